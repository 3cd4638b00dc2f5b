"""Log compaction (engine/storage/cleaner.py): what survives, tombstones and their
delete horizon, offsets and gaps, idempotent producers, null keys, crash at each
file step, concurrent appends/reads, read-only opens, third-party parsers."""

from __future__ import annotations

import os
import threading

import pytest
from kafka.record import MemoryRecords as KpMemoryRecords

import engine
from engine import _native
from engine.errors import InvalidRecordError, OutOfOrderSequenceError
from engine.storage import cleaner as cl
from engine.storage import cleaner_copy
from engine.storage.log import PartitionLog
from engine.storage.manager import LogManager

from .conftest import small_config

CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd
NOW = 1_700_000_000_000


def ccfg(**kw):
    base = {"cleanup.policy": "compact", "segment.bytes": 4096, "file.delete.delay.ms": 0}
    base.update(kw)
    return small_config(**base)


def open_log(path, cfg=None, **kw):
    return PartitionLog(path, cfg or ccfg(), **kw)


def batch(records, codec=0, ts=NOW, producer=(-1, -1, -1)):
    """records: [(key, value)]; value None = tombstone."""
    bb = _native.BatchBuilder()
    for i, (k, v) in enumerate(records):
        bb.append(v, key=k, timestamp=ts + i)
    pid, epoch, seq = producer
    return bb.build(codec=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def write_keyed(log, n_batches, per_batch=5, keys=17, codec=0, tombstone_every=0):
    """Appends keyed records; value b"<key>@<offset>" so every read can be checked.  Returns {key: (offset, value)}."""
    latest = {}
    off = log.log_end_offset
    for b in range(n_batches):
        recs = []
        for j in range(per_batch):
            n = b * per_batch + j
            k = b"key-%d" % (n % keys)
            tomb = tombstone_every and n % tombstone_every == tombstone_every - 1
            v = None if tomb else b"%s@%d" % (k, off) + b"x" * (n % 13)
            recs.append((k, v))
            latest[k] = (off, v)
            off += 1
        log.append(batch(recs, codec=codec))
    return latest


def read_all(log, start=None):
    """(offset, key, value) of every record from the log start to the high watermark (checked read)."""
    info = log.read(log.log_start_offset if start is None else start, 1 << 30, verify=True)
    out = []
    for s in info.slices:
        recs, _end = _native.decode_batches(s.read())
        out.extend((o, k, v) for o, _ts, k, v, _h in recs)
    return out


def check_consistent(records, latest=None):
    offsets = [o for o, _k, _v in records]
    assert offsets == sorted(set(offsets)), "offsets must increase, no duplicates"
    for o, k, v in records:
        if v is not None:
            assert v.startswith(b"%s@%d" % (k, o)), (o, k, v)
    if latest is not None:
        last = {}
        for o, k, v in records:
            last[k] = (o, v)
        assert last == latest


def survivors(latest, tombstones_kept=True):
    return sorted((o, k, v) for k, (o, v) in latest.items() if v is not None or tombstones_kept)


# -- what survives ----------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_latest_value_per_key_survives(tmp_path, codec):
    log = open_log(str(tmp_path / "t-0"))
    latest = write_keyed(log, 120, codec=codec)
    log.roll()
    assert len(log.segments) > 5
    before = log.size
    st = log.clean(now_ms=NOW)
    assert st.cleaned and st.map_keys == 17 and st.records_removed > 0
    assert st.records_kept == 17
    assert st.end_offset == log.log_end_offset
    assert log.size < before
    got = read_all(log)
    assert got == survivors(latest)
    # the codec is kept
    for seg in log.segments:
        if seg.size:
            hs, _ = _native.list_batches(os.pread(seg.fd, seg.size, 0), 0, -1, True)
            assert all(h.codec == codec for h in hs if h.records_count)
    # unchanged after a reopen (indexes rebuilt or loaded)
    log.close()
    log = open_log(str(tmp_path / "t-0"), had_clean_shutdown=False)
    assert read_all(log) == survivors(latest)
    for seg in log.segments:
        seg.sanity_check(deep=True)
    log.close()


def test_dirty_part_only_is_indexed_and_checkpoint_moves(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    write_keyed(log, 60)
    log.roll()
    st1 = log.clean(now_ms=NOW)
    ck = open(tmp_path / "cleaner-offset-checkpoint").read()
    assert ck == f"0\n1\nt 0 {st1.end_offset}\n"
    latest = write_keyed(log, 60)  # same keys, newer values
    log.roll()
    st2 = log.clean(now_ms=NOW)
    assert st2.first_dirty_offset == st1.end_offset
    assert st2.records_read == 300  # only the dirty section went into the map
    got = read_all(log)
    check_consistent(got, latest)
    assert got == survivors(latest)
    log.close()


def test_dirty_ratio_decides_background_cleaning(tmp_path):
    log = open_log(str(tmp_path / "t-0"), ccfg(**{"min.cleanable.dirty.ratio": 0.5}))
    write_keyed(log, 80)
    log.roll()
    assert cl.cleanable(log, NOW) == (True, 1.0)
    log.clean(now_ms=NOW)
    ok, ratio = cl.cleanable(log, NOW)
    assert not ok and ratio == 0.0
    write_keyed(log, 1)
    log.roll()
    ok, ratio = cl.cleanable(log, NOW)
    assert not ok and 0 < ratio < 0.5
    st = log.clean(now_ms=NOW, force=False)
    assert not st.cleaned and "ratio" in st.reason
    write_keyed(log, 40)
    log.roll()
    ok, ratio = cl.cleanable(log, NOW)
    assert ok and ratio >= 0.5
    log.close()


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path):
    log = open_log(str(tmp_path / "t-0"), ccfg(**{"min.compaction.lag.ms": 60_000}))
    latest = write_keyed(log, 40)  # record timestamps around NOW
    log.roll()
    st = log.clean(now_ms=NOW + 1_000)
    assert not st.cleaned and st.reason == "no cleanable segment"
    assert len(read_all(log)) == 200
    st = log.clean(now_ms=NOW + 61_000)
    assert st.cleaned
    assert read_all(log) == survivors(latest)
    log.close()


def test_max_compaction_lag_forces_cleaning(tmp_path):
    log = open_log(str(tmp_path / "t-0"), ccfg(**{"min.cleanable.dirty.ratio": 0.9,
                                                  "max.compaction.lag.ms": 60_000}))
    write_keyed(log, 40)
    log.roll()
    log.clean(now_ms=NOW)
    write_keyed(log, 1)
    log.roll()
    assert cl.cleanable(log, NOW)[0] is False
    assert cl.cleanable(log, NOW + 120_000)[0] is True
    log.close()


# -- tombstones -------------------------------------------------------------
def test_tombstones_kept_for_delete_retention_then_removed(tmp_path):
    retention = 50_000
    log = open_log(str(tmp_path / "t-0"), ccfg(**{"delete.retention.ms": retention}))
    write_keyed(log, 40, keys=10)
    off = log.log_end_offset
    log.append(batch([(b"key-3", None), (b"key-4", None)]))
    latest_tomb = {b"key-3": (off, None), b"key-4": (off + 1, None)}
    log.roll()
    log.clean(now_ms=NOW)
    got = read_all(log)
    tombs = [(o, k) for o, k, v in got if v is None]
    assert tombs == [(off, b"key-3"), (off + 1, b"key-4")]
    assert not any(k in latest_tomb and v is not None for _o, k, v in got)
    # the batch carries the delete horizon (KIP-534): attribute 0x40, baseTimestamp = now + retention
    marked, recs = [], []
    for seg in log.segments:
        hs, _ = _native.list_batches(os.pread(seg.fd, seg.size, 0), 0, -1, True)
        for h in hs:
            if h.attributes & 0x40:
                marked.append(h)
                recs.extend(_native.decode_batch(os.pread(seg.fd, h.size, h.position)))
    assert marked and all(h.base_timestamp == NOW + retention for h in marked)
    assert [(r[0], r[1]) for r in recs] == [(off, NOW), (off + 1, NOW + 1)]  # timestamps unchanged
    assert log._cleaner_horizon_due == NOW + retention
    # before the horizon: still there, and not cleanable on that account
    assert cl.cleanable(log, NOW + retention - 1)[0] is False
    st = log.clean(now_ms=NOW + retention - 1)
    assert st.tombstones_removed == 0
    assert [(o, k) for o, k, v in read_all(log) if v is None] == tombs
    # at the horizon: the background cleaner wants the log, and the tombstones go
    assert cl.cleanable(log, NOW + retention)[0] is True
    st = log.clean(now_ms=NOW + retention)
    assert st.tombstones_removed == 2
    got = read_all(log)
    assert not any(v is None for _o, _k, v in got)
    assert not any(k in latest_tomb for _o, k, _v in got)
    check_consistent(got)
    log.close()


# -- offsets, gaps, readers ----------------------------------------------------
def test_consumer_read_arrow_and_fetch_across_gaps(data_dir):
    with engine.open(data_dir, background=False) as eng:
        eng.create_topic("c", 1, config={"cleanup.policy": "compact", "segment.bytes": 2048,
                                         "file.delete.delay.ms": 0})
        log = eng.log("c", 0)
        latest = write_keyed(log, 80, codec=3)
        log.roll()
        log.clean(now_ms=NOW)
        want = survivors(latest)
        # the consumer: offsets of the survivors, positions move across the gaps
        c = eng.consumer(auto_offset_reset="earliest")
        c.assign([("c", 0)])
        got = []
        while True:
            recs = c.poll(timeout_ms=0)
            if not recs:
                break
            got.extend((r.offset, r.key, r.value) for r in recs)
        assert got == want
        # seek into a gap: the next survivor comes back
        gap = 5
        assert gap not in {o for o, _k, _v in want}
        c.seek(("c", 0), gap)
        first = c.poll(timeout_ms=0)[0]
        assert first.offset == min(o for o, _k, _v in want if o >= gap)
        # read_arrow: same rows
        table = eng.read_arrow("c", 0)
        rows = list(zip(table.column("offset").to_pylist(), table.column("key").to_pylist(),
                        table.column("value").to_pylist(), strict=True))
        assert rows == want
        # a fetch from an offset inside a removed range
        info = log.read(gap, 1 << 20, verify=True)
        recs, _ = _native.decode_batches(info.read())
        assert [r[0] for r in recs if r[0] >= gap][0] == first.offset


def test_third_party_parser_reads_cleaned_segments(tmp_path):
    log = open_log(str(tmp_path / "t-0"), ccfg(**{"delete.retention.ms": 1000}))
    latest = write_keyed(log, 60, codec=1, tombstone_every=7)
    log.roll()
    log.clean(now_ms=NOW)
    got = []
    for name in sorted(os.listdir(tmp_path / "t-0")):
        if not name.endswith(".log"):
            continue
        records = KpMemoryRecords(open(tmp_path / "t-0" / name, "rb").read())
        while records.has_next():
            b = records.next_batch()
            assert b.validate_crc()
            got.extend((r.offset, r.key, r.value) for r in b)
    assert got == survivors(latest)
    log.close()


# -- producers and keys --------------------------------------------------------
def test_idempotent_producer_accepted_after_cleaning(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    pid, epoch = 7, 0
    seq = 0
    for i in range(30):
        log.append(batch([(b"k%d" % (i % 3), b"v%d" % i), (b"k%d" % ((i + 1) % 3), b"w%d" % i)],
                         producer=(pid, epoch, seq)))
        seq += 2
    last = log.log_end_offset - 1
    # a later plain write supersedes the keys of the producer's last batch
    log.append(batch([(b"k0", b"z"), (b"k1", b"z"), (b"k2", b"z")]))
    log.roll()
    log.clean(now_ms=NOW)
    # the producer's last batch stays (empty) so its last sequence is in the log
    seg = log.segments[0]
    hs, _ = _native.list_batches(os.pread(seg.fd, seg.size, 0), 0, -1, True)
    kept = [h for h in hs if h.producer_id == pid]
    assert kept and kept[-1].last_offset == last and kept[-1].records_count == 0
    assert kept[-1].base_sequence + kept[-1].last_offset_delta == seq - 1
    # the next sequence is accepted, a retry of it is a duplicate, a gap is refused
    nxt = batch([(b"k9", b"after")], producer=(pid, epoch, seq))
    info = log.append(bytearray(nxt))
    dup = log.append(bytearray(nxt))
    assert (dup.first_offset, dup.last_offset) == (info.first_offset, info.last_offset)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch([(b"k9", b"gap")], producer=(pid, epoch, seq + 5)))
    assert read_all(log)[-1][1:] == (b"k9", b"after")
    log.close()


def test_null_key_rejected_on_compacted_topic_only(tmp_path):
    log = open_log(str(tmp_path / "t-0"))
    for codec in (0, 4):
        with pytest.raises(InvalidRecordError, match="without key"):
            log.append(batch([(b"a", b"1"), (None, b"2")], codec=codec))
    assert log.log_end_offset == 0
    log.append(batch([(b"a", b"1")]))
    plain = open_log(str(tmp_path / "p-0"), small_config())
    plain.append(batch([(None, b"2")]))
    # switching the policy to compact turns the check on
    plain.update_config(ccfg())
    with pytest.raises(InvalidRecordError):
        plain.append(batch([(None, b"3")]))
    log.close()
    plain.close()


def test_retention_applies_only_with_delete_policy(tmp_path):
    old = NOW - 10 * 86_400_000
    for policy, expect_deleted in (("compact", False), ("compact,delete", True)):
        log = open_log(str(tmp_path / f"{policy.replace(',', '_')}-0"),
                       ccfg(**{"cleanup.policy": policy, "retention.ms": 3_600_000}))
        for i in range(40):
            log.append(batch([(b"k%d" % i, b"v" * 50)], ts=old))
        log.roll()
        n = log.maybe_apply_retention(NOW)
        assert (n > 0) is expect_deleted
        log.close()


# -- crash safety -----------------------------------------------------------------
STEPS = ["cleaned", "swap", "deleted_one", "deleted", "final"]


def _multi_segment_log(path):
    log = open_log(path, ccfg(**{"segment.bytes": 1 << 20}))
    latest = {}
    for _ in range(6):  # six small segments: one group
        latest.update(write_keyed(log, 8, keys=9))
        log.roll()
    return log, latest


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_crash_at_each_file_step(tmp_path, step, clean_shutdown):
    path = str(tmp_path / "t-0")
    log, latest = _multi_segment_log(path)
    before = read_all(log)
    log.flush()
    seen = []

    def hook(name):
        seen.append(name)
        if name == step:
            raise cl.SimulatedCrash(name)

    with pytest.raises(cl.SimulatedCrash):
        log.clean(now_ms=NOW, _on_step=hook)
    assert seen[-1] == step
    # the crashed process is gone: a new writer opens the directory (the old object is dropped unclosed)
    reopened = open_log(path, ccfg(**{"segment.bytes": 1 << 20}), had_clean_shutdown=clean_shutdown,
                        recovery_point=log.recovery_point)
    names = os.listdir(path)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    got = read_all(reopened)
    check_consistent(got, latest)
    if step in ("cleaned",):
        assert got == before  # not swapped: the old segments
    else:
        assert got == survivors(latest)  # the swap completed on open
    for seg in reopened.segments:
        seg.sanity_check(deep=True)
    # and it cleans again fine
    reopened.clean(now_ms=NOW)
    assert read_all(reopened) == survivors(latest)
    reopened.close()


# -- concurrency --------------------------------------------------------------------
def test_concurrent_appender_and_reader_during_cleaning(tmp_path):
    log = open_log(str(tmp_path / "t-0"), ccfg(**{"segment.bytes": 2048}))
    latest = write_keyed(log, 40, keys=11)
    stop = threading.Event()
    errors: list = []
    lock = threading.Lock()

    def appender():
        try:
            for _ in range(400):
                with lock:
                    latest.update(write_keyed(log, 1, keys=11))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def reader():
        try:
            while not stop.is_set():
                check_consistent(read_all(log))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=appender), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    cleaned = 0
    try:
        while threads[0].is_alive() or cleaned < 3:
            st = log.clean(now_ms=NOW)
            cleaned += st.segments_written > 0
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    log.roll()
    log.clean(now_ms=NOW)
    got = read_all(log)
    check_consistent(got, latest)
    assert got == survivors(latest)
    log.close()


