"""Fetch and ListOffsets under read_committed (isolation_level 1) at the wire level, every
served version from 4: reads stop at the last stable offset, the answer carries the LSO and
the aborted transactions of the range; read_uncommitted answers carry the real LSO and a
null aborted list.  Transactional data is written with the storage API (transactional
batches + append_control), as the transaction coordinator does."""

from __future__ import annotations

import time

import pytest

from engine.protocol import messages as m
from engine.records import build_batch, decode

from .test_versions import call

kio_serial = pytest.importorskip("kio.serial")


def _txn(pid, seq, tag):
    ts = int(time.time() * 1000)
    return bytearray(build_batch([(tag + b"0", None, [], ts), (tag + b"1", None, [], ts)], producer_id=pid,
                                 producer_epoch=0, base_sequence=seq, is_transactional=True))


@pytest.fixture(scope="module")
def txbroker(tmp_path_factory):
    from .conftest import BrokerThread
    b = BrokerThread(str(tmp_path_factory.mktemp("rc")))

    def fill():
        b.engine.create_topic("rc", 1)
        log = b.engine.log("rc", 0)
        log.append(bytearray(build_batch([b"plain"])))          # 0
        log.append(_txn(100, 0, b"aborted"))                    # 1-2   producer 100
        log.append(_txn(200, 0, b"committed"))                  # 3-4   producer 200
        log.append_control(100, 0, False, 1)                    # 5     ABORT 100
        log.append_control(200, 0, True, 1)                     # 6     COMMIT 200
        log.append(_txn(300, 0, b"open"))                       # 7-8   producer 300, open
        log.append(bytearray(build_batch([b"after"])))          # 9
    b.call(fill)
    _TXBROKER[:] = [b]          # fetch() asks it for the topic id (Fetch v13+ names topics by id)
    yield b
    b.stop()


_TXBROKER: list = []


def fetch(port, version, isolation, offset=0):
    from engine.server.common import _topic_uuid
    tid = _topic_uuid(_TXBROKER[0].call(lambda: _TXBROKER[0].engine.topic_metadata("rc").topic_id))
    return call(port, 1, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": "rc", "topic_id": tid, "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1}]}]})


@pytest.mark.parametrize("version", range(4, m.SUPPORTED[1][1] + 1))
def test_fetch_read_committed_stops_at_the_lso_with_aborted_list(txbroker, version):
    (p,) = fetch(txbroker.port, version, 1).responses[0].partitions
    assert (int(p.error_code), p.high_watermark, p.last_stable_offset) == (0, 10, 7)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(100, 1)]
    recs = decode(bytes(p.records))
    # the client filters: the records up to the LSO, control batches skipped by the decoder
    assert [r.offset for r in recs] == [0, 1, 2, 3, 4]
    assert max(r.offset for r in recs) < 7


@pytest.mark.parametrize("version", [4, 11, m.SUPPORTED[1][1]])
def test_fetch_read_uncommitted_carries_the_lso_and_no_aborted_list(txbroker, version):
    (p,) = fetch(txbroker.port, version, 0).responses[0].partitions
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (10, 7, None)
    assert [r.offset for r in decode(bytes(p.records))][-1] == 9


def test_fetch_read_committed_at_the_lso_is_empty_with_an_empty_list(txbroker):
    (p,) = fetch(txbroker.port, 12, 1, offset=7).responses[0].partitions
    assert (int(p.error_code), p.last_stable_offset, p.aborted_transactions, bytes(p.records or b"")) == \
        (0, 7, (), b"")
    (p,) = fetch(txbroker.port, 12, 1, offset=3).responses[0].partitions   # from 3: the abort of [1, 5] overlaps
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(100, 1)]


@pytest.mark.parametrize("version", range(2, m.SUPPORTED[2][1] + 1))
def test_list_offsets_latest_under_read_committed_is_the_lso(txbroker, version):
    got = []
    for isolation in (0, 1):
        resp = call(txbroker.port, 2, version, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": "rc", "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1,
                                           "max_num_offsets": 1}]}]})
        got.append(resp.topics[0].partitions[0].offset)
    assert got == [10, 7]


def test_list_offsets_by_timestamp_under_read_committed_stops_below_the_lso(tmp_path):
    from .conftest import BrokerThread
    b = BrokerThread(str(tmp_path / "d"))
    try:
        def fill():
            b.engine.create_topic("ts", 1)
            log = b.engine.log("ts", 0)
            log.append(bytearray(build_batch([(b"old", None, [], 1000)])))                  # 0
            log.append(bytearray(build_batch([(b"t", None, [], 5000)], producer_id=3, producer_epoch=0,
                                             base_sequence=0, is_transactional=True)))    # 1, open
        b.call(fill)

        def ask(ts, isolation):
            resp = call(b.port, 2, 7, {"replica_id": -1, "isolation_level": isolation, "topics": [
                {"name": "ts", "partitions": [{"partition_index": 0, "timestamp": ts,
                                               "current_leader_epoch": -1}]}]})
            return resp.topics[0].partitions[0].offset
        assert (ask(500, 0), ask(500, 1)) == (0, 0)
        assert (ask(4000, 0), ask(4000, 1)) == (1, -1)          # the hit is at the LSO: none (Kafka)
        assert (ask(-3, 0), ask(-3, 1)) == (1, -1)
        assert (ask(-1, 0), ask(-1, 1)) == (2, 1)
    finally:
        b.stop()


