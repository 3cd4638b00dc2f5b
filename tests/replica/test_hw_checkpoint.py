"""The high-watermark checkpoint (Kafka's ``replication-offset-checkpoint``): written every
``replica.high.watermark.checkpoint.interval.ms`` and at close; a replicated (cluster-mode) data
directory reopens with each partition's HW at its checkpointed value, so a restarted leader or
follower never shows records that were above its committed point; the single node keeps HW =
log end offset."""

from __future__ import annotations

import logging
import os
import time

import engine
from engine.protocol.messages import ApiKey
from engine.storage import files
from engine.storage.manager import LogManager

from .conftest import fetch, produce, request, wait_until
from .test_replication import values_of

T = "t"


def _batch(n: int, seed: int = 0) -> bytes:
    from engine._native import BatchBuilder
    b = BatchBuilder()
    for i in range(n):
        b.append(b"v%d-%d" % (seed, i))
    return bytes(b.build())


def _hw_file(d: str) -> str:
    return open(os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT)).read()


def _written(d: str, hw: int, leo: int) -> None:
    """A replicated data directory with one log of `leo` records whose HW is `hw`, closed cleanly."""
    m = LogManager(d, auto_high_watermark=False)
    log = m.create_log(T, 0)
    for i in range(leo):
        log.append(_batch(1, i), leader_epoch=1)
    log.update_high_watermark(hw)
    m.close()


# -- unit: the file and the rule at open -----------------------------------------------------
def test_checkpoint_round_trip_and_interval(tmp_path):
    d = str(tmp_path / "d")
    cfg = engine.EngineConfig.from_mapping({"replica.high.watermark.checkpoint.interval.ms": 5000})
    assert cfg.ignored == {}                 # Kafka's key, with effect here
    m = LogManager(d, cfg, auto_high_watermark=False)
    log = m.create_log(T, 0)
    other = m.create_log("my.topic-x", 3)
    for i in range(10):
        log.append(_batch(2, i), leader_epoch=1)
    log.update_high_watermark(6)
    m.run_periodic_tasks(1_000_000)          # the first round writes every checkpoint
    assert _hw_file(d) == f"0\n2\nmy.topic-x 3 0\n{T} 0 6\n"      # Kafka's text format, sorted
    log.update_high_watermark(12)
    m.run_periodic_tasks(1_004_999)          # before the interval: unchanged
    assert _hw_file(d) == f"0\n2\nmy.topic-x 3 0\n{T} 0 6\n"
    m.run_periodic_tasks(1_005_000)          # replica.high.watermark.checkpoint.interval.ms later
    assert _hw_file(d) == f"0\n2\nmy.topic-x 3 0\n{T} 0 12\n"
    log.update_high_watermark(14)
    assert other.high_watermark == 0
    m.close()                                # clean shutdown writes it too
    assert _hw_file(d) == f"0\n2\nmy.topic-x 3 0\n{T} 0 14\n"
    # replicated reopen: the checkpointed HW, not the log end (20)
    m = LogManager(d, auto_high_watermark=False)
    assert (m.get_log(T, 0).high_watermark, m.get_log(T, 0).log_end_offset) == (14, 20)
    assert not m.get_log(T, 0).auto_high_watermark
    m.close()
    # single node (embedded API, serve without ZooKeeper): HW = log end, as before
    with engine.open(d, background=False) as eng:
        assert not eng.replicated
        assert eng.log(T, 0).high_watermark == 20
    with engine.open(d, background=False, replicated=True) as eng:
        assert eng.log(T, 0).high_watermark == 20    # the single node's close checkpointed 20
    _written(str(tmp_path / "e"), 3, 9)
    with engine.open(str(tmp_path / "e"), {"zookeeper.connect": "127.0.0.1:1"}, background=False) as eng:
        assert eng.replicated                        # cluster mode by configuration
        assert eng.log(T, 0).high_watermark == 3
        assert eng.read_arrow(T, 0).num_rows == 3    # readers stop at the checkpointed HW


def test_read_only_open_and_clamping(tmp_path):
    d = str(tmp_path / "d")
    _written(d, 4, 9)
    m = LogManager(d, auto_high_watermark=False)
    r = LogManager(d, read_only=True)                 # beside the writer: its published HW
    assert r.get_log(T, 0).high_watermark == 4
    assert len(r.get_log(T, 0).read(0, 1 << 20).read()) == len(m.get_log(T, 0).read(0, 1 << 20, max_offset=4).read())
    r.close()
    m.close()
    # a checkpointed HW above the log end (the log lost its tail) is clamped to the log end
    with open(os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT), "w") as f:
        f.write(f"0\n1\n{T} 0 50\n")
    m = LogManager(d, auto_high_watermark=False)
    assert m.get_log(T, 0).high_watermark == 9
    m.close()


def test_partition_missing_from_a_valid_checkpoint_starts_at_its_log_start(tmp_path):
    d = str(tmp_path / "d")
    _written(d, 4, 9)
    with open(os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT), "w") as f:
        f.write("0\n1\nother 0 3\n")                # Kafka: no entry -> 0
    m = LogManager(d, auto_high_watermark=False)
    assert m.get_log(T, 0).high_watermark == 0
    m.close()


