"""Client quotas (engine/security/quotas.py, engine/server/quota_handlers.py, engine/server/quotas.py):
DescribeClientQuotas / AlterClientQuotas through Kafka's kafka-configs.sh and the raw wire (Kafka
4.0's validation messages, validate_only, CLUSTER_AUTHORIZATION_FAILED with the ACL authorizer),
the quotas kept across a restart, Kafka's precedence, and their enforcement on real clients:
a confluent-kafka producer over its producer_byte_rate and a consumer over its consumer_byte_rate
get throttle_time_ms (throttle_cb) and are slowed down; request_percentage throttles a caller that
keeps the broker busy."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time

import pytest

from engine.errors import ErrorCode
from engine.protocol import messages as m
from engine.protocol.primitives import Reader
from engine.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from tests.security.test_broker_sasl import SaslBroker, _authenticate, _handshake, _read_frame, _request
from tests.serving import kafka_home

ck = pytest.importorskip("confluent_kafka")

ACL_CONFIG = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
# short windows: a rate is measured over at least (2 - 1) x 1 s, so the tests throttle quickly
FAST_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
DESCRIBE, ALTER = m.ApiKey.DESCRIBE_CLIENT_QUOTAS, m.ApiKey.ALTER_CLIENT_QUOTAS
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


class Wire:
    """One raw connection: PLAINTEXT (User:ANONYMOUS), or SASL PLAIN as ``user``."""

    def __init__(self, b: SaslBroker, user: str | None = None, client_id: str = "t"):
        port = b.plain_port if user is None else b.sasl_port
        self.s = socket.create_connection(("127.0.0.1", port), timeout=20)
        if user is not None:
            assert _handshake(self.s, "PLAIN").error_code == 0
            assert _authenticate(self.s, f"\0{user}\0{user}-secret".encode()).error_code == 0
        self.corr = 10
        self.client_id = client_id

    def call(self, key: int, version: int, data: dict) -> dict:
        self.corr += 1
        self.s.sendall(_request(key, version, m.encode(key, version, data, response=False), corr=self.corr,
                                client_id=self.client_id))
        frame = _read_frame(self.s)
        assert frame is not None and struct.unpack(">i", frame[:4])[0] == self.corr
        skip = 5 if m.is_flexible(key, version) and key != m.ApiKey.API_VERSIONS else 4
        return m.read_struct(m._entity(key, version, True), Reader(frame[skip:]))

    def close(self):
        self.s.close()


def _entity(**kw) -> list[dict]:
    return [{"entity_type": t.replace("_", "-"), "entity_name": n} for t, n in kw.items()]


def alter(w: Wire, entries: list[tuple[list[dict], list[tuple[str, float | None]]]], validate_only=False,
          version: int = 1) -> list[tuple[int, str | None]]:
    r = w.call(ALTER, version, {"entries": [
        {"entity": ent, "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None} for k, v in ops]}
        for ent, ops in entries], "validate_only": validate_only})
    return [(e["error_code"], e["error_message"]) for e in r["entries"]]


def describe(w: Wire, components: list[tuple[str, int, str | None]], strict=False, version: int = 1) -> dict:
    return w.call(DESCRIBE, version, {"components": [
        {"entity_type": t, "match_type": mt, "match": match} for t, mt, match in components], "strict": strict})


def _entries(r: dict) -> dict:
    return {frozenset((e["entity_type"], e["entity_name"]) for e in entry["entity"]):
            {v["key"]: v["value"] for v in entry["values"]} for entry in r["entries"]}


@pytest.fixture
def broker(tmp_path):
    b = SaslBroker(str(tmp_path / "data"), FAST_WINDOWS)
    yield b
    b.stop()


@pytest.fixture
def wire(broker):
    w = Wire(broker)
    yield w
    w.close()


# -- the APIs ----------------------------------------------------------------------------------
def test_advertised_and_idle_until_a_quota_is_set(broker, wire):
    r = wire.call(m.ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in r["api_keys"]}
    assert ranges[DESCRIBE] == (0, 1) and ranges[ALTER] == (0, 1)
    assert not broker.broker.quotas.active          # nothing configured: the request path is bare
    assert describe(wire, [])["entries"] == []
    assert alter(wire, [(_entity(user="alice"), [("producer_byte_rate", 1024.0)])]) == [(0, None)]
    assert broker.broker.quotas.active


@pytest.mark.parametrize("version", [0, 1])
def test_alter_and_describe(wire, version):
    res = alter(wire, [
        (_entity(user="alice"), [("producer_byte_rate", 1024.0), ("consumer_byte_rate", 2048.0)]),
        (_entity(user="alice", client_id="c1"), [("request_percentage", 12.5)]),
        (_entity(user=None), [("producer_byte_rate", 500.0)]),
        (_entity(client_id=None), [("consumer_byte_rate", 300.0)]),
    ], version=version)
    assert res == [(0, None)] * 4
    everything = _entries(describe(wire, [], version=version))
    assert everything == {
        frozenset({("user", "alice")}): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0},
        frozenset({("user", "alice"), ("client-id", "c1")}): {"request_percentage": 12.5},
        frozenset({("user", None)}): {"producer_byte_rate": 500.0},
        frozenset({("client-id", None)}): {"consumer_byte_rate": 300.0}}
    # Kafka's filter: exact, default, specified, strict
    assert set(_entries(describe(wire, [("user", EXACT, "alice")]))) == {
        frozenset({("user", "alice")}), frozenset({("user", "alice"), ("client-id", "c1")})}
    assert set(_entries(describe(wire, [("user", EXACT, "alice")], strict=True))) == {frozenset({("user", "alice")})}
    assert set(_entries(describe(wire, [("user", DEFAULT, None)]))) == {frozenset({("user", None)})}
    assert set(_entries(describe(wire, [("client-id", SPECIFIED, None)]))) == {
        frozenset({("user", "alice"), ("client-id", "c1")}), frozenset({("client-id", None)})}
    # a removal; the last key removed removes the entity
    assert alter(wire, [(_entity(user="alice"), [("consumer_byte_rate", None)]),
                        (_entity(client_id=None), [("consumer_byte_rate", None)])]) == [(0, None)] * 2
    everything = _entries(describe(wire, []))
    assert everything[frozenset({("user", "alice")})] == {"producer_byte_rate": 1024.0}
    assert frozenset({("client-id", None)}) not in everything


def test_invalid_requests_answer_kafkas_messages(broker, wire):
    bad = 42
    res = alter(wire, [
        (_entity(user="a1"), [("producer_byte_rate", -5.0)]),
        (_entity(user="a2"), [("producer_byte_rate", 0.0)]),
        (_entity(user="a3"), [("producer_byte_rate", 10.5)]),
        (_entity(user="a4"), [("consumer_byte_rate", 1e300)]),
        (_entity(user="a5"), [("not_a_quota", 1.0)]),
        (_entity(user="a6"), [("SCRAM-SHA-256", 1.0)]),
        ([{"entity_type": "group", "entity_name": "g"}], [("producer_byte_rate", 1.0)]),
        ([], [("producer_byte_rate", 1.0)]),
        (_entity(user=""), [("producer_byte_rate", 1.0)]),
        ([{"entity_type": "user", "entity_name": "a7"}, {"entity_type": "user", "entity_name": "a8"}],
         [("producer_byte_rate", 1.0)]),
        ([{"entity_type": "ip", "entity_name": "1.2.3.4"}, {"entity_type": "user", "entity_name": "a9"}],
         [("producer_byte_rate", 1.0)]),
        (_entity(user="ok"), [("producer_byte_rate", 100.0)]),
        (_entity(user="ok"), [("producer_byte_rate", 200.0)]),
    ])
    assert res == [
        (bad, "Quota producer_byte_rate must be greater than 0"),
        (bad, "Quota producer_byte_rate must be greater than 0"),
        (bad, "producer_byte_rate cannot be a fractional value."),
        (bad, "Proposed value for consumer_byte_rate is too large for a LONG."),
        (bad, "Invalid configuration key not_a_quota"),
        (bad, "Invalid configuration key SCRAM-SHA-256"),
        (bad, "Unhandled client quota entity type: group"),
        (bad, "Invalid empty client quota entity"),
        (bad, "Empty user not supported"),
        (bad, "Invalid client quota entity, duplicate entity entry user"),
        (bad, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
        (0, None),
        (bad, "Ignoring duplicate entity ClientQuotaEntity(entries={user=ok})"),
    ]
    # a key named twice for one entity (Kafka's answer: the duplicate-entity message)
    twice = [("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)]
    assert alter(wire, [(_entity(user="b", client_id="c"), twice)]) == [
        (bad, "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c, user=b})")]
    # only the valid entity was applied
    assert _entries(describe(wire, [])) == {frozenset({("user", "ok")}): {"producer_byte_rate": 100.0}}
    # validate_only: answered, nothing applied
    assert alter(wire, [(_entity(user="v"), [("producer_byte_rate", 10.0)]),
                        (_entity(user="w"), [("producer_byte_rate", -1.0)])], validate_only=True) == \
        [(0, None), (bad, "Quota producer_byte_rate must be greater than 0")]
    assert set(_entries(describe(wire, []))) == {frozenset({("user", "ok")})}
    # Describe filters Kafka refuses: the whole answer's error, entries null
    for components, code, msg in [
            ([("user", EXACT, None)], bad, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
            ([("user", DEFAULT, "x")], bad, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
            ([("user", SPECIFIED, "x")], bad,
             "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
            ([("user", EXACT, "a"), ("user", SPECIFIED, None)], bad,
             "Entity type user cannot appear more than once in the filter."),
            ([("", EXACT, "a")], bad, "Invalid empty entity type."),
            ([("user", 7, None)], bad, "Unknown match type 7"),
            ([("group", EXACT, "g")], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group")]:
        r = describe(wire, components)
        assert (r["error_code"], r["error_message"], r["entries"]) == (code, msg, None), components


def test_quotas_survive_a_restart(tmp_path):
    data = str(tmp_path / "data")
    b = SaslBroker(data)
    w = Wire(b)
    try:
        assert alter(w, [(_entity(user="alice", client_id=None), [("producer_byte_rate", 4096.0)]),
                         (_entity(client_id="c9"), [("request_percentage", 33.0)])]) == [(0, None)] * 2
    finally:
        w.close()
        b.stop()
    assert os.path.exists(os.path.join(data, "client-quotas.json"))
    b = SaslBroker(data)
    w = Wire(b)
    try:
        assert _entries(describe(w, [])) == {
            frozenset({("user", "alice"), ("client-id", None)}): {"producer_byte_rate": 4096.0},
            frozenset({("client-id", "c9")}): {"request_percentage": 33.0}}
        assert b.broker.quotas.active
        assert b.broker.quotas.limits("User:alice", "any")[0] == (4096.0, ("alice", "any"))
    finally:
        w.close()
        b.stop()


def test_precedence_is_kafkas(broker, wire):
    """user+client > user+<default> client > user > <default> user+client > <default> user+<default>
    client > <default> user > client > <default> client, each key on its own."""
    q = broker.broker.quotas
    steps = [  # (entity, producer_byte_rate): from the weakest to the strongest
        (_entity(client_id=None), 8.0), (_entity(client_id="c1"), 7.0), (_entity(user=None), 6.0),
        (_entity(user=None, client_id=None), 5.0), (_entity(user=None, client_id="c1"), 4.0),
        (_entity(user="alice"), 3.0), (_entity(user="alice", client_id=None), 2.0),
        (_entity(user="alice", client_id="c1"), 1.0)]
    expected_tags = [("", "c1"), ("", "c1"), ("alice", ""), ("alice", "c1"), ("alice", "c1"),
                     ("alice", ""), ("alice", "c1"), ("alice", "c1")]
    for (ent, rate), tags in zip(steps, expected_tags, strict=True):
        assert alter(wire, [(ent, [("producer_byte_rate", rate)])]) == [(0, None)]
        assert q.limits("User:alice", "c1")[0] == (rate, tags), ent
    # each key resolves on its own: a consumer quota only on the client default still applies
    assert alter(wire, [(_entity(client_id=None), [("consumer_byte_rate", 99.0)])]) == [(0, None)]
    assert q.limits("User:alice", "c1")[1] == (99.0, ("", "c1"))
    # another user falls back to the <default> user entries
    assert q.limits("User:bob", "c1")[0] == (4.0, ("bob", "c1"))
    assert q.limits("User:bob", "c2")[0] == (5.0, ("bob", "c2"))


def test_cluster_authorization(tmp_path):
    b = SaslBroker(str(tmp_path / "data"), ACL_CONFIG)
    alice, admin = Wire(b, "alice"), Wire(b, "admin")
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    try:
        r = describe(alice, [])
        assert (r["error_code"], r["error_message"], r["entries"]) == (denied, "Cluster authorization failed.", None)
        assert alter(alice, [(_entity(user="alice"), [("producer_byte_rate", 1.0)]),
                             (_entity(client_id="x"), [("producer_byte_rate", 1.0)])]) == \
            [(denied, "Cluster authorization failed.")] * 2
        assert not b.broker.quotas.active                        # nothing was stored
        # the super user may
        assert alter(admin, [(_entity(user="bob"), [("producer_byte_rate", 10.0)])]) == [(0, None)]
        # DESCRIBE_CONFIGS on the cluster lets alice describe, not alter
        b.broker.access.authorizer.create([AclBinding(
            ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:alice", "*",
            AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW)])
        assert set(_entries(describe(alice, []))) == {frozenset({("user", "bob")})}
        assert alter(alice, [(_entity(user="alice"), [("producer_byte_rate", 1.0)])]) == \
            [(denied, "Cluster authorization failed.")]
        b.broker.access.authorizer.create([AclBinding(
            ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:alice", "*",
            AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW)])
        assert alter(alice, [(_entity(user="alice"), [("producer_byte_rate", 1.0)])]) == [(0, None)]
    finally:
        alice.close()
        admin.close()
        b.stop()


# -- Kafka's kafka-configs.sh --------------------------------------------------------------------
@pytest.fixture(scope="module")
def kafka_configs():
    home = kafka_home()
    if home is None or shutil.which("java") is None:
        pytest.skip("Apache Kafka 4.0's tools not found (set KAFKA_HOME, or <repo>/../shared/kafka) or no java: "
                    "kafka-configs.sh not tested")

    def run(bootstrap: str, *args: str) -> str:
        p = subprocess.run([os.path.join(home, "bin", "kafka-configs.sh"), "--bootstrap-server", bootstrap, *args],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout
    return run


def test_kafka_configs_tool(broker, kafka_configs):
    bs = broker.plain_bootstrap
    out = kafka_configs(bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
                        "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    assert "Completed updating config for user alice." in out, out
    kafka_configs(bs, "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                  "--entity-name", "c1", "--add-config", "request_percentage=50")
    kafka_configs(bs, "--alter", "--entity-type", "clients", "--entity-default",
                  "--add-config", "producer_byte_rate=1000")
    assert broker.broker.quotas.store.snapshot() == {
        (("user", "alice"),): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
        (("user", "alice"), ("client-id", "c1")): {"request_percentage": 50.0},
        (("client-id", None),): {"producer_byte_rate": 1000.0}}
    out = kafka_configs(bs, "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert "Quota configs for user-principal 'alice' are" in out, out
    assert "producer_byte_rate=1048576.0" in out and "consumer_byte_rate=2097152.0" in out, out
    out = kafka_configs(bs, "--describe", "--entity-type", "clients", "--entity-default")
    assert "producer_byte_rate=1000.0" in out, out
    kafka_configs(bs, "--alter", "--entity-type", "users", "--entity-name", "alice",
                  "--delete-config", "consumer_byte_rate")
    assert broker.broker.quotas.store.snapshot()[(("user", "alice"),)] == {"producer_byte_rate": 1048576.0}


# -- enforcement ---------------------------------------------------------------------------------
def _set_quota(b: SaslBroker, entity: list[dict], key: str, value: float) -> None:
    w = Wire(b)
    try:
        assert alter(w, [(entity, [(key, value)])]) == [(0, None)]
    finally:
        w.close()


def test_a_producer_over_its_byte_rate_is_throttled(broker):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.plain_bootstrap})
    admin.create_topics([NewTopic("q", 1, 1)])["q"].result(30)
    rate = 20000.0
    _set_quota(broker, _entity(client_id="slow-producer"), "producer_byte_rate", rate)
    throttles: list[float] = []
    p = Producer({"bootstrap.servers": broker.plain_bootstrap, "client.id": "slow-producer",
                  "batch.size": 8192, "linger.ms": 1, "acks": 1,
                  "throttle_cb": lambda e: throttles.append(e.throttle_time),
                  "broker.address.family": "v4"})
    payload = os.urandom(1000)
    total = 100_000
    t0 = time.monotonic()
    for _ in range(total // len(payload)):
        p.produce("q", payload)
        p.poll(0)
    assert p.flush(60) == 0
    elapsed = time.monotonic() - t0
    p.poll(0.5)                                  # the last throttle events
    assert throttles and max(throttles) > 0, throttles
    # bounded: at most a window (1 s) of it at once above the rate, the rest waits (loose bound)
    assert elapsed >= (total / rate) / 2 - 1.0, elapsed


def test_a_consumer_over_its_byte_rate_is_throttled(broker):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.plain_bootstrap})
    admin.create_topics([NewTopic("c", 1, 1)])["c"].result(30)
    p = Producer({"bootstrap.servers": broker.plain_bootstrap, "client.id": "fast", "broker.address.family": "v4"})
    payload = os.urandom(1000)
    n = 100
    for _ in range(n):
        p.produce("c", payload)
    assert p.flush(30) == 0
    rate = 20000.0
    _set_quota(broker, _entity(client_id="slow-consumer"), "consumer_byte_rate", rate)
    throttles: list[float] = []
    c = Consumer({"bootstrap.servers": broker.plain_bootstrap, "client.id": "slow-consumer",
                  "group.id": "g", "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": 16384,
                  "throttle_cb": lambda e: throttles.append(e.throttle_time), "broker.address.family": "v4"})
    try:
        c.subscribe(["c"])
        got = 0
        t0 = time.monotonic()
        deadline = t0 + 90
        while got < n and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                got += 1
        elapsed = time.monotonic() - t0
        c.poll(0.5)
    finally:
        c.close()
    assert got == n
    assert throttles and max(throttles) > 0, throttles
    assert elapsed >= (n * len(payload) / rate) / 2 - 1.0, elapsed


def _fetch_throttle(b: SaslBroker, version: int, topic_id: bytes, replica_id: int) -> int:
    """One Fetch of partition 0 from offset 0 on its own connection (v15+: the fetcher named in
    ReplicaState, KIP-903): the answer's throttle_time_ms."""
    body = m.encode(m.ApiKey.FETCH, version, {
        "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "replica_state": {"replica_id": replica_id, "replica_epoch": 7},
        "topics": [{"topic_id": topic_id, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""}, response=False)
    s = socket.create_connection(("127.0.0.1", b.plain_port), timeout=20)
    try:
        s.sendall(_request(m.ApiKey.FETCH, version, body, corr=3))
        frame = _read_frame(s)
    finally:
        s.close()
    assert frame is not None and struct.unpack_from(">i", frame)[0] == 3
    return struct.unpack_from(">i", frame, 5)[0]           # after the flexible response header


def test_followers_at_fetch_v15_are_exempt_and_consumers_are_not(broker):
    """Kafka exempts a follower's Fetch from client quotas; from v15 the follower is named in
    ReplicaState (KIP-903; our followers fetch at v15), not in the body's first field.  Under a
    1 B/s consumer_byte_rate default a follower's v15 fetch is not throttled, a consumer's v16
    fetch (ReplicaState's replica id -1) still is."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.plain_bootstrap})
    admin.create_topics([NewTopic("fq", 1, 1)])["fq"].result(30)
    p = Producer({"bootstrap.servers": broker.plain_bootstrap, "broker.address.family": "v4"})
    p.produce("fq", os.urandom(1000))
    assert p.flush(30) == 0
    w = Wire(broker)
    try:
        md = w.call(m.ApiKey.METADATA, 12, {"topics": [{"topic_id": None, "name": "fq"}],
                                            "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False})
    finally:
        w.close()
    tid = md["topics"][0]["topic_id"]
    tid = tid.bytes if hasattr(tid, "bytes") else bytes(tid)
    _set_quota(broker, _entity(client_id=None), "consumer_byte_rate", 1.0)
    # (the follower first: counted, its answer alone would be far over 1 B/s)
    assert _fetch_throttle(broker, 15, tid, 1) == 0
    assert _fetch_throttle(broker, 15, tid, 1) == 0
    assert _fetch_throttle(broker, 16, tid, -1) > 0


def test_request_percentage_throttles_a_busy_caller(broker):
    _set_quota(broker, _entity(client_id="busy"), "request_percentage", 0.01)
    w = Wire(broker, client_id="busy")
    other = Wire(broker, client_id="idle")
    try:
        throttle = 0
        for _ in range(500):
            r = w.call(m.ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False,
                                               "include_cluster_authorized_operations": False})
            throttle = r["throttle_time"]
            if throttle:
                break
        assert 0 < throttle <= 1000          # request time: at most one window (Kafka's bound)
        t0 = time.monotonic()
        w.call(m.ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                      "include_topic_authorized_operations": False,
                                               "include_cluster_authorized_operations": False})
        assert time.monotonic() - t0 >= throttle / 1000 * 0.8     # muted after the answer
        # another client id has no quota: not throttled
        r = other.call(m.ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                              "include_topic_authorized_operations": False,
                                               "include_cluster_authorized_operations": False})
        assert r["throttle_time"] == 0
    finally:
        w.close()
        other.close()
