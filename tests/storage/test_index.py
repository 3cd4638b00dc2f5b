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