def test_old_slices_stay_readable_after_swap(tmp_path):
    log = open_log(str(tmp_path / "t-0"), ccfg(**{"file.delete.delay.ms": 60_000}))
    write_keyed(log, 60)
    log.roll()
    info = log.read(0, 1 << 30)
    before = info.read()
    log.clean(now_ms=NOW)
    assert any(n.endswith(".deleted") for n in os.listdir(tmp_path / "t-0"))
    assert info.read() == before  # the old inode is still open
    log.maybe_delete_pending(log.clock() + 120_000)
    assert info.read() == before
    assert not any(n.endswith(".deleted") for n in os.listdir(tmp_path / "t-0"))
    log.close()


def test_read_only_open_at_each_step_never_sees_a_torn_log(tmp_path):
    path = str(tmp_path / "t-0")
    log, latest = _multi_segment_log(path)
    before = read_all(log)
    after = survivors(latest)
    views = {}

    def hook(name):
        ro = PartitionLog(path, ccfg(**{"segment.bytes": 1 << 20}), read_only=True)
        try:
            got = read_all(ro)
        finally:
            ro.close()
        check_consistent(got, latest)
        views[name] = got

    log.clean(now_ms=NOW, _on_step=hook)
    assert set(views) == set(STEPS)
    assert views["cleaned"] == before
    for step in STEPS[1:]:
        assert views[step] == after, step
    log.close()


