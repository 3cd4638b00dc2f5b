"""Replication between in-process brokers (real sockets, real files): followers catch up, the
high watermark follows the ISR, acks=all waits for the ISR, min.insync.replicas, ISR shrink and
expand, truncation by leader epoch after a leader change (DivergingEpoch), fenced epochs."""

from __future__ import annotations

import time

from engine._native import decode_batches
from engine.protocol.messages import ApiKey

from .conftest import fetch, produce, request, wait_until


def values_of(node, topic):
    plog = node.log(topic)
    out = []
    for fs in plog.read(plog.log_start_offset, 1 << 24, max_offset=plog.log_end_offset).slices:
        # read(), not view(): above the HW a fetcher may cut these bytes in place at any moment
        # (an mmap of them was "mmap length is greater than file size", or SIGBUS)
        recs, _ = decode_batches(fs.read())
        out.extend(r[3] for r in recs if r[0] >= plog.log_start_offset)
    return out


def test_follower_catches_up_and_hw_follows_isr(cluster):
    # a 30 s lag allowance: the stopped follower stays in the ISR however slow the machine
    # (with the 1 s default here it could leave it first, and the leader's HW move on alone)
    c = cluster(2, {"replica.lag.time.max.ms": 30000})
    c.create("t", [0, 1])
    leader, follower = c.nodes[0], c.nodes[1]
    assert produce(leader.address, "t", [b"a", b"b", b"c"], acks=1) == (0, 0)
    wait_until(lambda: follower.log("t").log_end_offset == 3, what="follower LEO 3")
    wait_until(lambda: leader.log("t").high_watermark == 3, what="leader HW 3")
    wait_until(lambda: follower.log("t").high_watermark == 3, what="follower HW 3")
    assert values_of(follower, "t") == [b"a", b"b", b"c"]
    # the follower's copy is the leader's, epochs included
    assert follower.log("t").leader_epoch_cache.entries == leader.log("t").leader_epoch_cache.entries == [(1, 0)]

    # stop the follower: the leader keeps appending (acks=1), its HW stays where the ISR is
    c.stop(1)
    assert produce(leader.address, "t", [b"d"], acks=1) == (0, 3)
    time.sleep(0.3)
    assert leader.log("t").log_end_offset == 4 and leader.log("t").high_watermark == 3
    # a consumer sees only what the ISR has: the fetch answers HW 3 and no record above it
    res = fetch(leader.address, "t", 3)
    assert res.error_code == 0 and res.high_watermark == 3 and len(res.records) == 0


def test_acks_all_answers_after_the_follower_has_the_batch(cluster):
    from confluent_kafka import Producer

    c = cluster(2)
    c.create("t", [0, 1])
    follower = c.nodes[1]
    seen = []

    def delivered(err, msg):
        # at the moment the leader acknowledges, the follower's log already holds the record
        seen.append((err, msg.offset(), follower.log("t").log_end_offset))

    p = Producer({"bootstrap.servers": c.bootstrap(0), "acks": "all", "linger.ms": 0})
    for i in range(20):
        p.produce("t", b"v%d" % i, partition=0, on_delivery=delivered)
        p.flush(10)
    assert len(seen) == 20
    for err, offset, follower_leo in seen:
        assert err is None
        assert follower_leo > offset
    assert values_of(follower, "t") == [b"v%d" % i for i in range(20)]


def test_acks_all_times_out_when_the_follower_is_gone(cluster):
    c = cluster(2, {"replica.lag.time.max.ms": 30000})
    c.create("t", [0, 1])
    c.stop(1)                   # still in the ISR (30 s lag allowed): nobody acknowledges
    t0 = time.monotonic()
    code, _ = produce(c.nodes[0].address, "t", [b"x"], acks=-1, timeout_ms=300)
    assert code == 7            # REQUEST_TIMED_OUT
    assert 0.25 < time.monotonic() - t0 < 5
    assert c.nodes[0].log("t").log_end_offset == 1 and c.nodes[0].log("t").high_watermark == 0


def test_min_insync_replicas(cluster):
    c = cluster(2)
    c.create("t", [0, 1], config={"min.insync.replicas": 2})
    leader = c.nodes[0]
    assert produce(leader.address, "t", [b"ok"], acks=-1) == (0, 0)
    c.stop(1)
    # in flight when the follower drops out of the ISR: appended, then refused after append
    code, _ = produce(leader.address, "t", [b"late"], acks=-1, timeout_ms=10000)
    assert code == 20           # NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert c.isr("t") == [0]
    # now the ISR is smaller than min.insync.replicas: refused before the append
    leo = leader.log("t").log_end_offset
    assert produce(leader.address, "t", [b"no"], acks=-1)[0] == 19       # NOT_ENOUGH_REPLICAS
    assert leader.log("t").log_end_offset == leo
    # acks=1 still appends, but a lone leader never commits (KIP-966): the HW stays
    assert produce(leader.address, "t", [b"one"], acks=1)[0] == 0
    time.sleep(0.2)
    assert leader.log("t").high_watermark == 1


