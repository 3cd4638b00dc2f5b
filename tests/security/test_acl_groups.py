"""ACLs on the group APIs (engine/server/group_handlers.py): a broker with Kafka's ACL authorizer
(``super.users=User:admin``) over SASL_PLAINTEXT; alice, without and then with the ACLs, through
confluent-kafka (a consumer in a group, the AdminClient) and the raw wire where the exact codes
matter.  Kafka's checks: FindCoordinator DESCRIBE on the group / transactional id; JoinGroup,
SyncGroup, Heartbeat, LeaveGroup READ on the group; OffsetCommit READ on the group then on each
topic (before the unknown-topic check); OffsetFetch DESCRIBE on the group then on each topic;
DescribeGroups DESCRIBE per group and the caller's authorized operations; ListGroups filtered
unless DESCRIBE on the cluster; DeleteGroups DELETE per group; OffsetDelete DELETE on the group,
READ on each topic.  And with no authorizer nothing is refused."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from engine.errors import ErrorCode
from engine.protocol import messages as m
from engine.protocol.primitives import Reader
from engine.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from engine.server import authz
from tests.security.test_broker_sasl import SaslBroker, _authenticate, _handshake, _read_frame, _request

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka import admin as ck_admin  # noqa: E402

ACL_CONFIG = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
GROUP_AUTH, TOPIC_AUTH, TXN_AUTH = (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
_NOT_READY = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
              ErrorCode.NOT_COORDINATOR}


# -- the broker, clients and ACLs -----------------------------------------------------------
@pytest.fixture
def acl_broker(tmp_path):
    b = SaslBroker(str(tmp_path / "data"), ACL_CONFIG)
    assert b.broker.access.enabled
    admin = ck_admin.AdminClient(_conf(b, "admin"))
    for f in admin.create_topics([ck_admin.NewTopic("t1", 2, 1), ck_admin.NewTopic("t2", 1, 1)]).values():
        f.result(30)
    yield b
    b.stop()


@pytest.fixture
def open_broker(tmp_path):
    b = SaslBroker(str(tmp_path / "data"))
    assert not b.broker.access.enabled
    admin = ck_admin.AdminClient(_conf(b, "admin"))
    admin.create_topics([ck_admin.NewTopic("t1", 2, 1)])["t1"].result(30)
    yield b
    b.stop()


def _conf(b: SaslBroker, user: str, **extra) -> dict:
    return {"bootstrap.servers": b.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret",
            "broker.address.family": "v4", **extra}


def allow(b: SaslBroker, rtype: ResourceType, name: str, *ops: AclOperation, principal: str = "User:alice"):
    results = b.broker.access.authorizer.create([
        AclBinding(rtype, name, PatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW) for op in ops])
    assert results == [None] * len(ops)


class Wire:
    """One raw connection to the broker, logged in with SASL PLAIN as ``user``."""

    def __init__(self, b: SaslBroker, user: str):
        self.s = socket.create_connection(("127.0.0.1", b.sasl_port), timeout=10)
        assert _handshake(self.s, "PLAIN").error_code == 0
        assert _authenticate(self.s, f"\0{user}\0{user}-secret".encode()).error_code == 0
        self.corr = 10

    def call(self, key: int, version: int, data: dict) -> dict:
        self.corr += 1
        self.s.sendall(_request(key, version, m.encode(key, version, data, response=False), corr=self.corr))
        frame = _read_frame(self.s)
        assert frame is not None and struct.unpack(">i", frame[:4])[0] == self.corr
        skip = 5 if m.is_flexible(key, version) else 4
        return m.read_struct(m._entity(key, version, True), Reader(frame[skip:]))

    def until_ready(self, key: int, version: int, data: dict, codes) -> dict:
        """Call until the coordinator has loaded (``codes(response)`` free of the not-ready codes)."""
        for _ in range(200):
            r = self.call(key, version, data)
            if not set(codes(r)) & _NOT_READY:
                return r
            time.sleep(0.05)
        raise AssertionError(f"coordinator not ready: {r}")

    def close(self):
        self.s.close()


@pytest.fixture
def wires(acl_broker):
    opened: list[Wire] = []

    def open_(user: str) -> Wire:
        opened.append(Wire(acl_broker, user))
        return opened[-1]
    yield open_
    for w in opened:
        w.close()


def _commit_body(group: str, offsets: dict[tuple[str, int], int]) -> dict:
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o,
                                         "committed_leader_epoch": -1, "committed_metadata": ""})
    return {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def _codes(resp: dict) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]}


def commit(w: Wire, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """A simple consumer's OffsetCommit v8 (no generation), its codes per partition."""
    return _codes(w.until_ready(m.ApiKey.OFFSET_COMMIT, 8, _commit_body(group, offsets),
                                lambda r: _codes(r).values()))


