import os
import random
import time

import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as kp_murmur2

from engine import _native

from .helpers import CODECS


def test_header_fields():
    b = _native.BatchBuilder()
    for i in range(5):
        b.append(b"v%d" % i, timestamp=100 + i)
    assert len(b) == 5
    data = b.build(codec=3, base_offset=42, producer_id=9, producer_epoch=2, base_sequence=17,
                   is_transactional=True, partition_leader_epoch=4)
    h = _native.verify_batch(data)
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (42, 4, 5)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9, 2, 17)
    assert (h.partition_leader_epoch, h.codec, h.is_transactional, h.is_control) == (4, 3, True, False)
    assert (h.base_timestamp, h.max_timestamp) == (100, 104)
    assert h.size == len(data)


def test_size_in_bytes_and_reset():
    b = _native.BatchBuilder()
    assert b.size_in_bytes == 61
    b.append(b"x" * 100, timestamp=0)
    assert b.size_in_bytes == len(b.build())
    b.reset()
    assert len(b) == 0
    with pytest.raises(ValueError):
        b.build()
    b.append(b"y", timestamp=1)
    assert _native.decode_batch(b.build()) == [(0, 1, None, b"y", [])]


def test_timestamp_none_is_now():
    before = int(time.time() * 1000)
    b = _native.BatchBuilder()
    b.append(b"x")
    after = int(time.time() * 1000)
    (rec,) = _native.decode_batch(b.build())
    assert before <= rec[1] <= after


def test_input_types():
    b = _native.BatchBuilder()
    b.append(bytearray(b"ba"), key=memoryview(b"mv"), headers=[(b"bk", bytearray(b"bv"))], timestamp=1)
    b.append("str-é", key="k", headers=(h for h in [("h", b"1")]), timestamp=2)
    assert _native.decode_batch(b.build()) == [
        (0, 1, b"mv", b"ba", [("bk", b"bv")]),
        (1, 2, b"k", "str-é".encode(), [("h", b"1")]),
    ]
    with pytest.raises(TypeError):
        b.append(123)
    with pytest.raises(TypeError):
        b.append(b"x", headers=[(None, b"x")])


def test_accumulator_drain_and_offsets():
    acc = _native.RecordAccumulator(3, codec=0, batch_size=1 << 20)
    assert [acc.append(1, b"v%d" % i, None, None, 10 + i) for i in range(4)] == [0, 1, 2, 3]
    assert acc.append(0, b"other", b"k", [("h", None)], 5) == 0
    assert acc.records(1) == 4 and acc.nonempty() == [0, 1]
    assert acc.ready() == []
    data, n = acc.drain(1)
    assert n == 4 and acc.records(1) == 0
    assert acc.drain(2) == (b"", 0)
    buf = bytearray(data)
    first, last, *_ = _native.assign_offsets(buf, 50)
    assert (first, last) == (50, 53)
    assert [(r[0], r[3]) for r in _native.decode_batch(buf)] == [(50 + i, b"v%d" % i) for i in range(4)]
    data, n = acc.drain(0)
    assert _native.decode_batch(data) == [(0, 5, b"k", b"other", [("h", None)])]
    with pytest.raises(IndexError):
        acc.append(3, b"x")


@pytest.mark.parametrize("codec", CODECS)
def test_accumulator_closes_full_batches(codec):
    acc = _native.RecordAccumulator(1, codec=codec, batch_size=4096)
    vals = [os.urandom(100) for _ in range(200)]
    for i, v in enumerate(vals):
        assert acc.append(0, v, None, None, 1000) == i
    assert acc.ready() == [0]
    data, n = acc.drain(0)
    assert n == 200
    headers, end = _native.list_batches(data, check_crc=True)
    assert end == len(data) and len(headers) > 1
    assert all(h.codec == codec for h in headers)
    assert all(h.base_offset == 0 for h in headers)
    # uncompressed batches stay within batch_size
    if codec == 0:
        assert max(h.size for h in headers) <= 4096
    buf = bytearray(data)
    assert _native.assign_offsets(buf, 0)[:2] == (0, 199)
    recs, _ = _native.decode_batches(buf)
    assert [r[3] for r in recs] == vals and [r[0] for r in recs] == list(range(200))


