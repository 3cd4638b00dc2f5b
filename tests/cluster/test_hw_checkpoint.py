"""The high-watermark checkpoint in real ``serve --zookeeper`` processes: a follower and then a
leader SIGKILLed with records above the high watermark restart (or fail over) without showing
them; they become visible once committed."""

from __future__ import annotations

import os
import time

import engine
from tests.cluster.conftest import SESSION_MS, wait_for, zk_json

T = "hwc"


def _ro(srv):
    """(HW, LEO, rows read_arrow returns) of T-0 in a broker's data directory, read-only;
    None while the log is not there yet."""
    try:
        with engine.open(srv.data, read_only=True) as ro:
            log = ro.log(T, 0)
            return log.high_watermark, log.log_end_offset, ro.read_arrow(T, 0).num_rows
    except (FileNotFoundError, engine.errors.UnknownTopicOrPartitionError):
        return None


def _watermarks(bootstrap):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": "hwc"})
    try:
        return c.get_watermark_offsets(TopicPartition(T, 0), timeout=10)
    finally:
        c.close()


def test_sigkilled_replicas_restart_at_their_checkpointed_high_watermark(zk_client, cluster_factory):
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    c = cluster_factory(2)
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4"})
    # min.insync.replicas above the replication factor: the high watermark cannot move, so
    # every acks=1 record stays uncommitted on both replicas
    admin.create_topics([NewTopic(T, 1, 2, config={"min.insync.replicas": "3"})],
                        operation_timeout=20)[T].result(30)
    state = wait_for(lambda: zk_json(zk_client, f"/brokers/topics/{T}/partitions/0/state")[0], what="state")
    fid = 3 - state["leader"]                          # brokers 1 and 2
    leader, follower = c.brokers[state["leader"]], c.brokers[fid]
    p = Producer({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4", "acks": 1})
    for v in (b"u1", b"u2", b"u3"):
        p.produce(T, v, partition=0)
    assert p.flush(30) == 0
    wait_for(lambda: (_ro(follower) or (0, 0))[1] == 3, what="the follower has the 3 records")
    assert _ro(leader)[0] == _ro(follower)[0] == 0
    # the periodic checkpoint (replica.high.watermark.checkpoint.interval.ms, 5 s) names it
    ckpt = os.path.join(follower.data, "replication-offset-checkpoint")
    wait_for(lambda: os.path.exists(ckpt) and f"{T} 0 0\n" in open(ckpt).read(), timeout=20,
             what="the follower's checkpoint")

    follower.kill9()
    killed = time.monotonic()
    follower.start()
    assert _ro(follower) == (0, 3, 0)                 # records kept, none shown (was HW = LEO)
    # its old session expires (the controller drops it from the ISR), then the leader adds it back
    wait_for(lambda: sorted(zk_json(zk_client, f"/brokers/topics/{T}/partitions/0/state")[0]["isr"]) == [1, 2]
             and time.monotonic() - killed > SESSION_MS / 1000 + 1, timeout=40, what="the follower back in the ISR")

    # the leader dies too: the follower takes over (it is in the ISR) and still shows nothing
    leader.kill9()
    wait_for(lambda: zk_json(zk_client, f"/brokers/topics/{T}/partitions/0/state")[0]["leader"]
             == fid, timeout=30, what="failover")
    assert _watermarks(follower.bootstrap) == (0, 0)
    leader.start()
    assert _ro(leader)[0] == 0
    # committed once min.insync.replicas allows it: then the records are visible everywhere
    res = ConfigResource("topic", T, incremental_configs=[
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET)])
    # IncrementalAlterConfigs goes to the controller (librdkafka's admin target): a fresh admin
    # asks for it now rather than waiting on the controller the first admin cached (the killed one)
    def altered():
        fresh = AdminClient({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4"})
        try:
            fresh.incremental_alter_configs([res])[res].result(10)
            return True
        except (KafkaException, TimeoutError):
            return False
    wait_for(altered, timeout=40, what="min.insync.replicas=1 altered")

    def committed():
        try:
            return _watermarks(c.bootstrap) == (0, 3)
        except KafkaException:
            return False
    wait_for(committed, timeout=30, what="HW 3")
    wait_for(lambda: _ro(leader) == (3, 3, 3) and _ro(follower) == (3, 3, 3), what="HW 3 on both")
