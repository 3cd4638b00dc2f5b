import os
import struct

import pytest

from engine import _native
from engine.errors import CorruptIndexError, ReadOnlyError


def test_offset_index_append_lookup_truncate(tmp_path):
    p = str(tmp_path / "00000000000000000100.index")
    idx = _native.OffsetIndex(p, 100, 1003)
    assert (idx.entries, idx.max_entries, idx.file_size) == (0, 125, 1000)
    assert idx.lookup(5000) == (100, 0)  # empty: (base, 0)
    for k in range(10):
        idx.append(100 + 10 * k + 5, 1000 * k + 7)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(104) == (100, 0)
    assert idx.lookup(105) == (105, 7)
    assert idx.lookup(114) == (105, 7)
    assert idx.lookup(115) == (115, 1007)
    assert idx.lookup(10**9) == (195, 9007)
    with pytest.raises(ValueError):
        idx.append(195, 9999)  # offset not increasing
    with pytest.raises(ValueError):
        idx.append(300, 9007)  # position not increasing
    idx.truncate_to(135)  # removes entries >= 135
    assert idx.entries == 3 and idx.last_offset == 125
    idx.truncate_to(126)
    assert idx.entries == 3
    idx.trim_to_valid_size()
    idx.close()
    assert os.path.getsize(p) == 24
    raw = open(p, "rb").read()
    assert struct.unpack(">ii", raw[:8]) == (5, 7)


def test_offset_index_trailing_zero_detection_and_resize(tmp_path):
    p = str(tmp_path / "0.index")
    idx = _native.OffsetIndex(p, 0, 800)
    for k in range(4):
        idx.append(k * 3 + 2, k * 100 + 50)
    idx.close()  # not trimmed: 800 bytes, 4 used
    assert os.path.getsize(p) == 800
    again = _native.OffsetIndex(p, 0, 800)
    assert again.entries == 4
    again.sanity_check(10_000)
    assert again.lookup(6) == (5, 150)
    again.resize(80)
    assert again.file_size == 80 and again.entries == 4
    again.resize(8)  # never below the used size
    assert again.file_size == 32
    again.close()


def test_offset_index_full(tmp_path):
    idx = _native.OffsetIndex(str(tmp_path / "0.index"), 0, 24)
    for k in range(3):
        idx.append(k + 1, k + 1)
    assert idx.is_full
    with pytest.raises(ValueError):
        idx.append(10, 10)


@pytest.mark.parametrize("content,reason", [
    (b"\x00" * 7, "multiple"),
    (struct.pack(">iiii", 5, 100, 3, 200), "increase"),
    (struct.pack(">iiii", 5, 100, 6, 50), "increase"),
    (struct.pack(">ii", -3, 100), "negative"),
    (struct.pack(">ii", 5, 10_000_000), "past the log end"),
])
def test_offset_index_sanity_check(tmp_path, content, reason):
    p = str(tmp_path / "0.index")
    with open(p, "wb") as f:
        f.write(content)
    idx = _native.OffsetIndex(p, 0)
    with pytest.raises(CorruptIndexError, match=reason):
        idx.sanity_check(1000)


def test_time_index(tmp_path):
    p = str(tmp_path / "0.timeindex")
    t = _native.TimeIndex(p, 50, 120)
    assert t.max_entries == 10
    assert t.last_entry == (-1, 50)
    assert t.maybe_append(1000, 52)
    assert not t.maybe_append(1000, 53)  # timestamp did not grow
    assert t.maybe_append(1005, 60)
    assert t.maybe_append(2000, 70)
    with pytest.raises(ValueError):
        t.maybe_append(3000, 65)  # offset went back
    assert t.lookup(999) == (-1, 50)
    assert t.lookup(1000) == (1000, 52)
    assert t.lookup(1999) == (1005, 60)
    assert t.lookup(10**12) == (2000, 70)
    t.truncate_to(60)
    assert t.entries == 1 and t.last_entry == (1000, 52)
    t.sanity_check()
    t.trim_to_valid_size()
    t.close()
    assert os.path.getsize(p) == 12
    assert _native.TimeIndex(p, 50).entries == 1


def test_time_index_sanity(tmp_path):
    p = str(tmp_path / "0.timeindex")
    with open(p, "wb") as f:
        f.write(struct.pack(">qiqi", 2000, 5, 1000, 6))
    with pytest.raises(CorruptIndexError):
        _native.TimeIndex(p, 0).sanity_check()


def test_read_only_index(tmp_path):
    p = str(tmp_path / "0.index")
    w = _native.OffsetIndex(p, 0, 800)
    w.append(5, 100)
    r = _native.OffsetIndex(p, 0, -1, False)
    assert r.entries == 1 and r.lookup(7) == (5, 100)
    with pytest.raises(ReadOnlyError):
        r.append(9, 200)
    r.close()
    w.close()


def test_load_packed(tmp_path):
    t = _native.OffsetIndex(str(tmp_path / "0.index"), 10, 80)
    t.load_packed(struct.pack(">iiii", 1, 10, 4, 90))
    assert t.entries == 2 and t.lookup(13) == (11, 10)
    assert t.packed() == struct.pack(">iiii", 1, 10, 4, 90)
    with pytest.raises(CorruptIndexError):
        t.load_packed(struct.pack(">iiii", 4, 10, 1, 90))


def _disk_bytes(path) -> int:
    return os.stat(path).st_blocks * 512


def test_preallocated_indexes_are_sparse_and_reserve_blocks_as_they_fill(tmp_path):
    """A new active segment's indexes are 10 MiB long but cost no disk until written (Kafka's
    setLength); blocks are reserved a page ahead of the entries (ENOSPC, never SIGBUS)."""
    p, t = str(tmp_path / "0.index"), str(tmp_path / "0.timeindex")
    idx = _native.OffsetIndex(p, 0, 10 << 20)
    tix = _native.TimeIndex(t, 0, 10 << 20)
    assert os.path.getsize(p) == 10 << 20 and _disk_bytes(p) == 0
    assert os.path.getsize(t) == (10 << 20) - (10 << 20) % 12 and _disk_bytes(t) == 0
    for k in range(1000):                           # 8000 bytes of offset entries: two pages
        idx.append(k + 1, 100 * (k + 1))
        tix.maybe_append(1000 + k, k + 1)
    assert 8000 <= _disk_bytes(p) <= 64 << 10
    assert 12000 <= _disk_bytes(t) <= 64 << 10
    assert idx.lookup(500) == (500, 50000) and tix.lookup(1500) == (1500, 501)
    # a rebuild (load_packed) leaves the unused tail a hole again
    idx.load_packed(idx.packed()[:80])
    assert idx.entries == 10 and _disk_bytes(p) <= 16 << 10
    idx.close()
    tix.close()


def test_idle_partitions_cost_a_few_kib_of_disk(tmp_path):
    import engine
    with engine.open(tmp_path / "d", background=False) as eng:
        eng.create_topic("idle", 50)
        used = sum(_disk_bytes(os.path.join(dp, f)) for dp, _, fs in os.walk(tmp_path / "d") for f in fs)
        apparent = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(tmp_path / "d")
                       for f in fs)
    assert apparent > 900 << 20          # 100 index files of 10 MiB each, as Kafka's
    assert used < 2 << 20, f"{used} bytes of disk for 50 idle partitions"