def test_garbled_checkpoint_is_treated_as_missing(tmp_path, caplog):
    d = str(tmp_path / "d")
    _written(d, 4, 9)
    path = os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT)
    with open(path, "w") as f:
        f.write(f"0\n2\n{T} 0 4\n")                 # count says 2, one line: distrusted
    with caplog.at_level(logging.WARNING, logger="engine.storage.manager"):
        m = LogManager(d, auto_high_watermark=False)
    log = m.get_log(T, 0)
    assert log.high_watermark == 9                    # the old rule: the log end
    assert not log.auto_high_watermark                # still moved by replication only
    assert any(ev.path == path and "distrusted" in ev.reason for ev in m.recovery_report)
    assert any("no valid replication-offset-checkpoint" in r.getMessage() for r in caplog.records)
    m.close()
    assert _hw_file(d) == f"0\n1\n{T} 0 9\n"          # rewritten whole at close
    os.unlink(path)                                   # missing: the same fallback
    m = LogManager(d, auto_high_watermark=False)
    assert m.get_log(T, 0).high_watermark == 9
    m.close()


# -- in-process brokers: restarts with an uncommitted tail -------------------------------------
def _uncommitted_tail(cluster):
    """3 brokers, leader 0, ISR [0, 1, 2]; 2 committed records, then broker 2 stops (it stays in
    the ISR: 60 s lag allowance) and 3 acks=1 records reach brokers 0 and 1 only: LEO 5, HW 2."""
    c = cluster(3, {"replica.lag.time.max.ms": 60000})
    c.create(T, [0, 1, 2])
    n0, n1 = c.nodes[0], c.nodes[1]
    assert produce(n0.address, T, [b"a", b"b"], acks=-1) == (0, 0)
    wait_until(lambda: all(c.nodes[i].log(T).high_watermark == 2 for i in range(3)), what="HW 2 everywhere")
    c.stop(2)
    assert produce(n0.address, T, [b"x1", b"x2", b"x3"], acks=1) == (0, 2)
    wait_until(lambda: n1.log(T).log_end_offset == 5, what="follower LEO 5")
    time.sleep(0.3)                                   # a few more fetches: the HW stays
    assert n0.log(T).high_watermark == n1.log(T).high_watermark == 2
    return c


def test_restarted_follower_keeps_its_high_watermark(cluster, tmp_path):
    c = _uncommitted_tail(cluster)
    c.stop(1)
    assert f"{T} 0 2\n" in _hw_file(c.nodes[1].path)
    n1 = c.start(1)
    plog = n1.log(T)
    assert (plog.high_watermark, plog.log_end_offset) == (2, 5)     # not the log end
    assert n1.engine.read_arrow(T, 0).column("value").to_pylist() == [b"a", b"b"]
    with engine.open(n1.path, read_only=True) as ro:                # another reader of its directory
        assert ro.log(T, 0).high_watermark == 2
        assert ro.read_arrow(T, 0).num_rows == 2
    # it follows again; once broker 2 is back and caught up the tail is committed everywhere
    n1.rm.become_follower(T, 0, 0, 1, [0, 1, 2], 0)
    time.sleep(0.3)
    assert plog.high_watermark == 2
    n2 = c.start(2)
    n2.rm.become_follower(T, 0, 0, 1, [0, 1, 2], 0)
    wait_until(lambda: plog.high_watermark == 5, what="follower HW 5")
    assert values_of(n1, T) == [b"a", b"b", b"x1", b"x2", b"x3"]
    assert n1.engine.read_arrow(T, 0).num_rows == 5


def test_restarted_leader_shows_nothing_above_its_committed_point(cluster):
    c = _uncommitted_tail(cluster)
    c.stop(0)
    n0 = c.start(0)
    assert (n0.log(T).high_watermark, n0.log(T).log_end_offset) == (2, 5)
    # elected again (epoch 2) with the same ISR: broker 2 is still in it, so nothing commits
    c.elect(T, 0, 2, [0, 1, 2], [0, 1, 2], 1)
    time.sleep(0.3)
    res = fetch(n0.address, T, 2)                    # a read_uncommitted consumer
    assert (res.error_code, res.high_watermark, len(res.records)) == (0, 2, 0)
    assert n0.engine.read_arrow(T, 0).num_rows == 2
    # ListOffsets latest: the HW for a consumer, the log end for a replica (Kafka)
    for replica_id, want in ((-1, 2), (1, 5)):
        resp = request(n0.address, ApiKey.LIST_OFFSETS, 7, {
            "replica_id": replica_id, "isolation_level": 0, "topics": [{"name": T, "partitions": [
                {"partition_index": 0, "current_leader_epoch": 2, "timestamp": -1}]}]})
        assert resp["topics"][0]["partitions"][0]["offset"] == want
    # broker 2 returns, catches up: the HW reaches 5 and the consumer gets the records
    n2 = c.start(2)
    n2.rm.become_follower(T, 0, 0, 2, [0, 1, 2], 1)
    wait_until(lambda: n0.log(T).high_watermark == 5, what="leader HW 5")
    res = fetch(n0.address, T, 2)
    assert res.high_watermark == 5 and len(res.records) > 0
    assert values_of(n2, T) == [b"a", b"b", b"x1", b"x2", b"x3"]


def test_restarted_leader_alone_in_the_isr_commits_its_log(cluster):
    """Kafka's makeLeader: with the ISR down to the new leader its HW moves to its log end at
    once, not at the next append."""
    c = _uncommitted_tail(cluster)
    c.stop(1)
    c.stop(0)
    n0 = c.start(0)
    assert n0.log(T).high_watermark == 2
    c.view.set_partition(T, 0, 0, 2, [0, 1, 2], [0], 1)
    n0.rm.become_leader(T, 0, 2, [0, 1, 2], [0], 1)
    wait_until(lambda: n0.log(T).high_watermark == 5, what="leader HW 5")
    res = fetch(n0.address, T, 2)
    assert res.high_watermark == 5 and len(res.records) > 0
