"""The acks=all purgatory when the leader's disk fills (its data dir a real tmpfs, filled by a
filler file), with ``on_storage_error`` set as ``serve`` sets it: the produce whose append fails
and the one already waiting for the ISR are both answered KAFKA_STORAGE_ERROR -- never
acknowledged, never left to time out -- the manager reports the failure once, and from then on
the leader answers KAFKA_STORAGE_ERROR to followers and consumers, so its high watermark stays
where it was."""

from __future__ import annotations

import threading

from tests.tmpfs import fill, tmpfs

from .conftest import fetch, produce, wait_until

KAFKA_STORAGE_ERROR = 56


def test_full_leader_fails_pending_and_failing_produces(tmp_path, cluster):
    with tmpfs(tmp_path / "node0", "4m") as mnt:
        c = cluster(2, {"replica.lag.time.max.ms": 30000})     # a stopped follower stays in the ISR
        try:
            c.create("t", [0, 1])
            leader = c.nodes[0]
            failures = []
            leader.rm.on_storage_error = lambda exc, what: failures.append((exc.errno, what))
            assert produce(leader.address, "t", [b"a"], acks=-1) == (0, 0)
            wait_until(lambda: leader.log("t").high_watermark == 1, what="HW 1")
            c.stop(1)
            pending = []
            t = threading.Thread(target=lambda: pending.append(
                produce(leader.address, "t", [b"waits"], acks=-1, timeout_ms=20000)))
            t.start()
            wait_until(lambda: leader.log("t").log_end_offset == 2, what="the second batch appended")
            part = leader.rm.partition("t", 0)
            assert len(part.delayed_produce) == 1 and leader.log("t").high_watermark == 1
            fill(mnt)
            code, _ = produce(leader.address, "t", [b"x" * 100_000], acks=-1, timeout_ms=20000)
            assert code == KAFKA_STORAGE_ERROR
            t.join(10)
            assert pending and pending[0][0] == KAFKA_STORAGE_ERROR      # not 0, not a timeout
            assert failures == [(28, "append to t-0")]
            assert leader.log("t").log_end_offset == 2 and leader.log("t").high_watermark == 1
            # offline: a follower's fetch (it would move the HW) and a consumer's are refused
            assert fetch(leader.address, "t", 2, replica_id=1).error_code == KAFKA_STORAGE_ERROR
            assert fetch(leader.address, "t", 0).error_code == KAFKA_STORAGE_ERROR
            assert leader.log("t").high_watermark == 1
            assert produce(leader.address, "t", [b"later"], acks=1)[0] == KAFKA_STORAGE_ERROR
        finally:
            for node in c.nodes.values():
                node.stop()
