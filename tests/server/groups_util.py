"""Helpers for the consumer-group tests: one group member per client library, each polling in
its own thread, committing synchronously after every batch it processed, and recording every
(partition, offset) it consumed. A tests/secure_clients.py ``Bootstrap`` gives every client here its
security settings (the SASL_SSL rows)."""

from __future__ import annotations

import asyncio
import threading
import time

from tests.secure_clients import aiokafka, confluent, kafka_python

# Broker settings that keep group tests fast (Kafka's names; defaults are 3 s / 6 s).
GROUP_BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": 300,
    "group.min.session.timeout.ms": 500,
    "offsets.topic.num.partitions": 4,
}
SESSION_MS = 2000
HEARTBEAT_MS = 300


def wait_until(pred, timeout: float = 20.0, what: str = "condition", interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: bytes = b"") -> None:
    from confluent_kafka import Producer
    p = Producer(confluent(bootstrap, **{"linger.ms": 1}))
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, tag + b"%d-%d" % (part, i), partition=part)
    assert p.flush(20) == 0


class Member(threading.Thread):
    """A consumer-group member of one client library, polling in a thread."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str, **conf):
        super().__init__(daemon=True, name=f"member-{client}")
        self.client = client
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.conf = conf
        self.consumed: list[tuple[int, int]] = []
        self.assignment: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self._stop_evt = threading.Event()
        self.closed = threading.Event()

    def stop(self, timeout: float = 20.0) -> None:
        self._stop_evt.set()
        self.join(timeout)
        assert not self.is_alive(), f"{self.client} member did not close"

    def run(self) -> None:
        try:
            getattr(self, "_run_" + self.client.replace("-", "_"))()
        except BaseException as e:          # surfaced by the test through .error
            self.error = e
        finally:
            self.closed.set()

    # -- confluent-kafka (librdkafka) ----------------------------------------------------
    def _run_confluent(self) -> None:
        from confluent_kafka import Consumer, KafkaException
        c = Consumer({**confluent(self.bootstrap), "group.id": self.group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": HEARTBEAT_MS,
                      **self.conf})
        c.subscribe([self.topic])
        try:
            while not self._stop_evt.is_set():
                msgs = [m for m in c.consume(100, timeout=0.1) if m.error() is None]
                for m in msgs:
                    self.consumed.append((m.partition(), m.offset()))
                if msgs:
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException:
                        pass                    # a rebalance: the next owner re-reads, as in Kafka
                self.assignment = frozenset(tp.partition for tp in c.assignment())
        finally:
            c.close()

    # -- kafka-python ----------------------------------------------------------------------
    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka.errors import CommitFailedError, KafkaError
        c = KafkaConsumer(self.topic, **kafka_python(self.bootstrap), group_id=self.group,
                          enable_auto_commit=False, auto_offset_reset="earliest",
                          session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                          **self.conf)
        # metadata before the first poll: kafka-python 3.0.12 can lose the rejoin that a
        # metadata change starts (see tests/conformance/test_kafka_python.py)
        c.topics()
        try:
            while not self._stop_evt.is_set():
                batches = c.poll(timeout_ms=100)
                n = 0
                for _tp, msgs in batches.items():
                    for m in msgs:
                        self.consumed.append((m.partition, m.offset))
                        n += 1
                if n:
                    try:
                        c.commit()
                    except (CommitFailedError, KafkaError):
                        pass
                self.assignment = frozenset(tp.partition for tp in c.assignment())
        finally:
            c.close()

    # -- aiokafka ----------------------------------------------------------------------------
    def _run_aiokafka(self) -> None:
        asyncio.run(self._aiokafka_main())

    async def _aiokafka_main(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import CommitFailedError, KafkaError
        c = AIOKafkaConsumer(self.topic, **aiokafka(self.bootstrap), group_id=self.group,
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS,
                             **self.conf)
        await c.start()
        try:
            while not self._stop_evt.is_set():
                batches = await c.getmany(timeout_ms=100)
                n = 0
                for _tp, msgs in batches.items():
                    for m in msgs:
                        self.consumed.append((m.partition, m.offset))
                        n += 1
                if n:
                    try:
                        await c.commit()
                    except (CommitFailedError, KafkaError):
                        pass
                self.assignment = frozenset(tp.partition for tp in c.assignment())
        finally:
            await c.stop()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets through confluent-kafka's AdminClient (OffsetFetch)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    admin = AdminClient(confluent(bootstrap))
    fut = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])])[group]
    res = fut.result(10)
    return {tp.partition: tp.offset for tp in res.topic_partitions}