def test_background_cleaner_in_log_manager(tmp_path):
    from engine.config import EngineConfig
    from engine.storage.manager import LogManager

    ec = EngineConfig.from_mapping({"log.cleaner.backoff.ms": 10})
    with LogManager(str(tmp_path), ec) as mgr:
        log = mgr.create_log("compacted", 0, ccfg())
        plain = mgr.create_log("plain", 0, small_config())
        latest = write_keyed(log, 60)
        write_keyed(plain, 60)
        log.roll()
        plain.roll()
        cleaner = cl.LogCleaner(mgr, 10)
        st = cleaner.clean_once(NOW)
        assert st is not None and (st.topic, st.partition) == ("compacted", 0)
        assert cleaner.clean_once(NOW) is None  # nothing left to clean
        assert read_all(log) == survivors(latest)
        assert len(read_all(plain)) == 300
        # the manager's own thread
        latest.update(write_keyed(log, 60))
        log.roll()
        done = threading.Event()
        mgr.start_background(0.05)
        assert mgr.cleaner is not None
        for _ in range(400):
            if read_all(log) == survivors(latest):
                done.set()
                break
            done.wait(0.01)
        mgr.stop_background()
        assert done.is_set()
        mgr.delete_log("compacted", 0)
        assert "compacted" not in open(tmp_path / "cleaner-offset-checkpoint").read()


