"""Fixtures for the remote (``engine.connect``) client tests: our broker as a real
``python -m engine serve`` process, Apache Kafka 4.0 (skipped with a message when absent),
and a misbehaving TCP proxy (tests/client/proxy.py).  Everything on 127.0.0.1."""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

from tests.serving import ROOT, ServeProcess, free_port

_seq = itertools.count()


def kafka_home() -> str | None:
    home = os.environ.get("KAFKA_HOME")
    if home and os.path.isdir(home):
        return home
    shared = os.path.join(ROOT, "..", "shared", "kafka", "kafka_2.13-4.0.0")
    return shared if os.path.isdir(shared) else None


class KafkaProcess:
    """Apache Kafka 4.0 (single-node KRaft) via run-kafka.sh, stopped by its process group."""

    def __init__(self, home: str):
        self.script = os.path.join(os.path.dirname(os.path.abspath(home)), "run-kafka.sh")
        if not os.path.exists(self.script):
            raise FileNotFoundError(self.script)
        self.dir = tempfile.mkdtemp(prefix="kafka-")
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 120.0) -> "KafkaProcess":
        log = open(os.path.join(self.dir, "run.log"), "ab")
        self.proc = subprocess.Popen([self.script, os.path.join(self.dir, "data"), str(self.port), str(free_port()),
                                      "group.initial.rebalance.delay.ms=0"],
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        from engine.client.wire import WireClient
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited at start (logs in {self.dir})")
            try:
                with WireClient(self.bootstrap, request_timeout_ms=5000) as c:
                    c.metadata(None)
                    return self
            except Exception:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"Kafka did not start in {timeout}s (logs in {self.dir})")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)


@pytest.fixture(scope="session")
def ours(tmp_path_factory):
    srv = ServeProcess(tmp_path_factory.mktemp("remote-ours"),
                       "--config", "group.initial.rebalance.delay.ms=0").start()
    yield srv
    code, log = srv.stop()
    assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"


@pytest.fixture(scope="session")
def kafka():
    home = kafka_home()
    if home is None:
        pytest.skip("Apache Kafka 4.0 not found (set KAFKA_HOME or provide <repo>/../shared/kafka)")
    try:
        k = KafkaProcess(home).start()
    except (FileNotFoundError, RuntimeError) as e:
        pytest.skip(f"Apache Kafka 4.0 could not be started here: {e}")
    yield k
    k.stop()


@pytest.fixture(params=["ours", "kafka"])
def cluster(request):
    """bootstrap address of our broker, then of Apache Kafka 4.0."""
    return request.getfixturevalue(request.param).bootstrap


@pytest.fixture
def topic_name(request) -> str:
    name = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:50]
    return f"r-{name}-{next(_seq)}-{uuid.uuid4().hex[:6]}"


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")
