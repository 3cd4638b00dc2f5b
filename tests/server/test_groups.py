"""Consumer groups with unmodified Kafka clients against the broker (classic protocol).

- confluent-kafka, kafka-python and aiokafka members split a 6-partition topic
  disjointly and cover it; a member that closes hands its partitions over and
  the survivors resume exactly at the committed offsets (nothing skipped,
  nothing below the commit read again); one group may mix the three clients.
- librdkafka's cooperative-sticky assignor (incremental rebalances) works.
- A member killed with SIGKILL (no LeaveGroup) is removed after its session
  timeout and its partitions are reassigned.
- confluent-kafka's AdminClient: list / describe / delete consumer groups, list
  and alter consumer group offsets; kafka-python's KafkaAdminClient: list,
  describe, delete groups, list and delete group offsets.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.secure_clients import SASL_SSL_FULL, confluent, in_process_sasl_ssl, kafka_python

from .groups_util import (
    GROUP_BROKER_CONFIG,
    Member,
    committed_offsets,
    produce,
    wait_until,
)

PARTS = 6
PER = 10


# Every test runs over SASL_SSL too; with ENGINE_SASL_SSL_FULL=0 only these (each client's split
# and handover).
SASL_SSL_CI = {"test_group_split_and_handover"}


@pytest.fixture(params=["plaintext", pytest.param("sasl_ssl", marks=pytest.mark.sasl_ssl)])
def gbroker(request, make_broker, tmp_path):
    """The group tests' broker; ``sasl_ssl``: the clients on its SASL_SSL listener (SCRAM-SHA-512,
    tests/secure_clients.py), ``gbroker.bootstrap`` carrying their security settings."""
    if request.param == "plaintext":
        b = make_broker(GROUP_BROKER_CONFIG)
    elif SASL_SSL_FULL or request.node.originalname in SASL_SSL_CI:
        b = in_process_sasl_ssl(make_broker, GROUP_BROKER_CONFIG, str(tmp_path / "sasl-ssl"))
    else:
        pytest.skip("SASL_SSL row outside the subset ENGINE_SASL_SSL_FULL=0 keeps")
    b.call(lambda: b.engine.create_topic("t", PARTS))
    return b


def _assignments_split(members) -> bool:
    sets = [m.assignment for m in members]
    union = frozenset().union(*sets)
    return union == frozenset(range(PARTS)) and sum(len(s) for s in sets) == PARTS and all(sets)


def _check_errors(members):
    for m in members:
        assert m.error is None, f"{m.client}: {m.error!r}"


def _consumed(members) -> list[tuple[int, int]]:
    return [x for m in members for x in m.consumed]


def _handover(broker, clients, conf=None, group="g", check=None):
    """Members of `clients` share the topic; the first closes; the rest take over at the commits.
    `check(broker, group)` runs once the first split is stable."""
    produce(broker.bootstrap, "t", PARTS, PER)
    members = [Member(c, broker.bootstrap, group, "t", **(conf or {})) for c in clients]
    for m in members:
        m.start()
    try:
        everything = {(p, o) for p in range(PARTS) for o in range(PER)}
        wait_until(lambda: (_check_errors(members), everything <= set(_consumed(members)))[1],
                   what="all records consumed")
        wait_until(lambda: _assignments_split(members), what="a disjoint split covering the topic")
        wait_until(lambda: committed_offsets(broker.bootstrap, group, "t", PARTS) == {p: PER for p in range(PARTS)},
                   what="every partition committed at its end")
        if check is not None:
            check(broker, group)
        mark = [len(m.consumed) for m in members]

        leaving, survivors = members[0], members[1:]
        given_up = leaving.assignment
        leaving.stop()
        wait_until(lambda: _assignments_split(survivors), what="the survivors to take every partition")
        assert given_up <= frozenset().union(*(m.assignment for m in survivors))

        produce(broker.bootstrap, "t", PARTS, PER, tag=b"second-")
        second = {(p, o) for p in range(PARTS) for o in range(PER, 2 * PER)}
        wait_until(lambda: (_check_errors(survivors), second <= set(_consumed(survivors)))[1],
                   what="the second round consumed")
        after = [x for m, n in zip(members, mark, strict=True) for x in m.consumed[n:]]
        # resumed exactly at the committed offsets: nothing below them again, nothing twice
        assert sorted(after) == sorted(second), sorted(set(after) - second)[:10]
        wait_until(lambda: committed_offsets(broker.bootstrap, group, "t", PARTS) ==
                   {p: 2 * PER for p in range(PARTS)}, what="the second round committed")
    finally:
        for m in members:
            if m.is_alive():
                m.stop()
    _check_errors(members)


@pytest.mark.parametrize("client", ["confluent", "kafka-python", "aiokafka"])
def test_group_split_and_handover(gbroker, client):
    _handover(gbroker, [client] * 3)


def test_mixed_clients_share_one_group(gbroker):
    _handover(gbroker, ["kafka-python", "confluent", "aiokafka"])


def test_roundrobin_librdkafka(gbroker):
    _handover(gbroker, ["confluent"] * 2, {"partition.assignment.strategy": "roundrobin"})


def test_cooperative_sticky_librdkafka(gbroker):
    conf = {"partition.assignment.strategy": "cooperative-sticky"}

    def check(broker, group):
        from confluent_kafka.admin import AdminClient
        admin = AdminClient(confluent(broker.bootstrap))
        desc = admin.describe_consumer_groups([group])[group].result(10)
        assert desc.partition_assignor == "cooperative-sticky" and len(desc.members) == 3

    _handover(gbroker, ["confluent"] * 3, conf, check=check)


_KILLABLE = textwrap.dedent("""
    import json, sys
    from confluent_kafka import Consumer
    conf, group, session = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    c = Consumer({**conf, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": session,
                  "heartbeat.interval.ms": 300})
    c.subscribe(["t"])
    while True:
        msgs = [m for m in c.consume(100, timeout=0.1) if m.error() is None]
        if msgs:
            try:
                c.commit(asynchronous=False)
            except Exception:
                pass
        print("ASSIGNED", sorted(tp.partition for tp in c.assignment()), len(msgs), flush=True)
