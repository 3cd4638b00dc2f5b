import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import _native
from engine.errors import CorruptRecordError
from engine.records import Record, build_batch, decode

from .helpers import CODECS, batch, control_batch, recrc

WORKED = bytes.fromhex("22000000046b310a68656c6c6f0202680278")


def test_worked_example_layout():
    b = _native.BatchBuilder()
    b.append(b"hello", key=b"k1", headers=[("h", b"x")], timestamp=0)
    data = b.build()
    assert data[61:] == WORKED
    assert _native.decode_batch(data) == [(0, 0, b"k1", b"hello", [("h", b"x")])]


def test_offsets_timestamps_and_nulls():
    b = _native.BatchBuilder()
    b.append(b"a", timestamp=1000)
    b.append(None, key=b"", timestamp=990)
    b.append(b"", key=None, headers=[("n", None), ("e", b"")], timestamp=2000)
    data = b.build(base_offset=100)
    h = _native.read_header(data)
    assert (h.base_timestamp, h.max_timestamp, h.records_count, h.last_offset_delta) == (1000, 2000, 3, 2)
    assert _native.decode_batch(data) == [
        (100, 1000, None, b"a", []),
        (101, 990, b"", None, []),
        (102, 2000, None, b"", [("n", None), ("e", b"")]),
    ]


def test_log_append_time_uses_max_timestamp():
    data = bytearray(batch([b"a", b"b"], timestamp=10))
    _native.assign_offsets(data, 0, log_append_time=777)
    assert [r[1] for r in _native.decode_batch(data)] == [777, 777]


def test_decode_at_position_and_many_batches():
    data = batch([b"a", b"b"], 0) + batch([b"c"], 2, codec=3) + control_batch(3) + batch([b"d"], 4, codec=4)
    first_size = _native.read_header(data).size
    assert [r[3] for r in _native.decode_batch(data, first_size)] == [b"c"]
    recs, end = _native.decode_batches(data)
    assert end == len(data)
    assert [(r[0], r[3]) for r in recs] == [(0, b"a"), (1, b"b"), (2, b"c"), (4, b"d")]
    recs, _ = _native.decode_batches(data, skip_control=False)
    assert [r[0] for r in recs] == [0, 1, 2, 3, 4]


def test_partial_tail_stops_quietly():
    one = batch([b"a"], 0)
    data = one + batch([b"b", b"c"], 1)[:-3]
    recs, end = _native.decode_batches(data)
    assert [r[3] for r in recs] == [b"a"] and end == len(one)
    with pytest.raises(CorruptRecordError):
        _native.decode_batch(data, len(one))


def test_crc_mismatch_names_position():
    one = batch([b"a"], 0)
    data = bytearray(one + batch([b"b"], 1))
    data[len(one) + 65] ^= 1
    with pytest.raises(CorruptRecordError) as ei:
        _native.decode_batches(bytes(data), path="x.log", base_position=1000)
    assert ei.value.position == 1000 + len(one) and ei.value.path == "x.log"
    # without CRC checking the damaged byte is just data
    recs, _ = _native.decode_batches(bytes(data), check_crc=False)
    assert len(recs) == 2


def _with_records(payload: bytes, count: int) -> bytes:
    """A batch whose records region is replaced by `payload` (CRC fixed)."""
    data = bytearray(batch([b"x"]))[:61] + payload
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">i", data, 57, count)
    struct.pack_into(">i", data, 23, max(count - 1, 0))
    recrc(data)
    return bytes(data)


@pytest.mark.parametrize(
    "payload,count",
    [
        (WORKED[:-1], 1),                      # header value runs past the end
        (WORKED + b"\x00", 1),                 # trailing byte -> another record, count mismatch
        (WORKED, 2),                           # count says 2, payload holds 1
        (b"\x22" + WORKED[1:4] + b"\x03" + WORKED[5:], 1),   # key length -2
        (b"\x24" + WORKED[1:] + b"\x00", 1),   # length too big for the fields
        (b"\x20" + WORKED[1:-1], 1),           # length too small for the fields
        (b"\xff\xff\xff\xff\xff\xff", 1),      # varint overrun
        (b"\x01" + WORKED[1:], 1),             # negative record length
    ],
)
def test_bounds_problems_raise(payload, count):
    data = _with_records(payload, count)
    with pytest.raises(CorruptRecordError) as ei:
        _native.decode_batch(data, path="p")
    assert ei.value.position == 0
    sc = _native.ColumnScanner()
    with pytest.raises(CorruptRecordError):
        sc.feed(data)
    assert sc.num_rows == 0


def test_corrupt_compressed_payload():
    data = bytearray(batch([b"a" * 100] * 10, codec=3))
    data[70] ^= 0xFF
    recrc(data)
    with pytest.raises(CorruptRecordError):
        _native.decode_batch(data)


def test_record_helpers():
    data = build_batch([b"v", (b"w", b"k", [("h", b"1")], 9)], codec="zstd", base_offset=3)
    recs = decode(data)
    assert recs[1] == Record(4, 9, b"k", b"w", [("h", b"1")])
    assert recs[1].key == b"k"


values = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
records = st.lists(
    st.tuples(values, values, headers, st.integers(min_value=0, max_value=2**41)), min_size=1, max_size=40
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records, st.sampled_from(CODECS), st.integers(min_value=0, max_value=2**40))
def test_round_trip(recs, codec, base):
    b = _native.BatchBuilder()
    for value, key, hs, ts in recs:
        b.append(value, key=key, headers=hs, timestamp=ts)
    data = b.build(codec=codec, base_offset=base)
    expected = [(base + i, ts, key, value, list(hs)) for i, (value, key, hs, ts) in enumerate(recs)]
    assert _native.decode_batch(data) == expected
    sc = _native.ColumnScanner()
    sc.feed(data)
    t = sc.finish("t", 0)
    t.validate(full=True)
    rows = t.to_pylist()
    assert [(r["offset"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
            for r in rows] == [(o, k, v, h) for o, _, k, v, h in expected]
    assert t.column("timestamp").cast("int64").to_pylist() == [ts * 1000 for _, ts, _, _, _ in expected]


@pytest.mark.parametrize("codec", [0, 3])
def test_first_record_at_or_after(codec):
    b = _native.BatchBuilder()
    for ts in (100, 90, 130, 120):
        b.append(b"v", timestamp=ts)
    lead = batch([b"x"], 0)
    data = lead + b.build(codec=codec, base_offset=10)
    pos = len(lead)
    find = _native.first_record_at_or_after
    assert find(data, pos, 95) == (10, 100)
    assert find(data, pos, 101) == (12, 130)
    assert find(data, pos, 120, min_offset=13) == (13, 120)
    assert find(data, pos, 131) is None                       # above maxTimestamp
    assert find(data, pos, 0, min_offset=14) is None          # past the batch's last offset
    lat = bytearray(data)
    _native.assign_offsets(memoryview(lat)[pos:], 10, log_append_time=500)
    assert find(lat, pos, 200, min_offset=11) == (11, 500)     # LogAppendTime: every record maxTimestamp
    with pytest.raises(CorruptRecordError) as ei:
        find(data[:-1], pos, 0, path="x.log")
    assert (ei.value.position, ei.value.path) == (pos, "x.log")


def test_first_record_at_or_after_bad_record():
    data = bytearray(batch([b"a", b"b"]))
    data[61] = 0x7F            # first record's length varint: far past the batch
    recrc(data)
    with pytest.raises(CorruptRecordError, match="record 0"):
        _native.first_record_at_or_after(data, 0, 0)
