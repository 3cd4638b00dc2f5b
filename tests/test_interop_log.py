"""Our segment files are Kafka's: third-party readers parse our .log bytes, and
batches built by other clients append as-is (no re-encoding)."""

import os

import pytest
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from kafka.record import MemoryRecords as KpMemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder

import engine

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def produce(eng, codec, n=300):
    eng.create_topic("t", 1)
    sent = []
    with eng.producer(compression_type=codec, batch_size=4096, linger_ms=60_000) as p:
        for i in range(n):
            key = None if i % 7 == 0 else b"key-%d" % i
            value = None if i % 11 == 0 else os.urandom(20).hex().encode() * (i % 3 + 1)
            headers = [(f"h{i % 2}", b"x" * (i % 4))] if i % 5 else []
            ts = 1_700_000_000_000 + i
            p.send("t", value, key=key, headers=headers, timestamp=ts, partition=0)
            sent.append((i, ts, key, value, headers))
    return sent


def segment_bytes(eng):
    log_dir = os.path.join(eng.path, "t-0")
    logs = sorted(f for f in os.listdir(log_dir) if f.endswith(".log"))
    return b"".join(open(os.path.join(log_dir, f), "rb").read() for f in logs)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_segment(eng, codec):
    sent = produce(eng, codec)
    records = KpMemoryRecords(segment_bytes(eng))
    got = []
    batches = 0
    while records.has_next():
        batch = records.next_batch()
        batches += 1
        assert batch.validate_crc()
        assert batch.compression_type == CODEC_ID[codec]
        for r in batch:
            got.append((r.offset, r.timestamp, r.key, r.value,
                        [(k, v) for k, v in r.headers]))
    assert batches > 1
    assert got == [(o, ts, k, v, list(h)) for o, ts, k, v, h in sent]


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_reads_our_segment(eng, codec):
    sent = produce(eng, codec)
    records = AioMemoryRecords(segment_bytes(eng))
    got = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for r in batch:
            got.append((r.offset, r.timestamp, r.key, r.value, [(k, v) for k, v in r.headers]))
    assert got == [(o, ts, k, v, list(h)) for o, ts, k, v, h in sent]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_append_as_is(eng, codec):
    eng.create_topic("t", 1)
    log = eng.log("t", 0)
    expected = []
    for b in range(3):
        kb = KpBuilder(magic=2, compression_type=CODEC_ID[codec], is_transactional=0,
                       producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        for i in range(50):
            kb.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"value %d-%d" % (b, i),
                      headers=[("src", b"kafka-python")])
            expected.append((b"k%d" % i, b"value %d-%d" % (b, i)))
        raw = bytes(kb.build())
        info = log.append(bytearray(raw))
        assert (info.first_offset, info.last_offset) == (b * 50, b * 50 + 49)
        # stored byte for byte, but for the broker-owned fields (baseOffset, leader epoch)
        stored = log.read(info.first_offset, 1 << 20).slices[0].read()
        h = engine._native.read_header(stored, 0)
        assert stored[h.position + 16:h.position + h.size] == raw[16:]  # magic..end incl. CRC
    c = eng.consumer(auto_offset_reset="earliest")
    c.assign([("t", 0)])
    got = []
    while len(got) < 150:
        batch = c.poll(timeout_ms=100)
        assert batch
        got.extend(batch)
    assert [(r.key, r.value) for r in got] == expected
    assert [r.offset for r in got] == list(range(150))
    assert got[0].headers == [("src", b"kafka-python")]
