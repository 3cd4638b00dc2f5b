"""confluent-kafka (librdkafka) against ``python -m engine serve``: every public method of
``Producer``, ``Consumer`` and ``AdminClient`` that sends a request, each asserting the answer
Kafka 4.0 gives (checked against the reference broker, /work/shared/kafka).

``test_every_public_method_is_covered`` introspects the three classes: a public method that is
neither named in ``COVERED`` (with the test that calls it) nor in ``LOCAL_ONLY`` (with the reason
it sends nothing) fails the suite, so a method added by a new client release is not skipped
silently.

Features the broker does not serve yet are asserted to fail the way they fail today, promptly
and with a typed error (never a hang or a closed connection); each such test says which feature
it waits for.
"""

from __future__ import annotations

import inspect
import os
import time
import uuid

import pytest

from tests.secure_clients import confluent

ck = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed")
from confluent_kafka import (  # noqa: E402
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    ElectionType,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

T = 15  # seconds: every request-sending call below gets this timeout (never a hang)

# -- the inventory -------------------------------------------------------------------------
# "Class.method" -> the test(s) that call it against the broker and check its answer.
COVERED = {
    "Producer.produce": "test_produce_poll_flush_round_trip",
    "Producer.produce_batch": "test_produce_batch",
    "Producer.list_topics": "test_list_topics_and_cluster_id",
    "Producer.cluster_id": "test_list_topics_and_cluster_id",
    "Producer.close": "test_produce_poll_flush_round_trip",
    "Producer.init_transactions": "test_transactions",
    "Producer.begin_transaction": "test_transactions",
    "Producer.commit_transaction": "test_transactions",
    "Producer.abort_transaction": "test_transactions",
    "Producer.send_offsets_to_transaction": "test_transactions",
    "Consumer.assign": "test_consumer_assign_seek_pause_position",
    "Consumer.assignment": "test_consumer_assign_seek_pause_position",
    "Consumer.unassign": "test_consumer_assign_seek_pause_position",
    "Consumer.incremental_assign": "test_consumer_incremental_assign_unassign",
    "Consumer.incremental_unassign": "test_consumer_incremental_assign_unassign",
    "Consumer.consume": "test_consumer_assign_seek_pause_position",
    "Consumer.poll": "test_consumer_assign_seek_pause_position",
    "Consumer.seek": "test_consumer_assign_seek_pause_position",
    "Consumer.pause": "test_consumer_assign_seek_pause_position",
    "Consumer.resume": "test_consumer_assign_seek_pause_position",
    "Consumer.position": "test_consumer_assign_seek_pause_position",
    "Consumer.get_watermark_offsets": "test_consumer_watermarks_and_offsets_for_times",
    "Consumer.offsets_for_times": "test_consumer_watermarks_and_offsets_for_times",
    "Consumer.commit": "test_consumer_commit_committed_store_offsets",
    "Consumer.committed": "test_consumer_commit_committed_store_offsets",
    "Consumer.store_offsets": "test_consumer_commit_committed_store_offsets",
    "Consumer.subscribe": "test_group_lifecycle_consumer_and_admin",
    "Consumer.unsubscribe": "test_group_lifecycle_consumer_and_admin",
    "Consumer.memberid": "test_group_lifecycle_consumer_and_admin",
    "Consumer.consumer_group_metadata": "test_transactions",
    "Consumer.close": "test_group_lifecycle_consumer_and_admin",
    "Consumer.list_topics": "test_list_topics_and_cluster_id",
    "Consumer.cluster_id": "test_list_topics_and_cluster_id",
    "AdminClient.list_topics": "test_list_topics_and_cluster_id",
    "AdminClient.cluster_id": "test_list_topics_and_cluster_id",
    "AdminClient.describe_cluster": "test_describe_cluster",
    "AdminClient.create_topics": "test_create_describe_delete_topics",
    "AdminClient.describe_topics": "test_create_describe_delete_topics",
    "AdminClient.delete_topics": "test_create_describe_delete_topics",
    "AdminClient.create_partitions": "test_create_partitions",
    "AdminClient.describe_configs": "test_describe_and_incremental_alter_configs",
    "AdminClient.incremental_alter_configs": "test_describe_and_incremental_alter_configs",
    "AdminClient.alter_configs": "test_alter_configs_legacy_replaces_overrides",
    "AdminClient.list_offsets": "test_list_offsets_and_delete_records",
    "AdminClient.delete_records": "test_list_offsets_and_delete_records",
    "AdminClient.list_consumer_groups": "test_group_lifecycle_consumer_and_admin",
    "AdminClient.list_groups": "test_group_lifecycle_consumer_and_admin",
    "AdminClient.describe_consumer_groups": "test_group_lifecycle_consumer_and_admin",
    "AdminClient.delete_consumer_groups": "test_group_lifecycle_consumer_and_admin",
    "AdminClient.list_consumer_group_offsets": "test_group_lifecycle_consumer_and_admin",
    "AdminClient.alter_consumer_group_offsets": "test_group_lifecycle_consumer_and_admin",
    "AdminClient.describe_acls": "test_acls_without_authorizer",
    "AdminClient.create_acls": "test_acls_without_authorizer",
    "AdminClient.delete_acls": "test_acls_without_authorizer",
    "AdminClient.describe_user_scram_credentials": "test_user_scram_credentials",
    "AdminClient.alter_user_scram_credentials": "test_user_scram_credentials",
    "AdminClient.elect_leaders": "test_elect_leaders_single_replica",
}

# "Class.method" -> why it sends no request of its own.
LOCAL_ONLY = {
    "Producer.poll": "serves delivery callbacks from the local queue (used by the produce tests)",
    "Producer.flush": "waits for the local queue to drain (used by the produce tests)",
    "Producer.purge": "drops messages from librdkafka's local queues",
    "Producer.set_sasl_credentials": "stores credentials for the next SASL handshake (PLAINTEXT here)",
    "Consumer.set_sasl_credentials": "stores credentials for the next SASL handshake (PLAINTEXT here)",
    "AdminClient.poll": "serves callbacks from the local queue",
    "AdminClient.set_sasl_credentials": "stores credentials for the next SASL handshake (PLAINTEXT here)",
}


def _public_methods(cls) -> set[str]:
    return {f"{cls.__name__}.{n}" for n in dir(cls)
            if not n.startswith("_") and callable(getattr(cls, n))}


def test_every_public_method_is_covered():
    methods = set()
    for cls in (Producer, Consumer, AdminClient):
        methods |= _public_methods(cls)
    missing = sorted(methods - COVERED.keys() - LOCAL_ONLY.keys())
    assert not missing, (f"public confluent-kafka {ck.version()[0]} methods with no conformance "
                         f"test and no local-only reason: {missing}")
    stale = sorted((COVERED.keys() | LOCAL_ONLY.keys()) - methods)
    assert not stale, f"listed methods the client no longer has: {stale}"
    tests = {n for n, f in globals().items() if n.startswith("test_") and inspect.isfunction(f)}
    named = {t for v in COVERED.values() for t in v.split()}
    assert named <= tests, f"COVERED names tests that do not exist: {sorted(named - tests)}"
    helpers = "".join(inspect.getsource(f) for f in (_create, _produce, _consumer, _consume_n))
    for name in sorted(named):    # and each named test calls the method it covers (or a helper does)
        src = inspect.getsource(globals()[name])
        src += helpers if any(h in src for h in ("_create(", "_produce(", "_consume_n(")) else ""
        for meth in (k for k, v in COVERED.items() if name in v.split()):
            assert f".{meth.split('.')[1]}(" in src, f"{name} does not call {meth}"


# -- helpers -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bootstrap(request, security) -> str:
    """The module's broker; CONFORMANCE_BOOTSTRAP=host:port runs the same tests against another
    broker instead (the reference Kafka 4.0, to check what the tests expect)."""
    return os.environ.get("CONFORMANCE_BOOTSTRAP") or request.getfixturevalue("serve").client_bootstrap


@pytest.fixture(scope="module")
def admin(bootstrap):
    return AdminClient({**confluent(bootstrap)})


def _create(admin, topic, partitions=1, config=None):
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(T)


def _produce(bootstrap, topic, records, partition=0, linger_ms=5):
    """records: (key, value, timestamp_ms or None); returns the delivered offsets in order."""
    delivered = []
    p = Producer({**confluent(bootstrap), "linger.ms": linger_ms})
    for key, value, ts in records:
        kw = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, value, key, partition=partition,
                  on_delivery=lambda err, msg: delivered.append((err, msg.offset())), **kw)
    assert p.flush(T) == 0
    assert all(err is None for err, _ in delivered), delivered
    return [o for _, o in delivered]


