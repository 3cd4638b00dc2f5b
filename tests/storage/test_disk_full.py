"""A full disk under the embedded engine (a real tmpfs, filled by a filler file): an append that
cannot be stored raises KafkaStorageError (errno ENOSPC) and leaves nothing of itself behind --
neither a half batch in the segment nor an index entry -- whether the data write or the index's
block reservation failed; once space is free the same log takes appends again, and after a crash
every acknowledged record is there and recovery has nothing to cut."""

from __future__ import annotations

import errno
import os

import pytest

from engine.errors import KafkaStorageError
from engine.storage.manager import LogManager
from tests.storage.conftest import make_batch, small_config
from tests.tmpfs import fill, tmpfs

PAGE = 4096


def _cfg():
    # an offset-index entry for every append after the first; one page holds 512 of them
    return small_config(segment_bytes=10**7, index_interval_bytes=0, segment_index_bytes=1 << 20)


def _stored(log, seg):
    assert os.path.getsize(seg.log_path) == seg.size          # no half batch past the log's end
    assert seg.index.entries == 0 or seg.index.entry(seg.index.entries - 1)[1] < seg.size


def test_enospc_in_data_write_and_in_index_reservation(tmp_path):
    with tmpfs(tmp_path / "mnt", "1m") as mnt:
        d = os.path.join(mnt, "data")
        m = LogManager(d, config_for=lambda t: _cfg())
        log = m.create_log("t", 0)
        acked = []                                   # (offset, seed)

        def append(batch, seed):
            info = log.append(batch)
            acked.append((info.first_offset, seed))

        small = make_batch(1, 1000, 60, seed=0)      # the same size for every seed below 10
        seed = 0
        while log.active_segment.index.entries < PAGE // 8:     # the index's first page is full
            append(make_batch(1, 1000, 60, seed=seed % 10), seed % 10)
            seed += 1
        seg = log.active_segment
        assert seg.size % PAGE + len(small) <= PAGE   # the next batch fits the segment's last page
        filler = fill(mnt)

        # 1. the data write fits an allocated page, the index needs a new one: ENOSPC there
        leo = log.log_end_offset
        with pytest.raises(KafkaStorageError) as ei:
            log.append(make_batch(1, 1000, 60, seed=1))
        assert ei.value.errno == errno.ENOSPC
        assert ei.value.__cause__.filename == seg.index_path
        assert log.log_end_offset == leo and seg.index.entries == PAGE // 8
        _stored(log, seg)

        # 2. a batch larger than the free tail of the page: the write itself fails
        with pytest.raises(KafkaStorageError) as ei:
            log.append(make_batch(5, 1000, 3000, seed=2))
        assert ei.value.errno == errno.ENOSPC
        assert log.log_end_offset == leo
        _stored(log, seg)

        # 3. space again: the same log goes on, offsets contiguous
        os.unlink(filler)
        for s in range(20):
            append(make_batch(2, 1000 + s, 500, seed=100 + s), 100 + s)
        assert acked[-20][0] == leo
        _stored(log, seg)

        # 4. full again, then a crash (no close): everything acknowledged comes back, nothing cut
        fill(mnt)
        with pytest.raises(KafkaStorageError):
            log.append(make_batch(5, 1000, 3000, seed=3))
        end = log.log_end_offset
        m._release_lock()
        os.unlink(filler)
        m2 = LogManager(d, config_for=lambda t: _cfg())
        log2 = m2.get_log("t", 0)
        assert not m2.had_clean_shutdown
        assert log2.log_end_offset == end
        assert sum(ev.bytes_dropped for ev in m2.recovery_report) == 0
        data = log2.read(0, 10**9, verify=True)
        assert data.size == sum(s.size for s in log2.segments)
        from engine import _native
        firsts = [h.base_offset for h in _native.list_batches(memoryview(data.read()), 0, -1, False)[0]]
        assert firsts == [o for o, _s in acked]

        # 5. a close on the full disk: no exception, everything closed and unlocked, but no
        # clean-shutdown marker (its checkpoints could not be written): the next open recovers
        log2.append(make_batch(1, 1000, 60, seed=4))
        end = log2.log_end_offset
        filler = fill(mnt)
        m2.close()
        assert log2.closed
        os.unlink(filler)
        m3 = LogManager(d, config_for=lambda t: _cfg())
        assert not m3.had_clean_shutdown
        assert m3.get_log("t", 0).log_end_offset == end
        m3.close()


