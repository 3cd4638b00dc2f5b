import os
import subprocess
import sys
import threading

import pytest

import engine.storage.local_log as local_log
from engine import _native
from engine.errors import (
    CorruptRecordError,
    DataDirLockedError,
    InvalidTopicError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RecordTooLargeError,
)
from engine.storage import checkpoint, files
from engine.storage.log import LeaderEpochCache, PartitionLog
from engine.storage.manager import LogManager

from .conftest import ROOT, make_batch, small_config


def _open(tmp_path, **kw):
    cfg = kw.pop("config", None) or small_config()
    return PartitionLog(str(tmp_path / "t-0"), cfg, **kw)


def test_append_read_roundtrip_and_out_of_range(tmp_path):
    log = _open(tmp_path)
    stored = []
    for i in range(40):
        b = make_batch(2 + i % 3, 1000 + i, 120, seed=i)
        info = log.append(b)
        assert info.first_offset == (stored[-1][1] + 1 if stored else 0)
        assert info.records == 2 + i % 3 and info.batches == 1 and info.size == len(b)
        stored.append((info.first_offset, info.last_offset, bytes(b)))
    assert len(log.segments) > 1  # rolled by segment.bytes
    assert log.log_end_offset == stored[-1][1] + 1 == log.high_watermark
    everything = b"".join(x[2] for x in stored)
    f = log.read(0, 10**9)
    assert f.read() == everything
    for _first, last, b in stored[::7]:
        f = log.read(last, 1, min_one_batch=True)
        assert f.slices[0].read() == b
    f = log.read(stored[5][0], 300, min_one_batch=False)
    assert f.size == 300 and f.read() == everything[sum(len(x[2]) for x in stored[:5]):][:300]
    assert log.read(log.log_end_offset, 100).slices == []
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1, 100)
    log.delete_records_before(10)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 100)
    assert log.read(10, 10).slices[0].start_offset <= 10
    log.close()


def test_append_rejects_and_leaves_nothing(tmp_path):
    log = _open(tmp_path, config=small_config(max_message_bytes=500))
    log.append(make_batch(2, 1000, 50))
    leo, size = log.log_end_offset, log.size
    bad = make_batch(2, 1000, 50)
    bad[30] ^= 1  # CRC covered byte
    with pytest.raises(CorruptRecordError):
        log.append(bad)
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch(2, 1000, 600))
    assert (log.log_end_offset, log.size) == (leo, size)
    # bytes (read-only) input is copied, not rejected
    info = log.append(bytes(make_batch(1, 1000, 10)))
    assert info.first_offset == leo
    log.close()


def test_roll_by_time_and_retention(tmp_path):
    now = [10_000_000]
    cfg = small_config(segment_ms=1000, retention_ms=5000, segment_bytes=10**6)
    log = _open(tmp_path, config=cfg, clock=lambda: now[0])
    for i in range(10):
        log.append(make_batch(2, 1_000_000 + i * 600, 30))
    bases = [s.base_offset for s in log.segments]
    assert len(bases) == 5  # a new segment whenever the timestamp passed 1000 ms since the first batch
    # retention.ms: segments whose max timestamp is older than 5000 ms before now
    deleted = log.maybe_apply_retention(now_ms=1_000_000 + 9 * 600 + 100)
    assert deleted == 0
    deleted = log.maybe_apply_retention(now_ms=1_000_000 + 1 * 600 + 1 + 5001)
    assert deleted == 1 and log.log_start_offset == bases[1]
    assert not any(n.endswith(".deleted") for n in os.listdir(log.dir))
    assert sorted(n for n in os.listdir(log.dir) if n.endswith(".log")) == [
        files.segment_file(b, ".log") for b in bases[1:]]
    log.close()



def test_compact_only_topic_keeps_old_segments(tmp_path):
    """retention.ms / retention.bytes belong to cleanup.policy=delete; a compact-only log
    (__consumer_offsets) keeps every segment until the cleaner deals with it, as in Kafka."""
    cfg = small_config(segment_bytes=2000, retention_bytes=100, retention_ms=1)
    cfg = cfg.with_overrides({"cleanup.policy": "compact"})
    log = _open(tmp_path, config=cfg, clock=lambda: 10**13)
    for i in range(20):
        log.append(make_batch(3, 1000 + i, 100, seed=i))
    before = [s.base_offset for s in log.segments]
    assert len(before) > 2
    assert log.maybe_apply_retention(now_ms=10**13) == 0
    assert [s.base_offset for s in log.segments] == before and log.log_start_offset == 0
    log.update_config(cfg.with_overrides({"cleanup.policy": "compact,delete"}))
    assert log.maybe_apply_retention(now_ms=10**13) > 0
    log.close()