""")


def test_killed_member_is_removed_after_session_timeout(gbroker):
    produce(gbroker.bootstrap, "t", PARTS, PER)
    proc = subprocess.Popen([sys.executable, "-c", _KILLABLE, json.dumps(confluent(gbroker.bootstrap)), "gk", "2000"],
                            stdout=subprocess.PIPE, text=True)
    survivors = [Member("confluent", gbroker.bootstrap, "gk", "t") for _ in range(2)]
    try:
        for m in survivors:
            m.start()
        everything = {(p, o) for p in range(PARTS) for o in range(PER)}

        def killed_member_owns_some():
            line = proc.stdout.readline()
            return line.startswith("ASSIGNED [") and not line.startswith("ASSIGNED []") and \
                line.rstrip().endswith(" 0") and line

        # all three in the group, every record consumed and committed
        wait_until(lambda: sum(len(m.assignment) for m in survivors) in range(1, PARTS),
                   what="survivors sharing with the subprocess")
        wait_until(lambda: committed_offsets(gbroker.bootstrap, "gk", "t", PARTS) == {p: PER for p in range(PARTS)},
                   what="everything committed")
        wait_until(killed_member_owns_some, what="the subprocess to own partitions")
        assert everything - set(_consumed(survivors))     # some records were the subprocess's
        mark = [len(m.consumed) for m in survivors]
        proc.send_signal(signal.SIGKILL)                  # no LeaveGroup
        proc.wait(10)
        wait_until(lambda: _assignments_split(survivors), timeout=30,
                   what="the killed member's partitions reassigned")
        produce(gbroker.bootstrap, "t", PARTS, PER, tag=b"second-")
        second = {(p, o) for p in range(PARTS) for o in range(PER, 2 * PER)}
        wait_until(lambda: second <= set(_consumed(survivors)), what="the second round consumed")
        after = [x for m, n in zip(survivors, mark, strict=True) for x in m.consumed[n:]]
        assert sorted(after) == sorted(second)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stdout.close()
        for m in survivors:
            m.stop()
    _check_errors(survivors)


def test_admin_client_groups_and_offsets(gbroker):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(confluent(gbroker.bootstrap))
    produce(gbroker.bootstrap, "t", PARTS, PER)
    members = [Member("confluent", gbroker.bootstrap, "live", "t", **{"client.id": "admin-test"})
               for _ in range(2)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: _assignments_split(members), what="the live group to be stable")
        wait_until(lambda: committed_offsets(gbroker.bootstrap, "live", "t", PARTS) == {p: PER for p in range(PARTS)},
                   what="commits")

        # a simple (non-member) commit makes an Empty group, as manual assign+commit does in Kafka
        res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "manual", [TopicPartition("t", 0, 3), TopicPartition("t", 1, 7)])])["manual"].result(10)
        assert [(tp.partition, tp.offset, tp.error) for tp in res.topic_partitions] == [(0, 3, None), (1, 7, None)]
        assert committed_offsets(gbroker.bootstrap, "manual", "t", 2) == {0: 3, 1: 7}

        listed = admin.list_consumer_groups().result(10)
        states = {g.group_id: g.state for g in listed.valid}
        assert states == {"live": ConsumerGroupState.STABLE, "manual": ConsumerGroupState.EMPTY}
        stable_only = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10)
        assert [g.group_id for g in stable_only.valid] == ["live"]

        desc = admin.describe_consumer_groups(["live", "manual"])
        live, manual = desc["live"].result(10), desc["manual"].result(10)
        assert live.state == ConsumerGroupState.STABLE and live.partition_assignor == "range"
        assert len(live.members) == 2 and {m.client_id for m in live.members} == {"admin-test"}
        assigned = sorted(tp.partition for mem in live.members for tp in mem.assignment.topic_partitions)
        assert assigned == list(range(PARTS))
        assert manual.state == ConsumerGroupState.EMPTY and manual.members == []

        # altering the offsets of a group with live members is refused (UNKNOWN_MEMBER_ID, as Kafka)
        res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "live", [TopicPartition("t", 0, 0)])])["live"]
        with pytest.raises(Exception) as e:
            bad = res.result(10)
            assert any(tp.error is not None for tp in bad.topic_partitions)
            raise RuntimeError(str([tp.error for tp in bad.topic_partitions]))
        assert "UNKNOWN_MEMBER_ID" in str(e.value) or "Unknown member" in str(e.value)

        deleted = admin.delete_consumer_groups(["live", "manual", "nosuch"])
        deleted["manual"].result(10)
        with pytest.raises(Exception) as e:
            deleted["live"].result(10)
        assert e.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
        with pytest.raises(Exception) as e:
            deleted["nosuch"].result(10)
        assert e.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND
        assert committed_offsets(gbroker.bootstrap, "manual", "t", 2) == {0: -1001, 1: -1001}
    finally:
        for m in members:
            m.stop()
    _check_errors(members)
    # the live group is Empty now: it can be deleted, and its offsets go with it
    wait_until(lambda: {g.group_id: g.state for g in admin.list_consumer_groups().result(10).valid}
               == {"live": ConsumerGroupState.EMPTY}, what="the live group to become empty")
    admin.delete_consumer_groups(["live"])["live"].result(10)
    assert admin.list_consumer_groups().result(10).valid == []
    assert os.path.isdir(os.path.join(gbroker.engine.path, "__consumer_offsets-0"))


def test_kafka_python_admin_client(gbroker):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import GroupSubscribedToTopicError

    produce(gbroker.bootstrap, "t", PARTS, PER)
    m = Member("kafka-python", gbroker.bootstrap, "kg", "t")
    m.start()
    admin = KafkaAdminClient(**kafka_python(gbroker.bootstrap))
    try:
        wait_until(lambda: m.assignment == frozenset(range(PARTS)), what="the member to own the topic")
        wait_until(lambda: committed_offsets(gbroker.bootstrap, "kg", "t", PARTS) == {p: PER for p in range(PARTS)},
                   what="commits")
        assert [(g["group_id"], g["group_state"]) for g in admin.list_groups()] == [("kg", "Stable")]
        desc = admin.describe_groups(["kg"])["kg"]
        assert desc["protocol_data"] == "range" and len(desc["members"]) == 1
        assert desc["members"][0]["member_metadata"]["topics"] == ["t"]
        offsets = admin.list_group_offsets("kg")["kg"]
        assert {tp.partition: om.offset for tp, om in offsets.items()} == {p: PER for p in range(PARTS)}
        # OffsetDelete of a topic the live group subscribes to is refused
        assert admin.delete_group_offsets("kg", [TopicPartition("t", 0)]) == \
            {TopicPartition("t", 0): GroupSubscribedToTopicError}
    finally:
        m.stop()
    _check_errors([m])
    wait_until(lambda: [g["group_state"] for g in admin.list_groups()] == ["Empty"], what="an empty group")
    assert admin.delete_groups(["kg", "nope"]) == {"kg": "OK", "nope": "GroupIdNotFoundError"}
    admin.close()
