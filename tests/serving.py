"""A real ``python -m engine serve`` process for tests that use the broker as users do.

::

    srv = ServeProcess(tmp_path, "--config", "num.partitions=3").start()
    srv.bootstrap                      # "127.0.0.1:PORT"
    srv.kill9(); srv.start()           # same data directory, same port when it is free
    srv.stop()                         # SIGTERM: clean shutdown; returns (exit code, log text)

The broker's output goes to ``<dir>/broker.log`` (a file, never a pipe nobody reads, so a
chatty broker cannot block on a full pipe); ``start()`` waits for its "serving ... on" line.
Every listener is on 127.0.0.1.

Also the reference broker: :func:`find_kafka` (``KAFKA_HOME`` or ``<repo>/../shared/kafka``,
with the reason when absent, for a skip message) and :class:`KafkaProcess` (Apache Kafka 4.0
started with the shared ``run-kafka.sh`` in its own process group, stopped by that group —
never kafka-server-stop.sh, which stops every Kafka on the machine).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from engine.chaos.procs import signal_and_wait

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

    def start(self, timeout: float = 60.0) -> ServeProcess:
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
            except subprocess.TimeoutExpired:     # stuck: its threads' stacks into the log first
                os.kill(self.proc.pid, signal.SIGQUIT)
                time.sleep(1.0)
                with open(self.log_path, "ab") as f:
                    f.write(f"\n[test harness] no exit {timeout:.0f} s after SIGTERM: "
                            f"stacks above (SIGQUIT), now SIGKILL\n".encode())
                self.kill9()
        with open(self.log_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        return (self.proc.returncode if self.proc else None), text

    def log_text(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def served(tmp_path_factory, name: str, *args: str):
    """A pytest fixture body: a ServeProcess with `args` (group.initial.rebalance.delay.ms=0
    added), stopped at the end; fails the fixture if the broker logged a traceback."""
    srv = ServeProcess(tmp_path_factory.mktemp(name), "--config", "group.initial.rebalance.delay.ms=0",
                       *args).start()
    yield srv
    _code, log = srv.stop()
    assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"


# -- the reference broker: Apache Kafka 4.0 -----------------------------------------------------
def find_kafka() -> tuple[str | None, str]:
    """(the kafka_2.13-4.0.0 directory, '') or (None, why not)."""
    candidates = []
    if os.environ.get("KAFKA_HOME"):       # the distribution, or the folder holding it
        candidates += [os.environ["KAFKA_HOME"],
                       os.path.join(os.environ["KAFKA_HOME"], "kafka_2.13-4.0.0")]
    candidates.append(os.path.join(ROOT, "..", "shared", "kafka", "kafka_2.13-4.0.0"))
    for home in candidates:
        if os.path.isfile(os.path.join(home, "bin", "kafka-server-start.sh")):
            if shutil.which("java") is None:
                return None, "java is not on the PATH (Kafka 4.0 needs Java 17+)"
            return os.path.abspath(home), ""
    return None, ("Apache Kafka 4.0 not found: set KAFKA_HOME to a kafka_2.13-4.0.0 directory "
                  "(or put it at <repo>/../shared/kafka)")


def kafka_home() -> str | None:
    return find_kafka()[0]


class KafkaProcess:
    """Apache Kafka 4.0 (single-node KRaft on 127.0.0.1, a fresh data directory) via the shared
    run-kafka.sh; ``start()`` returns once it answers Metadata."""

    def __init__(self, home: str, directory: str | None = None, *settings: str):
        self.script = os.path.join(os.path.dirname(os.path.abspath(home)), "run-kafka.sh")
        if not os.path.exists(self.script):
            raise FileNotFoundError(f"no run-kafka.sh next to {home}")
        self.dir = directory or tempfile.mkdtemp(prefix="kafka-")
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.controller_port = free_port()    # known before start(): settings may name it
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.settings = list(settings)        # KEY=VALUE appended to run-kafka.sh's config
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> KafkaProcess:
        cport = self.controller_port
        log = open(os.path.join(self.dir, "kafka.out"), "ab")
        env = dict(os.environ, KAFKA_HEAP_OPTS=os.environ.get("KAFKA_HEAP_OPTS", "-Xmx512m -Xms512m"))
        self.proc = subprocess.Popen([self.script, os.path.join(self.dir, "kafka"), str(self.port),
                                      str(cport), *self.settings],
                                     stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()
        from engine.client.wire import WireClient
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with WireClient(self.bootstrap, request_timeout_ms=5000) as c:
                    c.metadata(None)
                    return self
            except Exception:
                time.sleep(0.3)
        self.stop()
        with open(os.path.join(self.dir, "kafka.out"), "rb") as f:
            tail = f.read()[-3000:].decode("utf-8", "replace")
        raise RuntimeError(f"Kafka did not start in {timeout}s:\n{tail}")

    def stop(self) -> None:
        signal_and_wait(self.proc, signal.SIGTERM, 30)


# -- ZooKeeper (cluster mode) -------------------------------------------------------------------
def find_zookeeper() -> tuple[str | None, str]:
    """(the jars' classpath, '') or (None, why not: Debian's zookeeper package or java missing)."""
    from engine.cluster.zkserver import find_zookeeper as find
    return find()


class ZooKeeperProcess:
    """A standalone ZooKeeper on a free 127.0.0.1 port with its own data dir (Debian's package,
    engine/cluster/zkserver.py); ``start()`` returns once it answers ``ruok``.  ``settings`` (zoo.cfg
    lines) and ``jvm_args`` go to ZooKeeperServer (e.g. SASL required: tests/cluster/test_zk_sasl.py);
    ``secure_port`` (0: a free one) adds a TLS port at ``secure_connect`` (tests/cluster/test_zk_tls.py)."""

    def __init__(self, directory, *, settings=None, jvm_args=(), secure_port=None):
        from engine.cluster.zkserver import ZooKeeperServer
        self.server = ZooKeeperServer(str(directory), settings=settings, jvm_args=jvm_args, secure_port=secure_port)
        self.connect = self.server.connect
        self.secure_connect = self.server.secure_connect

    def start(self) -> ZooKeeperProcess:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()