def fetch(w: Wire, group: str, topics: dict[str, list[int]] | None) -> dict:
    """One group's OffsetFetch v8: the group entry."""
    body = {"groups": [{"group_id": group, "topics": None if topics is None else [
        {"name": t, "partition_indexes": ps} for t, ps in topics.items()]}], "require_stable": False}
    return w.until_ready(m.ApiKey.OFFSET_FETCH, 8, body, lambda r: [r["groups"][0]["error_code"]])["groups"][0]


def _offsets(group_entry: dict) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t["name"], p["partition_index"]): (p["committed_offset"], p["error_code"])
            for t in group_entry["topics"] for p in t["partitions"]}


def _kafka_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), repr(exc)
    return exc.args[0].code()


# -- FindCoordinator --------------------------------------------------------------------------
def test_find_coordinator_group_needs_describe(acl_broker, wires):
    alice = wires("alice")
    r = alice.call(m.ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert (r["error_code"], r["error_message"], r["node_id"], r["host"], r["port"]) == (
        GROUP_AUTH, "Group authorization failed.", -1, "", -1)
    allow(acl_broker, ResourceType.GROUP, "g-ok", AclOperation.DESCRIBE)
    r = alice.until_ready(m.ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g", "g-ok"]},
                          lambda r: [c["error_code"] for c in r["coordinators"]])
    got = {c["key"]: (c["error_code"], c["node_id"], c["port"]) for c in r["coordinators"]}
    assert got == {"g": (GROUP_AUTH, -1, -1), "g-ok": (0, acl_broker.broker.node_id, acl_broker.sasl_port)}


def test_find_coordinator_transactional_id_needs_describe(acl_broker, wires):
    alice = wires("alice")
    r = alice.call(m.ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})
    assert (r["error_code"], r["error_message"], r["node_id"]) == (
        TXN_AUTH, "Transactional Id authorization failed.", -1)
    # a GROUP ACL of the same name does not open the transactional id
    allow(acl_broker, ResourceType.GROUP, "tx", AclOperation.DESCRIBE)
    assert alice.call(m.ApiKey.FIND_COORDINATOR, 3, {"key": "tx", "key_type": 1})["error_code"] == TXN_AUTH
    allow(acl_broker, ResourceType.TRANSACTIONAL_ID, "tx-ok", AclOperation.DESCRIBE)
    r = alice.until_ready(m.ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx", "tx-ok"]},
                          lambda r: [c["error_code"] for c in r["coordinators"]])
    got = {c["key"]: (c["error_code"], c["node_id"]) for c in r["coordinators"]}
    assert got == {"tx": (TXN_AUTH, -1), "tx-ok": (0, acl_broker.broker.node_id)}
    admin = wires("admin")                              # the super user needs no ACL
    r = admin.until_ready(m.ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]},
                          lambda r: [c["error_code"] for c in r["coordinators"]])
    assert r["coordinators"][0]["error_code"] == 0


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------
def _membership_codes(w: Wire, group: str) -> dict[str, int]:
    join = w.call(m.ApiKey.JOIN_GROUP, 5, {
        "group_id": group, "session_timeout": 10_000, "rebalance_timeout": 10_000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
    sync = w.call(m.ApiKey.SYNC_GROUP, 5, {
        "group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range", "assignments": []})
    hb = w.call(m.ApiKey.HEARTBEAT, 4, {"group_id": group, "generation_id": 1, "member_id": "m",
                                        "group_instance_id": None})
    leave = w.call(m.ApiKey.LEAVE_GROUP, 4, {"group_id": group, "members": [
        {"member_id": "m", "group_instance_id": None}]})
    leave0 = w.call(m.ApiKey.LEAVE_GROUP, 0, {"group_id": group, "member_id": "m"})
    if join["error_code"] == GROUP_AUTH:             # Kafka's error response: nothing about the group
        assert (join["member_id"], join["generation_id"], join["leader"], join["members"]) == ("", -1, "", [])
        assert leave["members"] == []
    return {"join": join["error_code"], "sync": sync["error_code"], "heartbeat": hb["error_code"],
            "leave": leave["error_code"], "leave_v0": leave0["error_code"]}


def test_membership_apis_need_read_on_the_group(acl_broker, wires):
    alice = wires("alice")
    denied = dict.fromkeys(("join", "sync", "heartbeat", "leave", "leave_v0"), GROUP_AUTH)
    assert _membership_codes(alice, "g") == denied
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.DESCRIBE)     # DESCRIBE is not READ
    assert _membership_codes(alice, "g") == denied
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.READ)
    for _ in range(200):
        codes = _membership_codes(alice, "g")
        if not set(codes.values()) & _NOT_READY:
            break
        time.sleep(0.05)
    # now the coordinator answers: a v4+ join without a member id is asked for one, the
    # unknown member "m" is unknown
    assert codes == {"join": ErrorCode.MEMBER_ID_REQUIRED, "sync": ErrorCode.UNKNOWN_MEMBER_ID,
                     "heartbeat": ErrorCode.UNKNOWN_MEMBER_ID, "leave": 0, "leave_v0": ErrorCode.UNKNOWN_MEMBER_ID}