def test_after_the_open_transaction_commits_everything_is_visible(tmp_path):
    from .conftest import BrokerThread
    b = BrokerThread(str(tmp_path / "d"))
    try:
        def fill():
            b.engine.create_topic("rc", 1)
            log = b.engine.log("rc", 0)
            log.append(_txn(7, 0, b"x"))
            return log
        log = b.call(fill)
        (p,) = fetch(b.port, 12, 1).responses[0].partitions
        assert (p.last_stable_offset, bytes(p.records or b"")) == (0, b"")
        b.call(lambda: log.append_control(7, 0, True, 0))
        (p,) = fetch(b.port, 12, 1).responses[0].partitions
        assert (p.last_stable_offset, p.aborted_transactions) == (3, ())
        assert [r.value for r in decode(bytes(p.records))] == [b"x0", b"x1"]
    finally:
        b.stop()


# -- real clients filter with our answers ---------------------------------------------------
@pytest.fixture(scope="module")
def clientbroker(tmp_path_factory):
    from tests.txn_data import fill

    from .conftest import BrokerThread
    b = BrokerThread(str(tmp_path_factory.mktemp("rc-clients")))

    def setup():
        b.engine.create_topic("tx", 1, config={"segment.bytes": 2048})
        return fill(b.engine.log("tx", 0)), b.engine.log("tx", 0).last_stable_offset
    (b.committed, b.uncommitted), b.lso = b.call(setup)
    yield b
    b.stop()


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
def test_confluent_kafka_consumer_isolation_levels(clientbroker, level):
    ck = pytest.importorskip("confluent_kafka")
    c = ck.Consumer({"bootstrap.servers": clientbroker.bootstrap, "group.id": f"g-{level}",
                     "isolation.level": level, "enable.auto.commit": False,
                     "max.partition.fetch.bytes": 1000})
    try:
        c.assign([ck.TopicPartition("tx", 0, 0)])
        got, deadline = [], time.monotonic() + 30
        want = clientbroker.committed if level == "read_committed" else clientbroker.uncommitted
        while len(got) < len(want) and time.monotonic() < deadline:
            for msg in c.consume(100, timeout=0.5):
                if msg.error() is None:
                    got.append(msg.value())
        assert got == want
        lo, hi = c.get_watermark_offsets(ck.TopicPartition("tx", 0), timeout=10)
        if level == "read_committed":
            assert c.position([ck.TopicPartition("tx", 0)])[0].offset <= clientbroker.lso
    finally:
        c.close()


def test_kafka_python_consumer_read_committed(clientbroker):
    kafka = pytest.importorskip("kafka")
    c = kafka.KafkaConsumer(bootstrap_servers=clientbroker.bootstrap, isolation_level="read_committed",
                            enable_auto_commit=False, consumer_timeout_ms=3000, max_partition_fetch_bytes=700)
    try:
        tp = kafka.TopicPartition("tx", 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        assert [m.value for m in c] == clientbroker.committed
        assert c.end_offsets([tp])[tp] == clientbroker.lso
    finally:
        c.close()


@pytest.mark.parametrize("version", [3, m.SUPPORTED[0][1]])
def test_produce_of_a_control_batch_is_invalid_record_and_nothing_is_written(tmp_path, version):
    """Reliability contract B12: a marker in a client's Produce gets Kafka's INVALID_RECORD."""
    from engine import _native

    from .conftest import BrokerThread
    b = BrokerThread(str(tmp_path / "d"))
    try:
        b.call(lambda: b.engine.create_topic("p", 1))
        # as Kafka 4.0 answers (checked against it): a marker is a transactional batch, so a
        # request without a transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53); with
        # one, a marker with no producer id is not verified and the append refuses it: INVALID_RECORD
        for tid, pid, code in ((None, -1, 53), (None, 7, 53), ("tx1", -1, 87)):
            resp = call(b.port, 0, version, {
                "transactional_id": tid, "acks": -1, "timeout": 1000,
                "topic_data": [{"name": "p", "partition_data": [
                    {"index": 0, "records": bytes(_native.build_control_batch(pid, 0, True, 0))}]}]})
            (part,) = resp.responses[0].partition_responses
            assert int(part.error_code) == code, (tid, pid)
        assert b.call(lambda: b.engine.log("p", 0).log_end_offset) == 0
    finally:
        b.stop()
