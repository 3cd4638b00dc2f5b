"""Partition placement through the ZooKeeper cluster: a broker holds logs only for the partitions
it replicates (other brokers answer as Kafka's do), and partition reassignment
(AlterPartitionReassignments / ListPartitionReassignments, KIP-455) under an idempotent acks=all
producer, with kafka-python's admin client and Kafka's own ``kafka-reassign-partitions.sh``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid

import pytest

from tests.cluster.conftest import controller_id, wait_for, zk_json
from tests.cluster.test_replication import Load, _check, _consume_all, _create
from tests.server.test_versions import call
from tests.serving import find_kafka

NOT_LEADER_OR_FOLLOWER = 6
NOT_CONTROLLER = 41


def _assignment(zkc, topic):
    return zk_json(zkc, f"/brokers/topics/{topic}")[0]


def _state(zkc, topic, p=0):
    return zk_json(zkc, f"/brokers/topics/{topic}/partitions/{p}/state")[0]


def _dirs(broker, topic):
    """The partition directories of `topic` in a broker's data dir (not the -delete ones)."""
    try:
        names = os.listdir(broker.data)
    except FileNotFoundError:
        return set()
    out = set()
    for n in names:
        head, _, p = n.rpartition("-")
        if head == topic and p.isdigit():
            out.add(int(p))
    return out


