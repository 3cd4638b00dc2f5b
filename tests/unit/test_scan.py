import os

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import _native
from engine.arrow import KAFKA_SCHEMA, batches_to_table
from engine.errors import CorruptRecordError

from .helpers import CODECS, batch, control_batch


def log_of(codecs=(0, 3, 4, 1, 2), per=4):
    """Batches of `per` records each, one per codec, plus a control batch in the middle."""
    out, off = [], 0
    for i, codec in enumerate(codecs):
        b = _native.BatchBuilder()
        for j in range(per):
            key = None if j % 3 == 0 else b"k%d" % off
            hs = [(f"h{j}", None if j == 1 else b"v")] * (j % 3)
            b.append(b"value-%d" % off if j != 2 else None, key=key, headers=hs, timestamp=1000 + off)
            off += 1
        out.append(b.build(codec=codec, base_offset=off - per))
        if i == 1:
            out.append(control_batch(off))
            off += 1
    return b"".join(out), off


def expected_rows(data, lo=0, hi=2**62):
    recs, _ = _native.decode_batches(data)
    return [r for r in recs if lo <= r[0] < hi]


def rows_of(table):
    return [
        (r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
        for r in table.to_pylist()
    ]


def as_rows(recs):
    return [(o, k, v, h) for o, _, k, v, h in recs]


def test_schema_is_sparks_kafka_schema():
    assert KAFKA_SCHEMA.names == ["key", "value", "topic", "partition", "offset", "timestamp",
                                  "timestampType", "headers"]
    assert KAFKA_SCHEMA.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert KAFKA_SCHEMA.field("headers").type == pa.list_(
        pa.struct([("key", pa.string()), ("value", pa.binary())]))
    data, _ = log_of()
    t = batches_to_table(data, "events", 7)
    assert t.schema == KAFKA_SCHEMA
    t.validate(full=True)
    assert set(t.column("topic").to_pylist()) == {"events"}
    assert set(t.column("partition").to_pylist()) == {7}


def test_scan_equals_decode_and_skips_control():
    data, end = log_of()
    t = batches_to_table(data, "t", 0)
    assert rows_of(t) == as_rows(expected_rows(data))
    assert 8 not in t.column("offset").to_pylist()        # the control record
    assert t.column("timestamp").cast("int64").to_pylist() == [r[1] * 1000 for r in expected_rows(data)]
    assert set(t.column("timestampType").to_pylist()) == {0}
    assert t.column("key").null_count > 0 and t.column("value").null_count > 0


@pytest.mark.parametrize("lo,hi", [(0, 3), (2, 9), (5, 6), (9, 100), (50, 60), (3, 3)])
def test_offset_bounds(lo, hi):
    data, _ = log_of()
    sc = _native.ColumnScanner()
    next_offset, pos = sc.feed(data, 0, -1, lo, hi)
    t = sc.finish("t", 0)
    want = expected_rows(data, lo, hi)
    assert rows_of(t) == as_rows(want)
    if hi < 21 and hi > lo:
        assert next_offset == hi
        # the batch holding `hi` is where to resume
        h = _native.read_header(data, pos)
        assert h.base_offset <= hi <= h.last_offset


def test_feed_returns_end_and_partial_tail():
    data, end_offset = log_of()
    sc = _native.ColumnScanner()
    assert sc.feed(data) == (end_offset, len(data))
    last = _native.list_batches(data)[0][-1]
    sc = _native.ColumnScanner()
    next_offset, pos = sc.feed(data[:-7])
    assert pos == last.position and next_offset == last.base_offset
    assert sc.num_rows == len(expected_rows(data)) - last.records_count


def test_max_rows_resume_gives_the_same_rows():
    data, _ = log_of(per=7)
    want = as_rows(expected_rows(data))
    sc = _native.ColumnScanner()
    got, pos, off = [], 0, 0
    while True:
        off, pos = sc.feed(data, pos, -1, off, max_rows=5)
        if sc.num_rows == 0:
            break
        t = sc.finish("t", 1, as_table=False)
        assert isinstance(t, pa.RecordBatch) and t.num_rows <= 5
        got += rows_of(t)
    assert got == want


def test_several_feeds_into_one_table():
    seg1 = batch([b"a", b"b"], 0) + batch([b"c"], 2)
    seg2 = batch([b"d"], 3, codec=4) + batch([b"e", b"f"], 4)
    sc = _native.ColumnScanner()
    assert sc.feed(seg1, start_offset=1) == (3, len(seg1))
    assert sc.feed(seg2, end_offset=5) == (5, len(batch([b"d"], 3, codec=4)))
    t = sc.finish("t", 0)
    assert t.column("value").to_pylist() == [b"b", b"c", b"d", b"e"]
    assert sc.num_rows == 0
    empty = sc.finish("t", 0)
    assert empty.num_rows == 0 and empty.schema == KAFKA_SCHEMA
    empty.validate(full=True)


def test_log_append_time_rows():
    buf = bytearray(batch([b"a", b"b"], timestamp=5))
    _native.assign_offsets(buf, 10, log_append_time=123_456)
    t = batches_to_table(buf, "t", 0)
    assert t.column("timestampType").to_pylist() == [1, 1]
    assert t.column("timestamp").cast("int64").to_pylist() == [123_456_000] * 2
    assert t.column("offset").to_pylist() == [10, 11]


def test_crc_flag_and_rollback():
    good = batch([b"a", b"b"], 0)
    bad = bytearray(batch([b"c", b"d"], 2))
    bad[-2] ^= 1                                     # the last value byte
    data = good + bytes(bad)
    sc = _native.ColumnScanner()
    with pytest.raises(CorruptRecordError) as ei:
        sc.feed(data, path="s.log", base_position=10)
    assert ei.value.position == 10 + len(good)
    assert sc.num_rows == 2                          # the good batch stays, nothing of the bad one
    assert sc.finish("t", 0).column("value").to_pylist() == [b"a", b"b"]
    sc = _native.ColumnScanner(check_crc=False)
    sc.feed(data)
    assert sc.num_rows == 4
    # a structurally bad last record: the batch's first record is rolled back too
    bad[-1] ^= 1                                     # headersCount 0 -> -1
    sc = _native.ColumnScanner(check_crc=False)
    with pytest.raises(CorruptRecordError, match="record 1"):
        sc.feed(good + bytes(bad))
    assert sc.num_rows == 2
    t = sc.finish("t", 0)
    t.validate(full=True)
    assert t.column("value").to_pylist() == [b"a", b"b"]


@pytest.mark.parametrize("codec", CODECS)
def test_large_batches_each_codec(codec):
    vals = [os.urandom(200) for _ in range(2000)]      # payload > 64 KiB: the nogil path
    batches = _native.build_batches(vals, timestamps=list(range(2000)), codec=codec,
                                    max_batch_bytes=300_000)
    data = bytearray(b"".join(batches))
    _native.assign_offsets(data, 1_000_000)
    t = batches_to_table(data, "t", 0)
    assert t.column("value").to_pylist() == vals
    assert t.column("offset").to_pylist() == list(range(1_000_000, 1_002_000))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=8),
                min_size=1, max_size=6),
       st.integers(0, 30), st.integers(0, 30), st.sampled_from(CODECS))