def test_retention_bytes_and_delayed_delete(tmp_path):
    cfg = small_config(segment_bytes=2000, retention_bytes=5000, file_delete_delay_ms=1000)
    now = [0]
    log = _open(tmp_path, config=cfg, clock=lambda: now[0])
    for i in range(40):
        log.append(make_batch(3, 1000 + i, 100, seed=i))
    total = log.size
    n = log.maybe_apply_retention(now_ms=0)
    assert n > 0 and log.size <= 5000 + 2000 and total - log.size >= total - 5000 - 2000
    assert log.size >= 5000 - 0  # never below retention.bytes by a whole segment
    leftovers = [x for x in os.listdir(log.dir) if x.endswith(".deleted")]
    assert leftovers  # renamed first, deleted after file.delete.delay.ms
    assert log.maybe_delete_pending(now_ms=999) == 0
    assert log.maybe_delete_pending(now_ms=1000) == n
    assert not [x for x in os.listdir(log.dir) if x.endswith(".deleted")]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 10)
    assert log.read(log.log_start_offset, 10).slices
    log.close()


def test_offset_for_timestamp(tmp_path):
    log = _open(tmp_path)
    for i in range(50):
        log.append(make_batch(2, 10_000 + 100 * i, 200))
    assert log.offset_for_timestamp(0) == (0, 10_000)
    assert log.offset_for_timestamp(10_050) == (2, 10_100)
    assert log.offset_for_timestamp(10_000 + 100 * 37 + 1) == (75, 10_000 + 100 * 37 + 1)
    assert log.offset_for_timestamp(10**9) is None
    assert log.offset_for_timestamp(-2) == (0, -1)
    assert log.offset_for_timestamp(-1) == (100, -1)
    log.close()


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_offset_for_timestamp_inside_compressed_batches(tmp_path, codec):
    """Kafka answers a timestamp lookup with the exact record, compressed batches included."""
    from engine.records import build_batch

    log = _open(tmp_path)
    for b in range(3):
        log.append(build_batch([(b"v%d" % i, None, None, 1_000 + 100 * b + i) for i in range(10)],
                               codec=codec))
    assert log.offset_for_timestamp(1_000) == (0, 1_000)
    assert log.offset_for_timestamp(1_104) == (14, 1_104)
    assert log.offset_for_timestamp(1_150) == (20, 1_200)
    assert log.offset_for_timestamp(1_209) == (29, 1_209)
    assert log.offset_for_timestamp(1_210) is None
    log.close()


def test_truncate_and_epoch_cache(tmp_path):
    log = _open(tmp_path)
    for epoch in (1, 1, 3, 3, 5):
        for _ in range(5):
            log.append(make_batch(2, 1000, 300), leader_epoch=epoch)
    assert log.leader_epoch_cache.entries == [(1, 0), (3, 20), (5, 40)]
    assert log.end_offset_for_epoch(1) == (1, 20)
    assert log.end_offset_for_epoch(2) == (1, 20)
    assert log.end_offset_for_epoch(5) == (5, 50)
    assert log.end_offset_for_epoch(0) == (0, 0)      # Kafka: older than all -> first start
    assert log.end_offset_for_epoch(6) == (-1, -1)    # newer than the latest: unknown
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert checkpoint.read_epoch_checkpoint(os.path.join(log.dir, files.LEADER_EPOCH_CHECKPOINT)) == [
        (1, 0), (3, 20), (5, 40)]
    assert log.truncate_to(33) == 32  # batch granularity: [32, 33] is removed whole
    assert log.leader_epoch_cache.entries == [(1, 0), (3, 20)]
    assert log.high_watermark == 32
    b = make_batch(2, 1000, 300)
    assert log.append(b, leader_epoch=6).first_offset == 32
    assert log.truncate_to(5) == 4
    assert len(log.segments) == 1 and log.log_end_offset == 4
    log.close()