def test_engine_reopen_keeps_compaction_and_unclean_recovery_accepts_gaps(data_dir):
    cfg = {"cleanup.policy": "compact", "segment.bytes": 2048, "file.delete.delay.ms": 0}
    with engine.open(data_dir, background=False) as eng:
        eng.create_topic("c", 1, config=cfg)
        log = eng.log("c", 0)
        latest = write_keyed(log, 80)
        log.roll()
        log.clean(now_ms=NOW)
        latest.update(write_keyed(log, 3))
    os.unlink(os.path.join(data_dir, ".kafka_cleanshutdown"))  # the next open recovers every segment
    with engine.open(data_dir, background=False) as eng:
        log = eng.log("c", 0)
        assert log.config["cleanup.policy"] == "compact"  # the topic config applies from the load on
        assert eng.logs.segments_scanned > 0
        assert not [e for e in log.recovery_stats.events if e.bytes_dropped]
        got = read_all(log)
        check_consistent(got, latest)
        with pytest.raises(InvalidRecordError):
            log.append(batch([(None, b"x")]))


def test_small_read_chunks_split_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(cleaner_copy, "_READ_CHUNK", 300)  # batches straddle chunks, some are larger than one
    log = open_log(str(tmp_path / "t-0"))
    latest = write_keyed(log, 50, per_batch=9, codec=0)
    log.roll()
    log.clean(now_ms=NOW)
    assert read_all(log) == survivors(latest)
    log.close()


