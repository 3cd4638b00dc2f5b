"""The in-process readers under transactions: the embedded consumer (``isolation_level`` /
``isolation.level``), ``read_arrow`` (also from a read-only open beside the writer) and the
native column scanner.  Markers never appear; read_committed stops at the LSO and leaves out
aborted transactions (the scanner filters natively from the aborted list)."""

from __future__ import annotations

import pytest

import engine
from engine import _native
from engine.errors import InvalidConfigError
from tests.txn_data import fill


@pytest.fixture
def eng(tmp_path):
    with engine.open(str(tmp_path / "d"), background=False) as e:
        e.create_topic("tx", partitions=1, config={"segment.bytes": 2048})
        yield e


def _consume(eng, **settings):
    c = eng.consumer(auto_offset_reset="earliest", max_poll_records=37, **settings)
    c.assign([("tx", 0)])
    out = []
    while True:
        got = c.poll(timeout_ms=0)
        if not got:
            break
        out += got
    return c, out


def test_read_arrow_committed_and_uncommitted(eng):
    log = eng.log("tx", 0)
    committed, uncommitted = fill(log)
    assert len(log.segments) > 3                                 # transactions span segments
    assert eng.read_arrow("tx", 0)["value"].to_pylist() == uncommitted
    t = eng.read_arrow("tx", 0, isolation_level="read_committed")
    assert t["value"].to_pylist() == committed
    assert max(t["offset"].to_pylist()) < log.last_stable_offset
    # a range starting inside an aborted transaction still drops its tail
    aborted = log.aborted_transactions(0, log.last_stable_offset)
    pid, first = aborted[1]
    mid = first + 5
    part = eng.read_arrow("tx", 0, start=mid, isolation_level="read_committed")
    assert part["value"].to_pylist() == [v for v, o in zip(t["value"].to_pylist(), t["offset"].to_pylist(), strict=True)
                                         if o >= mid]
    with pytest.raises(InvalidConfigError):
        eng.read_arrow("tx", 0, isolation_level="committed")


def test_read_only_open_reads_committed_beside_the_writer(eng, tmp_path):
    committed, _ = fill(eng.log("tx", 0))
    with engine.open(str(tmp_path / "d"), read_only=True, background=False) as ro:
        assert ro.read_arrow("tx", 0, isolation_level="read_committed")["value"].to_pylist() == committed
        ro_log = ro.log("tx", 0)
        assert ro_log.last_stable_offset == eng.log("tx", 0).last_stable_offset


def test_embedded_consumer_isolation_levels(eng):
    log = eng.log("tx", 0)
    committed, uncommitted = fill(log)
    c, recs = _consume(eng)                                      # Kafka's default: read_uncommitted
    assert [r.value for r in recs] == uncommitted
    assert c.end_offsets([("tx", 0)])[engine.TopicPartition("tx", 0)] == log.high_watermark
    c, recs = _consume(eng, **{"isolation.level": "read_committed"})
    assert [r.value for r in recs] == committed
    tp = engine.TopicPartition("tx", 0)
    assert c.position(tp) == log.last_stable_offset             # past the last marker, not beyond the LSO
    assert c.end_offsets([tp])[tp] == log.last_stable_offset
    # the open transaction commits: the rest becomes visible, the marker is not a record
    log.append_control(999, 0, True, 0)
    more = c.poll(timeout_ms=0)
    assert [r.value for r in more] == [v for v in uncommitted if v.startswith(b"open")] + \
        [b"tail-0", b"tail-1", b"tail-2"]
    assert c.position(tp) == log.high_watermark
    with pytest.raises(InvalidConfigError):
        eng.consumer(isolation_level="whatever")


def test_consumer_latest_under_read_committed_is_the_lso(eng):
    log = eng.log("tx", 0)
    fill(log)
    c = eng.consumer(isolation_level="read_committed")          # auto_offset_reset latest
    c.assign([("tx", 0)])
    tp = engine.TopicPartition("tx", 0)
    assert c.position(tp) == log.last_stable_offset < log.high_watermark


def test_scanner_filters_aborted_batches_natively():
    from engine.records import build_batch
    b = bytearray()
    off = 0

    def add(batch):
        nonlocal off, b
        batch = bytearray(batch)
        n = _native.assign_offsets(batch, off, 0, -1, True)[1] + 1
        off = n
        b += batch

    add(build_batch([b"a0", b"a1"], producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True))
    add(build_batch([b"plain"]))
    add(build_batch([b"b0"], producer_id=2, producer_epoch=0, base_sequence=0, is_transactional=True))
    add(_native.build_control_batch(1, 0, False, 0))             # abort 1 at 4
    add(build_batch([b"a2"], producer_id=1, producer_epoch=0, base_sequence=2, is_transactional=True))
    add(_native.build_control_batch(2, 0, True, 0))              # commit 2 at 6
    add(_native.build_control_batch(1, 0, True, 0))              # commit 1's second txn at 7
    sc = _native.ColumnScanner()
    sc.feed(b)
    assert sc.finish("t", 0)["value"].to_pylist() == [b"a0", b"a1", b"plain", b"b0", b"a2"]
    sc.set_aborted([(1, 0)])
    sc.feed(b)
    assert (sc.read_committed, sc.skipped_aborted) == (True, 2)
    assert sc.finish("t", 0)["value"].to_pylist() == [b"plain", b"b0", b"a2"]
    sc.set_aborted(None)
    sc.feed(b)
    assert sc.finish("t", 0).num_rows == 5
