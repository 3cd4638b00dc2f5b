"""The group APIs at the protocol level: kio-encoded requests on raw sockets.

Every served version of FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
DeleteGroups and OffsetDelete; the error codes of Kafka's classic protocol
(MEMBER_ID_REQUIRED, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL,
INVALID_SESSION_TIMEOUT, OFFSET_METADATA_TOO_LARGE, NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC); rejected commits change
nothing; a member that stops heartbeating is removed after its session
timeout while a JoinGroup waits on another connection; ``__consumer_offsets``
is internal.
"""

from __future__ import annotations

import io
import socket
import struct
import time

import pytest

from engine.protocol import messages as m
from engine.records import build_batch

from .conftest import connect, recv_frame
from .groups_util import GROUP_BROKER_CONFIG

pytest.importorskip("kio.serial")

MEMBER_ID_REQUIRED, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 79, 22, 25
REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL = 27, 82, 23
INVALID_SESSION_TIMEOUT, OFFSET_METADATA_TOO_LARGE = 26, 12
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC = 68, 69, 86


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Raw:
    """One connection; requests written and responses read with kio."""

    def __init__(self, port: int):
        self.sock = connect(port, timeout=20)
        self.corr = 0
        self.pending: list[tuple[int, int, int]] = []

    def close(self):
        self.sock.close()

    def send(self, key: int, version: int, data: dict) -> None:
        from kio.serial import entity_writer
        cls = m._entity(key, version, False)
        buf = io.BytesIO()
        entity_writer(cls)(buf, m._build(cls, data))
        flex = m.is_flexible(key, version)
        self.corr += 1
        header = struct.pack(">hhih", key, version, self.corr, 3) + b"raw" + (b"\x00" if flex else b"")
        frame = header + buf.getvalue()
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        self.pending.append((key, version, self.corr))

    def recv(self):
        from kio.serial import entity_reader
        key, version, corr = self.pending.pop(0)
        resp = recv_frame(self.sock)
        assert struct.unpack_from(">i", resp)[0] == corr
        pos = 4 + (1 if m.is_flexible(key, version) and key != 18 else 0)
        body = memoryview(resp[pos:]).toreadonly()
        entity, size = entity_reader(m._entity(key, version, True))(body, 0)
        assert size == len(body)
        return entity

    def call(self, key: int, version: int, data: dict):
        self.send(key, version, data)
        return self.recv()