def test_scan_matches_decode(batches, lo, span, codec):
    parts, off = [], 0
    for vals in batches:
        parts.append(batch(vals, off, codec=codec))
        off += len(vals)
    data = b"".join(parts)
    t = batches_to_table(data, "t", 0, lo, lo + span)
    assert rows_of(t) == as_rows(expected_rows(data, lo, lo + span))


def test_lz4_scratch_growth_and_bound():
    vals = [b"\x00" * 500_000 for _ in range(6)]          # ~3 MB from a few KB of lz4
    (b1,) = _native.build_batches(vals, codec=3, max_batch_bytes=10 << 20)
    small = _native.build_batches([b"x"], codec=3)[0]
    data = bytearray(small + b1 + small)
    _native.assign_offsets(data, 0)
    t = batches_to_table(data, "t", 0)
    assert t.column("value").to_pylist() == [b"x"] + vals + [b"x"]
    sc = _native.ColumnScanner(max_size=1_000_000)
    with pytest.raises(CorruptRecordError, match="exceeds"):
        sc.feed(data)
    assert sc.num_rows == 1
    garbage = bytearray(small)
    garbage[61:] = b"\x04\x22\x4d\x18" + b"\xff" * (len(small) - 65)
    from .helpers import recrc
    recrc(garbage)
    with pytest.raises(CorruptRecordError):
        _native.ColumnScanner().feed(garbage)


def test_read_only_mmap_input(tmp_path):
    import mmap

    data, _ = log_of()
    p = tmp_path / "00000000000000000000.log"
    p.write_bytes(data + b"\x00" * 100)              # preallocated zero tail
    with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        t = batches_to_table(mm, "t", 0)
        assert rows_of(t) == as_rows(expected_rows(data))
        recs, end = _native.decode_batches(mm)
        assert end == len(data) and len(recs) == t.num_rows
        del t, recs


@pytest.mark.parametrize("key,ok", [
    ("plain", True), ("é€𝄞", True), (b"\xff", False), (b"\xc0\xaf", False),
    (b"\xed\xa0\x80", False), (b"\xf4\x90\x80\x80", False), (b"ok\xe2\x82", False),
])
def test_header_keys_must_be_utf8(key, ok):
    b = _native.BatchBuilder()
    b.append(b"v", headers=[("first", b"1")], timestamp=1)
    b.append(b"w", headers=[(key, b"2")], timestamp=2)
    data = b.build()
    sc = _native.ColumnScanner()
    if ok:
        sc.feed(data)
        t = sc.finish("t", 0)
        t.validate(full=True)
        assert t.column("headers").to_pylist()[1] == [{"key": key, "value": b"2"}]
    else:
        with pytest.raises(CorruptRecordError, match="UTF-8"):
            sc.feed(data)
        assert sc.num_rows == 0
        # the tuple decoder is lenient, like Java (replacement characters)
        assert _native.decode_batch(data)[1][4][0][0].endswith("\ufffd")