def _idempotent_batch(seq: int, n: int = 5, value_size: int = 3000) -> bytearray:
    from kafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=7,
                                  producer_epoch=0, base_sequence=seq, batch_size=1 << 22)
    for i in range(n):
        b.append(i, timestamp=1000 + i, key=b"k", value=(b"%d:%d:" % (seq, i)) * (value_size // 8), headers=[])
    return b.build()


def test_enospc_at_roll_and_an_idempotent_retry(tmp_path):
    """A roll due when the disk is full (the new segment's first write or the producer snapshot
    fails), then the producer's retry of the refused batch once space is back: stored once, in
    order, with no sequence error -- a refused batch left no trace in the producer state."""
    with tmpfs(tmp_path / "mnt", "1m") as mnt:
        d = os.path.join(mnt, "data")
        cfg = small_config(segment_bytes=64 * 1024, segment_index_bytes=1 << 20)
        m = LogManager(d, config_for=lambda t: cfg)
        log = m.create_log("t", 0)
        seq = 0
        while len(log.segments) == 1 or log.active_segment.size + len(_idempotent_batch(seq)) <= 64 * 1024:
            log.append(_idempotent_batch(seq))
            seq += 5
        segments = len(log.segments)
        filler = fill(mnt)
        while True:                   # the roll that is due, then appends until one is refused
            try:
                log.append(_idempotent_batch(seq))
                seq += 5
            except KafkaStorageError as e:
                assert e.errno == errno.ENOSPC
                break
        assert len(log.segments) == segments + 1       # the roll happened on the full disk
        for seg in log.segments:
            assert os.path.getsize(seg.log_path) == seg.size
        leo = log.log_end_offset
        os.unlink(filler)
        info = log.append(_idempotent_batch(seq))          # the retry
        assert info.first_offset == leo
        assert log.append(_idempotent_batch(seq)).first_offset == leo   # a duplicate: the same offsets
        assert log.log_end_offset == leo + 5
        log.append(_idempotent_batch(seq + 5))
        assert len(log.segments) >= segments
        end = log.log_end_offset
        m.close()
        m2 = LogManager(d, config_for=lambda t: cfg)
        assert m2.had_clean_shutdown and m2.get_log("t", 0).log_end_offset == end
        m2.close()


_NO_SIGBUS = r"""
import os, sys
sys.path.insert(0, sys.argv[2])
import engine
from tests.tmpfs import fill
from tests.storage.conftest import make_batch
mnt, step = sys.argv[1], sys.argv[3]
d = os.path.join(mnt, "data")
if step == "crash":
    eng = engine.open(d, {"log.cleaner.enable": False}, background=False)
    eng.create_topic("a", 1)
    for i in range(50):
        eng.log("a", 0).append(make_batch(3, 1000, 200, seed=i))
    fill(mnt, "filler")
    for i in range(2):                # the same topic twice: the first try leaves its files
        try:
            eng.create_topic("b", 2)
        except OSError as e:
            print("create:", e.errno, flush=True)
    os._exit(0)                       # a crash: the active segment's index stays preallocated
try:
    eng = engine.open(d, {"log.cleaner.enable": False}, background=False)
    print("reopened:", eng.log("a", 0).log_end_offset, flush=True)
    eng.close()
except OSError as e:
    print("reopen:", e.errno, flush=True)
"""


def test_full_tmpfs_never_sigbus_on_leftover_sparse_indexes(tmp_path):
    """A log creation that failed on the full disk leaves a 10 MiB sparse index behind, and so
    does a crash (the active segment's index is trimmed only at a clean close); opening such an
    index on a full tmpfs read its holes through a shared map, which makes tmpfs allocate a page:
    SIGBUS. Now the scan stops at the first hole (SEEK_HOLE): errors are ENOSPC, never a crash."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tmpfs(tmp_path / "mnt", "2m") as mnt:
        out = []
        for step in ("crash", "reopen"):
            r = subprocess.run([sys.executable, "-c", _NO_SIGBUS, mnt, root, step], capture_output=True,
                               text=True, timeout=120, cwd=root)
            assert r.returncode == 0, (step, r.returncode, r.stdout, r.stderr[-2000:])
            out += r.stdout.splitlines()
        assert out[:2] == ["create: 28", "create: 28"], out
        os.unlink(os.path.join(mnt, "filler"))
        r = subprocess.run([sys.executable, "-c", _NO_SIGBUS, mnt, root, "reopen"], capture_output=True,
                           text=True, timeout=120, cwd=root)
        assert r.stdout.splitlines() == ["reopened: 150"], (r.stdout, r.stderr[-2000:])