def test_accumulator_oversized_record_gets_own_batch():
    acc = _native.RecordAccumulator(1, batch_size=1000)
    acc.append(0, b"a", None, None, 1)
    acc.append(0, b"b" * 5000, None, None, 1)
    acc.append(0, b"c", None, None, 1)
    data, n = acc.drain(0)
    headers, _ = _native.list_batches(data)
    assert n == 3 and [h.records_count for h in headers] == [1, 1, 1]


def _arrow_cases():
    vals = [os.urandom(random.randint(0, 50)) for _ in range(300)]
    vals[5] = None
    vals[77] = None
    keys = [None if i % 7 == 0 else b"k%d" % i for i in range(300)]
    return vals, keys


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary()])
def test_build_batches_arrow_matches_lists(typ):
    random.seed(3)
    vals, keys = _arrow_cases()
    ts = [1_000 + i for i in range(300)]
    from_lists = _native.build_batches(vals, keys, ts, codec=0, max_batch_bytes=2000)
    from_arrow = _native.build_batches(pa.array(vals, typ), pa.array(keys, typ),
                                       pa.array(ts, pa.int64()), codec=0, max_batch_bytes=2000)
    assert from_lists == from_arrow
    assert len(from_lists) > 1
    assert all(len(b) <= 2000 for b in from_lists)
    recs = [r for b in from_lists for r in _native.decode_batch(b)]
    assert [(r[2], r[3], r[1]) for r in recs] == list(zip(keys, vals, ts, strict=True))


def test_build_batches_sliced_chunked_string_and_timestamp_units():
    vals = pa.chunked_array([pa.array(["a", None, "ccc"]), pa.array(["dd", "é"])])
    keys = pa.array(["x", "k0", "k1", "k2", "k3", None], pa.large_string()).slice(1)
    ts = pa.array([1, 2, 3, 4, None], pa.timestamp("s"))
    before = int(time.time() * 1000)
    (data,) = _native.build_batches(vals, keys, ts, codec=4)
    recs = _native.decode_batch(data)
    assert [r[3] for r in recs] == [b"a", None, b"ccc", b"dd", "é".encode()]
    assert [r[2] for r in recs] == [b"k0", b"k1", b"k2", b"k3", None]
    assert [r[1] for r in recs[:4]] == [1000, 2000, 3000, 4000]
    assert recs[4][1] >= before
    ts_us = pa.array([1_500_999, 2_000_000], pa.timestamp("us", tz="UTC"))
    (data,) = _native.build_batches([b"a", b"b"], timestamps=ts_us)
    assert [r[1] for r in _native.decode_batch(data)] == [1500, 2000]


def test_build_batches_headers_and_errors():
    hs = [[("a", b"1")], None, [("b", None), ("c", b"")]]
    (data,) = _native.build_batches([b"x", b"y", b"z"], headers=hs, timestamps=[1, 2, 3])
    assert [r[4] for r in _native.decode_batch(data)] == [[("a", b"1")], [], [("b", None), ("c", b"")]]
    with pytest.raises(ValueError):
        _native.build_batches([b"x"], keys=[b"a", b"b"])
    with pytest.raises(TypeError):
        _native.build_batches(pa.array([1, 2]))
    assert _native.build_batches([]) == []


