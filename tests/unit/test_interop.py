"""Our batches read by third-party parsers, and theirs read by us."""

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

from engine import _native
from engine.arrow import batches_to_table

from .helpers import CODECS

RECORDS = [
    (b"k1", b"hello", [("h", b"x")], 1_700_000_000_000),
    (None, b"no key", [], 1_700_000_000_005),
    (b"null-value", None, [("a", None), ("b", b"")], 1_699_999_999_000),
    (b"", b"", [], 1_700_000_000_001),
    (b"big", b"v" * 100_000, [("bin", bytes(range(256)))], 1_700_000_000_002),
] + [(b"k%d" % i, b"value %d" % i, [], 1_700_000_001_000 + i) for i in range(200)]

KP_CODECS = (0, 1, 3, 4)          # kafka-python here lacks python-snappy
AIO_CODECS = (0, 1, 2, 3, 4)


def ours(codec):
    b = _native.BatchBuilder()
    for key, value, headers, ts in RECORDS:
        b.append(value, key=key, headers=headers, timestamp=ts)
    return bytes(b.build(codec=codec, base_offset=500))  # aiokafka's reader takes bytes only


def expected():
    return [(500 + i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(RECORDS)]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_ours(codec):
    data = ours(codec)
    if codec == 2:
        from kafka.codec import has_snappy

        if not has_snappy():
            pytest.skip("kafka-python needs python-snappy to read snappy")
    batch = KpBatch(data)
    assert batch.validate_crc()
    assert batch.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == expected()
    mr = KpMemoryRecords(data + ours(codec))
    n = 0
    while mr.has_next():
        n += sum(1 for _ in mr.next_batch())
    assert n == 2 * len(RECORDS)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_reads_ours(codec):
    data = ours(codec)
    batch = AioBatch(data)
    assert batch.validate_crc()
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == expected()
    mr = AioMemoryRecords(data + data)
    batches = 0
    while mr.has_next():
        assert len(list(mr.next_batch())) == len(RECORDS)
        batches += 1
    assert batches == 2


def _theirs(builder_cls, codec):
    b = builder_cls(2, codec, 0, 1002, 3, 40, 10 << 20)
    for i, (key, value, headers, ts) in enumerate(RECORDS):
        b.append(i, ts, key, value, headers)
    return bytes(b.build())


def _check_theirs(data, codec):
    h = _native.verify_batch(data)
    assert h.codec == codec and h.producer_id == 1002 and h.base_sequence == 40
    want = [(i, ts, k, v, h) for i, (k, v, h, ts) in enumerate(RECORDS)]
    assert _native.decode_batch(data) == want
    t = batches_to_table(data, "t", 0)
    t.validate(full=True)
    rows = [(r["offset"], r["key"], r["value"], [(x["key"], x["value"]) for x in r["headers"]])
            for r in t.to_pylist()]
    assert rows == [(o, k, v, hs) for o, _, k, v, hs in want]
    buf = bytearray(data)
    assert _native.assign_offsets(buf, 9000)[:2] == (9000, 9000 + len(RECORDS) - 1)
    assert [r[0] for r in _native.decode_batch(buf)] == list(range(9000, 9000 + len(RECORDS)))


@pytest.mark.parametrize("codec", KP_CODECS)
def test_we_read_kafka_python(codec):
    _check_theirs(_theirs(KpBuilder, codec), codec)


@pytest.mark.parametrize("codec", AIO_CODECS)
def test_we_read_aiokafka(codec):
    _check_theirs(_theirs(AioBuilder, codec), codec)


def test_aiokafka_snappy_is_xerial_and_lz4_has_block_checksums():
    snappy = _theirs(AioBuilder, 2)
    assert snappy[61:69] == b"\x82SNAPPY\x00"
    lz4 = _theirs(AioBuilder, 3)
    assert lz4[61 + 4] & 0x10                        # FLG block checksum bit
