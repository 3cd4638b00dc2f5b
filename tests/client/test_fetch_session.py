"""Fetch sessions (KIP-227) in the remote client: against Apache Kafka 4.0 the consumer's
Fetches open a session and go incremental (only changed partitions sent, partitions without
news absent, forgotten partitions dropped, a wrong epoch answered INVALID_FETCH_SESSION_EPOCH
and followed by a full fetch); against our broker, which keeps no sessions (session_id 0),
every Fetch stays a full one and the consumer works the same."""

from __future__ import annotations

import time

import pyarrow as pa

import engine
from engine.client.wire import WireClient
from engine.errors import KafkaApiError


def _produce(bootstrap, topic, parts, n):
    with engine.connect(bootstrap) as eng:
        eng.create_topic(topic, parts)
        with eng.producer() as p:
            for part in range(parts):
                p.send_batch(topic, values=pa.array([b"p%d-%d" % (part, i) for i in range(n)]),
                             partitions=pa.array([part] * n, pa.int32()))


def _consume_all(bootstrap, topic, parts, n):
    with engine.connect(bootstrap) as eng:
        c = eng.consumer(**{"auto.offset.reset": "earliest", "fetch.max.wait.ms": 100})
        c.assign([(topic, p) for p in range(parts)])
        got, deadline = [], time.monotonic() + 30
        while sum(b.num_rows for b in got) < parts * n and time.monotonic() < deadline:
            got += c.poll_arrow(max_records=1000, timeout_ms=300)
        time.sleep(0.5)                    # a few more (empty) fetches in the session
        got += c.poll_arrow(timeout_ms=0)
        sessions = c._fetcher.sessions()
        c.close()
    t = pa.Table.from_batches(got, schema=engine.KAFKA_SCHEMA)
    return t, sessions


def _check_rows(t, parts, n):
    assert t.num_rows == parts * n
    for part in range(parts):
        rows = t.filter(pa.compute.equal(t.column("partition"), part))
        assert rows.column("offset").to_pylist() == list(range(n))
        assert rows.column("value").to_pylist() == [b"p%d-%d" % (part, i) for i in range(n)]


def test_consumer_uses_incremental_fetch_sessions_on_kafka(kafka, topic_name):
    _produce(kafka.bootstrap, topic_name, 3, 200)
    t, sessions = _consume_all(kafka.bootstrap, topic_name, 3, 200)
    _check_rows(t, 3, 200)
    assert len(sessions) == 1
    fs = sessions[0]
    assert fs.active and fs.session_id != 0
    assert fs.incremental_fetches > 0 and fs.epoch > 1
    assert set(fs.partitions) == {(topic_name, p) for p in range(3)}


def test_consumer_stays_sessionless_on_our_broker(ours, topic_name):
    _produce(ours.bootstrap, topic_name, 3, 200)
    t, sessions = _consume_all(ours.bootstrap, topic_name, 3, 200)
    _check_rows(t, 3, 200)
    fs = sessions[0]
    assert not fs.active and fs.session_id == 0 and fs.epoch == 0
    assert fs.incremental_fetches == 0 and fs.full_fetches > 1