def test_murmur2_matches_kafka_python():
    rnd = random.Random(11)
    keys = [b"", b"a", b"ab", b"abc", b"abcd", b"21", b"foobar"] + [
        bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 64))) for _ in range(3000)
    ]
    for k in keys:
        h = _native.murmur2(k)
        assert -(2**31) <= h < 2**31
        assert h & 0xFFFFFFFF == kp_murmur2(k)
        for n in (1, 3, 12, 1000):
            assert _native.default_partition(k, n) == (kp_murmur2(k) & 0x7FFFFFFF) % n
    # Java values (Utils.murmur2 on UTF-8 strings), as used by Kafka's partitioner tests
    assert _native.murmur2(b"21") == -973932308
    assert _native.murmur2(b"foobar") == -790332482
    with pytest.raises(ValueError):
        _native.default_partition(b"k", 0)


def test_accumulator_drain_stamps_sequences():
    acc = _native.RecordAccumulator(1, codec=3, batch_size=2000, producer_id=5, producer_epoch=1)
    for i in range(100):
        acc.append(0, b"%050d" % i, None, None, 1)
    data, n = acc.drain(0, base_sequence=2**31 - 30, producer_epoch=4)
    headers, end = _native.list_batches(data, check_crc=True)
    assert end == len(data) and len(headers) > 2
    seq = 2**31 - 30
    for h in headers:
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (5, 4, seq)
        seq = (seq + h.records_count) % 2**31
    assert sum(h.records_count for h in headers) == n == 100
    assert [r[3] for r in _native.decode_batches(data)[0]] == [b"%050d" % i for i in range(100)]
    acc.append(0, b"x", None, None, 1)
    data, _ = acc.drain(0)
    assert _native.verify_batch(data).base_sequence == -1


def test_generator_headers_survive_a_batch_split():
    acc = _native.RecordAccumulator(1, batch_size=200)
    acc.append(0, b"x" * 120, None, None, 1)
    acc.append(0, b"y" * 120, None, (h for h in [("g", b"1")]), 2)     # closes the first batch
    data, n = acc.drain(0)
    assert [r[4] for r in _native.decode_batches(data)[0]] == [[], [("g", b"1")]]
    out = _native.build_batches([b"x" * 120, b"y" * 120], headers=[None, iter([("g", b"1")])],
                                max_batch_bytes=200)
    assert len(out) == 2 and _native.decode_batch(out[1])[0][4] == [("g", b"1")]


@pytest.mark.parametrize("codec", [0, 3])
def test_build_batches_stamps_producer_and_builds_incrementally(codec):
    # the remote producer's path: producer id, epoch and running base sequences written by the
    # builder (CRC over the final header), and batches built a few at a time from `start`
    vals = pa.array([b"r%05d" % i + b"x" * 150 for i in range(3000)], pa.binary())
    ts = pa.array(range(1000, 4000), pa.int64())
    whole = _native.build_batches(vals, None, ts, None, codec, 8192, -1, 77, 3, 0x7FFFFFF0)
    assert len(whole) > 4
    seq, first = 0x7FFFFFF0, 0
    for b in whole:
        h = _native.verify_batch(b)                      # CRC checked
        assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 3, seq)
        assert h.base_timestamp == 1000 + first
        seq = (seq + h.records_count) & 0x7FFFFFFF         # wraps as Kafka's sequences do
        first += h.records_count
    assert first == 3000
    plain = _native.build_batches(vals, None, ts, None, codec, 8192)
    assert [_native.verify_batch(b).records_count for b in plain] == \
        [_native.verify_batch(b).records_count for b in whole]
    assert all(_native.verify_batch(b).producer_id == -1 for b in plain)
    pieces, start, seq = [], 0, 0x7FFFFFF0
    while start < 3000:
        got = _native.build_batches(vals, None, ts, None, codec, 8192, -1, 77, 3, seq, start, 2)
        assert 1 <= len(got) <= 2
        for b in got:
            n = _native.verify_batch(b).records_count
            start += n
            seq = (seq + n) & 0x7FFFFFFF
        pieces += got
    assert [bytes(b) for b in pieces] == [bytes(b) for b in whole]
    with pytest.raises(ValueError):
        _native.build_batches(vals, None, ts, None, codec, 8192, -1, 77, 3, 0, 3001)
