"""Every codec written by one client library and read by another, through the broker:
kafka-python -> confluent-kafka, confluent-kafka -> aiokafka, aiokafka -> kafka-python."""

from __future__ import annotations

import asyncio
import time

import pytest

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 300


def expected(tag):
    return [(b"k%d" % i, b"%s-%d" % (tag.encode(), i), [("h", b"%d" % i)]) for i in range(N)]


def produce_kafka_python(bootstrap, topic, codec):
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec)
    for k, v, h in expected(topic):
        p.send(topic, v, key=k, headers=h, partition=0)
    p.flush()
    p.close()


def produce_confluent(bootstrap, topic, codec):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
    for k, v, h in expected(topic):
        p.produce(topic, v, key=k, headers=h, partition=0)
    assert p.flush(20) == 0


def produce_aiokafka(bootstrap, topic, codec):
    from aiokafka import AIOKafkaProducer

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec)
        await p.start()
        try:
            for k, v, h in expected(topic):
                await p.send(topic, v, key=k, headers=h, partition=0)
            await p.flush()
        finally:
            await p.stop()
    asyncio.run(run())


def consume_confluent(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "x", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 20
    while len(got) < N and time.monotonic() < deadline:
        for m in c.consume(500, timeout=0.5):
            if m.error() is None:
                got.append((m.key(), m.value(), [(k, v) for k, v in (m.headers() or [])]))
    c.close()
    return got


def consume_aiokafka(bootstrap, topic):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
            got, deadline = [], time.monotonic() + 20
            while len(got) < N and time.monotonic() < deadline:
                for msgs in (await c.getmany(timeout_ms=500)).values():
                    got.extend((m.key, m.value, list(m.headers)) for m in msgs)
            return got
        finally:
            await c.stop()
    return asyncio.run(run())


def consume_kafka_python(bootstrap, topic):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = [(r.key, r.value, list(r.headers)) for r in c]
    c.close()
    return got


PAIRS = [("kafka_python", produce_kafka_python, "confluent", consume_confluent),
         ("confluent", produce_confluent, "aiokafka", consume_aiokafka),
         ("aiokafka", produce_aiokafka, "kafka_python", consume_kafka_python)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("writer,produce,reader,consume", PAIRS, ids=[f"{w}-to-{r}" for w, _, r, _ in PAIRS])
def test_codec_across_clients(broker, codec, writer, produce, reader, consume):
    topic = f"x-{writer}-{codec}"
    broker.call(lambda: broker.engine.create_topic(topic, 1))
    produce(broker.bootstrap, topic, codec)
    got = consume(broker.bootstrap, topic)
    assert got == [(k, v, h) for k, v, h in expected(topic)]