def _consumer(bootstrap, **conf):
    base = {**confluent(bootstrap), "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    base.update(conf)
    return Consumer(base)


def _consume_n(c, n, timeout=T):
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for msg in c.consume(n - len(out), timeout=0.5):
            assert msg.error() is None, msg.error()
            out.append(msg)
    return out


def _until(fetch, ok, timeout=T):
    """fetch() until ok(result) (our broker answers at once; Kafka applies admin changes
    asynchronously, so the same test can run against it); returns the last result."""
    deadline = time.monotonic() + timeout
    while True:
        res = fetch()
        if ok(res) or time.monotonic() > deadline:
            return res
        time.sleep(0.1)


def _kerr(exc_info) -> KafkaError:
    return exc_info.value.args[0]


# -- Producer --------------------------------------------------------------------------------

def test_produce_poll_flush_round_trip(bootstrap, admin, topic_name):
    _create(admin, topic_name, 2)
    reports = []
    p = Producer({**confluent(bootstrap), "enable.idempotence": True, "acks": "all",
                  "compression.type": "lz4"})
    for i in range(5):
        p.produce(topic_name, value=f"v{i}".encode(), key=b"k", partition=1, timestamp=1_000 + i,
                  headers=[("h", b"x")], on_delivery=lambda e, m: reports.append((e, m)))
    deadline = time.monotonic() + T
    while len(reports) < 5 and time.monotonic() < deadline:
        p.poll(0.2)                                # delivery reports come from poll()
    assert [(e, m.partition(), m.offset()) for e, m in reports] == [(None, 1, i) for i in range(5)]
    assert p.flush(T) == 0
    assert p.close() is True
    c = _consumer(bootstrap)
    c.assign([TopicPartition(topic_name, 1, 0)])
    got = _consume_n(c, 5)
    c.close()
    assert [(m.offset(), m.key(), m.value(), m.timestamp(), m.headers()) for m in got] == \
        [(i, b"k", f"v{i}".encode(), (ck.TIMESTAMP_CREATE_TIME, 1_000 + i), [("h", b"x")])
         for i in range(5)]


def test_produce_batch(bootstrap, admin, topic_name):
    _create(admin, topic_name, 1)
    reports = []
    p = Producer({**confluent(bootstrap)})
    n = p.produce_batch(topic_name, [{"value": b"a", "key": b"1"}, {"value": b"b", "key": b"2"},
                                     {"value": b"c"}],
                        partition=0, on_delivery=lambda e, m: reports.append((e, m.offset())))
    assert n == 3
    assert p.flush(T) == 0
    assert sorted(reports) == [(None, 0), (None, 1), (None, 2)]
    c = _consumer(bootstrap)
    c.assign([TopicPartition(topic_name, 0, 0)])
    got = _consume_n(c, 3)
    c.close()
    assert [(m.key(), m.value()) for m in got] == [(b"1", b"a"), (b"2", b"b"), (None, b"c")]
    assert all(m.timestamp()[0] == ck.TIMESTAMP_CREATE_TIME for m in got)


def test_list_topics_and_cluster_id(bootstrap, admin, topic_name):
    _create(admin, topic_name, 3)
    ids = set()
    for client in (Producer({**confluent(bootstrap)}), _consumer(bootstrap), admin):
        md = _until(lambda client=client: client.list_topics(timeout=T),   # (Kafka: leaders a moment later)
                    lambda md: topic_name in md.topics and
                    all(pm.leader >= 0 for pm in md.topics[topic_name].partitions.values()))
        assert topic_name in md.topics
        tmd = md.topics[topic_name]
        assert tmd.error is None and sorted(tmd.partitions) == [0, 1, 2]
        # (orig_broker_id is librdkafka's: -1 when its bootstrap connection answered)
        (node,) = md.brokers
        assert md.orig_broker_id in (node, -1)
        assert all(pm.leader == node and pm.replicas == [node] and pm.isrs == [node]
                   for pm in tmd.partitions.values())
        assert f"{md.brokers[node].host}:{md.brokers[node].port}" == bootstrap
        one = client.list_topics(topic_name, timeout=T)
        assert list(one.topics) == [topic_name]
        cid = client.cluster_id(timeout=T)
        assert cid and cid == md.cluster_id
        ids.add(cid)
        if isinstance(client, Consumer):
            client.close()
    assert len(ids) == 1


def test_transactions(bootstrap, admin, topic_name):
    """init / begin / produce / send_offsets_to_transaction / commit, then an abort: a
    read_committed consumer sees the committed records only, and the group's offset is the
    one sent in the committed transaction."""
    _create(admin, topic_name, 1)
    group = f"txg-{topic_name}"
    p = Producer({**confluent(bootstrap), "transactional.id": f"tx-{topic_name}"})
    p.init_transactions(T)
    c = _consumer(bootstrap, **{"group.id": group})
    c.assign([TopicPartition(topic_name, 0, 0)])
    cgmd = c.consumer_group_metadata()
    assert cgmd is not None
    p.begin_transaction()
    p.produce(topic_name, b"committed", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 1)], cgmd, T)
    p.commit_transaction(T)
    p.begin_transaction()
    p.produce(topic_name, b"aborted", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 7)], cgmd, T)
    p.abort_transaction(T)
    c.close()
    res = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions(group)],
                                            request_timeout=T)[group].result(T)
    assert [(tp.partition, tp.offset) for tp in res.topic_partitions] == [(0, 1)]
    rc = _consumer(bootstrap, **{"isolation.level": "read_committed"})
    rc.assign([TopicPartition(topic_name, 0, 0)])
    got, deadline = [], time.monotonic() + T
    while time.monotonic() < deadline:
        m = rc.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
        elif got:
            break
    rc.close()
    assert got == [b"committed"]