def _poll_until(consumer: Consumer, want, seconds: float, errors: list):
    deadline = time.monotonic() + seconds
    got = []
    while time.monotonic() < deadline and not want(got, errors):
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            errors.append(msg.error().code())
        else:
            got.append(msg.value())
    return got


def test_consumer_in_a_group_needs_read_on_the_group(acl_broker):
    producer = Producer(_conf(acl_broker, "admin"))
    for i in range(3):
        producer.produce("t2", f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    allow(acl_broker, ResourceType.TOPIC, "t2", AclOperation.READ)
    allow(acl_broker, ResourceType.GROUP, "cg", AclOperation.DESCRIBE)   # it finds the coordinator
    errors: list[int] = []
    consumer = Consumer(_conf(acl_broker, "alice", **{
        "group.id": "cg", "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "error_cb": lambda e: errors.append(e.code())}))
    try:
        consumer.subscribe(["t2"])
        got = _poll_until(consumer, lambda got, errs: KafkaError.GROUP_AUTHORIZATION_FAILED in errs, 30, errors)
        assert KafkaError.GROUP_AUTHORIZATION_FAILED in errors, errors
        assert got == []
        allow(acl_broker, ResourceType.GROUP, "cg", AclOperation.READ)
        got += _poll_until(consumer, lambda got, errs: len(got) >= 3, 60, errors)
        assert got == [b"v0", b"v1", b"v2"]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    admin = ck_admin.AdminClient(_conf(acl_broker, "admin"))
    res = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions("cg")])["cg"].result(30)
    assert {(tp.topic, tp.partition, tp.offset) for tp in res.topic_partitions} == {("t2", 0, 3)}


# -- OffsetCommit -----------------------------------------------------------------------------
def test_offset_commit_needs_read_on_group_then_topic(acl_broker, wires):
    alice, admin = wires("alice"), wires("admin")
    asked = {("t1", 0): 5, ("t2", 0): 7, ("missing", 0): 1}
    # no READ on the group: every partition refused, even of a topic that does not exist
    r = alice.call(m.ApiKey.OFFSET_COMMIT, 8, _commit_body("g", asked))
    assert _codes(r) == dict.fromkeys(asked, GROUP_AUTH)
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.READ)
    allow(acl_broker, ResourceType.TOPIC, "t1", AclOperation.READ)
    # READ on the group and t1 only: t2 and the unknown topic are TOPIC_AUTHORIZATION_FAILED
    # (authorization before existence); the super user learns the topic is unknown
    assert commit(alice, "g", asked) == {("t1", 0): 0, ("t2", 0): TOPIC_AUTH, ("missing", 0): TOPIC_AUTH}
    assert commit(admin, "g2", {("missing", 0): 1}) == {("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _offsets(fetch(admin, "g", None)) == {("t1", 0): (5, 0)}      # t2 was not committed
    # every topic refused: nothing reaches the coordinator, the group is not even created
    assert commit(alice, "g3-never", {("t2", 0): 1}) == {("t2", 0): GROUP_AUTH}
    allow(acl_broker, ResourceType.GROUP, "g3", AclOperation.READ)
    assert commit(alice, "g3", {("t2", 0): 1}) == {("t2", 0): TOPIC_AUTH}
    admin_client = ck_admin.AdminClient(_conf(acl_broker, "admin"))
    assert "g3" not in _listed(admin_client)


def test_consumer_commit_without_read_on_the_topic(acl_broker):
    allow(acl_broker, ResourceType.GROUP, "cg", AclOperation.READ)
    allow(acl_broker, ResourceType.TOPIC, "t1", AclOperation.READ)
    consumer = Consumer(_conf(acl_broker, "alice", **{"group.id": "cg", "enable.auto.commit": False}))
    try:
        # librdkafka raises the partition's error; the t1 offset of the same request is kept
        with pytest.raises(KafkaException) as e:
            consumer.commit(offsets=[TopicPartition("t2", 0, 4), TopicPartition("t1", 0, 2)], asynchronous=False)
        assert _kafka_code(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()
    admin = ck_admin.AdminClient(_conf(acl_broker, "admin"))
    res = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions("cg")])["cg"].result(30)
    assert {(tp.topic, tp.partition, tp.offset) for tp in res.topic_partitions} == {("t1", 0, 2)}


# -- OffsetFetch ------------------------------------------------------------------------------
def test_offset_fetch_needs_describe_on_group_then_topic(acl_broker, wires):
    alice, admin = wires("alice"), wires("admin")
    assert commit(admin, "g", {("t1", 0): 5, ("t2", 0): 7}) == {("t1", 0): 0, ("t2", 0): 0}
    assert commit(admin, "secret", {("t1", 0): 3}) == {("t1", 0): 0}
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.DESCRIBE)
    allow(acl_broker, ResourceType.TOPIC, "t1", AclOperation.DESCRIBE)
    body = {"groups": [
        {"group_id": "g", "topics": [{"name": "t1", "partition_indexes": [0]},
                                     {"name": "t2", "partition_indexes": [0]},
                                     {"name": "missing", "partition_indexes": [0]}]},
        {"group_id": "secret", "topics": [{"name": "t1", "partition_indexes": [0]}]}], "require_stable": False}
    r = alice.call(m.ApiKey.OFFSET_FETCH, 8, body)
    g, secret = r["groups"]
    assert g["error_code"] == 0
    assert _offsets(g) == {("t1", 0): (5, 0), ("t2", 0): (-1, TOPIC_AUTH), ("missing", 0): (-1, TOPIC_AUTH)}
    assert (secret["group_id"], secret["error_code"]) == ("secret", GROUP_AUTH)
    assert all(p["committed_offset"] == -1 for t in secret["topics"] for p in t["partitions"])
    # all offsets: the topics the caller may not DESCRIBE are left out
    assert _offsets(fetch(alice, "g", None)) == {("t1", 0): (5, 0)}
    assert _offsets(fetch(admin, "g", None)) == {("t1", 0): (5, 0), ("t2", 0): (7, 0)}
    # one group before v8: the top-level error (v2+), before v2 on every partition
    r = alice.call(m.ApiKey.OFFSET_FETCH, 5, {"group_id": "secret", "topics": None})
    assert (r["error_code"], r["topics"]) == (GROUP_AUTH, [])
    r = alice.call(m.ApiKey.OFFSET_FETCH, 1, {"group_id": "secret",
                                              "topics": [{"name": "t1", "partition_indexes": [0]}]})
    assert [(p["committed_offset"], p["error_code"]) for p in r["topics"][0]["partitions"]] == [(-1, GROUP_AUTH)]


# -- DescribeGroups, ListGroups, DeleteGroups, OffsetDelete --------------------------------
def _listed(admin) -> set[str]:
    return {g.group_id for g in admin.list_consumer_groups().result(30).valid}


def test_describe_groups_needs_describe_and_tells_the_callers_operations(acl_broker, wires):
    assert commit(wires("admin"), "g", {("t1", 0): 1}) == {("t1", 0): 0}
    alice = ck_admin.AdminClient(_conf(acl_broker, "alice"))
    with pytest.raises(KafkaException) as e:
        alice.describe_consumer_groups(["g"])["g"].result(30)
    assert _kafka_code(e.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.DESCRIBE)
    d = alice.describe_consumer_groups(["g"], include_authorized_operations=True)["g"].result(30)
    assert d.state == ck.ConsumerGroupState.EMPTY
    assert set(d.authorized_operations) == {ck_admin.AclOperation.DESCRIBE}
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.READ, AclOperation.DELETE)
    d = alice.describe_consumer_groups(["g"], include_authorized_operations=True)["g"].result(30)
    ops = ck_admin.AclOperation
    assert set(d.authorized_operations) == {ops.DESCRIBE, ops.READ, ops.DELETE}
    admin = ck_admin.AdminClient(_conf(acl_broker, "admin"))     # (kept: its futures die with it)
    d = admin.describe_consumer_groups(["g"], include_authorized_operations=True)["g"].result(30)
    assert len(d.authorized_operations) == 5           # the super user: every group operation
    # raw: the order asked, the refused group carries only its error
    r = wires("alice").call(m.ApiKey.DESCRIBE_GROUPS, 5,
                            {"groups": ["secret", "g"], "include_authorized_operations": True})
    got = [(x["group_id"], x["error_code"], x["group_state"], x["authorized_operations"]) for x in r["groups"]]
    assert got == [("secret", GROUP_AUTH, "", authz.OMITTED),
                   ("g", 0, "Empty", sum(1 << op for op in (AclOperation.READ, AclOperation.DELETE,
                                                             AclOperation.DESCRIBE)))]


