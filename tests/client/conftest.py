"""Fixtures for the remote (``engine.connect``) client tests: our broker as a real
``python -m engine serve`` process, Apache Kafka 4.0 (skipped with a message when absent),
and a misbehaving TCP proxy (tests/client/proxy.py).  Everything on 127.0.0.1."""

from __future__ import annotations

import itertools
import socket
import time
import uuid

import pytest

from tests.serving import ServeProcess, free_port, served

from .proxy import MisbehavingProxy

_seq = itertools.count()


@pytest.fixture(scope="session")
def ours(tmp_path_factory):
    yield from served(tmp_path_factory, "remote-ours")


@pytest.fixture(scope="session")
def kafka(reference_kafka):
    return reference_kafka


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


@pytest.fixture
def proxied(tmp_path):
    """Our broker behind a MisbehavingProxy (the broker advertises the proxy's port, so every
    connection a client makes goes through it): (ServeProcess, proxy)."""
    proxy_port = free_port()
    srv = ServeProcess(tmp_path, "--advertised", f"127.0.0.1:{proxy_port}").start()
    proxy = MisbehavingProxy(srv.port, proxy_port)
    yield srv, proxy
    proxy.close()
    srv.stop()