# -- Consumer --------------------------------------------------------------------------------

def test_consumer_assign_seek_pause_position(bootstrap, admin, topic_name):
    _create(admin, topic_name, 2)
    _produce(bootstrap, topic_name, [(None, f"a{i}".encode(), None) for i in range(6)], partition=0)
    _produce(bootstrap, topic_name, [(None, f"b{i}".encode(), None) for i in range(4)], partition=1)
    c = _consumer(bootstrap)
    c.assign([TopicPartition(topic_name, 0, 2), TopicPartition(topic_name, 1, 0)])
    assert sorted((tp.topic, tp.partition) for tp in c.assignment()) == \
        [(topic_name, 0), (topic_name, 1)]
    got = _consume_n(c, 8)
    assert sorted((m.partition(), m.offset()) for m in got) == \
        [(0, o) for o in range(2, 6)] + [(1, o) for o in range(4)]
    pos = {tp.partition: tp.offset for tp in
           c.position([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])}
    assert pos == {0: 6, 1: 4}
    # seek back on partition 0, pause partition 1: only partition 0 comes, from offset 1
    c.seek(TopicPartition(topic_name, 0, 1))
    c.pause([TopicPartition(topic_name, 1)])
    _produce(bootstrap, topic_name, [(None, b"b4", None)], partition=1)
    got = _consume_n(c, 5)
    assert [(m.partition(), m.offset()) for m in got] == [(0, o) for o in range(1, 6)]
    msg = c.poll(0.5)
    assert msg is None                              # paused: b4 is not delivered
    c.resume([TopicPartition(topic_name, 1)])
    msg = None
    deadline = time.monotonic() + T
    while msg is None and time.monotonic() < deadline:
        msg = c.poll(0.5)
    assert msg is not None and msg.error() is None and (msg.partition(), msg.offset(), msg.value()) == \
        (1, 4, b"b4")
    c.unassign()
    assert c.assignment() == []
    c.close()


