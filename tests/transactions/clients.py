"""One face for the three Python clients' transactional producers and consumers.

``producer(name, bootstrap, transactional_id, **extra)`` gives a synchronous object with
``init()``, ``begin()``, ``send(topic, value, partition)``, ``flush()``, ``commit()``,
``abort()``, ``send_offsets({(topic, p): offset}, consumer)``, ``close()`` whatever the client
(aiokafka runs on a private event loop); ``is_fenced(exc)`` says whether an exception is that
client's "another producer with this transactional.id took over" error.

``read_all(name, bootstrap, topic, partitions, isolation)`` reads partitions from the start
to the end offset the broker gives for that isolation level (the last stable offset for
read_committed) and returns ``{partition: [(offset, value), ...]}`` and the end positions.

`bootstrap` may be a tests/secure_clients.py ``Bootstrap``: every client built here then gets its
security settings (SASL_SSL), so the suite's tests run unchanged over either listener.
"""

from __future__ import annotations

import asyncio
import time

from tests.secure_clients import aiokafka, confluent, kafka_python

CLIENTS = ("confluent", "aiokafka", "kafka-python")
T = 30  # seconds: any single client call


# ---------------------------------------------------------------- producers
class _Confluent:
    def __init__(self, bootstrap, txid, **extra):
        from confluent_kafka import Producer
        self.p = Producer({**confluent(bootstrap), "transactional.id": txid,
                           "linger.ms": 5, **extra})

    def init(self):
        self.p.init_transactions(T)

    def begin(self):
        self.p.begin_transaction()

    def send(self, topic, value, partition, key=None):
        self.p.produce(topic, value, key=key, partition=partition)
        self.p.poll(0)

    def flush(self):
        left = self.p.flush(T)
        assert left == 0, f"{left} records not delivered in {T}s"

    def commit(self):
        self.p.commit_transaction(T)

    def abort(self):
        # librdkafka purges what it has not sent yet: flush so aborted records reach the log.
        self.flush()
        self.p.abort_transaction(T)

    def send_offsets(self, offsets, consumer):
        from confluent_kafka import TopicPartition
        self.p.send_offsets_to_transaction(
            [TopicPartition(t, p, o) for (t, p), o in offsets.items()],
            consumer.group_metadata(), T)

    def close(self):
        self.p.flush(5)

    @staticmethod
    def is_fenced(exc):
        from confluent_kafka import KafkaError, KafkaException
        if not isinstance(exc, KafkaException):
            return False
        err = exc.args[0]
        return err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                              KafkaError.INVALID_PRODUCER_EPOCH)


class _KafkaPython:
    def __init__(self, bootstrap, txid, **extra):
        from kafka import KafkaProducer
        self.p = KafkaProducer(**kafka_python(bootstrap), transactional_id=txid, linger_ms=5,
                               request_timeout_ms=T * 1000, **extra)
        self.futures = []

    def init(self):
        self.p.init_transactions()

    def begin(self):
        self.p.begin_transaction()

    def send(self, topic, value, partition, key=None):
        self.futures.append(self.p.send(topic, value, key=key, partition=partition))

    def flush(self):
        self.p.flush(T)
        futs, self.futures = self.futures, []
        for f in futs:
            f.get(T)

    def commit(self):
        self.p.commit_transaction()

    def abort(self):
        self.flush()
        self.p.abort_transaction()

    def send_offsets(self, offsets, consumer):
        from kafka import OffsetAndMetadata, TopicPartition
        self.p.send_offsets_to_transaction(
            {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()},
            consumer.group_id)          # a bare group id: the consumer here is confluent-kafka's

    def close(self):
        self.p.close(5)

    @staticmethod
    def is_fenced(exc):
        from kafka.errors import InvalidProducerEpochError, ProducerFencedError
        return isinstance(exc, (ProducerFencedError, InvalidProducerEpochError))


class _AioKafka:
    def __init__(self, bootstrap, txid, **extra):
        self.loop = asyncio.new_event_loop()
        self.bootstrap, self.txid, self.extra = bootstrap, txid, extra
        self.p = None
        self.futures = []

    def _run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, T))

    def init(self):
        from aiokafka import AIOKafkaProducer

        async def make():
            p = AIOKafkaProducer(**aiokafka(self.bootstrap), transactional_id=self.txid,
                                 linger_ms=5, **self.extra)
            await p.start()          # InitProducerId happens here
            return p
        self.p = self._run(make())

    def begin(self):
        self._run(self.p.begin_transaction())

    def send(self, topic, value, partition, key=None):
        self.futures.append(self._run(self.p.send(topic, value, key=key, partition=partition)))

    def flush(self):
        self._run(self.p.flush())
        futs, self.futures = self.futures, []
        for f in futs:
            self._run(f)

    def commit(self):
        self.flush()
        self._run(self.p.commit_transaction())

    def abort(self):
        self.flush()
        self._run(self.p.abort_transaction())

    def send_offsets(self, offsets, consumer):
        from aiokafka import TopicPartition
        self._run(self.p.send_offsets_to_transaction(
            {TopicPartition(t, p): o for (t, p), o in offsets.items()}, consumer.group_id))

    def close(self):
        if self.p is not None:
            try:
                self._run(self.p.stop())
            except Exception:
                pass
        self.loop.close()

    @staticmethod
    def is_fenced(exc):
        from aiokafka.errors import InvalidProducerEpoch, ProducerFenced
        return isinstance(exc, (ProducerFenced, InvalidProducerEpoch))