def test_logs_only_on_replicas_and_kafka_answers_elsewhere(zk_client, cluster_factory):
    c = cluster_factory(3)
    topic = f"place-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 3, 1)
    a = wait_for(lambda: _assignment(zk_client, topic), what="the assignment")
    replicas = {int(p): r for p, r in a["partitions"].items()}
    wait_for(lambda: all(_dirs(b, topic) == {p for p, r in replicas.items() if i in r}
                         for i, b in c.brokers.items()), timeout=15, what="logs on the replicas only")
    time.sleep(0.5)
    for i, b in c.brokers.items():
        assert _dirs(b, topic) == {p for p, r in replicas.items() if i in r}, i
    p0_leader = replicas[0][0]
    other = next(i for i in c.brokers if i not in replicas[0])
    port = c.brokers[other].port
    # Metadata: the cluster's answer on every broker, partitions it holds no replica of included
    md = call(port, 3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False})
    [t] = md.topics
    assert int(t.error_code) == 0
    assert sorted((int(p.partition_index), int(p.leader_id), list(p.replica_nodes)) for p in t.partitions) == \
        sorted((p, r[0], r) for p, r in replicas.items())
    # ListOffsets, Fetch and DescribeProducers on a broker that is no replica: NOT_LEADER_OR_FOLLOWER
    lo = call(port, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    assert int(lo.topics[0].partitions[0].error_code) == NOT_LEADER_OR_FOLLOWER
    fe = call(port, 1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                            "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                                {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                                 "fetch_offset": 0, "last_fetched_epoch": -1,
                                                                 "log_start_offset": -1,
                                                                 "partition_max_bytes": 1 << 20}]}],
                            "forgotten_topics_data": [], "rack_id": ""})
    assert int(fe.responses[0].partitions[0].error_code) == NOT_LEADER_OR_FOLLOWER
    dp = call(port, 61, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
    assert int(dp.topics[0].partitions[0].error_code) == NOT_LEADER_OR_FOLLOWER
    # DescribeLogDirs lists what the broker holds: not partition 0 there, partition 0 on its replica
    for i, held in ((other, False), (p0_leader, True)):
        dl = call(c.brokers[i].port, 35, 1, {"topics": [{"topic": topic, "partitions": [0, 1, 2]}]})
        listed = {(t.name, int(p.partition_index)) for t in dl.results[0].topics for p in t.partitions}
        assert ((topic, 0) in listed) is held, (i, listed)
        assert listed == {(topic, p) for p in _dirs(c.brokers[i], topic)}
    # `topics describe` (Metadata + ListOffsets from the leaders) still works from any broker
    out = subprocess.run(["python3", "-m", "engine", "topics", "--bootstrap-server", c.brokers[other].bootstrap,
                          "describe", topic], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(f"{topic}") >= 3, out.stdout
    # the coordinators (their internal topics also placed on their replicas only) still work
    from confluent_kafka import Consumer, Producer, TopicPartition
    prod = Producer({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4"})
    for n in range(30):
        prod.produce(topic, str(n).encode(), partition=n % 3)
    assert prod.flush(30) == 0
    cons = Consumer({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4", "group.id": "g-" + topic,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    cons.subscribe([topic])
    got = []
    deadline = time.monotonic() + 40
    while len(got) < 30 and time.monotonic() < deadline:
        msg = cons.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(int(msg.value()))
    assert sorted(got) == list(range(30))
    cons.commit(asynchronous=False)
    committed = cons.committed([TopicPartition(topic, p) for p in range(3)], timeout=20)
    assert sorted(tp.offset for tp in committed) == [10, 10, 10]
    cons.close()
    offsets = _assignment(zk_client, "__consumer_offsets")
    for i, b in c.brokers.items():        # each broker creates its replicas as it learns of them
        want = {int(p) for p, r in offsets["partitions"].items() if i in r}
        wait_for(lambda b=b, want=want: _dirs(b, "__consumer_offsets") == want, timeout=30,
                 what=f"broker {i}'s __consumer_offsets replicas, and only them")


# -- partition reassignment ------------------------------------------------------------------
def _create_assigned(bootstrap, name, assignment, config=None):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    admin.create_topics([NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment,
                                 config=config or {})],
                        operation_timeout=20)[name].result(30)


def _kadmin(bootstrap):
    from kafka import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)


def _listed(admin):
    """list_partition_reassignments as {(topic, p): (replicas, adding, removing)}."""
    out = {}
    for tp, r in admin.list_partition_reassignments().items():
        out[(tp.topic, tp.partition)] = (list(r["replicas"]), list(r["adding_replicas"]),
                                         list(r["removing_replicas"]))
    return out


def _pause(broker):
    os.killpg(broker.proc.pid, signal.SIGSTOP)


def _resume(broker):
    os.killpg(broker.proc.pid, signal.SIGCONT)


def _roles(zkc):
    """(a, b, c): three broker ids, c not the controller (c is paused while it should catch up)."""
    ctl = controller_id(zkc)
    c = 3 if ctl != 3 else 2
    a, b = [i for i in (1, 2, 3) if i != c]
    return a, b, c


def test_move_rf2_partition_under_load(zk_client, cluster_factory):
    """{a,b} -> {b,c} (the leader a moves away) while an idempotent acks=all producer sends:
    in progress while c is paused, complete once c caught up, a's log gone, 0 lost / 0 dup."""
    from kafka import TopicPartition
    c = cluster_factory(3)
    a, b, new = _roles(zk_client)
    topic = f"mv-{uuid.uuid4().hex[:6]}"
    _create_assigned(c.brokers[1].bootstrap, topic, [[a, b]])
    wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state")
             and _state(zk_client, topic)["leader"] == a, what="a leads")
    load = Load(c.bootstrap, topic).start()
    admin = _kadmin(c.bootstrap)
    try:
        wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
        assert _listed(admin) == {}
        _pause(c.brokers[new])
        try:
            tp = TopicPartition(topic, 0)
            assert admin.alter_partition_reassignments({tp: [b, new]}) == {tp: None}
            # Kafka's layout while it moves: target first, then the original replicas not in it
            a1 = _assignment(zk_client, topic)
            assert (a1["partitions"], a1["adding_replicas"], a1["removing_replicas"]) == \
                ({"0": [b, new, a]}, {"0": [new]}, {"0": [a]})
            assert _listed(admin) == {(topic, 0): ([b, new, a], [new], [a])}
            before = len(load.acked)
            wait_for(lambda: len(load.acked) >= before + 300, timeout=30, what="acks while it moves")
            assert _listed(admin) == {(topic, 0): ([b, new, a], [new], [a])}   # c cannot catch up
            assert _dirs(c.brokers[a], topic) == {0}
        finally:
            _resume(c.brokers[new])
        wait_for(lambda: _listed(admin) == {}, timeout=40, what="the reassignment to complete")
        a2 = _assignment(zk_client, topic)
        assert (a2["partitions"], a2["adding_replicas"], a2["removing_replicas"]) == ({"0": [b, new]}, {}, {})
        st = _state(zk_client, topic)
        assert st["leader"] == b and sorted(st["isr"]) == sorted([b, new])   # elected from target ∩ ISR
        wait_for(lambda: _dirs(c.brokers[a], topic) == set(), timeout=15, what=f"{topic}-0 gone from broker {a}")
        assert _dirs(c.brokers[new], topic) == {0}
        before = len(load.acked)
        wait_for(lambda: len(load.acked) >= before + 1000, timeout=60, what="acks from the new leader")
    finally:
        load.stop()
        admin.close()
    assert load.errors == []
    lost, dup = _check(load, _consume_all(c.bootstrap, topic, 1))
    assert (lost, dup) == (0, 0)


def test_shrink_to_one_replica_under_load_and_errors(zk_client, cluster_factory):
    """{a,b,c} -> {c} under the producer (completes at once: c is in the ISR), then Kafka's
    errors, a cancellation, and NOT_CONTROLLER from a broker that is not the controller."""
    from kafka import TopicPartition
    from kafka.errors import for_code
    InvalidReplicaAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError = \
        for_code(39), for_code(85), for_code(3)
    c = cluster_factory(3)
    a, b, new = _roles(zk_client)
    topic = f"sh-{uuid.uuid4().hex[:6]}"
    _create_assigned(c.brokers[1].bootstrap, topic, [[a, b, new]])
    wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state")
             and len(_state(zk_client, topic)["isr"]) == 3, timeout=30, what="a full ISR")
    load = Load(c.bootstrap, topic).start()
    admin = _kadmin(c.bootstrap)
    try:
        wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
        tp = TopicPartition(topic, 0)
        assert admin.alter_partition_reassignments({tp: [new]}) == {tp: None}
        wait_for(lambda: _assignment(zk_client, topic)["partitions"] == {"0": [new]}, timeout=30,
                 what="the reassignment to complete")
        assert _listed(admin) == {}
        st = _state(zk_client, topic)
        assert (st["leader"], st["isr"]) == (new, [new])
        for old in (a, b):
            wait_for(lambda old=old: _dirs(c.brokers[old], topic) == set(), timeout=15,
                     what=f"the log gone from {old}")
        before = len(load.acked)
        wait_for(lambda: len(load.acked) >= before + 1000, timeout=60, what="acks from the new leader")
    finally:
        load.stop()
    assert load.errors == []
    assert _check(load, _consume_all(c.bootstrap, topic, 1)) == (0, 0)

    # errors, as Kafka: nothing to cancel, bad targets, unknown topic / partition
    missing = TopicPartition(topic + "-none", 0)
    r = admin.alter_partition_reassignments({tp: None, TopicPartition(topic, 5): [a],
                                             missing: [a]})
    assert r == {tp: NoReassignmentInProgressError, TopicPartition(topic, 5): UnknownTopicOrPartitionError,
                 missing: UnknownTopicOrPartitionError}
    for bad in ([a, a], [a, 99]):
        assert admin.alter_partition_reassignments({tp: bad}) == {tp: InvalidReplicaAssignmentError}
    resp = call(c.brokers[controller_id(zk_client)].port, 45, 0, {"timeout": 5000, "topics": [   # (kafka-python
        {"name": topic, "partitions": [{"partition_index": 0, "replicas": []}]}]})          # refuses [] itself)
    assert [(int(p.error_code), p.error_message) for p in resp.responses[0].partitions] == \
        [(39, "The manual partition assignment includes an empty replica list.")]
    assert admin.alter_partition_reassignments({tp: [new]}) == {tp: None}      # already there: done
    # a reassignment that cannot finish (x, not the controller, paused), then cancelled: back to
    # [new], and x holds nothing
    x = a if controller_id(zk_client) != a else b
    _pause(c.brokers[x])
    try:
        assert admin.alter_partition_reassignments({tp: [x]}) == {tp: None}
        assert _listed(admin) == {(topic, 0): ([x, new], [x], [new])}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert _listed(admin) == {}
        a3 = _assignment(zk_client, topic)
        assert (a3["partitions"], a3["adding_replicas"], a3["removing_replicas"]) == ({"0": [new]}, {}, {})
    finally:
        _resume(c.brokers[x])
    wait_for(lambda: _dirs(c.brokers[x], topic) == set(), timeout=15, what=f"no log of {topic} on {x}")
    admin.close()
    # only the controller serves these (Kafka's ZooKeeper-era brokers): NOT_CONTROLLER elsewhere
    other = next(i for i in c.brokers if i != controller_id(zk_client))
    resp = call(c.brokers[other].port, 46, 0, {"timeout": 5000, "topics": None})
    assert int(resp.error_code) == NOT_CONTROLLER
    resp = call(c.brokers[other].port, 45, 0, {"timeout": 5000, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "replicas": [a]}]}]})
    assert (int(resp.error_code), resp.responses) == (NOT_CONTROLLER, ())
    assert _assignment(zk_client, topic)["partitions"] == {"0": [new]}