def test_consumer_incremental_assign_unassign(bootstrap, admin, topic_name):
    _create(admin, topic_name, 2)
    _produce(bootstrap, topic_name, [(None, b"p0", None)], partition=0)
    _produce(bootstrap, topic_name, [(None, b"p1", None)], partition=1)
    c = _consumer(bootstrap)
    c.incremental_assign([TopicPartition(topic_name, 0, 0)])
    got = _consume_n(c, 1)
    assert [(m.partition(), m.value()) for m in got] == [(0, b"p0")]
    c.incremental_assign([TopicPartition(topic_name, 1, 0)])
    assert sorted(tp.partition for tp in c.assignment()) == [0, 1]
    got = _consume_n(c, 1)
    assert [(m.partition(), m.value()) for m in got] == [(1, b"p1")]
    c.incremental_unassign([TopicPartition(topic_name, 0)])
    assert [tp.partition for tp in c.assignment()] == [1]
    c.close()


def test_consumer_watermarks_and_offsets_for_times(bootstrap, admin, topic_name):
    _create(admin, topic_name, 1)
    _produce(bootstrap, topic_name, [(None, b"x", ts) for ts in (1_000, 3_000, 2_000, 3_000, 1_500)])
    c = _consumer(bootstrap)
    assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=T, cached=False) == (0, 5)
    res = c.offsets_for_times([TopicPartition(topic_name, 0, 1_600)], timeout=T)
    assert [(tp.partition, tp.offset, tp.error) for tp in res] == [(0, 1, None)]
    res = c.offsets_for_times([TopicPartition(topic_name, 0, 0)], timeout=T)
    assert res[0].offset == 0
    res = c.offsets_for_times([TopicPartition(topic_name, 0, 10_000)], timeout=T)
    assert res[0].offset == -1                      # no record that late: OFFSET_END
    admin.delete_records([TopicPartition(topic_name, 0, 2)])[TopicPartition(topic_name, 0, 2)].result(T)
    assert c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=T, cached=False) == (2, 5)
    c.close()