def test_session_protocol_against_kafka(kafka, topic_name):
    _produce(kafka.bootstrap, topic_name, 2, 10)
    a, b = (topic_name, 0), (topic_name, 1)
    with WireClient(kafka.bootstrap) as w:
        node = w.leader(*a)
        fs = w.fetch_session(node)
        res = w.fetch_many(node, {a: 0, b: 0}, max_wait_ms=50, session=True)
        assert set(res) == {a, b} and fs.active and fs.epoch == 1 and fs.full_fetches == 1
        sid = fs.session_id
        ea, eb = w.leader_epoch(*a), w.leader_epoch(*b)     # Metadata's, part of what the session holds
        assert ea >= 0 and eb >= 0
        assert fs.build({a: (10, 1048576, ea), b: (0, 1048576, eb)})[2:] == ({a: (10, 1048576, ea)}, [])
        fs._pending = None
        res = w.fetch_many(node, {a: 10, b: 10}, max_wait_ms=50, session=True)
        assert fs.session_id == sid and fs.epoch == 2
        assert all(len(r.records) == 0 for r in res.values())
        res = w.fetch_many(node, {a: 10, b: 10}, max_wait_ms=50, session=True)
        # nothing changed: nothing sent, nothing new, the partitions are absent
        assert res == {} and fs.epoch == 3 and fs.incremental_fetches == 2
        # b moves back: only b is sent, only b has news
        res = w.fetch_many(node, {a: 10, b: 5}, max_wait_ms=50, session=True)
        assert set(res) == {b} and len(res[b].records) > 0 and fs.epoch == 4
        # a forgotten: the session holds b only
        res = w.fetch_many(node, {b: 10}, max_wait_ms=50, session=True)
        assert set(fs.partitions) == {b} and fs.epoch == 5
        # a wrong epoch: Kafka's INVALID_FETCH_SESSION_EPOCH, then a full fetch opens a new session
        fs.epoch = 77
        try:
            w.fetch_many(node, {b: 10}, max_wait_ms=50, session=True)
            raise AssertionError("a wrong session epoch was accepted")
        except KafkaApiError as e:
            assert e.code == 71 and e.retriable
        assert not fs.active
        res = w.fetch_many(node, {a: 3, b: 10}, max_wait_ms=50, session=True)
        assert set(res) == {a, b} and fs.active and fs.epoch == 1 and fs.full_fetches == 2
        # an unknown session id: FETCH_SESSION_ID_NOT_FOUND, then a full fetch again
        fs.session_id = fs.session_id ^ 0x5A5A5A5
        try:
            w.fetch_many(node, {a: 3, b: 10}, max_wait_ms=50, session=True)
            raise AssertionError("an unknown session id was accepted")
        except KafkaApiError as e:
            assert e.code == 70 and e.retriable
        res = w.fetch_many(node, {a: 3, b: 10}, max_wait_ms=50, session=True)
        assert set(res) == {a, b} and fs.active


def test_session_request_to_our_broker_is_a_full_fetch(ours, topic_name):
    _produce(ours.bootstrap, topic_name, 2, 10)
    a, b = (topic_name, 0), (topic_name, 1)
    with WireClient(ours.bootstrap) as w:
        node = w.leader(*a)
        for _ in range(3):
            res = w.fetch_many(node, {a: 0, b: 10}, max_wait_ms=20, session=True)
            assert set(res) == {a, b} and len(res[a].records) > 0 and len(res[b].records) == 0
        fs = w.fetch_session(node)
        assert not fs.active and fs.full_fetches == 3 and fs.incremental_fetches == 0


def test_one_fetcher_thread_per_leader(cluster, topic_name):
    """The read-ahead runs one fetcher thread per broker leading an assigned partition
    (one broker here: one thread, named after its node id, holding every partition)."""
    import threading
    _produce(cluster, topic_name, 3, 50)
    with engine.connect(cluster) as eng:
        c = eng.consumer(**{"auto.offset.reset": "earliest", "fetch.max.wait.ms": 100})
        c.assign([(topic_name, p) for p in range(3)])
        got, deadline = 0, time.monotonic() + 30
        while got < 150 and time.monotonic() < deadline:
            got += sum(b.num_rows for b in c.poll_arrow(timeout_ms=300))
        assert got == 150
        node = c._client.leader(topic_name, 0)
        assert set(c._fetcher.threads) == {node}
        assert {c._fetcher.leaders[tp] for tp in c.assignment()} == {node}
        assert f"remote-consumer-fetcher-{node}" in {t.name for t in threading.enumerate()}
        c.close()
        assert not any(t.is_alive() for t in c._fetcher.threads.values())