def test_list_groups_shows_what_the_caller_may_describe(acl_broker, wires):
    admin_wire = wires("admin")
    for g in ("ga", "gb"):
        assert commit(admin_wire, g, {("t1", 0): 1}) == {("t1", 0): 0}
    admin, alice = (ck_admin.AdminClient(_conf(acl_broker, u)) for u in ("admin", "alice"))
    assert _listed(admin) == {"ga", "gb"}
    assert _listed(alice) == set()
    allow(acl_broker, ResourceType.GROUP, "ga", AclOperation.READ)       # READ implies DESCRIBE
    assert _listed(alice) == {"ga"}
    allow(acl_broker, ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE)
    assert _listed(alice) == {"ga", "gb"}


def test_delete_groups_needs_delete(acl_broker, wires):
    assert commit(wires("admin"), "g", {("t1", 0): 1}) == {("t1", 0): 0}
    admin, alice = (ck_admin.AdminClient(_conf(acl_broker, u)) for u in ("admin", "alice"))
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.READ, AclOperation.DESCRIBE)
    with pytest.raises(KafkaException) as e:
        alice.delete_consumer_groups(["g"])["g"].result(30)
    assert _kafka_code(e.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert "g" in _listed(admin)
    # one request, a group allowed and one not (that does not exist): per-group results
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.DELETE)
    r = wires("alice").call(m.ApiKey.DELETE_GROUPS, 2, {"groups_names": ["nope", "g"]})
    assert [(x["group_id"], x["error_code"]) for x in r["results"]] == [("nope", GROUP_AUTH), ("g", 0)]
    assert "g" not in _listed(admin)