def test_consumer_commit_committed_store_offsets(bootstrap, admin, topic_name):
    _create(admin, topic_name, 1)
    _produce(bootstrap, topic_name, [(None, f"m{i}".encode(), None) for i in range(5)])
    group = f"g-{topic_name}"
    tp = TopicPartition(topic_name, 0)
    c = _consumer(bootstrap, **{"group.id": group, "enable.auto.offset.store": False})
    assert c.committed([tp], timeout=T)[0].offset == ck.OFFSET_INVALID   # nothing committed yet
    c.assign([TopicPartition(topic_name, 0, 0)])
    got = _consume_n(c, 5)
    assert len(got) == 5
    # explicit offsets, synchronous: the answer lists them without error
    res = c.commit(offsets=[TopicPartition(topic_name, 0, 2, metadata="m")], asynchronous=False)
    assert [(r.partition, r.offset, r.error) for r in res] == [(0, 2, None)]
    assert [(r.offset, r.metadata) for r in c.committed([tp], timeout=T)] == [(2, "m")]
    # store_offsets: commit() with no arguments commits what was stored, not the position
    c.store_offsets(message=got[2])                 # stores offset 3 (the next one)
    c.commit(asynchronous=False)
    assert c.committed([tp], timeout=T)[0].offset == 3
    c.store_offsets(offsets=[TopicPartition(topic_name, 0, 4)])
    c.commit(asynchronous=False)
    assert c.committed([tp], timeout=T)[0].offset == 4
    # position-based commit of the consumed message (message=): offset + 1
    c.commit(message=got[4], asynchronous=False)
    assert c.committed([tp], timeout=T)[0].offset == 5
    c.close()
    other = _consumer(bootstrap, **{"group.id": group})
    assert other.committed([tp], timeout=T)[0].offset == 5
    other.close()


def test_group_lifecycle_consumer_and_admin(bootstrap, admin, topic_name):
    _create(admin, topic_name, 2)
    for part in (0, 1):
        _produce(bootstrap, topic_name, [(None, b"r", None)] * 3, partition=part)
    group = f"g-{topic_name}"
    assigned = []
    c = _consumer(bootstrap, **{"group.id": group, "session.timeout.ms": 6000,
                                "partition.assignment.strategy": "range"})
    assert c.memberid() is None                     # not in a group yet
    c.subscribe([topic_name], on_assign=lambda cons, parts: assigned.extend(parts))
    got = _consume_n(c, 6)
    assert sorted((m.partition(), m.offset()) for m in got) == \
        [(p, o) for p in (0, 1) for o in range(3)]
    assert sorted(tp.partition for tp in assigned) == [0, 1]
    member = c.memberid()
    assert member and member.startswith("rdkafka-")
    c.commit(asynchronous=False)

    listing = admin.list_consumer_groups(request_timeout=T).result(T)
    assert listing.errors == []
    mine = [g for g in listing.valid if g.group_id == group]
    assert len(mine) == 1 and mine[0].state == ConsumerGroupState.STABLE
    assert not mine[0].is_simple_consumer_group
    stable_only = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY},
                                             request_timeout=T).result(T)
    assert group not in [g.group_id for g in stable_only.valid]
    classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC},
                                         request_timeout=T).result(T)
    assert [g.type for g in classic.valid if g.group_id == group] == [ConsumerGroupType.CLASSIC]
    modern = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER},
                                        request_timeout=T).result(T)
    assert group not in [g.group_id for g in modern.valid]

    desc = admin.describe_consumer_groups([group], request_timeout=T)[group].result(T)
    assert desc.state == ConsumerGroupState.STABLE and desc.partition_assignor == "range"
    assert [m.member_id for m in desc.members] == [member]
    assert sorted(tp.partition for tp in desc.members[0].assignment.topic_partitions) == [0, 1]
    assert desc.coordinator.id == admin.list_topics(timeout=T).orig_broker_id

    with pytest.warns(DeprecationWarning):      # list_groups() is deprecated, still served
        legacy = [g for g in admin.list_groups(group, timeout=T) if g.id == group]
    assert len(legacy) == 1 and legacy[0].state == "Stable" and legacy[0].protocol_type == "consumer"
    assert legacy[0].protocol == "range" and [m.id for m in legacy[0].members] == [member]

    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=T)[group].result(T)
    assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 3), (1, 3)]

    # a group with members refuses an admin offset change: UNKNOWN_MEMBER_ID per partition
    res = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0, 1)])],
        request_timeout=T)[group].result(T)
    assert [(tp.partition, tp.error.code() if tp.error else None) for tp in res.topic_partitions] \
        == [(0, KafkaError.UNKNOWN_MEMBER_ID)]
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=T)[group].result(T)
    assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 3), (1, 3)]
    # delete refused while it has members
    with pytest.raises(KafkaException) as ei:
        admin.delete_consumer_groups([group], request_timeout=T)[group].result(T)
    assert _kerr(ei).code() == KafkaError.NON_EMPTY_GROUP

    c.unsubscribe()                                 # revocation is served by poll()
    assert _until(lambda: (c.poll(0.1), c.assignment())[1], lambda a: a == []) == []
    c.close()                                       # LeaveGroup: the group is empty at once
    desc = admin.describe_consumer_groups([group], request_timeout=T)[group].result(T)
    assert desc.state == ConsumerGroupState.EMPTY and desc.members == []

    res = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0, 1)])],
        request_timeout=T)[group].result(T)
    assert [(tp.partition, tp.offset, tp.error) for tp in res.topic_partitions] == [(0, 1, None)]
    offsets = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0)])],
        request_timeout=T)[group].result(T)
    assert [(tp.partition, tp.offset) for tp in offsets.topic_partitions] == [(0, 1)]

    assert admin.delete_consumer_groups([group], request_timeout=T)[group].result(T) is None
    assert group not in [g.group_id for g in
                         admin.list_consumer_groups(request_timeout=T).result(T).valid]
    with pytest.raises(KafkaException) as ei:
        admin.delete_consumer_groups([group], request_timeout=T)[group].result(T)
    assert _kerr(ei).code() == KafkaError.GROUP_ID_NOT_FOUND
    gone = admin.describe_consumer_groups([group], request_timeout=T)[group].result(T)
    assert gone.state == ConsumerGroupState.DEAD and gone.members == []
    none = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=T)[group].result(T)
    assert none.topic_partitions == []


