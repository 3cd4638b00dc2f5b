"""Transactions in the storage layer: control batches (markers), open transactions in the
producer state, the last stable offset, Kafka's ``.txnindex`` (contents, rebuild on recovery,
truncation, deletion with its segment), snapshots of open transactions, refused markers and
client control batches; Kafka's kafka-dump-log reads our files."""

from __future__ import annotations

import os
import struct
import subprocess
import time

import pytest

from engine import _native
from engine.errors import InvalidProducerEpochError, InvalidRecordError
from engine.records import build_batch
from engine.storage import files, txnindex
from engine.storage import producer_state as ps
from engine.storage.log import PartitionLog
from engine.storage.manager import LogManager
from tests.serving import kafka_home

from .conftest import small_config

T = "t"


def txn(pid, epoch, seq, n=2, ts=None, tag=b"r"):
    ts = int(time.time() * 1000) if ts is None else ts   # markers carry "now": no time-based roll
    return bytearray(build_batch([(tag + b"%d" % i, b"k", [], ts + i) for i in range(n)], producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq, is_transactional=True))


def plain(n=2, tag=b"p"):
    ts = int(time.time() * 1000)
    return bytearray(build_batch([(tag + b"%d" % i, b"k", [], ts + i) for i in range(n)]))


def manager(d, **kw):
    return LogManager(d, config_for=lambda t: small_config(**kw))


def txn_entries(log):
    out = []
    for seg in log.segments:
        p = seg.txn_index.path
        if os.path.exists(p):
            out += txnindex.decode(open(p, "rb").read(), p)
    return out


