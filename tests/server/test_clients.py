"""Unmodified clients against the broker: kafka-python, aiokafka (and librdkafka when installed)."""

from __future__ import annotations

import asyncio
import time

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError  # noqa: E402

# InitProducerId (idempotence) is not served yet: kafka-python's default would refuse.
PAD = b"x" * 200  # compressible: librdkafka sends a batch raw when compression does not pay
PRODUCER = dict(enable_idempotence=False, linger_ms=5, request_timeout_ms=10000)


def _records(n: int, base_ts: int):
    out = []
    for i in range(n):
        key = None if i % 5 == 0 and i % 7 != 3 else b"key-%d" % i
        value = None if i % 7 == 3 else b"value-%d-" % i + b"x" * (i % 50)
        headers = [("h", b"%d" % i), ("empty", b"")] if i % 2 else []
        out.append((key, value, headers, base_ts + i))
    return out


def _consume(bootstrap: str, topic: str, n: int, partition: int = 0, timeout: float = 15.0):
    c = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                got.extend(recs)
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_round_trip(broker, codec):
    if codec == "snappy":
        pytest.importorskip("snappy")
    topic = f"rt-{codec or 'none'}"
    base_ts = 1_700_000_000_000
    sent = _records(60, base_ts)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, **PRODUCER)
    futures = [p.send(topic, key=k, value=v, headers=h, timestamp_ms=ts, partition=0)
               for k, v, h, ts in sent]
    p.flush()
    offsets = [f.get(10).offset for f in futures]
    p.close()
    assert offsets == list(range(60))
    got = _consume(broker.bootstrap, topic, 60)
    assert [r.offset for r in got] == list(range(60))
    assert [(r.key, r.value, list(r.headers), r.timestamp) for r in got] == \
        [(k, v, h, ts) for k, v, h, ts in sent]
    # what the broker stored is Kafka's format: the embedded reader agrees
    assert broker.call(lambda: broker.engine.log(topic, 0).log_end_offset) == 60


def test_kafka_python_offsets(broker):
    topic = "offsets"
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, **PRODUCER)
    for i in range(10):
        p.send(topic, value=b"v%d" % i, timestamp_ms=1_000_000 + 1000 * i, partition=0)
    p.flush()
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
        found = c.offsets_for_times({tp: 1_004_500})
        assert found[tp].offset == 5 and found[tp].timestamp == 1_005_000
        assert c.offsets_for_times({tp: 9_999_999})[tp] is None
        broker.call(lambda: broker.engine.log(topic, 0).delete_records_before(3))
        assert c.beginning_offsets([tp]) == {tp: 3}
    finally:
        c.close()


def test_kafka_python_admin(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("adm", num_partitions=3, replication_factor=1,
                                      topic_configs={"retention.ms": "3600000"})])
        assert broker.call(lambda: broker.engine.partitions_for("adm")) == 3
        assert broker.call(lambda: broker.engine.topic_config("adm")["retention.ms"]) == 3600000
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("adm", num_partitions=1, replication_factor=1)])
        assert "adm" in admin.list_topics()
        admin.delete_topics(["adm"])
        assert "adm" not in broker.call(broker.engine.list_topics)
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.delete_topics(["adm"])
    finally:
        admin.close()