def test_lagging_follower_leaves_and_rejoins_the_isr(cluster):
    c = cluster(2)
    c.create("t", [0, 1])
    leader = c.nodes[0]
    assert produce(leader.address, "t", [b"a"], acks=-1) == (0, 0)
    c.stop(1)
    wait_until(lambda: c.isr("t") == [0] and leader.rm.partition("t", 0).isr == [0], what="ISR shrink to [0]")
    # with the ISR [0] the leader commits alone (min.insync.replicas=1)
    assert produce(leader.address, "t", [b"b", b"c"], acks=-1) == (0, 1)
    assert leader.log("t").high_watermark == 3
    # the follower comes back, truncates by epoch (nothing to cut), catches up, rejoins
    node = c.start(1)
    assert node.log("t").log_end_offset == 1
    node.rm.become_follower("t", 0, 0, 1, [0, 1], c.view.partition_epoch("t", 0))
    wait_until(lambda: c.isr("t") == [0, 1], what="ISR expand to [0, 1]")
    assert node.log("t").log_end_offset == 3
    assert values_of(node, "t") == [b"a", b"b", b"c"]
    assert [tuple(ch[2]) for ch in c.view.isr_changes] == [(0,), (0, 1)]


def test_a_gone_follower_caught_up_at_its_last_fetch_does_not_block_another_joining_the_isr(cluster):
    """KIP-841: the leader adds to the ISR only followers whose broker is alive.  Broker 2 is
    gone (its last fetch was caught up) and out of the ISR; broker 1 catches up and must join
    alone -- asking for [0, 1, 2] is refused by the ZooKeeper view as long as 2 is gone, which
    kept a reassignment from ever completing once 2's death was seen before 1 caught up."""
    c = cluster(3)
    c.create("t", [0, 1, 2])
    leader = c.nodes[0]
    assert produce(leader.address, "t", [b"a"], acks=-1) == (0, 0)
    wait_until(lambda: all(f.leo == 1 for f in leader.rm.partition("t", 0).followers.values()),
               what="both followers caught up")
    c.stop(2)
    c.elect("t", 0, 1, [0, 1, 2], isr=[0], partition_epoch=c.view.partition_epoch("t", 0) + 1)
    assert produce(leader.address, "t", [b"b"], acks=1) == (0, 1)
    wait_until(lambda: c.isr("t") == [0, 1], what="broker 1 back in the ISR")
    assert all(2 not in ch[2] for ch in c.view.isr_changes), c.view.isr_changes


def test_divergent_follower_is_truncated_by_leader_epoch(cluster):
    c = cluster(2, {"replica.lag.time.max.ms": 30000})
    c.create("t", [0, 1], epoch=1)
    n0, n1 = c.nodes[0], c.nodes[1]
    assert produce(n0.address, "t", [b"a", b"b"], acks=-1) == (0, 0)
    wait_until(lambda: n1.log("t").high_watermark == 2, what="follower HW 2")
    # node 1 goes away; node 0 appends three records nobody else gets (acks=1)
    c.stop(1)
    assert produce(n0.address, "t", [b"x1", b"x2", b"x3"], acks=1) == (0, 2)
    assert n0.log("t").log_end_offset == 5 and n0.log("t").high_watermark == 2
    # node 1 returns and is elected (epoch 2) with ISR [1]; it appends two records of its own
    c.start(1)
    n1 = c.nodes[1]
    c.view.set_partition("t", 0, 1, 2, [0, 1], [1], 1)
    n1.rm.become_leader("t", 0, 2, [0, 1], [1], 1)
    assert produce(n1.address, "t", [b"y1", b"y2"], acks=-1) == (0, 2)
    # node 0 follows: its epoch-1 tail (offsets 2-4) diverges from the leader's epoch-2 records
    n0.rm.become_follower("t", 0, 1, 2, [0, 1], 1)
    wait_until(lambda: values_of(n0, "t") == [b"a", b"b", b"y1", b"y2"], what="node 0 truncated and caught up")
    assert n0.log("t").log_end_offset == 4
    assert n0.rm._fetchers[1].truncations_on_fetch == 1      # by DivergingEpoch (KIP-320)
    assert n0.log("t").leader_epoch_cache.entries == n1.log("t").leader_epoch_cache.entries == [(1, 0), (2, 2)]
    wait_until(lambda: c.isr("t") == [1, 0], what="node 0 back in the ISR")
    wait_until(lambda: n0.log("t").high_watermark == 4, what="node 0 HW 4")


