"""A real ``python -m engine serve`` process for tests that use the broker as users do.

::

    srv = ServeProcess(tmp_path, "--config", "num.partitions=3").start()
    srv.bootstrap                      # "127.0.0.1:PORT"
    srv.kill9(); srv.start()           # same data directory, same port when it is free
    srv.stop()                         # SIGTERM: clean shutdown; returns (exit code, log text)

The broker's output goes to ``<dir>/broker.log`` (a file, never a pipe nobody reads, so a
chatty broker cannot block on a full pipe); ``start()`` waits for its "serving ... on" line.
Every listener is on 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    def __init__(self, directory, *args: str, port: int | None = None, log_level: str = "info"):
        self.dir = str(directory)
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "broker.log")
        self.args = list(args)
        self.port = port or free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log_level = log_level
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> "ServeProcess":
        os.makedirs(self.dir, exist_ok=True)
        offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        log = open(self.log_path, "ab")
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "engine", "serve", "--data-dir", self.data,
             "--listen", self.bootstrap, "--log-level", self.log_level, *self.args],
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", "replace")
            if re.search(r"serving .* on [\d.]+:\d+", text):
                return self
            if self.proc.poll() is not None:
                if "address already in use" in text.lower():      # the old port was taken meanwhile
                    self.port = free_port()
                    self.bootstrap = f"127.0.0.1:{self.port}"
                    return self.start(timeout)
                raise RuntimeError(f"the broker exited at start:\n{text[-3000:]}")
            time.sleep(0.05)
        self.kill9()
        raise RuntimeError(f"the broker did not start in {timeout}s (log: {self.log_path})")

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.running:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, timeout: float = 30.0) -> tuple[int | None, str]:
        """SIGTERM (clean shutdown); returns (exit code, the whole log)."""
        if self.running:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        with open(self.log_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        return (self.proc.returncode if self.proc else None), text

    def log_text(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")
