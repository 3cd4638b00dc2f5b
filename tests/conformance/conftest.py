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

from tests.serving import served

_seq = itertools.count()


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    yield from served(tmp_path_factory, "conformance")


@pytest.fixture
def bootstrap(serve) -> str:
    return serve.bootstrap


@pytest.fixture
def topic_name(request) -> str:
    """A fresh topic name per test."""
    return f"c-{re.sub(r'[^a-zA-Z0-9._-]', '-', request.node.name)[:60]}-{next(_seq)}-" \
           f"{uuid.uuid4().hex[:6]}"
