"""Connection limits (engine/server/connection_quotas.py, Kafka's ConnectionQuotas) on a real
broker: max.connections.per.ip (+ overrides) closes the connection over the limit at once,
max.connections (broker-wide or per listener) stops accepting until a connection closes, the
inter-broker listener is let in and closes another listener's least recently active connection,
max.connection.creation.rate delays accepts; bad values are startup errors naming the key.

Raw sockets speak ApiVersions v0 to tell an accepted connection (answered) from one closed at
once (end of stream) or one left in the backlog (no answer within a short timeout); real clients
(kafka-python, confluent-kafka) show that connections already in keep working."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

from engine.errors import InvalidConfigError
from engine.server.connection_quotas import INT_MAX, ConnectionQuotas, Rate, parse_ip_overrides
from tests.security.test_broker_sasl import SaslBroker, _read_frame, _request
from tests.serving import ROOT, free_port

API_VERSIONS_V0 = _request(18, 0, b"")


class PlainBroker:
    """One PLAINTEXT listener on a free port of 127.0.0.1, the given Kafka keys."""

    def __init__(self, data_dir: str, config: dict):
        import engine
        from engine.server import BackgroundBroker
        self.engine = engine.open(data_dir, config, background=False)
        try:
            self._bg = BackgroundBroker(self.engine, "127.0.0.1", 0)
        except BaseException:
            self.engine.close()
            raise
        self.broker = self._bg.broker
        self.port = self._bg.port
        self.bootstrap = self._bg.bootstrap

    def quotas(self, fn):
        """fn(broker.connection_quotas) on the broker's loop."""
        return self._bg.call(fn, self.broker.connection_quotas)

    def stop(self):
        self._bg.stop()
        self.engine.close()


@pytest.fixture
def plain_broker(tmp_path):
    brokers = []

    def start(**config) -> PlainBroker:
        b = PlainBroker(str(tmp_path / f"data{len(brokers)}"), {k.replace("_", "."): str(v)
                                                                  for k, v in config.items()})
        brokers.append(b)
        return b

    yield start
    for b in brokers:
        b.stop()