def test_offset_delete_needs_delete_on_group_and_read_on_topic(acl_broker, wires):
    alice, admin = wires("alice"), wires("admin")
    assert commit(admin, "g", {("t1", 0): 5, ("t2", 0): 7}) == {("t1", 0): 0, ("t2", 0): 0}
    body = {"group_id": "g", "topics": [{"name": "t1", "partitions": [{"partition_index": 0}]},
                                        {"name": "t2", "partitions": [{"partition_index": 0}]}]}
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.READ)
    r = alice.call(m.ApiKey.OFFSET_DELETE, 0, body)
    assert (r["error_code"], r["topics"]) == (GROUP_AUTH, [])
    allow(acl_broker, ResourceType.GROUP, "g", AclOperation.DELETE)
    allow(acl_broker, ResourceType.TOPIC, "t1", AclOperation.READ)
    r = alice.call(m.ApiKey.OFFSET_DELETE, 0, body)
    assert r["error_code"] == 0
    assert _codes(r) == {("t1", 0): 0, ("t2", 0): TOPIC_AUTH}
    assert _offsets(fetch(admin, "g", None)) == {("t2", 0): (7, 0)}


# -- no authorizer: nothing refused -------------------------------------------------------------
def test_without_an_authorizer_nothing_is_refused(open_broker):
    w = Wire(open_broker, "alice")
    try:
        r = w.until_ready(m.ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]},
                          lambda r: [c["error_code"] for c in r["coordinators"]])
        assert r["coordinators"][0]["error_code"] == 0
        assert commit(w, "g", {("t1", 0): 5, ("missing", 0): 1}) == {
            ("t1", 0): 0, ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert _offsets(fetch(w, "g", None)) == {("t1", 0): (5, 0)}
        r = w.call(m.ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": True})
        assert (r["groups"][0]["error_code"], r["groups"][0]["authorized_operations"]) == (0, authz.GROUP_OPERATIONS)
        alice = ck_admin.AdminClient(_conf(open_broker, "alice"))
        assert "g" in _listed(alice)
        r = w.call(m.ApiKey.OFFSET_DELETE, 0, {"group_id": "g", "topics": [
            {"name": "t1", "partitions": [{"partition_index": 0}]}]})
        assert (r["error_code"], _codes(r)) == (0, {("t1", 0): 0})
        r = w.call(m.ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
        assert r["results"][0]["error_code"] == 0
    finally:
        w.close()