def test_kafka_reassign_partitions_tool(zk_client, cluster_factory, tmp_path):
    """Kafka 4.0's kafka-reassign-partitions.sh --execute / --verify / --list against the cluster."""
    home, why = find_kafka()
    if home is None:
        pytest.skip(why)
    c = cluster_factory(3)
    topic = f"tool-{uuid.uuid4().hex[:6]}"
    _create_assigned(c.brokers[1].bootstrap, topic, [[1, 2], [2, 3]])
    wait_for(lambda: all(zk_client.exists(f"/brokers/topics/{topic}/partitions/{p}/state") for p in (0, 1)),
             what="the partition states")
    from confluent_kafka import Producer
    prod = Producer({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4", "acks": "all"})
    for n in range(200):
        prod.produce(topic, str(n).encode(), partition=n % 2)
    assert prod.flush(30) == 0
    tool = os.path.join(home, "bin", "kafka-reassign-partitions.sh")

    def run(*args, bootstrap=None):
        out = subprocess.run([tool, "--bootstrap-server", bootstrap or c.bootstrap, *args], capture_output=True,
                             text=True, timeout=120)
        return out.returncode, out.stdout, out.stderr
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [3, 1]},
        {"topic": topic, "partition": 1, "replicas": [1]}]}))
    rc, out, err = run("--execute", "--reassignment-json-file", str(plan))
    assert rc == 0, out + err
    assert "Current partition replica assignment" in out
    assert f'"topic":"{topic}","partition":0,"replicas":[1,2]' in out          # the rollback plan
    assert f"Successfully started partition reassignments for {topic}-0,{topic}-1" in out

    def verified():
        rc, out, err = run("--verify", "--reassignment-json-file", str(plan))
        assert rc == 0, out + err
        return f"Reassignment of partition {topic}-0 is completed." in out and \
            f"Reassignment of partition {topic}-1 is completed." in out and out
    out = wait_for(verified, timeout=60, what="--verify to report both complete")
    assert _assignment(zk_client, topic)["partitions"] == {"0": [3, 1], "1": [1]}
    wait_for(lambda: _dirs(c.brokers[2], topic) == set() and _dirs(c.brokers[3], topic) == {0}
             and _dirs(c.brokers[1], topic) == {0, 1}, timeout=15, what="logs where the replicas are")
    rc, out, err = run("--list")
    assert (rc, out.strip()) == (0, "No partition reassignments found."), err
    # a move that cannot finish (its new replica x paused), listed, then --cancel
    x = 2 if controller_id(zk_client) != 2 else 3
    ctl = c.brokers[controller_id(zk_client)].bootstrap       # (not the paused broker)
    plan2 = tmp_path / "plan2.json"
    plan2.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 1, "replicas": [x]}]}))
    _pause(c.brokers[x])
    try:
        rc, out, err = run("--execute", "--reassignment-json-file", str(plan2), bootstrap=ctl)
        assert rc == 0 and f"Successfully started partition reassignment for {topic}-1" in out, out + err
        rc, out, err = run("--list", bootstrap=ctl)
        assert rc == 0 and f"{topic}-1: replicas: {x},1. adding: {x}. removing: 1." in out, out + err
        # (--preserve-throttles: clearing them asks every broker, the paused one too)
        rc, out, err = run("--cancel", "--reassignment-json-file", str(plan2), "--preserve-throttles",
                           bootstrap=ctl)
        assert rc == 0 and f"Successfully cancelled partition reassignment for: {topic}-1" in out, out + err
        assert _assignment(zk_client, topic)["partitions"] == {"0": [3, 1], "1": [1]}
    finally:
        _resume(c.brokers[x])
    rc, out, err = run("--list")
    assert (rc, out.strip()) == (0, "No partition reassignments found."), err
    wait_for(lambda: 1 not in _dirs(c.brokers[x], topic), timeout=15, what=f"no {topic}-1 on broker {x}")
    from tests.cluster.test_replication import _consume_all as consume
    assert sorted(consume(c.bootstrap, topic, 2)) == list(range(200))


