"""Consumer groups and transactions in cluster mode: the coordinators live with the leaders of
the replicated ``__consumer_offsets`` / ``__transaction_state`` partitions (a real ZooKeeper,
three ``python -m engine serve`` processes, confluent-kafka clients)."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.cluster.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

FIND_COORDINATOR = 10
SMALL = ("--config", "offsets.topic.num.partitions=3", "--config", "transaction.state.log.num.partitions=3")


def find_coordinator(bootstrap: str, key: str, key_type: int = 0) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator v3 asked of the broker at `bootstrap`."""
    from engine.client.wire import WireClient
    with WireClient(bootstrap, request_timeout_ms=5000) as w:
        r = w._call(None, FIND_COORDINATOR, {"key": key, "key_type": key_type}, version=3)
    return r["error_code"], r["node_id"]


def same_coordinator_everywhere(cluster, key: str, key_type: int = 0) -> int | None:
    answers = [find_coordinator(b.bootstrap, key, key_type) for b in cluster.brokers.values() if b.running]
    nodes = {node for code, node in answers if code == 0}
    if all(code == 0 for code, _ in answers) and len(nodes) == 1:
        return nodes.pop()
    return None


def make_topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % 2)
    assert p.flush(30) == 0


def consume(bootstrap: str, group: str, topic: str, n: int, timeout: float = 40.0) -> list[bytes]:
    """Read up to `n` values in `group` (committing synchronously after each), then close."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000,
                     "isolation.level": "read_committed"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append(msg.value())
            c.commit(message=msg, asynchronous=False)
    finally:
        c.close()
    return got


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = c.committed([ck.TopicPartition(topic, p) for p in range(2)], timeout=20)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}


def test_group_coordinator_is_the_offsets_leader_and_survives_its_kill(cluster_factory):
    c = cluster_factory(3, *SMALL)
    b1 = c.brokers[1].bootstrap
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    make_topic(c.bootstrap, topic)
    produce(c.bootstrap, topic, [f"v{i}".encode() for i in range(10)])

    # the first FindCoordinator creates __consumer_offsets through ZooKeeper, RF 3
    coord = wait_for(lambda: same_coordinator_everywhere(c, group), 40, "one coordinator named by every broker")
    md = AdminClient({"bootstrap.servers": b1}).list_topics("__consumer_offsets", timeout=20)
    assert md.topics["__consumer_offsets"].error is None, md.topics["__consumer_offsets"].error
    parts = md.topics["__consumer_offsets"].partitions
    assert sorted(parts) == [0, 1, 2]
    assert all(len(p.replicas) == 3 for p in parts.values())

    # a group member bootstrapping only from broker 1 commits through the coordinator
    got = consume(b1, group, topic, 6)
    assert len(got) == 6
    offsets = committed(c.brokers[3].bootstrap, group, topic)
    assert sum(offsets.values()) == 6, offsets

    # the coordinator dies: another replica of its partition takes over, the offsets are there
    c.brokers[coord].kill9()
    alive = [i for i in c.brokers if i != coord]
    # (until ZooKeeper expires its session, ~6 s, the survivors still name it, as Kafka's would)
    new = wait_for(lambda: (same_coordinator_everywhere(c, group) or 0) in alive
                   and same_coordinator_everywhere(c, group), 40, "a new coordinator")
    assert new in alive
    boot = ",".join(c.brokers[i].bootstrap for i in alive)
    assert committed(boot, group, topic) == offsets
    rest = consume(boot, group, topic, 4)
    assert sorted(got + rest) == sorted(f"v{i}".encode() for i in range(10))   # nothing re-read


def test_a_deleted_topics_committed_offsets_are_removed_by_its_coordinator(cluster_factory):
    """DeleteTopics: the group coordinator removes the groups' committed offsets of the topic
    (Kafka's onPartitionsDeleted), so the topic made again under its name is read from its
    start.  Stale offsets made Kafka Streams skip the first records of its recreated
    repartition topic after kafka-streams-application-reset.sh (tests/java)."""
    c = cluster_factory(3, *SMALL)
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    make_topic(c.bootstrap, topic)
    produce(c.bootstrap, topic, [f"v{i}".encode() for i in range(10)])
    assert len(consume(c.bootstrap, group, topic, 6)) == 6
    assert sum(committed(c.bootstrap, group, topic).values()) == 6

    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(60)
    wait_for(lambda: committed(c.bootstrap, group, topic) == {0: ck.OFFSET_INVALID, 1: ck.OFFSET_INVALID},
             30, "the deleted topic's committed offsets gone")

    # the name again: a new topic, which the group reads from its first record
    wait_for(lambda: _recreated(c.bootstrap, topic), 60, "the topic created again")
    produce(c.bootstrap, topic, [f"w{i}".encode() for i in range(10)])
    assert sorted(consume(c.bootstrap, group, topic, 10)) == sorted(f"w{i}".encode() for i in range(10))


def _recreated(bootstrap: str, topic: str) -> bool:
    try:
        make_topic(bootstrap, topic)
    except ck.KafkaException as e:         # still being deleted here and there: try again
        if e.args[0].code() in (ck.KafkaError.TOPIC_ALREADY_EXISTS, ck.KafkaError.UNKNOWN_TOPIC_OR_PART):
            return False
        raise
    return True


def test_non_coordinator_answers_not_coordinator(cluster_factory):
    c = cluster_factory(3, *SMALL)
    group = f"g-{uuid.uuid4().hex[:8]}"
    coord = wait_for(lambda: same_coordinator_everywhere(c, group), 40, "one coordinator")
    other = next(i for i in c.brokers if i != coord)
    from engine.client.wire import WireClient
    with WireClient(c.brokers[other].bootstrap) as w:
        r = w._call(None, 9, {"group_id": group, "topics": None}, version=5)     # OffsetFetch v5
    assert r["error_code"] == 16            # NOT_COORDINATOR
    with WireClient(c.brokers[coord].bootstrap) as w:
        r = w._call(None, 9, {"group_id": group, "topics": None}, version=5)
    assert r["error_code"] == 0


def test_transaction_commit_survives_the_txn_coordinators_kill(cluster_factory):
    c = cluster_factory(3, *SMALL)
    topic, tid = f"tx-{uuid.uuid4().hex[:8]}", f"tid-{uuid.uuid4().hex[:8]}"
    make_topic(c.bootstrap, topic)
    p = ck.Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid, "acks": "all"})
    p.init_transactions(60)
    coord = wait_for(lambda: same_coordinator_everywhere(c, tid, 1), 40, "one transaction coordinator")
    p.begin_transaction()
    for i in range(10):                     # both partitions: markers to two leaders
        p.produce(topic, f"c{i}".encode(), partition=i % 2)
    p.commit_transaction(60)
    p.begin_transaction()
    p.produce(topic, b"aborted", partition=0)
    p.abort_transaction(60)
    del p

    c.brokers[coord].kill9()
    alive = [i for i in c.brokers if i != coord]
    new = wait_for(lambda: (same_coordinator_everywhere(c, tid, 1) or 0) in alive
                   and same_coordinator_everywhere(c, tid, 1), 40, "a new transaction coordinator")
    assert new in alive
    boot = ",".join(c.brokers[i].bootstrap for i in alive)
    # the committed values are read by read_committed consumers, the aborted one is not
    got = consume(boot, f"g-{uuid.uuid4().hex[:8]}", topic, 11, timeout=30)
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(10))
    # the new coordinator knows the transactional id: the producer re-initialises (epoch bump)
    p2 = ck.Producer({"bootstrap.servers": boot, "transactional.id": tid, "acks": "all"})
    p2.init_transactions(60)
    p2.begin_transaction()
    p2.produce(topic, b"after", partition=1)
    p2.commit_transaction(60)
    from engine.client.wire import WireClient

    def state():
        with WireClient(c.brokers[new].bootstrap) as w:
            r = w._call(None, 65, {"transactional_ids": [tid]}, version=0)   # DescribeTransactions
        st = r["transaction_states"][0]
        return st if (st["error_code"], st["transaction_state"]) == (0, "CompleteCommit") else None
    # (EndTxn answers once PrepareCommit is written; the markers follow, as in Kafka)
    st = wait_for(state, 20, "CompleteCommit after the markers")
    assert st["producer_epoch"] >= 1            # the id was known: InitProducerId bumped its epoch


def test_produce_is_verified_by_a_coordinator_on_another_broker(cluster_factory):
    """KIP-890 across brokers: the leader of a partition asks the transaction coordinator on
    another broker (AddPartitionsToTxn v4, verify-only) before appending a transactional batch —
    a partition added to the transaction is appended, one that was not is refused with
    INVALID_TXN_STATE and nothing is written."""
    from engine import _native
    from engine.client.wire import WireClient

    c = cluster_factory(3, *SMALL)
    topic, tid = f"kv-{uuid.uuid4().hex[:8]}", f"tid-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(30)
    ck.Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid}).init_transactions(60)
    coord = wait_for(lambda: same_coordinator_everywhere(c, tid, 1), 40, "one transaction coordinator")

    def leaders():
        with WireClient(c.bootstrap, request_timeout_ms=5000) as w:
            parts = w.metadata([topic])[topic]
        return parts if all(p.leader >= 0 for p in parts) else None
    by_leader: dict[int, list[int]] = {}
    for p in wait_for(leaders, 30, "leaders of every partition"):
        by_leader.setdefault(p.leader, []).append(p.partition)
    other, (added, not_added) = next((b, ps[:2]) for b, ps in by_leader.items() if b != coord and len(ps) >= 2)

    with WireClient(c.brokers[coord].bootstrap, request_timeout_ms=10000) as w:
        r = w._call(None, 22, {"transactional_id": tid, "transaction_timeout": 60000,
                               "producer_id": -1, "producer_epoch": -1}, version=3)     # InitProducerId
        assert r["error_code"] == 0
        pid, epoch = r["producer_id"], r["producer_epoch"]
        r = w._call(None, 24, {"v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                               "v3_and_below_producer_epoch": epoch,
                               "v3_and_below_topics": [{"name": topic, "partitions": [added]}]}, version=3)
        assert r["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0

    def produce_txn(partition: int) -> int:
        b = _native.BatchBuilder()
        b.append(b"txn-value", None, None, int(time.time() * 1000))
        with WireClient(c.brokers[other].bootstrap, request_timeout_ms=10000) as w:
            records = b.build(0, 0, pid, epoch, 0, True)
            r = w._call(None, 0, {"transactional_id": tid, "acks": -1, "timeout": 10000, "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}]},
                version=9)
        return r["responses"][0]["partition_responses"][0]["error_code"]

    def end_offset(partition: int) -> int:
        with WireClient(c.brokers[other].bootstrap, request_timeout_ms=5000) as w:
            return w.list_offsets({(topic, partition): -1})[(topic, partition)][0]

    assert produce_txn(not_added) == 48                      # INVALID_TXN_STATE, asked of broker `coord`
    assert end_offset(not_added) == 0
    assert produce_txn(added) == 0
    assert end_offset(added) == 1
    with WireClient(c.brokers[coord].bootstrap, request_timeout_ms=10000) as w:   # EndTxn: abort
        assert w._call(None, 26, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                  "committed": False}, version=3)["error_code"] == 0
