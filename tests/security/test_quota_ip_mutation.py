"""The two quota kinds added to the client quotas: ``connection_creation_rate`` per IP (KIP-612,
engine/server/ip_quotas.py) and ``controller_mutation_rate`` (KIP-599, engine/server/
mutation_quotas.py), against a broker the test starts (tests/serving.py ServeProcess, short quota
windows so a rate is measured over 1 s and the mutation bucket holds 2 x rate tokens).

* Kafka 4.0's kafka-configs.sh sets and describes ``--entity-type ips`` quotas (a given address
  and the default);
* Kafka's validation answers over the wire (an ip with a user, a name that is no address, a key
  the entity type does not take, a fractional rate);
* a connection from an address over its quota is held unanswered and closed after the throttle
  time, as Kafka's acceptor does; the ``<default>`` ip quota applies to other addresses;
* CreateTopics v6+ / CreatePartitions v3+ / DeleteTopics v5+ answer THROTTLING_QUOTA_EXCEEDED (89)
  with throttle_time_ms once the bucket is below zero, older versions are served and throttled;
  confluent-kafka's AdminClient (CreateTopics v4) is served and sees the throttle time.

Their persistence and the bucket's arithmetic: tests/unit/test_ip_mutation_quotas.py."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
import uuid

import pytest

from engine.errors import ErrorCode
from engine.protocol import messages as m
from tests.differential.wire import Client, plain
from tests.serving import ServeProcess, kafka_home

ck = pytest.importorskip("confluent_kafka")

WINDOWS = ("--config", "quota.window.num=2", "--config", "quota.window.size.seconds=1",
           "--config", "controller.quota.window.num=2", "--config", "controller.quota.window.size.seconds=1")
EXACT, DEFAULT, SPECIFIED = 0, 1, 2
API_VERSIONS = struct.pack(">hhih", 18, 0, 7, 1) + b"t"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = ServeProcess(tmp_path_factory.mktemp("quota-ip"), *WINDOWS).start()
    yield s
    _code, log = s.stop()
    assert "Traceback" not in log, log[-4000:]


def _client(srv, client_id: str = "t") -> Client:
    return Client(srv.port, client_id)


def _alter(c: Client, entries, validate_only=False) -> list[tuple[int, str | None]]:
    r = plain(c.call(m.ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [
        {"entity": [{"entity_type": t, "entity_name": n} for t, n in ent],
         "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None} for k, v in ops]}
        for ent, ops in entries], "validate_only": validate_only}))
    return [(e["error_code"], e["error_message"]) for e in r["entries"]]


def _describe(c: Client, components, strict=False) -> dict:
    r = plain(c.call(m.ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
        {"entity_type": t, "match_type": mt, "match": match} for t, mt, match in components], "strict": strict}))
    assert r["error_code"] == 0, r
    return {tuple((e["entity_type"], e["entity_name"]) for e in entry["entity"]):
            {v["key"]: v["value"] for v in entry["values"]} for entry in r["entries"]}


def _connect_from(srv, source: str) -> socket.socket:
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(5)
    s.connect(("127.0.0.1", srv.port))
    return s


def _answered(s: socket.socket, t0: float | None = None) -> tuple[bool, float]:
    """(did an ApiVersions get an answer, seconds from ``t0`` (default: now) until the answer or
    the close)."""
    t0 = time.monotonic() if t0 is None else t0
    try:
        s.sendall(struct.pack(">i", len(API_VERSIONS)) + API_VERSIONS)
        got = s.recv(4)
    except OSError:
        got = b""
    finally:
        s.close()
    return len(got) == 4, time.monotonic() - t0


@pytest.fixture(scope="module")
def kafka_configs(srv):
    home = kafka_home()
    if home is None or not os.path.exists(os.path.join(home, "bin", "kafka-configs.sh")):
        pytest.skip("Apache Kafka 4.0's tools not found (set KAFKA_HOME, or <repo>/../shared/kafka)")

    def run(*args: str) -> str:
        p = subprocess.run([os.path.join(home, "bin", "kafka-configs.sh"), "--bootstrap-server", srv.bootstrap,
                            *args], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout
    return run


# -- IP quotas -------------------------------------------------------------------------------------
def test_ip_quotas_through_kafka_configs(srv, kafka_configs):
    out = kafka_configs("--alter", "--entity-type", "ips", "--entity-name", "127.0.0.2",
                        "--add-config", "connection_creation_rate=2")
    assert "Completed updating config for ip 127.0.0.2." in out, out
    with _client(srv) as c:         # (the tool's --entity-default sends the same: ip, null)
        assert _alter(c, [([("ip", None)], [("connection_creation_rate", 500.0)])]) == [(0, None)]
    out = kafka_configs("--describe", "--entity-type", "ips")
    assert "Quota configs for ip '127.0.0.2' are connection_creation_rate=2.0" in out, out
    assert "Quota configs for the default ip are connection_creation_rate=500.0" in out, out
    with _client(srv) as c:
        assert _describe(c, [("ip", EXACT, "127.0.0.2")]) == {(("ip", "127.0.0.2"),): {"connection_creation_rate": 2.0}}
        assert _describe(c, [("ip", DEFAULT, None)]) == {(("ip", None),): {"connection_creation_rate": 500.0}}
        assert set(_describe(c, [("ip", SPECIFIED, None)])) == {(("ip", "127.0.0.2"),), (("ip", None),)}
    # a connection from 127.0.0.2 over 2 a second: kept unanswered, closed after the throttle
    # time (Kafka: (3 - 2) / 2 x 1 s = 500 ms); the others are served
    opened = [(_connect_from(srv, "127.0.0.2"), time.monotonic()) for _ in range(3)]
    results = [_answered(s, t0) for s, t0 in opened]
    assert [ok for ok, _ in results] == [True, True, False], results
    assert 0.3 <= results[2][1] <= 5.0, results
    assert _answered(_connect_from(srv, "127.0.0.3"))[0]        # another address: its default, 500
    with _client(srv) as c:
        assert _alter(c, [([("ip", None)], [("connection_creation_rate", None)]),
                          ([("ip", "127.0.0.2")], [("connection_creation_rate", None)])]) == [(0, None)] * 2
        assert _describe(c, [("ip", SPECIFIED, None)]) == {}


def test_default_ip_quota_and_validation(srv):
    with _client(srv) as c:
        bad = ErrorCode.INVALID_REQUEST
        assert _alter(c, [
            ([("ip", "127.0.0.2"), ("user", "u")], [("connection_creation_rate", 1.0)]),
            ([("ip", "not-an-ip.invalid")], [("connection_creation_rate", 1.0)]),
            ([("ip", "10.0.0.2")], [("producer_byte_rate", 100.0)]),
            ([("ip", "10.0.0.3")], [("connection_creation_rate", 1.5)]),
            ([("ip", "10.0.0.4")], [("connection_creation_rate", 3e9)]),
            ([("user", "u")], [("connection_creation_rate", 1.0)]),
            ([("client-id", "c")], [("controller_mutation_rate", 0.0)]),
            ([("ip", "10.0.0.1")], [("connection_creation_rate", 4.0)]),
        ]) == [
            (bad, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
            (bad, "not-an-ip.invalid is not a valid IP or resolvable host."),
            (bad, "Invalid configuration key producer_byte_rate"),
            (bad, "connection_creation_rate cannot be a fractional value."),
            (bad, "Proposed value for connection_creation_rate is too large for an INT."),
            (bad, "Invalid configuration key connection_creation_rate"),
            (bad, "Quota controller_mutation_rate must be greater than 0"),
            (0, None)]
        r = plain(c.call(m.ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
            {"entity_type": "ip", "match_type": SPECIFIED, "match": None},
            {"entity_type": "user", "match_type": SPECIFIED, "match": None}], "strict": False}))
        assert (r["error_code"], r["entries"]) == (bad, None), r
        # the default for every address: 127.0.0.4 gets 2 a second (this connection is older)
        assert _alter(c, [([("ip", None)], [("connection_creation_rate", 2.0)])]) == [(0, None)]
        try:
            opened = [_connect_from(srv, "127.0.0.4") for _ in range(3)]
            results = [_answered(s)[0] for s in opened]
            assert results == [True, True, False], results
        finally:
            assert _alter(c, [([("ip", None)], [("connection_creation_rate", None)])]) == [(0, None)]
        assert _answered(_connect_from(srv, "127.0.0.4"))[0]


# -- controller_mutation_rate --------------------------------------------------------------------
def _call(c: Client, key: int, version: int, data: dict) -> dict:
    """The answer as plain values, its throttle time as ``throttle_time_ms`` (an int)."""
    r = c.call(key, version, data)
    out = plain(r)
    out["throttle_time_ms"] = int(r["throttle_time"])
    return out


def _create(c: Client, version: int, topics: dict[str, int]) -> dict:
    return _call(c, m.ApiKey.CREATE_TOPICS, version, {
        "topics": [{"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
                   for n, p in topics.items()], "timeout": 10000, "validate_only": False})


def test_controller_mutation_rate(srv):
    cid = f"mut-{uuid.uuid4().hex[:6]}"
    with _client(srv) as c:         # (kafka-configs.sh --entity-type clients: test_quotas.py)
        assert _alter(c, [([("client-id", cid)], [("controller_mutation_rate", 2.0)])]) == [(0, None)]
        assert _describe(c, [("client-id", EXACT, cid)]) == {(("client-id", cid),): {"controller_mutation_rate": 2.0}}
    a, b, c2 = (f"{cid}-{x}" for x in "abc")
    with _client(srv, cid) as c:
        # a bucket of 2 x 1 s x 2 = 4 tokens: a takes 4 (0 left), b takes 1 (-1 left, allowed),
        # c finds the bucket below zero: 89, no message, throttle ~ 1 / 2 s
        r = _create(c, 7, {a: 4, b: 1, c2: 1})
        assert [(t["name"], t["error_code"], t["error_message"]) for t in r["topics"]] == [
            (a, 0, None), (b, 0, None), (c2, ErrorCode.THROTTLING_QUOTA_EXCEEDED, None)], r
        assert 0 < r["throttle_time_ms"] <= 500, r
        # the connection was muted for the throttle time: the bucket is back near zero; an old
        # version (permissive) is served and throttled
        t0 = time.monotonic()
        r = _create(c, 5, {c2: 3})
        assert r["topics"][0]["error_code"] == 0 and r["throttle_time_ms"] > 0, r
        throttle = r["throttle_time_ms"]
        # DeleteTopics v5 while the bucket is below zero: 89 for an existing topic, an unknown
        # topic its own error
        r = _call(c, m.ApiKey.DELETE_TOPICS, 5, {"topic_names": [a, f"{cid}-none"], "timeout": 10000})
        assert time.monotonic() - t0 >= throttle / 1000.0 * 0.8          # muted meanwhile
        codes = {t["name"]: t["error_code"] for t in r["responses"]}
        assert codes[f"{cid}-none"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, r
        if codes[a] == ErrorCode.THROTTLING_QUOTA_EXCEEDED:   # the mute may have refilled it
            assert r["throttle_time_ms"] > 0, r
        # CreatePartitions v3: the topic's own error comes first (no increase), then the quota
        r = _call(c, m.ApiKey.CREATE_PARTITIONS, 3, {"topics": [{"name": b, "count": 1, "assignments": None}],
                                                      "timeout": 10000, "validate_only": False})
        assert r["results"][0]["error_code"] == ErrorCode.INVALID_PARTITIONS, r
    # another client id has no quota
    with _client(srv, "other") as c:
        r = _create(c, 7, {f"{cid}-d": 10})
        assert r["topics"][0]["error_code"] == 0 and r["throttle_time_ms"] == 0, r


def test_confluent_admin_is_throttled(srv):
    """librdkafka's CreateTopics (v4: the permissive quota) is served, and reports the throttle."""
    from confluent_kafka.admin import AdminClient, NewTopic
    cid = f"ck-{uuid.uuid4().hex[:6]}"
    with _client(srv) as c:
        assert _alter(c, [([("client-id", cid)], [("controller_mutation_rate", 1.0)])]) == [(0, None)]
    throttles: list[int] = []
    admin = AdminClient({"bootstrap.servers": srv.bootstrap, "client.id": cid,
                         "throttle_cb": lambda ev: throttles.append(int(ev.throttle_time * 1000))})
    futures = admin.create_topics([NewTopic(f"{cid}-x", 6, 1)])
    futures[f"{cid}-x"].result(30)        # served: 2 tokens, 6 taken (-4: 4 s of throttle)
    deadline = time.monotonic() + 10
    while not throttles and time.monotonic() < deadline:
        admin.poll(0.1)
    assert throttles and max(throttles) > 2000, throttles

