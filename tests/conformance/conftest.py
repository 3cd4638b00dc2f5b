"""Conformance: every public request-sending method of the real Python clients (and kcat)
against ``python -m engine serve``, asserting the result Kafka documents.

One broker process per test module (``serve``), on 127.0.0.1; tests make their own topics
(``topic_name``) so they do not depend on each other's order.
"""

from __future__ import annotations

import itertools
import re
import uuid

import pytest

from tests.serving import ServeProcess

_seq = itertools.count()


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    srv = ServeProcess(tmp_path_factory.mktemp("conformance"),
                       "--config", "group.initial.rebalance.delay.ms=0").start()
    yield srv
    code, log = srv.stop()
    assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"


@pytest.fixture
def bootstrap(serve) -> str:
    return serve.bootstrap


@pytest.fixture
def topic_name(request) -> str:
    """A fresh topic name per test."""
    return f"c-{re.sub(r'[^a-zA-Z0-9._-]', '-', request.node.name)[:60]}-{next(_seq)}-" \
           f"{uuid.uuid4().hex[:6]}"
