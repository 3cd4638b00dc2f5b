"""engine/cluster/zk.py against a real ZooKeeper: conditional partition-state writes and the
controller-epoch fence (a deposed controller's writes fail), with two sessions in this process."""

from __future__ import annotations

from engine.cluster.registration import BrokerRegistration
from engine.cluster.zk import PartitionState, TopicAssignment, ZkStore


def test_conditional_writes_and_controller_fence(zk):
    a = ZkStore(zk.connect, 6000).start()
    b = ZkStore(zk.connect, 6000).start()
    try:
        assert a.try_become_controller(1) == 1
        assert b.try_become_controller(2) is None            # the seat is taken
        assert b.controller_id() == 1
        a.create_topic("t", TopicAssignment("AAAAAAAAAAAAAAAAAAAAAQ", {0: [1, 2]}), {"retention.ms": "1"})
        _, a_epoch_version = a.controller_epoch()
        st = PartitionState(1, 0, [1, 2], 1)
        assert a.create_partition_state("t", 0, st, a_epoch_version)
        cur = a.partition_state("t", 0)
        assert (cur.leader, cur.leader_epoch, cur.isr, cur.version) == (1, 0, [1, 2], 0)
        # the leader's ISR change: conditional on the version it read
        shrink = PartitionState(1, 0, [1], 1, version=0)
        assert b.update_partition_state("t", 0, shrink) == 1
        stale = PartitionState(1, 0, [1, 2], 1, version=0)
        assert a.update_partition_state("t", 0, stale) is None            # someone wrote first
        # a new controller: the old one's writes now fail even at the right state version
        a.client.delete("/controller")
        assert b.try_become_controller(2) == 2
        elect = PartitionState(2, 1, [1], 1, version=1)
        assert a.update_partition_state("t", 0, elect, a_epoch_version) is None
        assert a.partition_state("t", 0).leader == 1
        _, b_epoch_version = b.controller_epoch()
        assert b.update_partition_state("t", 0, PartitionState(2, 1, [2], 2, version=1), b_epoch_version) == 2
        assert b.topic_config("t") == {"retention.ms": "1"}
        assert b.assignment("t").partitions == {0: [1, 2]}
        # producer-id blocks never overlap across brokers
        first = a.allocate_producer_ids(1, 1000)
        second = b.allocate_producer_ids(2, 1000)
        assert second == first + 1000
    finally:
        a.close()
        b.close()


def test_chroot_is_created_and_used(zk, zk_client):
    s = ZkStore(zk.connect + "/kafka/one", 6000).start()
    try:
        s.register_broker(7, BrokerRegistration.of([("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 1234)]))
        assert zk_client.get_children("/kafka/one/brokers/ids") == ["7"]
        assert s.broker(7).endpoint("PLAINTEXT") == ("127.0.0.1", 1234)
        assert zk_client.exists("/brokers/ids/7") is None
    finally:
        s.close()