# -- AdminClient -----------------------------------------------------------------------------

def test_describe_cluster(admin):
    res = admin.describe_cluster(request_timeout=T).result(T)
    md = admin.list_topics(timeout=T)
    assert res.cluster_id == md.cluster_id
    assert [n.id for n in res.nodes] == [md.orig_broker_id]
    assert res.controller.id == md.orig_broker_id
    node = res.nodes[0]
    assert f"{node.host}:{node.port}" == f"{md.brokers[node.id].host}:{md.brokers[node.id].port}"


def test_create_describe_delete_topics(admin, topic_name):
    # validate_only creates nothing
    assert admin.create_topics([NewTopic(topic_name, 3, 1)], validate_only=True)[topic_name] \
        .result(T) is None
    assert topic_name not in admin.list_topics(timeout=T).topics   # (naming it would auto-create)
    assert admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(T) is None
    with pytest.raises(KafkaException) as ei:
        admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(T)
    assert _kerr(ei).code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as ei:
        admin.create_topics([NewTopic(topic_name + "-r", 1, 3)])[topic_name + "-r"].result(T)
    assert _kerr(ei).code() == KafkaError.INVALID_REPLICATION_FACTOR

    desc = admin.describe_topics(TopicCollection([topic_name]), request_timeout=T)[topic_name].result(T)
    broker = admin.list_topics(timeout=T).orig_broker_id
    assert desc.name == topic_name and not desc.is_internal
    assert desc.topic_id is not None and str(desc.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA"
    assert [(p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr])
            for p in desc.partitions] == [(i, broker, [broker], [broker]) for i in range(3)]
    with pytest.raises(KafkaException) as ei:
        admin.describe_topics(TopicCollection([topic_name + "-x"]),
                              request_timeout=T)[topic_name + "-x"].result(T)
    assert _kerr(ei).code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    assert admin.delete_topics([topic_name], operation_timeout=T)[topic_name].result(T) is None
    assert topic_name not in _until(lambda: admin.list_topics(timeout=T).topics,
                                    lambda topics: topic_name not in topics)
    with pytest.raises(KafkaException) as ei:
        admin.delete_topics([topic_name], operation_timeout=T)[topic_name].result(T)
    assert _kerr(ei).code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions(admin, topic_name):
    _create(admin, topic_name, 1)
    assert admin.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result(T) is None
    ids = _until(lambda: [p.id for p in admin.describe_topics(
        TopicCollection([topic_name]), request_timeout=T)[topic_name].result(T).partitions],
        lambda ids: len(ids) == 4)
    assert ids == [0, 1, 2, 3]
    with pytest.raises(KafkaException) as ei:     # shrinking is refused
        admin.create_partitions([NewPartitions(topic_name, 2)])[topic_name].result(T)
    assert _kerr(ei).code() == KafkaError.INVALID_PARTITIONS
    assert admin.create_partitions([NewPartitions(topic_name, 6)], validate_only=True)[topic_name] \
        .result(T) is None
    assert len(admin.list_topics(topic_name, timeout=T).topics[topic_name].partitions) == 4