def _connect(port: int, timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def _answered(s: socket.socket) -> bool:
    """True: ApiVersions was answered; False: the broker closed the connection."""
    try:
        s.sendall(API_VERSIONS_V0)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return _read_frame(s) is not None


def _unanswered_for(s: socket.socket, seconds: float) -> bool:
    """True when ApiVersions gets no answer (and no close) within `seconds`: the connection
    waits in the listener's backlog."""
    s.sendall(API_VERSIONS_V0)
    s.settimeout(seconds)
    try:
        data = s.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        return True
    finally:
        s.settimeout(10.0)
    assert data, "the broker closed a connection it should have left in the backlog"
    return False


def _still_open(s: socket.socket) -> bool:
    """Nothing to read and not closed by the broker."""
    s.settimeout(0.3)
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except TimeoutError:
        return True
    except ConnectionResetError:
        return False
    finally:
        s.settimeout(10.0)


def _wait_for(cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# -- max.connections.per.ip --------------------------------------------------------------------
def test_per_ip_limit_closes_the_next_connection_and_a_client_already_in_keeps_working(plain_broker):
    from kafka import KafkaProducer
    b = plain_broker(max_connections_per_ip=4)
    topic = f"t-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=b.bootstrap, api_version=(2, 8, 0))
    try:
        producer.send(topic, b"before").get(timeout=30)
        held = []
        for _ in range(4):                     # fill what the producer left of the 4
            s = _connect(b.port)
            if not _answered(s):
                s.close()
                break
            held.append(s)
        else:
            pytest.fail("a fifth connection from 127.0.0.1 was accepted")
        assert held, "the producer alone used up the limit"
        assert b.quotas(lambda q: q.per_ip["127.0.0.1"]) == 4
        assert not _answered(_connect(b.port))           # over the limit: closed at once
        assert b.quotas(lambda q: q.stats("PLAINTEXT").rejected) >= 2
        # the producer's connection is untouched
        producer.send(topic, b"during").get(timeout=30)
        for s in held:
            assert _answered(s)
        # one closes: a slot frees
        held.pop().close()
        _wait_for(lambda: b.quotas(lambda q: q.per_ip["127.0.0.1"]) == 3)
        s = _connect(b.port)
        assert _answered(s)
        held.append(s)
        assert not _answered(_connect(b.port))
        for s in held:
            s.close()
    finally:
        producer.close(timeout=5)


def test_an_override_for_127_0_0_1_raises_the_limit(plain_broker):
    b = plain_broker(max_connections_per_ip=1, max_connections_per_ip_overrides="10.1.2.3:7, 127.0.0.1:3")
    held = [_connect(b.port) for _ in range(3)]
    assert all(_answered(s) for s in held)
    assert not _answered(_connect(b.port))
    for s in held:
        s.close()


def test_the_default_per_ip_limit_applies_where_no_override_names_the_address(plain_broker):
    b = plain_broker(max_connections_per_ip=1, max_connections_per_ip_overrides="10.1.2.3:7")
    first = _connect(b.port)
    assert _answered(first)
    assert not _answered(_connect(b.port))
    first.close()


def test_a_hostname_override_counts_for_the_addresses_it_resolves_to():
    q = ConnectionQuotas.from_configs({"max.connections.per.ip": "2",
                                       "max.connections.per.ip.overrides": "localhost:9"}, ["PLAINTEXT"])
    assert q.max_for_ip("127.0.0.1") == 9
    assert q.max_for_ip("::ffff:127.0.0.1") == 9       # IPv4-mapped: the same address
    assert q.max_for_ip("10.0.0.1") == 2


# -- max.connections -------------------------------------------------------------------------
def test_max_connections_stops_accepting_until_a_connection_closes(plain_broker):
    b = plain_broker(max_connections=2)
    first, second = _connect(b.port), _connect(b.port)
    assert _answered(first) and _answered(second)
    waiting = _connect(b.port)           # the kernel completes the handshake: it is in the backlog
    assert _unanswered_for(waiting, 1.0)
    assert b.quotas(lambda q: q.total) == 2
    first.close()
    assert _read_frame(waiting) is not None        # accepted now, and its request answered
    assert _answered(second)
    assert b.quotas(lambda q: q.total) == 2
    waiting.close()
    second.close()


def test_a_client_waits_while_the_broker_is_full_and_gets_in_when_a_slot_frees(plain_broker):
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError
    b = plain_broker(max_connections=1)
    only = _connect(b.port)
    assert _answered(only)
    with pytest.raises(KafkaError):        # NoBrokersAvailable: its connection is never served
        KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=1500, bootstrap_timeout_ms=2000)
    only.close()
    _wait_for(lambda: b.quotas(lambda q: q.total) == 0)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=20000)
    try:
        assert isinstance(admin.list_topics(), list)
    finally:
        admin.close()


def test_a_listener_limit_leaves_the_other_listener_accepting(tmp_path):
    b = SaslBroker(str(tmp_path / "data"), {"listener.name.sasl_plaintext.max.connections": "1"})
    try:
        first = _connect(b.sasl_port)
        assert _answered(first)
        waiting = _connect(b.sasl_port)
        assert _unanswered_for(waiting, 1.0)
        plain = [_connect(b.plain_port) for _ in range(3)]
        assert all(_answered(s) for s in plain)
        first.close()
        assert _read_frame(waiting) is not None
        for s in [waiting, *plain]:
            s.close()
    finally:
        b.stop()


def test_the_inter_broker_listener_gets_in_and_closes_the_least_active_other_connection(tmp_path):
    # PLAINTEXT is the inter-broker listener (security.inter.broker.protocol's default)
    b = SaslBroker(str(tmp_path / "data"), {"max.connections": "2"})
    try:
        older, newer = _connect(b.sasl_port), _connect(b.sasl_port)
        assert _answered(older)
        time.sleep(0.05)
        assert _answered(newer)                  # `older` is now the least recently active
        blocked = _connect(b.sasl_port)
        assert _unanswered_for(blocked, 0.5)     # a client listener at the limit: backlog
        inter = _connect(b.plain_port)
        assert _answered(inter)                  # the protected listener is let in
        older.settimeout(10)
        assert _read_frame(older) is None        # ... and the least active connection closed
        assert _still_open(newer)                # (a second ApiVersions before SASL would close it)
        stats = b._bg.call(lambda: b.broker.connection_quotas.stats("SASL_PLAINTEXT"))
        assert stats.closed_for_inter_broker == 1
        for s in (blocked, inter, newer):
            s.close()
    finally:
        b.stop()