def test_corrupt_batch_stops_the_cleaning_and_changes_nothing(tmp_path):
    from engine.errors import CorruptRecordError
    from engine.storage.manager import LogManager

    with LogManager(str(tmp_path)) as mgr:
        log = mgr.create_log("t", 0, ccfg())
        write_keyed(log, 60)
        log.roll()
        seg = log.segments[1]
        os.pwrite(seg.fd, b"\xff", 200)  # a payload byte: the CRC no longer matches
        names = sorted(os.listdir(tmp_path / "t-0"))
        with pytest.raises(CorruptRecordError):
            log.clean(now_ms=NOW)
        assert sorted(os.listdir(tmp_path / "t-0")) == names  # no .cleaned left behind
        assert os.pread(seg.fd, 1, 200) == b"\xff"  # the corrupt segment is not rewritten
        cleaner = cl.LogCleaner(mgr)
        assert cleaner.clean_once(NOW) is None
        assert ("t", 0) in cleaner.uncleanable


def test_offset_map_put_get_grow_and_full():
    m = _native.OffsetMap(24 * 200, initial_slots=16)  # 200 slots: 180 keys at most
    assert m.capacity == 180
    for i in range(180):
        assert m.put(b"key-%d" % i, i)
    assert m.full and len(m) == 180 and m.bytes_used == 24 * 200
    assert not m.put(b"one more", 1000)  # a new key no longer fits
    assert m.put(b"key-7", 500)  # an update does
    assert m.get(b"key-7") == 500 and m.get(b"key-8") == 8 and m.get(b"absent") == -1
    assert m.put(b"", 3) is False  # full: even the empty key is new
    assert m.latest_offset == 500