def _topic_configs(admin, topic):
    res = ConfigResource(ResourceType.TOPIC, topic)
    deadline = time.monotonic() + T
    while True:     # (Kafka knows a new topic's configs a moment after CreateTopics answers)
        try:
            return admin.describe_configs([res], request_timeout=T)[res].result(T)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_describe_and_incremental_alter_configs(admin, topic_name):
    _create(admin, topic_name, 1, {"retention.ms": "123456"})
    cfg = _topic_configs(admin, topic_name)
    r = cfg["retention.ms"]
    assert (r.value, r.source, r.is_default, r.is_read_only, r.is_sensitive) == \
        ("123456", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False, False, False)
    s = cfg["segment.bytes"]
    assert (s.value, s.source, s.is_default) == ("1073741824", ConfigSource.DEFAULT_CONFIG.value, True)
    assert cfg["cleanup.policy"].value == "delete"

    res = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("segment.ms", "600000", incremental_operation=AlterConfigOpType.SET)])
    assert admin.incremental_alter_configs([res])[res].result(T) is None
    cfg = _until(lambda: _topic_configs(admin, topic_name), lambda c: c["segment.ms"].value == "600000")
    assert (cfg["retention.ms"].value, cfg["retention.ms"].source) == \
        ("604800000", ConfigSource.DEFAULT_CONFIG.value)
    assert (cfg["cleanup.policy"].value, cfg["cleanup.policy"].source) == \
        ("delete,compact", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert (cfg["segment.ms"].value, cfg["segment.ms"].source) == \
        ("600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)

    bad = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as ei:
        admin.incremental_alter_configs([bad])[bad].result(T)
    assert _kerr(ei).code() == KafkaError.INVALID_CONFIG

    broker = str(admin.list_topics(timeout=T).orig_broker_id)
    bres = ConfigResource(ResourceType.BROKER, broker)
    bcfg = admin.describe_configs([bres], request_timeout=T)[bres].result(T)
    assert bcfg["num.partitions"].value == "1" and bcfg["num.partitions"].is_read_only


def test_alter_configs_legacy_replaces_overrides(admin, topic_name):
    """Waits for: AlterConfigs (legacy, api key 33; branch apis). Kafka replaces the whole set
    of overrides: keys not listed go back to their defaults."""
    _create(admin, topic_name, 1, {"retention.ms": "123456"})
    res = ConfigResource(ResourceType.TOPIC, topic_name, set_config={"segment.ms": "600000"})
    with pytest.warns(DeprecationWarning):
        fut = admin.alter_configs([res])[res]
    assert fut.result(T) is None
    cfg = _until(lambda: _topic_configs(admin, topic_name), lambda c: c["segment.ms"].value == "600000")
    assert (cfg["segment.ms"].value, cfg["segment.ms"].source) == \
        ("600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert (cfg["retention.ms"].value, cfg["retention.ms"].source) == \
        ("604800000", ConfigSource.DEFAULT_CONFIG.value)


def test_list_offsets_and_delete_records(bootstrap, admin, topic_name):
    _create(admin, topic_name, 1)
    _produce(bootstrap, topic_name, [(None, b"x", ts) for ts in (1_000, 3_000, 2_000, 3_000, 1_500)])
    tp = TopicPartition(topic_name, 0)

    def offset(spec):
        return admin.list_offsets({tp: spec}, request_timeout=T)[tp].result(T)

    assert offset(OffsetSpec.earliest()).offset == 0
    assert offset(OffsetSpec.latest()).offset == 5
    mx = offset(OffsetSpec.max_timestamp())
    assert (mx.offset, mx.timestamp) == (1, 3_000)    # the first record with the largest timestamp
    by = offset(OffsetSpec.for_timestamp(1_600))
    assert (by.offset, by.timestamp) == (1, 3_000)
    assert offset(OffsetSpec.for_timestamp(10_000)).offset == -1
    read_committed = admin.list_offsets({tp: OffsetSpec.latest()},
                                        isolation_level=ck.IsolationLevel.READ_COMMITTED,
                                        request_timeout=T)[tp].result(T)
    assert read_committed.offset == 5                 # no open transactions: LSO == HW

    dtp = TopicPartition(topic_name, 0, 3)
    deleted = admin.delete_records([dtp], request_timeout=T, operation_timeout=T)[dtp].result(T)
    assert deleted.low_watermark == 3
    assert offset(OffsetSpec.earliest()).offset == 3
    # beyond the high watermark: OFFSET_OUT_OF_RANGE
    far = TopicPartition(topic_name, 0, 99)
    with pytest.raises(KafkaException) as ei:
        admin.delete_records([far], request_timeout=T, operation_timeout=T)[far].result(T)
    assert _kerr(ei).code() == KafkaError.OFFSET_OUT_OF_RANGE
    # -1 means "up to the high watermark"
    hw = TopicPartition(topic_name, 0, ck.OFFSET_END)
    assert admin.delete_records([hw], request_timeout=T)[hw].result(T).low_watermark == 5


def test_list_offsets_by_time_after_delete_records_inside_a_batch(bootstrap, admin, topic_name):
    """The log start inside a batch: the first record at or after it with a late-enough timestamp,
    as Kafka's LogSegment.findOffsetByTimestamp (was -1: the whole batch was skipped)."""
    _create(admin, topic_name, 1)
    _produce(bootstrap, topic_name, [(None, b"x", ts) for ts in (1_000, 3_000, 2_000, 3_000, 1_500)],
             linger_ms=200)                     # one batch: offsets 0-4
    tp, dtp = TopicPartition(topic_name, 0), TopicPartition(topic_name, 0, 3)
    admin.delete_records([dtp], request_timeout=T)[dtp].result(T)
    res = admin.list_offsets({tp: OffsetSpec.for_timestamp(0)}, request_timeout=T)[tp].result(T)
    assert (res.offset, res.timestamp) == (3, 3_000)   # Kafka 4.0: the first record left


def test_acls_without_authorizer(admin, topic_name):
    """Waits for: DescribeAcls/CreateAcls/DeleteAcls (branch apis). Kafka 4.0 with no authorizer
    describes no ACLs and refuses changes with SECURITY_DISABLED."""
    any_filter = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(any_filter, request_timeout=T).result(T) == []
    binding = AclBinding(ResourceType.TOPIC, topic_name, ResourcePatternType.LITERAL, "User:x", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as ei:
        admin.create_acls([binding], request_timeout=T)[binding].result(T)
    assert _kerr(ei).code() == KafkaError.SECURITY_DISABLED
    with pytest.raises(KafkaException) as ei:
        admin.delete_acls([any_filter], request_timeout=T)[any_filter].result(T)
    assert _kerr(ei).code() == KafkaError.SECURITY_DISABLED


def test_user_scram_credentials(admin):
    """KIP-554 credentials as Kafka 4.0 answers them: an unknown user RESOURCE_NOT_FOUND, an
    upsert described with its mechanism and iterations (never salt or keys), a deletion removes
    it, deleting it again RESOURCE_NOT_FOUND."""
    user = f"u-{uuid.uuid4().hex[:8]}"
    up = UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                      b"secret", b"salt")
    rm = UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)
    with pytest.raises(KafkaException) as ei:
        admin.describe_user_scram_credentials([user], request_timeout=T)[user].result(T)
    assert _kerr(ei).code() == KafkaError.RESOURCE_NOT_FOUND
    assert admin.alter_user_scram_credentials([up], request_timeout=T)[user].result(T) is None
    desc = admin.describe_user_scram_credentials([user], request_timeout=T)[user].result(T)
    assert [(i.mechanism, i.iterations) for i in desc.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_256, 8192)]
    everyone = admin.describe_user_scram_credentials(request_timeout=T).result(T)
    assert user in everyone
    assert admin.alter_user_scram_credentials([rm], request_timeout=T)[user].result(T) is None
    with pytest.raises(KafkaException) as ei:
        admin.alter_user_scram_credentials([rm], request_timeout=T)[user].result(T)
    assert _kerr(ei).code() == KafkaError.RESOURCE_NOT_FOUND


def test_elect_leaders_single_replica(admin, topic_name):
    """Waits for: ElectLeaders (branch apis). One replica is always the preferred leader:
    Kafka 4.0 answers ELECTION_NOT_NEEDED per partition (preferred and unclean alike), and an
    election over all partitions has nothing to report."""
    _create(admin, topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        # (no request_timeout=: confluent-kafka 2.16.1's binding raises SystemError on any kwarg)
        res = admin.elect_leaders(kind, [tp]).result(T)
        assert list(res) == [tp]
        assert res[tp].code() == KafkaError.ELECTION_NOT_NEEDED
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(T) == {}
