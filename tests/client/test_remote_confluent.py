"""engine.connect next to confluent-kafka (librdkafka), against our broker and Apache Kafka 4.0:
what one produces the other reads back identically, and both kinds of consumer share a group."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

import engine

ck = pytest.importorskip("confluent_kafka")

N = 500


def _records():
    return [(None if i % 11 == 0 else b"k%d" % i,
             None if i % 13 == 0 else b"value-%d" % i * (1 + i % 4),
             1_700_000_000_000 + i,
             [("a", b"%d" % i), ("null", None)] if i % 5 == 0 else [])
            for i in range(N)]


def _arrow_rows(table):
    ts = table.column("timestamp").cast(pa.int64()).to_pylist()
    return [(k, v, t // 1000, [(h["key"], h["value"]) for h in hs])
            for k, v, t, hs in zip(table.column("key").to_pylist(), table.column("value").to_pylist(),
                                   ts, table.column("headers").to_pylist(), strict=True)]


@pytest.mark.parametrize("codec", ["none", "zstd", "lz4"])
def test_confluent_produced_reads_back_identically_through_arrow(cluster, topic_name, codec):
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 1)
        p = ck.Producer({"bootstrap.servers": cluster, "compression.type": codec, "linger.ms": 5})
        for k, v, ts, hs in _records():
            p.produce(topic_name, value=v, key=k, timestamp=ts, headers=hs or None, partition=0)
        assert p.flush(30) == 0
        c = eng.consumer(**{"auto.offset.reset": "earliest"})
        c.assign([(topic_name, 0)])
        got, deadline = [], time.monotonic() + 30
        while sum(b.num_rows for b in got) < N and time.monotonic() < deadline:
            got += c.poll_arrow(timeout_ms=500)
        c.close()
        table = pa.Table.from_batches(got)
        assert table.column("offset").to_pylist() == list(range(N))
        assert _arrow_rows(table) == _records()
        assert _arrow_rows(eng.read_arrow(topic_name, 0)) == _records()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_arrow_produced_reads_back_identically_through_confluent(cluster, topic_name, codec):
    recs = _records()
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 1)
        with eng.producer(**{"compression.type": codec}) as p:
            p.send_batch(topic_name, values=[r[1] for r in recs], keys=[r[0] for r in recs],
                         timestamps=[r[2] for r in recs], headers=[r[3] for r in recs], partitions=0)
    c = ck.Consumer({"bootstrap.servers": cluster, "group.id": f"g-{topic_name}",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic_name, 0, 0)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < N and time.monotonic() < deadline:
        for m in c.consume(500, 0.5):
            assert m.error() is None, m.error()
            got.append((m.key(), m.value(), m.timestamp()[1], list(m.headers() or [])))
    c.close()
    assert got == recs


def test_arrow_and_confluent_consumers_share_a_group(cluster, topic_name):
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 4)
        with eng.producer() as p:
            for part in range(4):
                p.send_batch(topic_name, values=[b"%d-%d" % (part, i) for i in range(40)], partitions=part)
        group = f"g-{topic_name}"
        seen_arrow: list = []
        seen_ck: list = []
        arrow_assignment: list = []
        ck_assignment: list = []
        stop = threading.Event()
        errors: list = []

        def arrow_member():
            try:
                c = eng.consumer(**{"group.id": group, "auto.offset.reset": "earliest",
                                    "partition.assignment.strategy": "range"})
                c.subscribe([topic_name])
                while not stop.is_set():
                    for b in c.poll_arrow(timeout_ms=200):
                        seen_arrow.extend(b.column("value").to_pylist())
                    arrow_assignment[:] = c.assignment()
                c.close()
            except BaseException as e:
                errors.append(e)

        def ck_member():
            try:
                c = ck.Consumer({"bootstrap.servers": cluster, "group.id": group,
                                 "auto.offset.reset": "earliest", "partition.assignment.strategy": "range",
                                 "session.timeout.ms": 10000})
                c.subscribe([topic_name])
                while not stop.is_set():
                    for m in c.consume(100, 0.2):
                        if m.error() is None:
                            seen_ck.append(m.value())
                    ck_assignment[:] = [(tp.topic, tp.partition) for tp in c.assignment()]
                c.close()
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=arrow_member), threading.Thread(target=ck_member)]
        for t in threads:
            t.start()
        want = {b"%d-%d" % (p_, i) for p_ in range(4) for i in range(40)}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not errors and not (
                set(seen_arrow) | set(seen_ck) >= want and arrow_assignment and ck_assignment
                and len(set(arrow_assignment) | set(ck_assignment)) == 4):
            time.sleep(0.2)
        stop.set()
        for t in threads:
            t.join(60)
        assert not errors, errors
        assert arrow_assignment and ck_assignment
        assert not set(map(tuple, arrow_assignment)) & set(ck_assignment)
        assert set(seen_arrow) | set(seen_ck) == want