def test_new_controller_finishes_a_move_and_a_restarted_old_replica_drops_its_log(zk_client, cluster_factory):
    """The move's state is in ZooKeeper only: the controller (also a replica being removed) is
    SIGKILLed mid-move; the next controller finishes it, and the killed broker, restarted, deletes
    the log of the partition it no longer replicates."""
    from tests.cluster.conftest import SESSION_MS
    c = cluster_factory(3)
    ctl = controller_id(zk_client)
    y, z = [i for i in (1, 2, 3) if i != ctl]
    topic = f"fo-{uuid.uuid4().hex[:6]}"
    _create_assigned(c.brokers[y].bootstrap, topic, [[y, ctl]])
    wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state")
             and len(_state(zk_client, topic)["isr"]) == 2, timeout=30, what="a full ISR")
    from confluent_kafka import Producer
    prod = Producer({"bootstrap.servers": c.brokers[y].bootstrap, "broker.address.family": "v4", "acks": "all"})
    for n in range(100):
        prod.produce(topic, str(n).encode())
    assert prod.flush(30) == 0
    _pause(c.brokers[z])
    try:
        resp = call(c.brokers[ctl].port, 45, 0, {"timeout": 5000, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "replicas": [y, z]}]}]})
        assert [int(p.error_code) for p in resp.responses[0].partitions] == [0]
        assert _assignment(zk_client, topic)["adding_replicas"] == {"0": [z]}
        c.brokers[ctl].kill9()
    finally:
        _resume(c.brokers[z])
    wait_for(lambda: controller_id(zk_client) not in (None, ctl),
             timeout=SESSION_MS / 1000 + 20, what="a new controller")
    wait_for(lambda: _assignment(zk_client, topic)["partitions"] == {"0": [y, z]}, timeout=30,
             what="the new controller to finish the move")
    a = _assignment(zk_client, topic)
    assert (a["adding_replicas"], a["removing_replicas"]) == ({}, {})
    assert sorted(_state(zk_client, topic)["isr"]) == sorted([y, z])
    resp = call(c.brokers[controller_id(zk_client)].port, 46, 0, {"timeout": 5000, "topics": None})
    assert (int(resp.error_code), resp.topics) == (0, ())
    assert _dirs(c.brokers[ctl], topic) == {0}          # (killed before it could act)
    c.brokers[ctl].start()
    wait_for(lambda: _dirs(c.brokers[ctl], topic) == set(), timeout=30,
             what=f"the restarted broker {ctl} to delete its stale {topic}-0")
    from tests.cluster.test_replication import _consume_all as consume
    assert sorted(consume(c.bootstrap, topic, 1)) == list(range(100))