def join_data(group, member_id="", protocols=(("range", b"meta"),), session=10000, instance=None,
              protocol_type="consumer"):
    return {"group_id": group, "session_timeout": session, "rebalance_timeout": 10000,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": md} for n, md in protocols], "reason": None}


def join(raw: Raw, group: str, version: int = 5, **kw):
    """A complete JoinGroup (answering MEMBER_ID_REQUIRED); returns the response."""
    r = raw.call(11, version, join_data(group, **kw))
    if r.error_code == MEMBER_ID_REQUIRED:
        assert version >= 4 and r.member_id
        r = raw.call(11, version, join_data(group, member_id=r.member_id, **kw))
    return r


def sync(raw: Raw, group: str, gen: int, member: str, assignments=None, version: int = 3, instance=None):
    return raw.call(14, version, {"group_id": group, "generation_id": gen, "member_id": member,
                                  "group_instance_id": instance, "protocol_type": "consumer",
                                  "protocol_name": "range",
                                  "assignments": [{"member_id": k, "assignment": v}
                                                  for k, v in (assignments or {}).items()]})


def establish(raw: Raw, group: str, protocols=(("range", b"meta"),), instance=None):
    j = join(raw, group, protocols=protocols, instance=instance)
    assert j.error_code == 0, j.error_code
    s = sync(raw, group, j.generation_id, j.member_id, {j.member_id: b"assigned"}, instance=instance)
    assert s.error_code == 0 and s.assignment == b"assigned"
    return j.member_id, j.generation_id


def heartbeat(raw, group, gen, member, instance=None, version=3):
    return raw.call(12, version, {"group_id": group, "generation_id": gen, "member_id": member,
                                  "group_instance_id": instance}).error_code


def commit(raw, group, gen, member, offsets, version=7, instance=None, metadata=""):
    by_topic: dict = {}
    for (t, p), off in offsets.items():
        by_topic.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                           "committed_leader_epoch": -1, "committed_metadata": metadata})
    r = raw.call(8, version, {"group_id": group, "generation_id_or_member_epoch": gen, "member_id": member,
                              "group_instance_id": instance, "retention_time": -1,
                              "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def fetch(raw, group, partitions, version=7):
    by_topic: dict = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    r = raw.call(9, version, {"group_id": group, "require_stable": False,
                              "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]})
    assert r.error_code == 0
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}


@pytest.fixture
def pbroker(make_broker):
    b = make_broker({**GROUP_BROKER_CONFIG, "group.initial.rebalance.delay.ms": 0})
    b.call(lambda: b.engine.create_topic("t", 4))
    b.call(lambda: b.engine.create_topic("u", 1))
    return b


@pytest.fixture
def raw(pbroker):
    r = Raw(pbroker.port)
    # As Kafka: the first FindCoordinator starts creating __consumer_offsets and answers
    # COORDINATOR_NOT_AVAILABLE (15) at once; clients retry until it is there.
    answers = []
    deadline = time.monotonic() + 20
    while not answers or answers[-1] != 0:
        assert time.monotonic() < deadline, answers
        answers.append(int(r.call(10, 3, {"key": "warm", "key_type": 0}).error_code))
        if answers[-1]:
            time.sleep(0.05)
    assert answers[0] in (0, 15) and set(answers[:-1]) <= {15}
    # every __consumer_offsets partition taken up and loaded, not only "warm"'s: the tests' raw
    # calls do not retry NOT_COORDINATOR (16) as clients do
    pbroker.engine.group_coordinator.wait_loaded(timeout=20,
                                                 partitions=GROUP_BROKER_CONFIG["offsets.topic.num.partitions"])
    yield r
    r.close()


def _versions(key):
    lo, hi = m.SUPPORTED[key]
    return range(lo, hi + 1)


def test_find_coordinator_every_version(pbroker, raw):
    for v in _versions(10):
        if v >= 4:
            r = raw.call(10, v, {"key_type": 0, "coordinator_keys": ["a", "b"]})
            assert [(c.key, c.error_code, c.node_id, c.port) for c in r.coordinators] == \
                [("a", 0, 0, pbroker.port), ("b", 0, 0, pbroker.port)]
            # key type 1: __transaction_state is created by the first lookup (COORDINATOR_NOT_AVAILABLE
            # meanwhile, as Kafka), then this node coordinates the transactional id
            for _ in range(100):
                r = raw.call(10, v, {"key_type": 1, "coordinator_keys": ["txn"]})
                if r.coordinators[0].error_code != 15:
                    break
                time.sleep(0.05)
            assert [(c.key, c.error_code, c.node_id, c.port) for c in r.coordinators] == \
                [("txn", 0, 0, pbroker.port)]
        else:
            r = raw.call(10, v, {"key": "a", "key_type": 0})
            assert (r.error_code, r.node_id, r.port) == (0, 0, pbroker.port)
            assert r.host == "127.0.0.1"


def test_join_sync_heartbeat_leave_every_version(raw):
    for v in _versions(11):
        group = f"join-v{v}"
        r = raw.call(11, v, join_data(group))
        if v >= 4:
            assert r.error_code == MEMBER_ID_REQUIRED and r.member_id.startswith("raw-")
            r = raw.call(11, v, join_data(group, member_id=r.member_id))
        assert r.error_code == 0 and r.generation_id == 1 and r.leader == r.member_id
        assert r.protocol_name == "range"
        assert [(x.member_id, x.metadata) for x in r.members] == [(r.member_id, b"meta")]
        if v >= 7:
            assert r.protocol_type == "consumer"
    for v in _versions(14):
        group = f"sync-v{v}"
        j = join(raw, group)
        s = sync(raw, group, j.generation_id, j.member_id, {j.member_id: b"A"}, version=v)
        assert s.error_code == 0 and s.assignment == b"A"
        if v >= 5:
            assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
    for v in _versions(12):
        group = f"hb-v{v}"
        member, gen = establish(raw, group)
        assert heartbeat(raw, group, gen, member, version=v) == 0
        assert heartbeat(raw, group, gen + 1, member, version=v) == ILLEGAL_GENERATION
        assert heartbeat(raw, group, gen, "nobody", version=v) == UNKNOWN_MEMBER_ID
    for v in _versions(13):
        group = f"leave-v{v}"
        member, gen = establish(raw, group)
        if v >= 3:
            r = raw.call(13, v, {"group_id": group, "members": [
                {"member_id": member, "group_instance_id": None, "reason": "test"},
                {"member_id": "nobody", "group_instance_id": None, "reason": None}]})
            assert r.error_code == 0
            assert [(x.member_id, x.error_code) for x in r.members] == [(member, 0), ("nobody", UNKNOWN_MEMBER_ID)]
        else:
            assert raw.call(13, v, {"group_id": group, "member_id": member}).error_code == 0
            assert raw.call(13, v, {"group_id": group, "member_id": member}).error_code == UNKNOWN_MEMBER_ID
        d = raw.call(15, 0, {"groups": [group]}).groups[0]
        assert d.group_state == "Empty" and d.members == ()


def test_offset_commit_and_fetch_every_version(raw):
    member, gen = establish(raw, "offs")
    for v in _versions(8):
        assert commit(raw, "offs", gen, member, {("t", 0): 100 + v, ("t", 1): 200 + v}, version=v) == \
            {("t", 0): 0, ("t", 1): 0}
        for fv in _versions(9):
            if fv >= 8:
                r = raw.call(9, fv, {"require_stable": False, "groups": [
                    {"group_id": "offs", "member_id": None, "member_epoch": -1,
                     "topics": [{"name": "t", "partition_indexes": [0, 1, 2]}]},
                    {"group_id": "nosuch", "member_id": None, "member_epoch": -1, "topics": None}]})
                g, none = r.groups
                assert g.error_code == 0 and none.error_code == 0 and none.topics == ()
                got = {(p.partition_index): p.committed_offset for p in g.topics[0].partitions}
            else:
                r = raw.call(9, fv, {"group_id": "offs", "require_stable": False,
                                     "topics": [{"name": "t", "partition_indexes": [0, 1, 2]}]})
                got = {(p.partition_index): p.committed_offset for p in r.topics[0].partitions}
            assert got == {0: 100 + v, 1: 200 + v, 2: -1}
    # v2+: null topics = every committed offset of the group
    r = raw.call(9, 2, {"group_id": "offs", "topics": None})
    assert sorted((t.name, p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions) == \
        [("t", 0, 100 + max(_versions(8))), ("t", 1, 200 + max(_versions(8)))]


def test_describe_list_delete_every_version(raw):
    member, gen = establish(raw, "live", protocols=[("range", subscription("t"))])
    assert commit(raw, "simple", -1, "", {("t", 0): 5}) == {("t", 0): 0}
    for v in _versions(15):
        live, simple, nosuch = raw.call(15, v, {"groups": ["live", "simple", "nosuch"],
                                                "include_authorized_operations": False}).groups
        assert (live.error_code, live.group_state, live.protocol_type, live.protocol_data) == \
            (0, "Stable", "consumer", "range")
        assert [(x.member_id, x.client_id, x.client_host, x.member_metadata, x.member_assignment)
                for x in live.members] == [(member, "raw", "/127.0.0.1", subscription("t"), b"assigned")]
        assert (simple.group_state, simple.members) == ("Empty", ())
        assert (nosuch.error_code, nosuch.group_state) == (0, "Dead")
    for v in _versions(16):
        r = raw.call(16, v, {"states_filter": [], "types_filter": []})
        assert r.error_code == 0
        assert sorted((g.group_id, g.protocol_type) for g in r.groups) == [("live", "consumer"), ("simple", "")]
        if v >= 4:
            r = raw.call(16, v, {"states_filter": ["Stable"], "types_filter": []})
            assert [(g.group_id, g.group_state) for g in r.groups] == [("live", "Stable")]
    for v in _versions(42):
        assert commit(raw, f"del-{v}", -1, "", {("t", 0): 1}) == {("t", 0): 0}
        r = raw.call(42, v, {"groups_names": [f"del-{v}", "live", "nosuch"]})
        assert [(x.group_id, x.error_code) for x in r.results] == \
            [(f"del-{v}", 0), ("live", NON_EMPTY_GROUP), ("nosuch", GROUP_ID_NOT_FOUND)]
        assert fetch(raw, f"del-{v}", [("t", 0)]) == {("t", 0): -1}
    # OffsetDelete: refused for a topic the live group subscribes to, allowed for others
    assert commit(raw, "live", gen, member, {("t", 0): 1, ("u", 0): 2}) == {("t", 0): 0, ("u", 0): 0}
    r = raw.call(47, 0, {"group_id": "live", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0}]},
        {"name": "u", "partitions": [{"partition_index": 0}]}]})
    assert r.error_code == 0
    assert {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions} == \
        {("t", 0): GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0}
    assert fetch(raw, "live", [("t", 0), ("u", 0)]) == {("t", 0): 1, ("u", 0): -1}
    r = raw.call(47, 0, {"group_id": "nosuch", "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]})
    assert r.error_code == GROUP_ID_NOT_FOUND


def test_rejected_commits_change_nothing(raw):
    member, gen = establish(raw, "g")
    assert commit(raw, "g", gen, member, {("t", 0): 10, ("t", 1): 11}) == {("t", 0): 0, ("t", 1): 0}
    assert commit(raw, "g", gen + 1, member, {("t", 0): 99}) == {("t", 0): ILLEGAL_GENERATION}
    assert commit(raw, "g", gen - 1, member, {("t", 0): 98}) == {("t", 0): ILLEGAL_GENERATION}
    assert commit(raw, "g", gen, "stranger", {("t", 0): 97}) == {("t", 0): UNKNOWN_MEMBER_ID}
    # a simple (generation -1) commit is only for groups without live members
    assert commit(raw, "g", -1, "", {("t", 1): 96}) == {("t", 1): UNKNOWN_MEMBER_ID}
    # a member generation for a group that does not exist
    assert commit(raw, "nogroup", 3, "", {("t", 0): 1}) == {("t", 0): ILLEGAL_GENERATION}
    assert commit(raw, "g", gen, member, {("t", 2): 5}, metadata="x" * 5000) == {("t", 2): OFFSET_METADATA_TOO_LARGE}
    assert commit(raw, "g", gen, member, {("t", 9): 5, ("nope", 0): 1}) == \
        {("t", 9): 3, ("nope", 0): 3}     # UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(raw, "g", [("t", 0), ("t", 1), ("t", 2), ("t", 9)]) == \
        {("t", 0): 10, ("t", 1): 11, ("t", 2): -1, ("t", 9): -1}


def test_static_member_replaced_and_old_instance_fenced(raw):
    r = raw.call(11, 5, join_data("s", instance="inst-1"))
    assert r.error_code == 0, "static members join without MEMBER_ID_REQUIRED"
    old = r.member_id
    assert old.startswith("inst-1-")
    assert sync(raw, "s", r.generation_id, old, {old: b"A"}, instance="inst-1").error_code == 0
    # the same instance restarts: a new member id, same generation, the assignment kept
    r2 = raw.call(11, 5, join_data("s", instance="inst-1"))
    assert r2.error_code == 0 and r2.member_id != old and r2.generation_id == r.generation_id
    s = sync(raw, "s", r2.generation_id, r2.member_id, instance="inst-1")
    assert s.error_code == 0 and s.assignment == b"A"
    assert heartbeat(raw, "s", r.generation_id, old, instance="inst-1") == FENCED_INSTANCE_ID
    assert commit(raw, "s", r.generation_id, old, {("t", 0): 1}, instance="inst-1") == {("t", 0): FENCED_INSTANCE_ID}
    assert heartbeat(raw, "s", r2.generation_id, r2.member_id, instance="inst-1") == 0
    assert heartbeat(raw, "s", r2.generation_id, r2.member_id, instance="other") == UNKNOWN_MEMBER_ID


def test_inconsistent_protocol_and_session_timeout_bounds(raw):
    establish(raw, "p")
    r = join(raw, "p", protocols=[("roundrobin", b"x")])
    assert r.error_code == INCONSISTENT_GROUP_PROTOCOL
    r = join(raw, "p", protocol_type="connect")
    assert r.error_code == INCONSISTENT_GROUP_PROTOCOL
    assert join(raw, "q", session=100).error_code == INVALID_SESSION_TIMEOUT          # below the 500 set
    assert join(raw, "q", session=1_800_001).error_code == INVALID_SESSION_TIMEOUT   # Kafka's max
    assert join(raw, "q", protocols=[]).error_code == INCONSISTENT_GROUP_PROTOCOL


def test_rebalance_and_session_timeout_over_raw_connections(pbroker):
    a, b = Raw(pbroker.port), Raw(pbroker.port)
    try:
        ma, gen = establish(a, "r")
        r = b.call(11, 5, join_data("r", session=1000))
        mb = r.member_id
        b.send(11, 5, join_data("r", member_id=mb, session=1000))   # waits for A to rejoin
        time.sleep(0.2)
        assert heartbeat(a, "r", gen, ma) == REBALANCE_IN_PROGRESS
        assert commit(a, "r", gen, ma, {("t", 0): 7}) == {("t", 0): 0}    # allowed while preparing
        ja = a.call(11, 5, join_data("r", member_id=ma))
        jb = b.recv()
        assert ja.error_code == jb.error_code == 0 and ja.generation_id == jb.generation_id == gen + 1
        leader, follower = (ja, jb) if ja.members else (jb, ja)
        assert sorted(x.member_id for x in leader.members) == sorted([ma, mb]) and follower.members == ()
        # the follower's SyncGroup waits for the leader's assignment
        other = b if follower is jb else a
        mine = a if other is b else b
        other.send(14, 3, {"group_id": "r", "generation_id": gen + 1, "member_id": follower.member_id,
                           "group_instance_id": None, "assignments": []})
        time.sleep(0.1)
        assert commit(mine, "r", gen + 1, leader.member_id, {("t", 0): 8}) == {("t", 0): REBALANCE_IN_PROGRESS}
        s = sync(mine, "r", gen + 1, leader.member_id, {ma: b"for-a", mb: b"for-b"})
        assert s.error_code == 0
        assert other.recv().assignment == (b"for-b" if follower.member_id == mb else b"for-a")
        assert s.assignment == (b"for-a" if leader.member_id == ma else b"for-b")
        # B stops heartbeating (1 s session): A is told to rebalance, rejoins alone
        deadline = time.monotonic() + 10
        while heartbeat(a, "r", gen + 1, ma) != REBALANCE_IN_PROGRESS:
            assert time.monotonic() < deadline, "B was never removed"
            time.sleep(0.1)
        ja = a.call(11, 5, join_data("r", member_id=ma))
        assert ja.error_code == 0 and ja.generation_id == gen + 2 and [x.member_id for x in ja.members] == [ma]
        assert heartbeat(b, "r", gen + 1, mb) == UNKNOWN_MEMBER_ID
        assert fetch(a, "r", [("t", 0)]) == {("t", 0): 7}
    finally:
        a.close()
        b.close()


def test_consumer_offsets_is_internal(pbroker):
    raw = Raw(pbroker.port)          # not the `raw` fixture: that one makes the topic exist
    r = raw.call(3, 9, {"topics": [{"name": "__consumer_offsets"}], "allow_auto_topic_creation": True,
                        "include_topic_authorized_operations": False,
                        "include_cluster_authorized_operations": False})
    assert r.topics[0].error_code == 3        # not auto-created by a Metadata request
    establish(raw, "makes-it")                # the coordinator creates it on first need
    r = raw.call(3, 9, {"topics": None, "allow_auto_topic_creation": False,
                        "include_topic_authorized_operations": False,
                        "include_cluster_authorized_operations": False})
    internal = {t.name: t.is_internal for t in r.topics}
    assert internal["__consumer_offsets"] is True and internal["t"] is False
    meta = pbroker.engine.describe_topic("__consumer_offsets")
    assert len(meta.partitions) == GROUP_BROKER_CONFIG["offsets.topic.num.partitions"]
    assert meta.config["cleanup.policy"] == "compact" and meta.config["segment.bytes"] == 104857600
    batch = bytes(build_batch([b"forged"]))
    r = raw.call(0, 7, {"transactional_id": None, "acks": 1, "timeout": 1000, "topic_data": [
        {"name": "__consumer_offsets", "partition_data": [{"index": 0, "records": batch}]}]})
    assert r.responses[0].partition_responses[0].error_code == 17     # INVALID_TOPIC_EXCEPTION
    raw.close()


def test_join_group_wait_does_not_block_other_connections(pbroker):
    """A JoinGroup parked for the rebalance answers late; other connections are served meanwhile."""
    a, b, c = Raw(pbroker.port), Raw(pbroker.port), Raw(pbroker.port)
    try:
        ma, gen = establish(a, "w")
        mb = b.call(11, 5, join_data("w")).member_id
        b.send(11, 5, join_data("w", member_id=mb))
        b.sock.settimeout(0.5)
        with pytest.raises(socket.timeout):
            b.sock.recv(1)                    # parked until A rejoins
        b.sock.settimeout(20)
        assert c.call(18, 0, {}).error_code == 0
        assert fetch(c, "w", [("t", 0)]) == {("t", 0): -1}
        a.call(11, 5, join_data("w", member_id=ma))
        assert b.recv().error_code == 0
    finally:
        a.close()
        b.close()
        c.close()