def test_small_dedupe_buffer_cleans_in_steps(tmp_path):
    log = open_log(str(tmp_path / "t-0"), ccfg(**{"segment.bytes": 1 << 20}))
    latest = {}
    for seg in range(6):  # each segment: 10 keys of its own, each written twice
        for _ in range(2):
            recs = []
            for i in range(10):
                k = b"key-%d" % (seg * 10 + i)
                off = log.log_end_offset + i
                recs.append((k, b"%s@%d" % (k, off)))
                latest[k] = (off, recs[-1][1])
            log.append(batch(recs))
        log.roll()
    ends = []
    for _ in range(10):
        st = log.clean(now_ms=NOW, dedupe_buffer_size=24 * 30)  # 27 keys: two segments a cleaning
        ends.append(st.end_offset)
        if st.end_offset == log.log_end_offset:
            break
    assert ends == [40, 80, 120]
    assert read_all(log) == survivors(latest)
    log.close()


def test_gaps_stay_legal_after_the_policy_goes_back_to_delete(tmp_path):
    """Kafka lets a topic switch from compact to delete; its cleaned segments keep their
    offset gaps, which must not then read as corruption (checked reads, verify, unclean recovery)."""
    path = str(tmp_path / "t-0")
    log = open_log(path)
    write_keyed(log, 60, keys=5)
    log.roll()
    assert log.clean().records_removed > 0
    before = read_all(log)
    delete_cfg = small_config(**{"cleanup.policy": "delete", "segment.bytes": 4096, "file.delete.delay.ms": 0})
    log.update_config(delete_cfg)
    assert read_all(log) == before
    assert log.scrub() == []
    leo = log.log_end_offset
    log.close()
    # reopened as the engine does, unclean (no marker): the LogManager reads the cleaner checkpoint
    mgr = LogManager(str(tmp_path), config_for=lambda _topic: delete_cfg)
    reopened = mgr.get_log("t", 0)
    assert reopened.gaps_allowed and reopened.log_end_offset == leo
    assert read_all(reopened) == before
    mgr.close()
