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

from tests.cluster.conftest import wait_for, zk_json
from tests.cluster.test_replication import Load, _check, _consume_all, _create
from tests.serving import find_kafka
from tests.server.test_versions import call

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
    for i, b in c.brokers.items():
        assert _dirs(b, "__consumer_offsets") == {int(p) for p, r in offsets["partitions"].items() if i in r}