# -- max.connection.creation.rate --------------------------------------------------------------
def test_connections_above_the_creation_rate_are_delayed(plain_broker):
    rate, n = 10, 30
    # two 1 s windows: after an idle period about `rate` connections get in at once (Kafka's
    # Rate measures over at least quota.window.num - 1 windows), the rest at `rate` per second
    b = plain_broker(max_connection_creation_rate=rate, quota_window_num=2, quota_window_size_seconds=1)
    keep = _connect(b.port)
    assert _answered(keep)
    t0 = time.monotonic()
    conns = []
    for _ in range(n):
        s = _connect(b.port)
        assert _answered(s)
        conns.append(s)
    elapsed = time.monotonic() - t0
    assert elapsed >= 0.5 * (n - rate) / rate, elapsed     # ~2 s expected; a loose lower bound
    stats = b.quotas(lambda q: q.stats("PLAINTEXT"))
    assert stats.throttled >= 1 and stats.throttle_ms > 0    # (fewer on a slow machine: no exact count)
    assert _answered(keep)                  # connections already in were served meanwhile
    for s in [keep, *conns]:
        s.close()


def test_a_listener_creation_rate_is_its_own():
    q = ConnectionQuotas.from_configs({"listener.name.sasl_plaintext.max.connection.creation.rate": "5",
                                       "max.connection.creation.rate": "50"}, ["PLAINTEXT", "SASL_PLAINTEXT"])
    assert q.listeners["SASL_PLAINTEXT"].rate.bound == 5
    assert q.listeners["PLAINTEXT"].rate.bound == 50      # the broker-wide value is its default


def test_kafka_rate_throttle_times():
    r = Rate(10, samples=11, window_ms=1000)
    # 100 in the first instant are within 10/s over the 10 s minimum window; the 101st is not
    assert all(r.record_and_throttle_ms(0.0, 1000.0) == 0 for _ in range(100))
    assert r.record_and_throttle_ms(0.0, 1000.0) == 100.0          # (10.1 - 10) / 10 * 10000
    unlimited = ConnectionQuotas.from_configs({}, ["PLAINTEXT"])
    assert unlimited.unlimited and unlimited.max_connections == INT_MAX


# -- configuration errors ------------------------------------------------------------------------
@pytest.mark.parametrize("config,key", [
    ({"max.connections": "-1"}, "max.connections"),
    ({"max.connections.per.ip": "-5"}, "max.connections.per.ip"),
    ({"max.connection.creation.rate": "-1"}, "max.connection.creation.rate"),
    ({"listener.name.plaintext.max.connections": "many"}, "listener.name.plaintext.max.connections"),
    ({"listener.name.plaintext.max.connection.creation.rate": "-3"},
     "listener.name.plaintext.max.connection.creation.rate"),
    ({"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:x"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:-2"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "bad host!:3"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "no-such-host.invalid:3"}, "max.connections.per.ip.overrides"),
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip.overrides"),
    ({"quota.window.num": "0"}, "quota.window.num"),
])
def test_bad_values_are_errors_naming_the_key(tmp_path, config, key):
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        PlainBroker(str(tmp_path / "data"), config).stop()


def test_override_parsing_follows_kafka():
    assert parse_ip_overrides("") == {}
    assert parse_ip_overrides(" 127.0.0.1:3 , ::1:5,host.example:0") == {
        "127.0.0.1": 3, "::1": 5, "host.example": 0}


def test_serve_refuses_a_bad_limit_before_creating_anything(tmp_path):
    data = tmp_path / "d"
    out = subprocess.run([sys.executable, "-m", "engine", "serve", "--data-dir", str(data),
                          "--listen", f"127.0.0.1:{free_port()}",
                          "--config", "max.connections.per.ip.overrides=127.0.0.1:lots"],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode != 0
    assert "max.connections.per.ip.overrides" in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert not os.path.exists(data)


def test_the_metrics_count_rejections_and_connections_per_listener(plain_broker):
    from prometheus_client.parser import text_string_to_metric_families
    b = plain_broker(max_connections_per_ip=1)
    metrics = b._bg.call(b.broker.enable_metrics)
    first = _connect(b.port)
    assert _answered(first)
    assert not _answered(_connect(b.port))
    assert not _answered(_connect(b.port))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(metrics.scrape().decode()) for s in fam.samples}
    assert samples[("engine_server_connections_rejected_total",
                    (("listener", "PLAINTEXT"), ("reason", "per_ip")))] == 2
    assert samples[("kafka_server_socket_server_metrics_connection_count", (("listener", "PLAINTEXT"),))] == 1
    first.close()