def dump(paths, *extra):
    home = kafka_home()
    if home is None:
        pytest.skip("Kafka not found (set KAFKA_HOME to a Kafka 4.0 install)")
    r = subprocess.run([os.path.join(home, "bin", "kafka-dump-log.sh"), "--files", ",".join(paths), *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


# -- control batch bytes -------------------------------------------------------------------
def test_control_batch_layout():
    b = _native.build_control_batch(77, 3, False, 9, timestamp=1234)
    h = _native.read_header(b, 0)
    assert (h.attributes, h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (0x30, 77, 3, -1, 1)
    assert (h.base_timestamp, h.max_timestamp, len(b)) == (1234, 1234, 78)
    _native.verify_batch(b, 0)                                   # CRC ok
    # the one record: key = version 0, type 0 (ABORT); value = version 0, coordinator epoch 9
    assert bytes(b[61:]) == bytes([0x20, 0, 0, 0, 0x08]) + struct.pack(">hh", 0, 0) + bytes([0x0C]) + \
        struct.pack(">hi", 0, 9) + b"\x00"
    assert _native.read_control_record(b, 0) == (0, 9)
    assert _native.read_control_record(_native.build_control_batch(1, 0, True, 2), 0) == (1, 2)


# -- markers, producer state and the LSO ---------------------------------------------------
def test_markers_open_and_close_transactions_and_move_the_lso(tmp_path):
    with manager(str(tmp_path)) as m:
        log = m.create_log(T, 0)
        assert log.last_stable_offset == 0
        log.append(plain())                                      # 0-1, not transactional
        assert log.last_stable_offset == 2
        log.append(txn(10, 0, 0))                                # 2-3: producer 10 opens at 2
        log.append(txn(11, 0, 0))                                # 4-5: producer 11 opens at 4
        log.append(txn(10, 0, 2))                                # 6-7: still producer 10's
        assert log.last_stable_offset == 2 and log.high_watermark == 8
        assert log.producer_state.ongoing_transactions() == {10: 2, 11: 4}
        assert log.append_control(10, 0, True, 0) == 8           # COMMIT of 10
        assert log.last_stable_offset == 4                       # 11 is still open
        assert log.append_control(11, 0, False, 0) == 9          # ABORT of 11
        assert log.last_stable_offset == 10 == log.high_watermark
        assert log.producer_state.ongoing_transactions() == {}
        # the ABORT is indexed with the LSO after it (no open transaction: marker + 1)
        assert txn_entries(log) == [txnindex.AbortedTxn(11, 4, 9, 10)]
        assert log.aborted_transactions(0, 10) == [(11, 4)]
        assert log.aborted_transactions(6, 10) == [(11, 4)]      # overlaps [6, 10)
        assert log.aborted_transactions(0, 4) == []              # starts at 4: not in [0, 4)
        # a marker for a producer without an open transaction is written, changes nothing
        assert log.append_control(10, 0, False, 0) == 10
        assert len(txn_entries(log)) == 1 and log.last_stable_offset == 11
        # described as Kafka does: currentTxnFirstOffset -1 once closed
        assert {p.producer_id: p.current_txn_first_offset for p in log.active_producers()} == {10: -1, 11: -1}


def test_abort_entry_records_the_next_open_transaction_as_lso(tmp_path):
    with manager(str(tmp_path)) as m:
        log = m.create_log(T, 0)
        log.append(txn(1, 0, 0))                                 # 0-1
        log.append(txn(2, 0, 0))                                 # 2-3
        log.append_control(1, 0, False, 5)                       # 4: abort 1, 2 still open at 2
        assert txn_entries(log) == [txnindex.AbortedTxn(1, 0, 4, 2)]
        assert log.last_stable_offset == 2
        log.append_control(2, 0, False, 5)                       # 5
        assert txn_entries(log)[1] == txnindex.AbortedTxn(2, 2, 5, 6)
        assert log.aborted_transactions(0, 6) == [(1, 0), (2, 2)]
        # Kafka's search stops at the first entry whose LSO reaches the upper bound
        assert log.aborted_transactions(0, 2) == [(1, 0)]


def test_lso_waits_for_the_high_watermark_to_pass_the_marker(tmp_path):
    d = str(tmp_path / "p")
    log = PartitionLog(os.path.join(d, "t-0"), small_config(), auto_high_watermark=False)
    try:
        log.append(txn(5, 0, 0))
        log.update_high_watermark(2)
        assert log.last_stable_offset == 0
        log.append_control(5, 0, True, 0)                        # marker at 2, HW still 2
        assert log.last_stable_offset == 0                       # not replicated yet (Kafka)
        log.update_high_watermark(3)
        assert log.last_stable_offset == 3
        fi = log.read(0, 1 << 20, isolation_level=1)
        assert (fi.last_stable_offset, fi.aborted_transactions) == (3, [])
    finally:
        log.close()


def test_stale_markers_are_refused_and_nothing_is_written(tmp_path):
    with manager(str(tmp_path)) as m:
        log = m.create_log(T, 0)
        log.append(txn(3, 2, 0))
        log.append_control(3, 2, False, 4)
        log.append(txn(3, 2, 2))
        leo = log.log_end_offset
        with pytest.raises(InvalidProducerEpochError) as ei:
            log.append_control(3, 1, True, 4)
        assert ei.value.code == 47                               # INVALID_PRODUCER_EPOCH
        with pytest.raises(Exception) as ei:
            log.append_control(3, 2, True, 3)                    # older coordinator epoch
        assert ei.value.code == 52 and "TRANSACTION_COORDINATOR_FENCED" in str(ei.value)
        assert log.log_end_offset == leo and log.last_stable_offset == 3
        # a newer epoch (the coordinator bumped it on abort) is accepted and closes the transaction
        assert log.append_control(3, 3, False, 4) == leo
        assert log.last_stable_offset == leo + 1
        assert log.active_producers()[0].epoch == 3


def test_control_batch_from_a_client_is_invalid_record(tmp_path):
    with manager(str(tmp_path)) as m:
        log = m.create_log(T, 0)
        log.append(txn(3, 0, 0))
        for b in (_native.build_control_batch(3, 0, True, 0), _native.build_control_batch(-1, -1, True, 0),
                  bytearray(plain()) + _native.build_control_batch(-1, -1, False, 0)):
            with pytest.raises(InvalidRecordError) as ei:
                log.append(bytearray(b))
            assert ei.value.code == 87
        assert log.log_end_offset == 2 and log.last_stable_offset == 0


def test_non_transactional_write_inside_an_open_transaction_is_invalid_txn_state(tmp_path):
    with manager(str(tmp_path)) as m:
        log = m.create_log(T, 0)
        log.append(txn(6, 0, 0))
        idem = bytearray(build_batch([b"x"], producer_id=6, producer_epoch=0, base_sequence=2))
        with pytest.raises(Exception) as ei:
            log.append(idem)
        assert ei.value.code == 48 and "INVALID_TXN_STATE" in str(ei.value)
        assert log.log_end_offset == 2
        log.append_control(6, 0, True, 0)
        assert log.append(idem).first_offset == 3                # after the marker it is fine


def test_follower_append_replays_markers(tmp_path):
    with manager(str(tmp_path / "a")) as m, manager(str(tmp_path / "b")) as f:
        leader, follower = m.create_log(T, 0), f.create_log(T, 0)
        leader.append(txn(8, 0, 0))
        leader.append(plain())
        leader.append_control(8, 0, False, 1)
        data = leader.read(0, 1 << 20).read()
        follower.append(bytearray(data), assign_offsets=False)
        assert follower.log_end_offset == 5 and follower.last_stable_offset == 5
        assert txn_entries(follower) == [txnindex.AbortedTxn(8, 0, 4, 5)]


# -- .txnindex lifecycle -------------------------------------------------------------------
def _abort_per_segment(log, rounds=6):
    """Each round: a transaction of producer 20+i, aborted, with padding so segments roll."""
    for i in range(rounds):
        log.append(txn(20 + i, 0, 0, n=20, tag=b"x" * 200))
        log.append_control(20 + i, 0, False, 0)


def test_txnindex_follows_its_segment_through_roll_retention_and_truncation(tmp_path):
    with manager(str(tmp_path), segment_bytes=6000) as m:
        log = m.create_log(T, 0)
        _abort_per_segment(log)
        segs = log.segments
        assert len(segs) > 2
        entries = txn_entries(log)
        assert [e.producer_id for e in entries] == list(range(20, 26))
        for seg in segs:                                         # each entry lives with its marker
            for e in (txnindex.decode(open(seg.txn_index.path, "rb").read())
                      if os.path.exists(seg.txn_index.path) else []):
                assert seg.base_offset <= e.last_offset < seg.next_offset
        assert log.aborted_transactions(0, log.high_watermark) == [(e.producer_id, e.first_offset)
                                                                   for e in entries]
        # truncation drops the entries of markers at or above the new end, reopens the transaction
        last = entries[-1]
        log.truncate_to(last.last_offset)
        assert txn_entries(log) == entries[:-1]
        assert log.producer_state.ongoing_transactions() == {last.producer_id: last.first_offset}
        assert log.last_stable_offset == last.first_offset
        # retention deletes the txnindex with its segment
        first = log.segments[0]
        assert os.path.exists(first.txn_index.path)
        log.delete_records_before(log.segments[1].base_offset)
        assert not os.path.exists(first.txn_index.path)
        assert not any(n.endswith(".txnindex.deleted") for n in os.listdir(log.dir))


def test_txnindex_rebuilt_after_deleting_it_and_after_an_unclean_shutdown(tmp_path):
    d = str(tmp_path)
    with manager(d, segment_bytes=6000) as m:
        log = m.create_log(T, 0)
        _abort_per_segment(log)
        log.append(txn(99, 0, 0))                                # left open
        expected = txn_entries(log)
        lso = log.last_stable_offset
        pdir = log.dir
    # 1. txnindex and offset index of every segment deleted (clean shutdown): rebuilt identical
    for n in os.listdir(pdir):
        if n.endswith(files.TXN_INDEX_SUFFIX) or n.endswith(files.INDEX_SUFFIX):
            os.unlink(os.path.join(pdir, n))
    with manager(d, segment_bytes=6000) as m:
        log = m.get_log(T, 0)
        assert txn_entries(log) == expected
        assert log.last_stable_offset == lso
    # 2. unclean shutdown (no marker, recovery point 0), txnindex files garbage: rebuilt from the log
    os.unlink(os.path.join(d, files.CLEAN_SHUTDOWN_FILE))
    for n in os.listdir(pdir):
        if n.endswith(files.TXN_INDEX_SUFFIX):
            with open(os.path.join(pdir, n), "wb") as f:
                f.write(b"\x07" * 35)
        if n.endswith(files.SNAPSHOT_SUFFIX) or n == files.RECOVERY_POINT_CHECKPOINT:
            os.unlink(os.path.join(pdir, n))
    os.unlink(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT))
    with manager(d, segment_bytes=6000) as m:
        log = m.get_log(T, 0)
        assert log.recovery_stats.segments_scanned == len(log.segments)
        assert txn_entries(log) == expected
        assert log.producer_state.ongoing_transactions() == {99: lso}
        assert log.last_stable_offset == lso


def test_garbage_txnindex_after_a_clean_shutdown_is_rebuilt(tmp_path):
    d = str(tmp_path)
    with manager(d) as m:
        log = m.create_log(T, 0)
        log.append(txn(1, 0, 0))
        log.append_control(1, 0, False, 0)
        log.append(plain())
        expected = txn_entries(log)
        path = log.segments[0].txn_index.path
    with open(path, "ab") as f:
        f.write(b"\x00" * 5)                                    # not a multiple of 34 bytes
    with manager(d) as m:
        log = m.get_log(T, 0)
        assert any("txnindex" in ev.path for ev in log.recovery_stats.events)
        assert txn_entries(log) == expected
        assert log.aborted_transactions(0, log.high_watermark) == [(1, 0)]


def test_open_transaction_survives_restart_through_the_snapshot(tmp_path):
    d = str(tmp_path)
    with manager(d) as m:
        log = m.create_log(T, 0)
        log.append(plain())
        log.append(txn(4, 1, 0))                                 # opens at 2
        log.append(plain())
    snap = ps.snapshot_path(log.dir, 6)
    assert {e.producer_id: e.current_txn_first_offset for e in ps.read_snapshot(snap)} == {4: 2}
    with manager(d) as m:
        log = m.get_log(T, 0)
        assert log.last_stable_offset == 2
        log.append_control(4, 1, False, 0)
        assert log.last_stable_offset == 7
        assert txn_entries(log) == [txnindex.AbortedTxn(4, 2, 6, 7)]
    if kafka_home() is not None:
        out = dump([snap])
        assert "producerId: 4 producerEpoch: 1 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong[2]" in out


def test_read_committed_read_stops_at_the_lso(tmp_path):
    with manager(str(tmp_path)) as m:
        log = m.create_log(T, 0)
        log.append(plain())                                      # 0-1
        log.append(txn(1, 0, 0))                                 # 2-3 open
        log.append(plain())                                      # 4-5
        fi = log.read(0, 1 << 20, isolation_level=1)
        assert (fi.last_stable_offset, fi.high_watermark, fi.aborted_transactions) == (2, 6, [])
        hs, _ = _native.list_batches(fi.read())
        assert [h.base_offset for h in hs] == [0]
        fu = log.read(0, 1 << 20)
        assert (fu.last_stable_offset, fu.aborted_transactions) == (2, None)
        assert len(_native.list_batches(fu.read())[0]) == 3
        log.append_control(1, 0, False, 0)                       # 6
        fi = log.read(0, 1 << 20, isolation_level=1)
        assert (fi.last_stable_offset, fi.aborted_transactions) == (7, [(1, 2)])
        assert [h.base_offset for h in _native.list_batches(fi.read())[0]] == [0, 2, 4, 6]


def test_read_only_open_sees_the_published_lso_and_txnindex(tmp_path):
    d = str(tmp_path)
    with manager(d) as m:
        log = m.create_log(T, 0)
        log.append(txn(1, 0, 0))
        log.append(plain())
        ro = PartitionLog(log.dir, small_config(), read_only=True)
        try:
            assert (ro.high_watermark, ro.last_stable_offset) == (4, 0)
            log.append_control(1, 0, False, 0)
            assert ro.last_stable_offset == 5
            assert ro.aborted_transactions(0, 5) == [(1, 0)]
        finally:
            ro.close()


# -- Kafka reads our files -----------------------------------------------------------------
def test_kafka_dump_log_reads_our_txnindex_and_control_batches(tmp_path):
    with manager(str(tmp_path)) as m:
        log = m.create_log(T, 0)
        log.append(txn(1, 0, 0))
        log.append(txn(2, 0, 0))
        log.append_control(1, 0, False, 3)
        log.append_control(2, 0, True, 3)
        seg = log.segments[0]
        paths = [seg.txn_index.path, seg.log_path]
    out = dump(paths, "--print-data-log")
    assert "version: 0 producerId: 1 firstOffset: 0 lastOffset: 4 lastStableOffset: 2" in out
    assert "endTxnMarker: ABORT coordinatorEpoch: 3" in out and "endTxnMarker: COMMIT coordinatorEpoch: 3" in out
    assert out.count("isTransactional: true isControl: true") == 2
    assert "isvalid: false" not in out
    deep = dump([paths[1]], "--deep-iteration", "--index-sanity-check")
    assert "Exception" not in deep and "corrupt" not in deep.lower()


# -- compaction ------------------------------------------------------------------------------
def _kv(pid, seq, pairs, txn_flag=True):
    ts = int(time.time() * 1000)
    return bytearray(build_batch([(v, k, [], ts) for k, v in pairs], producer_id=pid, producer_epoch=0,
                                 base_sequence=seq, is_transactional=txn_flag))


def _batches(log):
    out = []
    for seg in log.segments:
        if seg.size:
            out += _native.list_batches(seg._data(), 0, seg.size)[0]
    return out


def _markers(log):
    out = []
    for seg in log.segments:
        if seg.size:
            data = seg._data()
            for h in _native.list_batches(data, 0, seg.size)[0]:
                if h.is_control:
                    kind = _native.read_control_record(data, h.position)[0] if h.records_count else None
                    out.append((h.base_offset, h.producer_id, kind, bool(h.attributes & 0x40)))
    return out


def test_cleaner_removes_aborted_data_then_markers_after_delete_retention(tmp_path):
    with manager(str(tmp_path), cleanup_policy="compact", delete_retention_ms=1000) as m:
        log = m.create_log(T, 0)
        log.append(_kv(1, 0, [(b"k1", b"v1")]))                    # 0   txn A (committed)
        log.append_control(1, 0, True, 0)                          # 1
        log.append(_kv(2, 0, [(b"k1", b"bad"), (b"k3", b"bad3")]))  # 2-3 txn B (aborted)
        log.append_control(2, 0, False, 0)                         # 4
        log.append(_kv(2, 2, [(b"k4", b"c4")]))                    # 5   txn C (committed)
        log.append_control(2, 0, True, 0)                          # 6
        log.roll()
        log.append(_kv(1, 1, [(b"k1", b"v1b")]))                   # 7   txn D (committed)
        log.append_control(1, 0, True, 0)                          # 8
        log.append(_kv(-1, -1, [(b"k2", b"x")], txn_flag=False))   # 9   plain
        log.roll()
        log.append(_kv(-1, -1, [(b"k9", b"active")], txn_flag=False))
        assert txn_entries(log) == [txnindex.AbortedTxn(2, 2, 4, 5)]
        now = int(time.time() * 1000)

        s1 = log.clean(now_ms=now)
        assert s1.cleaned and s1.aborted_batches_removed == 1
        # aborted data gone (even for read_uncommitted), k1 keeps its committed value
        assert log_values(log) == {b"k1": b"v1b", b"k4": b"c4", b"k2": b"x", b"k9": b"active"}
        # markers of transactions whose data was seen in this pass stay, the abort keeps its entry
        assert [(o, p, k) for o, p, k, _h in _markers(log)] == [(1, 1, 1), (4, 2, 0), (6, 2, 1), (8, 1, 1)]
        assert txn_entries(log) == [txnindex.AbortedTxn(2, 2, 4, 5)]

        s2 = log.clean(now_ms=now + 10)
        assert s2.cleaned
        # no data left for txn A's COMMIT and txn B's ABORT: they get a delete horizon
        assert [(o, h) for o, _p, _k, h in _markers(log)] == [(1, True), (4, True), (6, False), (8, False)]
        assert txn_entries(log) == []
        assert log_values(log) == {b"k1": b"v1b", b"k4": b"c4", b"k2": b"x", b"k9": b"active"}

        s3 = log.clean(now_ms=now + 10 + 1000 + 1)
        assert s3.markers_removed == 2
        assert [o for o, _p, _k, _h in _markers(log)] == [6, 8]
        assert log_values(log) == {b"k1": b"v1b", b"k4": b"c4", b"k2": b"x", b"k9": b"active"}
        seg = log.segments[0]
        paths = [seg.log_path]
    if kafka_home() is not None:
        out = dump(paths, "--print-data-log", "--deep-iteration")
        assert "isvalid: false" not in out and "endTxnMarker: COMMIT" in out


def test_cleaner_never_cleans_an_open_transaction(tmp_path):
    with manager(str(tmp_path), cleanup_policy="compact") as m:
        log = m.create_log(T, 0)
        log.append(_kv(-1, -1, [(b"a", b"1")], txn_flag=False))
        log.roll()
        log.append(_kv(5, 0, [(b"a", b"2")]))                      # open: LSO 1
        log.roll()
        log.append(_kv(-1, -1, [(b"a", b"3")], txn_flag=False))
        log.roll()
        log.append(_kv(-1, -1, [(b"z", b"z")], txn_flag=False))
        stats = log.clean(now_ms=int(time.time() * 1000))
        assert log.last_stable_offset == 1
        # the first segment ends at the LSO and is cleanable; nothing at/after the open txn is touched
        assert [h.base_offset for h in _batches(log)] == [0, 1, 2, 3]
        assert stats.end_offset <= 1


def log_values(log):
    """key -> value of every data record left in the log (read_uncommitted, as stored)."""
    out = {}
    for seg in log.segments:
        if seg.size:
            for _off, _ts, k, v, _h in _native.decode_batches(seg._data(), 0, seg.size)[0]:
                out[k] = v
    return out


def test_our_dump_log_prints_markers_and_txnindex_as_kafka(tmp_path, capsys):
    from engine.dump import dump_log
    with manager(str(tmp_path)) as m:
        log = m.create_log(T, 0)
        log.append(txn(1, 0, 0))
        log.append_control(1, 0, False, 7)
        seg = log.segments[0]
    assert dump_log(seg.txn_index.path) == 0
    assert dump_log(seg.log_path, print_records=True) == 0
    out = capsys.readouterr().out
    assert "version: 0 producerId: 1 firstOffset: 0 lastOffset: 2 lastStableOffset: 3" in out
    assert "endTxnMarker: ABORT coordinatorEpoch: 7" in out