def test_produce_to_every_partition_and_long_poll_wakes(broker):
    broker.call(lambda: broker.engine.create_topic("multi", 3))
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                      fetch_max_wait_ms=5000, auto_offset_reset="earliest")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, **PRODUCER)
    try:
        tps = [TopicPartition("multi", i) for i in range(3)]
        c.assign(tps)
        assert c.poll(timeout_ms=300) == {}      # nothing yet; the fetch parks in the broker
        t0 = time.monotonic()
        for i in range(3):
            p.send("multi", value=b"m%d" % i, partition=i)
        p.flush()
        got = {}
        while sum(len(v) for v in got.values()) < 3 and time.monotonic() - t0 < 10:
            for tp, recs in c.poll(timeout_ms=100).items():
                got.setdefault(tp, []).extend(recs)
        elapsed = time.monotonic() - t0
        assert {tp.partition: [r.value for r in v] for tp, v in got.items()} == \
            {0: [b"m0"], 1: [b"m1"], 2: [b"m2"]}
        # a 5 s long poll was woken by the produce, not by its timeout
        assert elapsed < 4.0
    finally:
        p.close()
        c.close()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_round_trip(broker, codec):
    aiokafka = pytest.importorskip("aiokafka")

    async def main():
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec)
        await p.start()
        try:
            metas = [await p.send_and_wait("aio", b"value-%d" % i, key=b"k%d" % i, partition=0,
                                           headers=[("n", b"%d" % i)], timestamp_ms=1_600_000_000_000 + i)
                     for i in range(20)]
        finally:
            await p.stop()
        assert [md.offset for md in metas] == list(range(20))
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                      enable_auto_commit=False, fetch_max_wait_ms=100)
        await c.start()
        try:
            tp = aiokafka.TopicPartition("aio", 0)
            c.assign([tp])
            got = []
            deadline = time.monotonic() + 10
            while len(got) < 20 and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=200)).values():
                    got.extend(recs)
            assert [(m.offset, m.key, m.value, list(m.headers), m.timestamp) for m in got] == \
                [(i, b"k%d" % i, b"value-%d" % i, [("n", b"%d" % i)], 1_600_000_000_000 + i)
                 for i in range(20)]
            assert await c.end_offsets([tp]) == {tp: 20}
            assert (await c.offsets_for_times({tp: 1_600_000_000_010}))[tp].offset == 10
        finally:
            await c.stop()

    asyncio.run(main())


def test_auto_create_disabled(make_broker):
    b = make_broker({"auto.create.topics.enable": False})
    c = KafkaConsumer(bootstrap_servers=b.bootstrap)
    try:
        assert c.topics() == set()
        assert not c.partitions_for_topic("nope")
    finally:
        c.close()
    assert b.call(b.engine.list_topics) == []


def _first_batch_codec(broker, topic: str) -> int:
    def codec():
        data = broker.engine.log(topic, 0).read(0, 1 << 20).read()
        return int.from_bytes(data[21:23], "big") & 0x7
    return broker.call(codec)


@pytest.mark.parametrize("codec,cid", [("lz4", 3), ("zstd", 4)])
def test_kafka_python_batches_stay_compressed(broker, codec, cid):
    """The broker stores the client's deflated batch as is (no re-compression)."""
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, **PRODUCER)
    p.send("cz", value=b"a" * 1000, partition=0)
    p.flush()
    p.close()
    assert _first_batch_codec(broker, "cz") == cid


# librdkafka's LZ4 feature check wants FindCoordinator (10) in ApiVersions (rdkafka_feature.c):
# with the group coordinator served, lz4 batches go out compressed (codec 3).
@pytest.mark.parametrize("codec,cid", [("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)])
def test_confluent_kafka_round_trip(broker, codec, cid):
    ck = pytest.importorskip("confluent_kafka")
    topic = f"ck-{codec}"
    # librdkafka defaults (no idempotence); compression works because Produce v0 is advertised
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5})
    for i in range(30):
        p.produce(topic, value=None if i == 7 else b"value-%d" % i + PAD, key=b"k%d" % i,
                  headers=[("i", b"%d" % i)], partition=0, timestamp=1_650_000_000_000 + i)
    assert p.flush(10) == 0
    assert _first_batch_codec(broker, topic) == cid
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < 30 and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.key(), msg.value(), msg.headers(), msg.timestamp()[1]))
        assert got == [(i, b"k%d" % i, None if i == 7 else b"value-%d" % i + PAD, [("i", b"%d" % i)],
                        1_650_000_000_000 + i) for i in range(30)]
        assert c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=5) == (0, 30)
        # by timestamp inside a compressed batch: the exact record, as Kafka answers
        found = c.offsets_for_times([ck.TopicPartition(topic, 0, 1_650_000_000_000 + 17)], timeout=5)
        assert found[0].offset == 17
    finally:
        c.close()


def test_durable_mode_produce_and_consume(make_broker):
    """flush.messages=1: appends fdatasync in the thread pool; clients see the same results."""
    b = make_broker({"log.flush.interval.messages": 1})
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **PRODUCER)
    offsets = [p.send("dur", value=b"d%d" % i, partition=0).get(10).offset for i in range(5)]
    p.close()
    assert offsets == list(range(5))
    assert [r.value for r in _consume(b.bootstrap, "dur", 5)] == [b"d%d" % i for i in range(5)]
    assert b.call(lambda: b.engine.log("dur", 0).recovery_point) == 5