def test_epoch_cache_rules():
    c = LeaderEpochCache(None)
    assert c.assign(2, 10) and not c.assign(2, 15) and not c.assign(1, 20)
    assert c.assign(4, 10)  # conflicting start: replaces epoch 2
    assert c.entries == [(4, 10)]
    c.assign(6, 30)
    c.truncate_from_start(20)
    assert c.entries == [(4, 20), (6, 30)]


def test_durable_group_commit(tmp_path, monkeypatch):
    calls = []

    class Counting:
        def __getattr__(self, name):
            return getattr(_native, name)

        @staticmethod
        def fdatasync(fd):
            calls.append(fd)
            _native.fdatasync(fd)

    monkeypatch.setattr(local_log, "_native", Counting())  # the module doing the fdatasyncs
    log = _open(tmp_path, config=small_config(flush_messages=1, segment_bytes=10**6))
    assert log.config.durable
    errors = []
    per_thread = 40

    def worker(t):
        try:
            for i in range(per_thread):
                info = log.append(make_batch(1, 1000, 64, seed=t))
                # Acknowledged only when synced: recovery point (fdatasync'd prefix) covers it.
                if log.recovery_point <= info.last_offset or log.high_watermark <= info.last_offset:
                    errors.append((t, i, info.last_offset, log.recovery_point))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    n = 8 * per_thread
    assert log.log_end_offset == n == log.recovery_point
    assert 0 < len(calls) < n  # appenders shared syncs
    assert log.sync_count == len(calls)
    log.close()


def test_flush_messages_policy(tmp_path):
    log = _open(tmp_path, config=small_config(flush_messages=10, segment_bytes=10**6))
    for _ in range(4):
        log.append(make_batch(2, 1000, 10))
    assert log.recovery_point == 0
    log.append(make_batch(2, 1000, 10))
    assert log.recovery_point == 10
    log.close()


