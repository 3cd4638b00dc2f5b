"""Jepsen-style rows under an idempotent acks=all confluent-kafka producer with unique values
(RF 3, ``min.insync.replicas=2``; tests/cluster/test_replication.py's Load and checker), each
printing acked / lost / dup / errors / max unavailability and the time to the first delivery
after each fault:

* a fast double failover: the leader SIGKILLed, then the new leader as soon as it is elected;
  the returning replicas truncate by leader epoch, nothing acknowledged is lost or doubled;
* the last replica standing: both followers SIGKILLed; the lone leader acknowledges nothing
  (min ISR refuses, the high watermark stays), then the followers return and deliveries resume;
* the controller SIGKILLed under load (another broker takes /controller);
* unclean election on: the only other replica is out of the ISR when the leader dies; it is
  elected anyway and what only the old leader had is lost — reported, as Kafka's documentation
  says of ``unclean.leader.election.enable``.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

from tests.cluster.conftest import SESSION_MS, controller_id, wait_for
from tests.cluster.test_replication import Load, _check, _consume_all, _create, _state

LAG = ("--config", "replica.lag.time.max.ms=3000")


def _topic(c, zk_client, prefix, rf=3, config=None):
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 1, rf, {"min.insync.replicas": "2", **(config or {})})
    wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state")
             and len(_state(zk_client, topic)["isr"]) == rf, what="the partition with a full ISR")
    return topic


def _first_delivery_after(load, t0: float) -> float:
    """Seconds from t0 to the first acknowledgement after it (waits up to 90 s)."""
    n = len(load.ack_times)
    wait_for(lambda: len(load.ack_times) > n and load.ack_times[-1] > t0, timeout=90, what="a delivery")
    return next(t for t in load.ack_times if t > t0) - t0


def test_fast_double_failover_truncates_by_epoch(zk_client, cluster_factory):
    c = cluster_factory(3, *LAG)
    topic = _topic(c, zk_client, "dbl")
    load = Load(c.bootstrap, topic).start()
    wait_for(lambda: len(load.acked) >= 1500, timeout=60, what="1500 acknowledged records")
    first = _state(zk_client, topic)["leader"]
    t0 = time.monotonic()
    c.brokers[first].kill9()
    second = wait_for(lambda: _state(zk_client, topic)["leader"] not in (first, -1)
                      and _state(zk_client, topic)["leader"], timeout=SESSION_MS / 1000 + 30,
                      what="the second leader")
    c.brokers[second].kill9()            # at once: the third replica is alone with min ISR 2
    t1 = time.monotonic()
    c.brokers[first].start()             # the first comes back, truncates by epoch, rejoins
    wait_for(lambda: first in _state(zk_client, topic)["isr"], timeout=SESSION_MS / 1000 + 60,
             what="the first leader back in the ISR")
    took = _first_delivery_after(load, t1)
    c.brokers[second].start()
    wait_for(lambda: len(_state(zk_client, topic)["isr"]) == 3, timeout=60, what="a full ISR again")
    before = len(load.acked)
    wait_for(lambda: len(load.acked) >= before + 500, timeout=60, what="500 more acknowledgements")
    load.stop()
    print(f"\ndouble failover: the second leader killed {t1 - t0:.2f}s after the first; first delivery "
          f"{took:.2f}s after that; leader epoch now {_state(zk_client, topic)['leader_epoch']}")
    assert load.errors == []
    assert _check(load, _consume_all(c.bootstrap, topic, 1)) == (0, 0)


def test_last_replica_standing_acknowledges_nothing_then_recovers(zk_client, cluster_factory):
    c = cluster_factory(3, *LAG)
    topic = _topic(c, zk_client, "last")
    load = Load(c.bootstrap, topic).start()
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    leader = _state(zk_client, topic)["leader"]
    followers = [b for b in c.brokers if b != leader]
    for b in followers:
        c.brokers[b].kill9()
    wait_for(lambda: _state(zk_client, topic)["isr"] == [leader], timeout=SESSION_MS / 1000 + 30,
             what="the ISR down to the leader")
    acked_alone = len(load.acked)
    time.sleep(3.0)                       # the lone leader gets produce requests all this time
    assert len(load.acked) == acked_alone, "a lone leader acknowledged with min.insync.replicas=2"
    t0 = time.monotonic()
    for b in followers:
        c.brokers[b].start()
    took = _first_delivery_after(load, t0)
    before = len(load.acked)
    wait_for(lambda: len(load.acked) >= before + 500, timeout=60, what="500 more acknowledgements")
    load.stop()
    print(f"\nlast replica standing: 0 acks while alone for 3 s; first delivery {took:.2f}s after the "
          f"followers' restart")
    assert load.errors == []           # NOT_ENOUGH_REPLICAS is retried by the producer
    assert _check(load, _consume_all(c.bootstrap, topic, 1)) == (0, 0)


def test_controller_killed_under_load(zk_client, cluster_factory):
    c = cluster_factory(3, *LAG)
    topic = _topic(c, zk_client, "ctl")
    load = Load(c.bootstrap, topic).start()
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    controller = json.loads(zk_client.get("/controller")[0])["brokerid"]
    t0 = time.monotonic()
    c.brokers[controller].kill9()
    wait_for(lambda: controller_id(zk_client) not in (None, controller),
             timeout=SESSION_MS / 1000 + 30, what="another controller")
    took = _first_delivery_after(load, t0)
    c.brokers[controller].start()
    before = len(load.acked)
    wait_for(lambda: len(load.acked) >= before + 1000, timeout=60, what="1000 more acknowledgements")
    wait_for(lambda: len(_state(zk_client, topic)["isr"]) == 3, timeout=60, what="a full ISR again")
    load.stop()
    print(f"\ncontroller killed: first delivery {took:.2f}s after the kill")
    assert load.errors == []
    assert _check(load, _consume_all(c.bootstrap, topic, 1)) == (0, 0)


def test_unclean_election_loses_what_only_the_old_leader_had(zk_client, cluster_factory):
    """RF 2, ``min.insync.replicas=1``, unclean election on: the follower is frozen (SIGSTOP)
    until the ISR is the leader alone, the leader acknowledges more, then dies; the follower is
    resumed and elected although it was not in the ISR. Records only the old leader had are
    lost (counted and printed: the price of unclean election); nothing is duplicated. The
    idempotent producer then fails fatally with OUT_OF_ORDER_SEQUENCE_NUMBER (librdkafka sees
    its sequences go backwards, as it would against Kafka), so later sends are errors, not acks."""
    c = cluster_factory(2, *LAG)
    topic = f"unc-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 1, 2, {"min.insync.replicas": "1",
                                                  "unclean.leader.election.enable": "true"})
    wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state")
             and len(_state(zk_client, topic)["isr"]) == 2, what="the partition with a full ISR")
    load = Load(c.bootstrap, topic).start()
    wait_for(lambda: len(load.acked) >= 500, timeout=60, what="500 acknowledged records")
    leader = _state(zk_client, topic)["leader"]
    follower = next(b for b in c.brokers if b != leader)
    pid = c.brokers[follower].proc.pid
    os.killpg(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: _state(zk_client, topic)["isr"] == [leader], timeout=30, what="the ISR down to the leader")
        before = len(load.acked)
        wait_for(lambda: len(load.acked) >= before + 300, timeout=60, what="acks from the leader alone")
        c.brokers[leader].kill9()
    finally:
        os.killpg(pid, signal.SIGCONT)
    wait_for(lambda: _state(zk_client, topic)["leader"] == follower, timeout=SESSION_MS / 1000 + 60,
             what="the unclean election of the out-of-sync follower")
    load.stop()
    lost, dup = _check(load, _consume_all(c.brokers[follower].bootstrap, topic, 1))
    print(f"unclean election: {lost} acknowledged records lost (only the old leader had them)")
    assert dup == 0
    assert lost >= 1                      # the divergence unclean election allows, reported
