"""Apache Kafka 4.0 beside our broker, for differential tests and Kafka's own tools.

Kafka is found through ``KAFKA_HOME`` (the ``kafka_2.13-4.0.0`` directory) or
``<repo>/../shared/kafka``; the whole package is skipped, saying why, when neither exists or
``java`` is not on the PATH.  The reference broker is started with the shared ``run-kafka.sh``
(single-node KRaft on 127.0.0.1, a fresh data directory) in its own process group and stopped by
that PID at the end — never with kafka-server-stop.sh, which stops every Kafka on the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

from tests.serving import ROOT, ServeProcess, free_port


def find_kafka() -> tuple[str | None, str]:
    """(KAFKA_HOME, '') or (None, why not)."""
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


KAFKA_HOME, WHY_NOT = find_kafka()


def pytest_collection_modifyitems(config, items):
    if KAFKA_HOME is None:
        skip = pytest.mark.skip(reason=WHY_NOT)
        for item in items:
            if "tests/differential" in str(item.fspath).replace(os.sep, "/"):
                item.add_marker(skip)


def _run_kafka_script() -> str:
    """run-kafka.sh next to the distribution (it lives in shared/kafka/)."""
    return os.path.join(os.path.dirname(KAFKA_HOME), "run-kafka.sh")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class KafkaProcess:
    def __init__(self, directory: str):
        self.dir = directory
        self.port = free_port()
        cport = free_port()
        while cport == self.port:
            cport = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.out = open(os.path.join(directory, "kafka.out"), "wb")
        env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx512m -Xms512m")
        self.proc = subprocess.Popen(
            [_run_kafka_script(), os.path.join(directory, "kafka"), str(self.port), str(cport),
             ],
            stdout=self.out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 90
        while not _accepts(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                with open(os.path.join(directory, "kafka.out"), "rb") as f:
                    tail = f.read()[-3000:].decode("utf-8", "replace")
                raise RuntimeError(f"Kafka did not start:\n{tail}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        self.out.close()


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    if not os.path.isfile(_run_kafka_script()):
        pytest.skip(f"no run-kafka.sh next to {KAFKA_HOME} (shared/kafka/run-kafka.sh starts "
                    "the reference broker)")
    k = KafkaProcess(str(tmp_path_factory.mktemp("kafka-ref")))
    yield k
    k.stop()


@pytest.fixture(scope="session")
def ours(tmp_path_factory):
    srv = ServeProcess(tmp_path_factory.mktemp("ours"),
                       "--config", "group.initial.rebalance.delay.ms=0").start()
    yield srv
    code, log = srv.stop()
    assert "Traceback" not in log, f"our broker logged a traceback:\n{log[-4000:]}"


@pytest.fixture(scope="session")
def kafka_home() -> str:
    return KAFKA_HOME