def test_manager_lock_second_writer(tmp_path):
    d = str(tmp_path / "data")
    m = LogManager(d, config_for=lambda t: small_config())
    with pytest.raises(DataDirLockedError) as ei:
        LogManager(d)
    assert f"pid={os.getpid()}" in ei.value.holder
    code = (f"import sys; sys.path.insert(0, {ROOT!r})\n"
            "from engine.storage.manager import LogManager\nfrom engine.errors import DataDirLockedError\n"
            f"try:\n    LogManager({d!r})\nexcept DataDirLockedError as e:\n    print(e.holder)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert f"pid={os.getpid()}" in out.stdout, out.stderr
    m.close()
    LogManager(d).close()  # released


def test_read_only_open_sees_only_published_hw(tmp_path):
    d = str(tmp_path / "data")
    w = LogManager(d, config_for=lambda t: small_config(), auto_high_watermark=False)
    log = w.create_log("events", 0)
    for i in range(30):
        log.append(make_batch(2, 1000 + i, 200, seed=i))
    log.update_high_watermark(20)
    r = LogManager(d, read_only=True, config_for=lambda t: small_config())
    assert not os.path.exists(os.path.join(d, "x"))
    rlog = r.get_log("events", 0)
    assert rlog.high_watermark == 20
    data = rlog.read(0, 10**9).read()
    assert data == log.read(0, 10**9, max_offset=20).read() and len(data) > 0
    with pytest.raises(OffsetOutOfRangeError):
        rlog.read(21, 100)
    with pytest.raises(ReadOnlyError):
        rlog.append(make_batch())
    # the writer moves on (new segments, more bytes); the reader follows the published HW
    for i in range(30):
        log.append(make_batch(2, 2000 + i, 200, seed=i))
    assert rlog.read(0, 10**9).read() == data
    log.update_high_watermark(log.log_end_offset)
    assert rlog.read(0, 10**9).read() == log.read(0, 10**9).read()
    assert sum(s.size for s in rlog.segments_for_range(0)) == log.size
    before = {n: os.stat(os.path.join(log.dir, n)).st_mtime_ns for n in os.listdir(log.dir)}
    r.close()
    assert before == {n: os.stat(os.path.join(log.dir, n)).st_mtime_ns for n in os.listdir(log.dir)}
    w.close()


def test_segments_for_range(tmp_path):
    log = _open(tmp_path)
    stored = []
    for i in range(60):
        b = make_batch(3, 1000, 150, seed=i)
        info = log.append(b)
        stored.append((info.first_offset, bytes(b)))
    slices = log.segments_for_range(10, 100)
    joined = b"".join(s.read() for s in slices)
    want = b"".join(b for first, b in stored if first + 2 >= 10 and first < 100)
    assert joined == want
    log.update_high_watermark(30)
    assert b"".join(s.read() for s in log.segments_for_range(0)) == b"".join(b for f, b in stored if f < 30)
    log.close()


def test_files_and_checkpoints(tmp_path):
    assert files.filename_prefix(5) == "00000000000000000005"
    with pytest.raises(InvalidTopicError):
        files.validate_topic("a/b")
    with pytest.raises(InvalidTopicError):
        files.validate_topic("..")
    with pytest.raises(InvalidTopicError):
        files.validate_topic("x" * 250)
    files.validate_topic("x" * 249)
    with pytest.raises(ValueError):
        files.parse_partition_dir("nodash")
    name = files.delete_dir_name("a-b", 3)
    assert name.startswith("a-b-3.") and name.endswith("-delete") and files.parse_partition_dir(name) == ("a-b", 3)
    p = str(tmp_path / "cp")
    checkpoint.write_offset_checkpoint(p, {("a-b", 0): 5, ("c", 2): 7})
    assert open(p).read() == "0\n2\na-b 0 5\nc 2 7\n"
    assert checkpoint.read_offset_checkpoint(p) == {("a-b", 0): 5, ("c", 2): 7}
    assert checkpoint.read_offset_checkpoint(str(tmp_path / "missing")) is None


def test_directory_has_kafkas_file_names(tmp_path):
    d = str(tmp_path / "data")
    m = LogManager(d, config_for=lambda t: small_config())
    log = m.create_log("my.topic-x", 3)
    for i in range(40):
        log.append(make_batch(3, 1000 + i, 200, seed=i))
    m.close()
    import re
    assert sorted(os.listdir(d)) == [".kafka_cleanshutdown", ".lock", "log-start-offset-checkpoint",
                                     "my.topic-x-3", "recovery-point-offset-checkpoint",
                                     "replication-offset-checkpoint"]
    names = os.listdir(os.path.join(d, "my.topic-x-3"))
    seg = [n for n in names if re.fullmatch(r"\d{20}\.(log|index|timeindex)", n)]
    snaps = sorted(n for n in names if re.fullmatch(r"\d{20}\.snapshot", n))
    assert sorted(set(names) - set(seg) - set(snaps)) == [".highwatermark", "leader-epoch-checkpoint"]
    # producer snapshots as Kafka names them: the latest two, the newest at the log end (clean close)
    assert len(snaps) == 2 and snaps[-1] == f"{log.log_end_offset:020d}.snapshot"
    bases = sorted({n.split(".")[0] for n in seg})
    assert len(bases) > 1 and all(f"{b}.{s}" in names for b in bases for s in ("log", "index", "timeindex"))
    # every sealed segment's indexes are trimmed to whole entries
    for n in seg:
        size = os.path.getsize(os.path.join(d, "my.topic-x-3", n))
        assert size % {"log": 1, "index": 8, "timeindex": 12}[n.split(".")[1]] == 0
    assert open(os.path.join(d, "replication-offset-checkpoint")).read() == "0\n1\nmy.topic-x 3 120\n"


def test_concurrent_appends_reads_and_retention(tmp_path):
    cfg = small_config(segment_bytes=4000, retention_bytes=20_000, retention_ms=-1)
    log = _open(tmp_path, config=cfg)
    stop = threading.Event()
    errors = []
    payload = {}

    def writer():
        try:
            for i in range(400):
                b = make_batch(2, 1000 + i, 150, seed=i)
                info = log.append(b)
                payload[info.first_offset] = bytes(b)
                if i % 25 == 0:
                    log.maybe_apply_retention()
        except Exception as e:  # pragma: no cover
            errors.append(e)
        finally:
            stop.set()

    def reader():
        try:
            while not stop.is_set():
                start = log.log_start_offset
                try:
                    f = log.read(start, 3000, verify=True)
                except OffsetOutOfRangeError:
                    continue  # retention moved the start between the two calls
                data = f.read()
                pos, off = 0, f.slices[0].start_offset if f.slices else None
                while off is not None and pos < len(data):
                    want = payload.get(off)
                    if want is None:
                        break  # appended, visible, but the writer has not recorded it yet
                    assert data[pos:pos + len(want)] == want
                    pos += len(want)
                    off += 2
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert log.log_end_offset == 800 and log.log_start_offset > 0
    log.close()


def test_background_tasks_flush_and_retention(tmp_path):
    import time

    cfg = small_config(flush_ms=0, retention_bytes=3000, retention_ms=-1, segment_bytes=2000)
    m = LogManager(str(tmp_path / "data"), config_for=lambda t: cfg)
    log = m.create_log("bg", 0)
    for i in range(30):
        log.append(make_batch(2, 1000, 200, seed=i))
    assert log.recovery_point == 0
    m.start_background(0.02)
    deadline = time.time() + 10
    while (log.recovery_point < log.log_end_offset or log.log_start_offset == 0) and time.time() < deadline:
        time.sleep(0.02)
    m.stop_background()
    assert log.recovery_point == log.log_end_offset and log.log_start_offset > 0
    rp = checkpoint.read_offset_checkpoint(os.path.join(m.data_dir, files.RECOVERY_POINT_CHECKPOINT))
    assert rp[("bg", 0)] == log.log_end_offset
    m.close()


def test_reader_survives_writer_crash_recovery(tmp_path):
    """A read-only open keeps working while a new writer recovers (cuts a torn tail, rebuilds indexes)."""
    d = str(tmp_path / "data")
    cfg = small_config()
    w = LogManager(d, config_for=lambda t: cfg)
    log = w.create_log("r", 0)
    for i in range(30):
        log.append(make_batch(2, 1000 + i, 300, seed=i))
    everything = log.read(0, 10**9).read()
    seg = log.active_segment
    w._release_lock()  # crash
    with open(seg.log_path, "ab") as f:
        f.write(os.urandom(3000))  # torn tail
    with open(seg.index_path, "r+b") as f:
        f.write(os.urandom(64))
    r = LogManager(d, read_only=True, config_for=lambda t: cfg)
    rlog = r.get_log("r", 0)
    assert rlog.read(0, 10**9).read() == everything
    w2 = LogManager(d, config_for=lambda t: cfg)  # recovery: truncates the tail, rebuilds indexes
    assert [e for e in w2.recovery_report if e.bytes_dropped == 3000]
    log2 = w2.get_log("r", 0)
    assert rlog.read(0, 10**9, verify=True).read() == everything
    assert rlog.offset_for_timestamp(1029) == (57, 1029)  # batch 28 holds 1028, 1029
    for i in range(10):
        log2.append(make_batch(2, 5000 + i, 300, seed=100 + i))
    assert rlog.read(0, 10**9).read() == log2.read(0, 10**9).read()
    r.close()
    w2.close()


def test_roll_schedules_flush_of_previous_segments(tmp_path):
    log = _open(tmp_path, config=small_config(segment_bytes=3000))
    for i in range(5):
        log.append(make_batch(2, 1000, 200, seed=i))
    assert len(log.segments) == 1 and log.recovery_point == 0
    assert not log.maybe_flush()  # flush.ms is "never" by default, and nothing rolled yet
    for i in range(10):
        log.append(make_batch(2, 1000, 200, seed=i))
    assert len(log.segments) > 1 and log.recovery_point == 0
    assert log.maybe_flush()
    assert log.recovery_point >= log.active_segment.base_offset
    assert all(s.flushed_size == s.size for s in log.segments[:-1])
    log.close()


def test_truncate_fully_and_start_at_publishes_hw_log_start_and_lso(tmp_path):
    """A follower restarting behind its leader's log start republishes all three
    `.highwatermark` fields (HW @0, log start @8, LSO @24): none is left stale."""
    import struct

    log = _open(tmp_path)
    for i in range(5):
        log.append(make_batch(2, 1000 + i, 60, seed=i))
    assert log.high_watermark == log.log_end_offset == 10
    path = os.path.join(log.dir, files.HIGH_WATERMARK_FILE)

    def published():
        with open(path, "rb") as f:
            hw, start, _magic, lso, lso_magic = struct.unpack("<5q", f.read(40))
        return hw, start, lso, lso_magic

    assert published()[:3] == (10, 0, 10)
    log.truncate_fully_and_start_at(250)
    hw, start, lso, lso_magic = published()
    assert (hw, start, lso) == (250, 250, 250) and lso_magic == 0x4B4C534F31
    assert log.last_stable_offset == 250 == log.log_end_offset
    log.close()