def test_fenced_and_unknown_epochs_and_not_leader(cluster):
    c = cluster(2)
    c.create("t", [0, 1], epoch=5)
    leader, follower = c.nodes[0], c.nodes[1]
    assert produce(leader.address, "t", [b"a"], acks=-1) == (0, 0)
    assert fetch(leader.address, "t", 0, current_leader_epoch=5).error_code == 0
    assert fetch(leader.address, "t", 0, current_leader_epoch=4).error_code == 74   # FENCED_LEADER_EPOCH
    assert fetch(leader.address, "t", 0, current_leader_epoch=6).error_code == 75   # UNKNOWN_LEADER_EPOCH
    # a follower serves neither consumers nor producers
    assert fetch(follower.address, "t", 0).error_code == 6                          # NOT_LEADER_OR_FOLLOWER
    assert produce(follower.address, "t", [b"b"], acks=1)[0] == 6
    # a replica fetch with a stale epoch is fenced too
    assert fetch(leader.address, "t", 1, current_leader_epoch=4, replica_id=1).error_code == 74
    # OffsetForLeaderEpoch answers the end of an epoch to the leader's replicas
    resp = request(leader.address, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
        "replica_id": 1, "topics": [{"topic": "t", "partitions": [
            {"partition": 0, "current_leader_epoch": 5, "leader_epoch": 5}]}]})
    p = resp["topics"][0]["partitions"][0]
    assert (p["error_code"], p["leader_epoch"], p["end_offset"]) == (0, 5, 1)
    # Metadata carries the leader, its epoch, replicas and ISR from the cluster view
    md = request(follower.address, ApiKey.METADATA, 12, {
        "topics": [{"name": "t", "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False})
    part = md["topics"][0]["partitions"][0]
    assert (part["leader_id"], part["leader_epoch"], list(part["replica_nodes"]),
            list(part["isr_nodes"])) == (0, 5, [0, 1], [0, 1])
    assert sorted(b["node_id"] for b in md["brokers"]) == [0, 1]


def test_follower_keeps_records_above_its_high_watermark(cluster):
    """KIP-101: a follower whose HW lags its log (as after a restart) keeps what the leader's
    epoch still covers; truncating to the HW would drop committed records."""
    c = cluster(2, {"replica.lag.time.max.ms": 30000})
    c.create("t", [0, 1], epoch=1)
    n0, n1 = c.nodes[0], c.nodes[1]
    assert produce(n0.address, "t", [b"a", b"b", b"c"], acks=-1) == (0, 0)
    c.stop(1)
    c.start(1)
    n1 = c.nodes[1]
    plog = n1.log("t")
    plog.update_high_watermark(1)            # its HW lags its LEO (3)
    cuts = []
    real = plog.truncate_to
    plog.truncate_to = lambda offset: (cuts.append(offset), real(offset))[1]
    c.view.set_partition("t", 0, 0, 2, [0, 1], [0, 1], 0)
    n0.rm.become_leader("t", 0, 2, [0, 1], [0, 1], 0)
    n1.rm.become_follower("t", 0, 0, 2, [0, 1], 0)
    wait_until(lambda: plog.high_watermark == 3, what="follower HW 3")
    assert cuts == []                        # the leader's epoch 1 ends at 3 = our LEO: nothing cut
    assert plog.log_end_offset == 3
    assert n1.rm._fetchers[0].truncations_on_fetch == 0


def test_idempotent_producer_survives_a_leader_change(cluster):
    from confluent_kafka import Producer

    c = cluster(2, {"replica.lag.time.max.ms": 30000})
    c.create("t", [0, 1], epoch=1)
    n0, n1 = c.nodes[0], c.nodes[1]
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)

    p = Producer({"bootstrap.servers": f"{c.bootstrap(0)},{c.bootstrap(1)}", "enable.idempotence": True,
                  "linger.ms": 0, "topic.metadata.refresh.interval.ms": 200})
    for i in range(10):
        p.produce("t", b"a%d" % i, partition=0, on_delivery=delivered)
    assert p.flush(10) == 0 and not errors
    # the follower rebuilt the producer's state from the replicated batch headers
    wait_until(lambda: n1.log("t").log_end_offset == 10, what="follower LEO 10")
    lead = {e.producer_id: e for e in n0.log("t").active_producers()}
    follow = {e.producer_id: e for e in n1.log("t").active_producers()}
    assert lead.keys() == follow.keys() and len(lead) == 1
    # node 1 takes over (epoch 2); the producer goes on with its sequence numbers there
    c.view.set_partition("t", 0, 1, 2, [0, 1], [1, 0], 0)
    n1.rm.become_leader("t", 0, 2, [0, 1], [1, 0], 0)
    n0.rm.become_follower("t", 0, 1, 2, [0, 1], 0)
    for i in range(10):
        p.produce("t", b"b%d" % i, partition=0, on_delivery=delivered)
    assert p.flush(20) == 0 and not errors
    expect = [b"a%d" % i for i in range(10)] + [b"b%d" % i for i in range(10)]
    assert values_of(n1, "t") == expect
    wait_until(lambda: values_of(n0, "t") == expect, what="old leader caught up as follower")


def test_new_replica_behind_the_leaders_log_start_starts_there(cluster):
    c = cluster(2)
    n0, n1 = c.nodes[0], c.nodes[1]
    n0.engine.create_topic("t", 1)
    c.elect("t", 0, 1, [0], [0])
    assert produce(n0.address, "t", [b"r%d" % i for i in range(10)], acks=-1) == (0, 0)
    resp = request(n0.address, ApiKey.DELETE_RECORDS, 2, {
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 6}]}], "timeout": 5000})
    assert resp["topics"][0]["partitions"][0]["low_watermark"] == 6
    # node 1 is added as a replica with an empty log: offset 0 is below the leader's log start
    n1.engine.create_topic("t", 1)
    c.view.set_partition("t", 0, 0, 1, [0, 1], [0], 0)
    n0.rm.become_leader("t", 0, 1, [0, 1], [0], 0)
    n1.rm.become_follower("t", 0, 0, 1, [0, 1], 0)
    wait_until(lambda: c.isr("t") == [0, 1], what="new replica in the ISR")
    plog = n1.log("t")
    assert (plog.log_start_offset, plog.log_end_offset) == (6, 10)
    assert values_of(n1, "t") == [b"r%d" % i for i in range(6, 10)]


