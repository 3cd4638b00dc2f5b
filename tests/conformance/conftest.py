"""Conformance: every public request-sending method of the real Python clients (and kcat)
against ``python -m engine serve``, asserting the result Kafka documents.

One broker process per test module (``serve``), on 127.0.0.1; tests make their own topics
(``topic_name``) so they do not depend on each other's order.

Each module runs twice (``security``): ``plaintext``, and ``sasl_ssl`` -- the clients on the
broker's SASL_SSL listener (SCRAM-SHA-512, tests/secure_clients.py), every client given its
security settings by the module's ``bootstrap`` (a ``Bootstrap``). Every test runs over SASL_SSL
too (CI included); ``ENGINE_SASL_SSL_FULL=0`` keeps only those named in ``SASL_SSL_CI``. With
``CONFORMANCE_BOOTSTRAP`` (another broker) only the plaintext rows run.
"""

from __future__ import annotations

import itertools
import os
import re
import uuid

import pytest

from tests.secure_clients import Bootstrap, limit_sasl_ssl_rows, serve_sasl_ssl
from tests.serving import served

_seq = itertools.count()
# Over SASL_SSL in CI: each client's produce/consume, transactions and consumer groups.
SASL_SSL_CI = {
    "test_produce_poll_flush_round_trip", "test_transactions", "test_group_lifecycle_consumer_and_admin",  # confluent
    "test_producer_transactions", "test_consumer_group_split_commit_close",  # kafka-python (+ transactions)
    "test_consumer_group_split_commit",                                      # aiokafka (+ transactions)
    "test_produce_P_consume_C", "test_balanced_consumer_G_commits",          # kcat
}


def pytest_configure(config):
    config.addinivalue_line("markers", "sasl_ssl: a row run over our broker's SASL_SSL listener")


def pytest_collection_modifyitems(config, items):
    limit_sasl_ssl_rows(config, items, os.path.dirname(os.path.abspath(__file__)), "security", SASL_SSL_CI)


@pytest.fixture(scope="module",
                params=["plaintext"] if os.environ.get("CONFORMANCE_BOOTSTRAP") else ["plaintext", "sasl_ssl"])
def security(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def serve(security, tmp_path_factory):
    """The broker process; ``serve.client_bootstrap`` is where (and how) the clients connect."""
    if security == "plaintext":
        for srv in served(tmp_path_factory, "conformance"):
            srv.client_bootstrap = Bootstrap(srv.bootstrap)
            yield srv
        return
    srv, boot = serve_sasl_ssl(tmp_path_factory.mktemp("conformance-sasl-ssl"),
                               "--config", "group.initial.rebalance.delay.ms=0")
    srv.client_bootstrap = boot
    yield srv
    _code, log = srv.stop()
    assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"


@pytest.fixture
def bootstrap(serve) -> str:
    return serve.client_bootstrap


@pytest.fixture
def topic_name(request) -> str:
    """A fresh topic name per test."""
    return f"c-{re.sub(r'[^a-zA-Z0-9._-]', '-', request.node.name)[:60]}-{next(_seq)}-" \
           f"{uuid.uuid4().hex[:6]}"
