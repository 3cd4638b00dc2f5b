import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


@pytest.fixture
def data_dir(tmp_path):
    return str(tmp_path / "data")


@pytest.fixture
def eng(data_dir):
    import engine

    e = engine.open(data_dir, background=False)
    yield e
    e.close()


@pytest.fixture(scope="session")
def reference_kafka(tmp_path_factory):
    """Apache Kafka 4.0 on 127.0.0.1 (tests/serving.py KafkaProcess), one for the whole session,
    for tests that only look at their own topics and groups (the differential tests, which compare
    whole-cluster listings, start their own).  Skipped, saying why, where Kafka or java is absent
    (KAFKA_HOME, or <repo>/../shared/kafka)."""
    from tests.serving import KafkaProcess, find_kafka
    home, why_not = find_kafka()
    if home is None:
        pytest.skip(why_not)
    try:
        k = KafkaProcess(home, str(tmp_path_factory.mktemp("kafka-ref"))).start()
    except (FileNotFoundError, RuntimeError) as e:
        pytest.skip(f"Apache Kafka 4.0 could not be started here: {e}")
    yield k
    k.stop()