def test_three_brokers_commit_with_min_isr_two(cluster):
    c = cluster(3)
    c.create("t", [0, 1, 2], config={"min.insync.replicas": 2})
    leader = c.nodes[0]
    assert produce(leader.address, "t", [b"a"], acks=-1) == (0, 0)
    wait_until(lambda: all(c.nodes[i].log("t").log_end_offset == 1 for i in (1, 2)), what="both followers")
    c.stop(2)
    wait_until(lambda: c.isr("t") == [0, 1], what="ISR [0, 1]")
    # two in-sync replicas are enough for acks=all; the HW is the ISR's
    assert produce(leader.address, "t", [b"b", b"c"], acks=-1) == (0, 1)
    assert leader.log("t").high_watermark == 3
    assert c.nodes[1].log("t").log_end_offset == 3
    c.stop(1)
    wait_until(lambda: c.isr("t") == [0], what="ISR [0]")
    assert produce(leader.address, "t", [b"d"], acks=-1)[0] == 19       # NOT_ENOUGH_REPLICAS
    # both come back: they catch up and rejoin, and acks=all works again
    for i in (1, 2):
        node = c.start(i)
        node.rm.become_follower("t", 0, 0, 1, [0, 1, 2], c.view.partition_epoch("t", 0))
    wait_until(lambda: sorted(c.isr("t")) == [0, 1, 2], what="ISR [0, 1, 2]")
    assert produce(leader.address, "t", [b"e"], acks=-1) == (0, 3)
    for i in (1, 2):
        wait_until(lambda i=i: values_of(c.nodes[i], "t") == [b"a", b"b", b"c", b"e"], what=f"node {i} data")


def test_delete_records_answers_once_every_live_replica_moved(cluster):
    c = cluster(2)
    c.create("t", [0, 1])
    n0, n1 = c.nodes[0], c.nodes[1]
    assert produce(n0.address, "t", [b"r%d" % i for i in range(5)], acks=-1) == (0, 0)
    assert produce(n0.address, "t", [b"s%d" % i for i in range(5)], acks=-1) == (0, 5)
    wait_until(lambda: n1.log("t").high_watermark == 10, what="follower HW 10")

    def delete(offset):
        resp = request(n0.address, ApiKey.DELETE_RECORDS, 2, {
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": offset}]}],
            "timeout": 10000})
        p = resp["topics"][0]["partitions"][0]
        return p["error_code"], p["low_watermark"]

    assert delete(5) == (0, 5)
    # answered only after the follower's log start moved too (it reports it in its fetches)
    assert n1.log("t").log_start_offset == 5
    assert values_of(n1, "t") == [b"s%d" % i for i in range(5)]
    # a replica that is down does not hold the answer back
    c.stop(1)
    assert delete(7) == (0, 7)
