"""Apache Kafka 4.0 beside our broker, for differential tests and Kafka's own tools.

Kafka is found through ``KAFKA_HOME`` (the ``kafka_2.13-4.0.0`` directory) or
``<repo>/../shared/kafka``; the whole package is skipped, saying why, when neither exists or
``java`` is not on the PATH.  The reference broker is started with the shared ``run-kafka.sh``
(single-node KRaft on 127.0.0.1, a fresh data directory) in its own process group and stopped by
that PID at the end — never with kafka-server-stop.sh, which stops every Kafka on the machine.
"""

from __future__ import annotations

import os

import pytest

from tests.serving import KafkaProcess, find_kafka, served

KAFKA_HOME, WHY_NOT = find_kafka()


def pytest_collection_modifyitems(config, items):
    if KAFKA_HOME is None:
        skip = pytest.mark.skip(reason=WHY_NOT)
        for item in items:
            if "tests/differential" in str(item.fspath).replace(os.sep, "/"):
                item.add_marker(skip)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """A Kafka of its own (not the shared ``reference_kafka``): these tests compare whole-cluster
    listings (all topics, all groups), so no other test may leave topics or groups in it."""
    try:
        k = KafkaProcess(KAFKA_HOME, str(tmp_path_factory.mktemp("kafka-diff"))).start()
    except FileNotFoundError as e:
        pytest.skip(f"{e} (shared/kafka/run-kafka.sh starts the reference broker)")
    yield k
    k.stop()


@pytest.fixture(scope="session")
def ours(tmp_path_factory):
    yield from served(tmp_path_factory, "ours")


@pytest.fixture(scope="session")
def kafka_home() -> str:
    return KAFKA_HOME
