"""Exactly-once acceptance tests: real clients' transactions against a real broker.

Every test takes the ``broker`` fixture, parametrized ``ours`` (``python -m engine serve``,
tests/serving.py ServeProcess) and ``kafka`` (Apache Kafka 4.0 via tests/serving.py
KafkaProcess), so each expectation is checked against Kafka itself as well as against ours.
Select with ``TXN_BROKERS=ours`` / ``TXN_BROKERS=kafka`` (default: all the rows), or deselect Kafka's rows
with ``-m "not kafka"``; they are skipped, saying why, where Kafka or java is absent.

A third row, ``sasl_ssl``, is ours again with the clients on a SASL_SSL listener (SCRAM-SHA-512,
tests/secure_clients.py): ``broker.bootstrap`` is then a ``Bootstrap`` carrying the security
settings that tests/transactions/clients.py gives every client. Every test runs over it (CI
included); ``ENGINE_SASL_SSL_FULL=0`` keeps only those in ``SASL_SSL_CI`` (``TXN_BROKERS`` may
leave the row out).

Both brokers get the same settings: a short
``transaction.abort.timed.out.transaction.cleanup.interval.ms`` (so a producer that dies inside
a transaction is aborted about a second after its ``transaction.timeout.ms``), a small
``__transaction_state`` and no initial rebalance delay.
"""

from __future__ import annotations

import itertools
import os
import re
import uuid

import pytest

from tests.secure_clients import limit_sasl_ssl_rows, serve_sasl_ssl
from tests.serving import KafkaProcess, ServeProcess, find_kafka

# Both brokers are started with these (Kafka: server.properties lines; ours: --config).
BROKER_SETTINGS = (
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
    "transaction.remove.expired.transaction.cleanup.interval.ms=3600000",
    "transaction.state.log.num.partitions=3",
    "offsets.topic.num.partitions=3",
    "group.initial.rebalance.delay.ms=0",
)
SELECTED = [b.strip() for b in os.environ.get("TXN_BROKERS", "ours,kafka,sasl_ssl").split(",") if b.strip()]
_seq = itertools.count()
# The tests run over SASL_SSL in CI: transactional produce with each client, fencing,
# consume-transform-produce with group offsets, read_committed reads (Kafka's own tools over
# SASL_SSL: tests/security/test_java_tools_secure.py).
SASL_SSL_CI = {"test_aborted_round_moves_nothing_committed_round_moves_both",
               "test_second_producer_fences_the_first", "test_open_transaction_holds_back_read_committed"}


def pytest_configure(config):
    config.addinivalue_line("markers", "kafka: a row run against Apache Kafka 4.0 (the reference)")
    config.addinivalue_line("markers", "ours_only: a test of our broker alone (it kills the broker)")
    config.addinivalue_line("markers", "sasl_ssl: a row run over our broker's SASL_SSL listener")


class Broker:
    """What a test needs of a broker: its kind ('ours', 'kafka' or 'sasl_ssl'), bootstrap address
    (for 'sasl_ssl' a tests/secure_clients.py ``Bootstrap``), data directory."""

    def __init__(self, kind: str, bootstrap: str, proc, data_dir: str):
        self.kind = kind
        self.bootstrap = bootstrap
        self.proc = proc
        self.data_dir = data_dir          # where its partition directories are

    def __repr__(self) -> str:
        return f"Broker({self.kind}, {self.bootstrap})"


def pytest_collection_modifyitems(config, items):
    """Mark the rows run against Kafka ``kafka`` (here, once the marker is registered)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if not str(item.path).startswith(here + os.sep):
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("broker", callspec.params.get("own_broker")) == "kafka":
            item.add_marker(pytest.mark.kafka)
    limit_sasl_ssl_rows(config, items, here, "broker", SASL_SSL_CI)


def _params():
    out = []
    for kind in ("ours", "kafka", "sasl_ssl"):
        marks = []
        if kind not in SELECTED:
            marks.append(pytest.mark.skip(reason=f"TXN_BROKERS={','.join(SELECTED)} leaves out {kind}"))
        out.append(pytest.param(kind, id=kind, marks=marks))
    return out


def args_of(settings) -> list[str]:
    return [a for kv in settings for a in ("--config", kv)]


@pytest.fixture(scope="session", params=_params())
def broker(request, tmp_path_factory):
    if request.param == "ours":
        srv = ServeProcess(tmp_path_factory.mktemp("txn-ours"), *args_of(BROKER_SETTINGS)).start()
        yield Broker("ours", srv.bootstrap, srv, srv.data)
        _code, log = srv.stop()
        assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"
        return
    if request.param == "sasl_ssl":
        srv, bootstrap = serve_sasl_ssl(tmp_path_factory.mktemp("txn-sasl-ssl"), *args_of(BROKER_SETTINGS))
        yield Broker("sasl_ssl", bootstrap, srv, srv.data)
        _code, log = srv.stop()
        assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"
        return
    home, why_not = find_kafka()
    if home is None:
        pytest.skip(why_not)
    try:
        k = KafkaProcess(home, str(tmp_path_factory.mktemp("txn-kafka")), *BROKER_SETTINGS).start()
    except (FileNotFoundError, RuntimeError) as e:
        pytest.skip(f"Apache Kafka 4.0 could not be started here: {e}")
    try:
        yield Broker("kafka", k.bootstrap, k, os.path.join(k.dir, "kafka", "log"))   # run-kafka.sh's log.dirs
    finally:
        k.stop()


@pytest.fixture
def bootstrap(broker) -> str:
    return broker.bootstrap


@pytest.fixture
def unique(request) -> str:
    """A fresh name stem per test (topics, transactional ids, groups)."""
    return f"tx-{re.sub(r'[^a-zA-Z0-9._-]', '-', request.node.name)[:50]}-{next(_seq)}-" \
           f"{uuid.uuid4().hex[:6]}"
