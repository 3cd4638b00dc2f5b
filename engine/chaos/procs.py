"""The broker processes the chaos tools start: a free loopback port, a process started in its
own session with its output in a log file and waited for until its port accepts, and a signal to
its process group waited out (SIGKILL after a bound)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time

__all__ = ["free_port", "reserve_ports", "signal_and_wait", "start_listening"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reserve_ports(n: int) -> list[socket.socket]:
    """`n` loopback ports, each held by a bound socket until the caller closes it: ports the
    kernel gives no other bind meanwhile (port 0 -- a proxy's, ZooKeeper's -- included), unlike
    :func:`free_port`'s, free again as soon as it returns.  Close them just before the processes
    that listen on them start."""
    held: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", 0))
    except OSError:
        for s in held:
            s.close()
        raise
    return held


def start_listening(args: list[str], log_path: str, port: int, what: str, timeout: float = 60.0,
                    ready: str | None = None, **popen) -> subprocess.Popen:
    """`args` started in a new session, stdout and stderr appended to `log_path`; returns once
    127.0.0.1:`port` accepts and, with `ready` (a regular expression), once a line of this start's
    log matches it too -- so another process that happens to listen on `port` is not taken for
    this one.  RuntimeError (naming `what`, with the log's tail) if it exits first or is not
    ready within `timeout` seconds."""
    offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **popen)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited at start:\n{_tail(log_path)}")
        if ready is None or re.search(ready, _since(log_path, offset)):
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                return proc
            except OSError:
                pass
        time.sleep(0.1)
    signal_and_wait(proc, signal.SIGKILL, 10)
    raise RuntimeError(f"{what} did not listen within {timeout:.0f}s:\n{_tail(log_path)}")


def _since(path: str, offset: int) -> str:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def signal_and_wait(proc: subprocess.Popen | None, sig: int, timeout: float) -> None:
    """`sig` to the process group of a running `proc`, then wait for it to exit (SIGKILL after
    `timeout` seconds)."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-3000:].decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