_PRODUCERS = {"confluent": _Confluent, "kafka-python": _KafkaPython, "aiokafka": _AioKafka}


def producer(name, bootstrap, txid, **extra):
    return _PRODUCERS[name](bootstrap, txid, **extra)


# ---------------------------------------------------------------- group consumers (for send_offsets)
class GroupConsumer:
    """A confluent-kafka consumer in group `group_id` with manual assignment: what
    ``send_offsets`` needs (its group metadata / id) and the committed offsets."""

    def __init__(self, bootstrap, group_id):
        from confluent_kafka import Consumer
        self.group_id = group_id
        self.c = Consumer({**confluent(bootstrap), "group.id": group_id,
                           "enable.auto.commit": False, "isolation.level": "read_committed",
                           "auto.offset.reset": "earliest"})

    def group_metadata(self):
        return self.c.consumer_group_metadata()

    def committed(self, topic, partitions):
        from confluent_kafka import TopicPartition
        got = self.c.committed([TopicPartition(topic, p) for p in partitions], timeout=T)
        return {tp.partition: tp.offset for tp in got}

    def close(self):
        self.c.close()


# ---------------------------------------------------------------- reading
def read_all(name, bootstrap, topic, partitions, isolation, timeout=30.0):
    """({p: [(offset, value)]}, {p: position after reading}) up to the isolation level's end."""
    return {"confluent": _read_confluent, "kafka-python": _read_kafka_python,
            "aiokafka": _read_aiokafka}[name](bootstrap, topic, list(partitions), isolation, timeout)


def _read_confluent(bootstrap, topic, partitions, isolation, timeout):
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({**confluent(bootstrap), "group.id": "unused-reader",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        out = {p: [] for p in partitions}
        eof = set()
        deadline = time.monotonic() + timeout
        while len(eof) < len(partitions):
            assert time.monotonic() < deadline, f"confluent {isolation}: no end of {topic} in {timeout}s"
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out[m.partition()].append((m.offset(), m.value()))
        pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in partitions])}
        return out, pos
    finally:
        c.close()


def _read_kafka_python(bootstrap, topic, partitions, isolation, timeout):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(**kafka_python(bootstrap), isolation_level=isolation,
                      enable_auto_commit=False, fetch_max_wait_ms=50, auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        c.seek_to_beginning()
        ends = c.end_offsets(tps)           # ListOffsets with the consumer's isolation level
        out = {p: [] for p in partitions}
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, \
                f"kafka-python {isolation}: stuck at {[c.position(tp) for tp in tps]} of {ends}"
            for tp, recs in c.poll(timeout_ms=200).items():
                out[tp.partition] += [(r.offset, r.value) for r in recs]
        return out, {tp.partition: c.position(tp) for tp in tps}
    finally:
        c.close()


def _read_aiokafka(bootstrap, topic, partitions, isolation, timeout):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def go():
        c = AIOKafkaConsumer(**aiokafka(bootstrap), isolation_level=isolation,
                             enable_auto_commit=False, fetch_max_wait_ms=50,
                             auto_offset_reset="earliest")
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            ends = await c.end_offsets(tps)
            out = {p: [] for p in partitions}
            deadline = time.monotonic() + timeout
            while True:
                pos = {tp: await c.position(tp) for tp in tps}
                if all(pos[tp] >= ends[tp] for tp in tps):
                    return out, {tp.partition: pos[tp] for tp in tps}
                assert time.monotonic() < deadline, f"aiokafka {isolation}: stuck at {pos} of {ends}"
                for tp, recs in (await c.getmany(timeout_ms=200)).items():
                    out[tp.partition] += [(r.offset, r.value) for r in recs]
        finally:
            await c.stop()
    return asyncio.run(asyncio.wait_for(go(), timeout + 15))


def end_offsets(bootstrap, topic, partitions, isolation):
    """ListOffsets(latest) with the isolation level: the high watermark or the LSO."""
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(**kafka_python(bootstrap), isolation_level=isolation)
    try:
        got = c.end_offsets([TopicPartition(topic, p) for p in partitions])
        return {tp.partition: o for tp, o in got.items()}
    finally:
        c.close()


def create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({**confluent(bootstrap)})
    for f in a.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=T).values():
        f.result(T)
    # wait until the broker knows it (Kafka's metadata propagates asynchronously)
    deadline = time.monotonic() + T
    while time.monotonic() < deadline:
        md = a.list_topics(topic, timeout=T)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {topic} not visible in {T}s")
