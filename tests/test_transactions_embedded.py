"""The embedded transactional producer: the Engine's transaction coordinator, in-process.

Commit, abort, the LSO, zombie fencing (embedded against embedded, and against a confluent-kafka
producer with the same transactional.id through ``eng.serve()``), transactional offsets, the
state rules, time-outs, and what readers see: the raw log, a read_committed embedded consumer
and ``read_arrow``, and a real read_committed client over the wire.
"""

from __future__ import annotations

import time

import pytest

import engine
from engine.client.producer import TransactionAbortedError
from engine.errors import KafkaApiError

CONFIG = {"transaction.state.log.num.partitions": 2, "offsets.topic.num.partitions": 2,
          "group.initial.rebalance.delay.ms": 0,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}
PRODUCER_FENCED, INVALID_TXN_STATE = 90, 48


@pytest.fixture
def eng(tmp_path):
    e = engine.open(str(tmp_path / "data"), CONFIG)
    yield e
    e.close()


def _values(eng, topic, partition):
    """(offset, value) of every data record in the log (read_uncommitted, no markers)."""
    c = eng.consumer(auto_offset_reset="earliest")
    c.assign([(topic, partition)])
    out = []
    while True:
        recs = c.poll(timeout_ms=0)
        if not recs:
            return out
        out += [(r.offset, r.value) for r in recs]


def _txn(eng, txid, **settings):
    p = eng.producer(transactional_id=txid, linger_ms=0, **settings)
    p.init_transactions()
    return p


def test_commit_and_abort_write_markers_and_move_the_lso(eng):
    eng.create_topic("t", partitions=2)
    p = _txn(eng, "tx")
    p.begin_transaction()
    futs = [p.send("t", b"c%d" % i, partition=i % 2) for i in range(4)]
    log0, log1 = eng.log("t", 0), eng.log("t", 1)
    p.flush()
    assert (log0.high_watermark, log0.last_stable_offset) == (2, 0)   # open: held at its first record
    p.commit_transaction()
    assert [f.result().offset for f in futs] == [0, 0, 1, 1]
    # each partition: two records and the COMMIT marker, nothing open
    assert (log0.high_watermark, log0.last_stable_offset) == (3, 3)
    assert (log1.high_watermark, log1.last_stable_offset) == (3, 3)

    p.begin_transaction()
    p.send_batch("t", [b"a0", b"a1", b"a2"], partition=0)           # send_batch is transactional too
    assert log0.last_stable_offset == 3
    p.abort_transaction()
    assert (log0.high_watermark, log0.last_stable_offset) == (7, 7)
    assert log1.high_watermark == 3                                    # not in that transaction
    assert _values(eng, "t", 0) == [(0, b"c0"), (1, b"c2"), (3, b"a0"), (4, b"a1"), (5, b"a2")]
    assert log0.aborted_transactions(0, 7) == [(p._txn.producer_id, 3)]
    p.close()


def test_abort_drops_records_not_yet_appended(eng):
    eng.create_topic("t", partitions=1)
    p = eng.producer(transactional_id="tx", linger_ms=60_000)       # nothing leaves by itself
    p.init_transactions()
    p.begin_transaction()
    fut = p.send("t", b"never")
    p.abort_transaction()
    with pytest.raises(TransactionAbortedError):
        fut.result()
    assert eng.log("t", 0).high_watermark == 0                      # no partition was added
    p.begin_transaction()
    p.send("t", b"kept")
    p.commit_transaction()
    assert _values(eng, "t", 0) == [(0, b"kept")]
    p.close()


def test_state_rules(eng):
    eng.create_topic("t", partitions=1)
    plain = eng.producer()
    with pytest.raises(KafkaApiError) as ei:
        plain.init_transactions()
    assert ei.value.code == INVALID_TXN_STATE
    plain.close()

    p = eng.producer(**{"transactional.id": "tx", "transaction.timeout.ms": 30000})  # Kafka's keys
    for call in (p.begin_transaction, p.commit_transaction, lambda: p.send("t", b"x")):
        with pytest.raises(KafkaApiError) as ei:
            call()
        assert ei.value.code == INVALID_TXN_STATE and "init_transactions" in str(ei.value)
    p.init_transactions()
    with pytest.raises(KafkaApiError) as ei:
        p.send("t", b"outside")
    assert ei.value.code == INVALID_TXN_STATE and "no transaction is open" in str(ei.value)
    with pytest.raises(KafkaApiError):
        p.send_batch("t", [b"outside"])
    p.begin_transaction()
    with pytest.raises(KafkaApiError) as ei:
        p.begin_transaction()
    assert ei.value.code == INVALID_TXN_STATE
    p.commit_transaction()                        # an empty transaction commits locally
    assert eng.log("t", 0).high_watermark == 0
    p.close()
    with pytest.raises(KafkaApiError):
        eng.producer(transactional_id="")


def test_second_instance_fences_the_first(eng):
    eng.create_topic("t", partitions=1)
    zombie = _txn(eng, "tx")
    zombie.begin_transaction()
    zombie.send("t", b"zombie")
    zombie.flush()
    successor = _txn(eng, "tx")                     # bumps the epoch, aborts the zombie's transaction
    assert successor._txn.epoch > zombie._txn.epoch     # +2: one bump for the abort, one for init
    late = zombie.send("t", b"late")
    with pytest.raises(KafkaApiError) as ei:
        zombie.commit_transaction()
    assert ei.value.code == PRODUCER_FENCED
    with pytest.raises(KafkaApiError):
        late.result()
    for call in (zombie.begin_transaction, zombie.abort_transaction):
        with pytest.raises(KafkaApiError) as ei:
            call()
        assert ei.value.code == PRODUCER_FENCED      # fatal: only close() is left
    zombie.close()

    successor.begin_transaction()
    successor.send("t", b"next")
    successor.commit_transaction()
    log = eng.log("t", 0)
    assert _values(eng, "t", 0) == [(0, b"zombie"), (2, b"next")]   # 1: the zombie's ABORT marker
    assert log.aborted_transactions(0, log.high_watermark) == [(zombie._txn.producer_id, 0)]
    assert log.last_stable_offset == log.high_watermark == 4
    successor.close()


def test_abandoned_transaction_times_out_and_fences_its_producer(eng):
    eng.create_topic("t", partitions=1)
    p = _txn(eng, "tx", transaction_timeout_ms=300)
    p.begin_transaction()
    p.send("t", b"slow")
    p.flush()
    log = eng.log("t", 0)
    assert log.last_stable_offset == 0
    deadline = time.monotonic() + 10
    while log.last_stable_offset != log.high_watermark:     # aborted after 300 ms (+100 ms check)
        assert time.monotonic() < deadline, "the timed-out transaction was not aborted"
        time.sleep(0.05)
    assert log.aborted_transactions(0, log.high_watermark) == [(p._txn.producer_id, 0)]
    with pytest.raises(KafkaApiError) as ei:
        p.commit_transaction()
    assert ei.value.code == PRODUCER_FENCED         # the abort bumped the epoch
    p.close()


def test_send_offsets_commit_with_the_transaction_and_abort_without(eng):
    eng.create_topic("in", partitions=1)
    eng.create_topic("out", partitions=1)
    with eng.producer() as plain:
        plain.send_batch("in", [b"x%d" % i for i in range(6)], partition=0)
    c = eng.consumer(group_id="g", auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([("in", 0)])
    p = _txn(eng, "tx")

    p.begin_transaction()
    p.send("out", b"X0")
    p.send_offsets_to_transaction({("in", 0): 3}, "g")
    p.abort_transaction()
    assert c.committed([("in", 0)]) == {("in", 0): None}

    p.begin_transaction()
    p.send("out", b"X0")
    p.send_offsets_to_transaction({("in", 0): 3}, "g")
    p.commit_transaction()
    assert c.committed([("in", 0)]) == {("in", 0): 3}

    class Meta:                              # kafka-python's ConsumerGroupMetadata shape
        group_id, generation_id, member_id, group_instance_id = "g", -1, "", None
    p.begin_transaction()
    p.send_offsets_to_transaction({("in", 0): 6}, Meta())
    p.commit_transaction()                   # offsets only, no records
    assert c.committed([("in", 0)]) == {("in", 0): 6}

    class Stale(Meta):                       # KIP-447: the group's generation is checked
        generation_id = 7

    class Consumerish:                       # a consumer with group_metadata(), as kafka-python's
        def group_metadata(self):
            return Stale()
    p.begin_transaction()
    with pytest.raises(KafkaApiError) as ei:
        p.send_offsets_to_transaction({("in", 0): 1}, Consumerish())
    assert ei.value.code == 22               # ILLEGAL_GENERATION; the transaction must be aborted
    with pytest.raises(KafkaApiError) as ei:
        p.commit_transaction()
    assert ei.value.code == INVALID_TXN_STATE
    p.abort_transaction()
    assert c.committed([("in", 0)]) == {("in", 0): 6}
    c.close()
    p.close()


def test_init_after_restart_recovers_the_id(tmp_path):
    path = str(tmp_path / "data")
    with engine.open(path, CONFIG) as eng:
        eng.create_topic("t", partitions=1)
        p = _txn(eng, "tx")
        first = (p._txn.producer_id, p._txn.epoch)
        p.begin_transaction()
        p.send("t", b"left-open")
        p.flush()                             # the engine closes with the transaction open
    with engine.open(path, CONFIG) as eng:
        p = _txn(eng, "tx")                   # same id, next epoch; the open transaction is aborted
        assert p._txn.producer_id == first[0] and p._txn.epoch > first[1]
        p.begin_transaction()
        p.send("t", b"after")
        p.commit_transaction()
        log = eng.log("t", 0)
        assert _values(eng, "t", 0) == [(0, b"left-open"), (2, b"after")]
        assert log.aborted_transactions(0, log.high_watermark) == [(first[0], 0)]
        p.close()


def test_wire_client_and_embedded_producer_share_the_coordinator(eng):
    """A confluent-kafka producer through eng.serve() and an embedded one with the same
    transactional.id fence each other; a read_committed confluent consumer sees what the
    embedded producer committed and nothing it aborted."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    eng.create_topic("t", partitions=1)
    p = _txn(eng, "shared")
    p.begin_transaction()
    p.send("t", b"embedded-committed")
    p.commit_transaction()
    p.begin_transaction()
    p.send("t", b"embedded-aborted")
    p.flush()
    with eng.serve("127.0.0.1:0") as broker:
        wire = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "shared"})
        wire.init_transactions(30)                # fences the embedded producer, aborts its transaction
        with pytest.raises(KafkaApiError) as ei:
            p.commit_transaction()
        assert ei.value.code == PRODUCER_FENCED
        wire.begin_transaction()
        wire.produce("t", b"wire-committed", partition=0)
        wire.commit_transaction(30)

        c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "r",
                                      "isolation.level": "read_committed", "enable.partition.eof": True,
                                      "auto.offset.reset": "earliest"})
        c.assign([confluent_kafka.TopicPartition("t", 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                break
            got.append((m.offset(), m.value()))
        c.close()
        del wire                                   # destroyed while the broker still answers
    p.close()
    assert got == [(0, b"embedded-committed"), (4, b"wire-committed")]


def test_read_committed_consumer_and_read_arrow(eng):
    eng.create_topic("t", partitions=1)
    p = _txn(eng, "tx")
    p.begin_transaction()
    p.send_batch("t", [b"c0", b"c1"], partition=0)
    p.commit_transaction()
    p.begin_transaction()
    p.send_batch("t", [b"a0", b"a1"], partition=0)
    p.abort_transaction()
    p.begin_transaction()
    p.send("t", b"c2", partition=0)
    p.commit_transaction()
    p.begin_transaction()
    p.send("t", b"open", partition=0)              # left open: the LSO stops before it
    p.flush()

    c = eng.consumer(auto_offset_reset="earliest", isolation_level="read_committed")
    c.assign([("t", 0)])
    got = []
    for _ in range(5):
        got += [(r.offset, r.value) for r in c.poll(timeout_ms=10)]
    assert got == [(0, b"c0"), (1, b"c1"), (6, b"c2")]
    assert c.position(("t", 0)) == 8                  # the LSO: the open transaction's first record
    committed = eng.read_arrow("t", 0, isolation_level="read_committed")
    assert committed.column("offset").to_pylist() == [0, 1, 6]
    assert committed.column("value").to_pylist() == [b"c0", b"c1", b"c2"]
    everything = eng.read_arrow("t", 0)
    assert everything.column("value").to_pylist() == [b"c0", b"c1", b"a0", b"a1", b"c2", b"open"]

    p.commit_transaction()
    got = []
    for _ in range(3):
        got += [(r.offset, r.value) for r in c.poll(timeout_ms=10)]
    assert got == [(8, b"open")]
    c.close()
    p.close()


def test_read_only_open_reads_committed_beside_the_writer(eng, tmp_path):
    """A read-only open of the directory (no lock; another process in real use) reads
    read_committed up to the LSO the writer publishes, without aborted records."""
    eng.create_topic("t", partitions=1)
    p = _txn(eng, "tx")
    p.begin_transaction()
    p.send_batch("t", [b"c0"], partition=0)
    p.commit_transaction()
    p.begin_transaction()
    p.send_batch("t", [b"a0"], partition=0)
    p.abort_transaction()
    p.begin_transaction()
    p.send_batch("t", [b"open"], partition=0)
    with engine.open(str(tmp_path / "data"), read_only=True) as ro:
        assert ro.read_arrow("t", 0, isolation_level="read_committed").column("value").to_pylist() == [b"c0"]
        assert ro.read_arrow("t", 0).column("value").to_pylist() == [b"c0", b"a0", b"open"]
        p.commit_transaction()
        assert ro.read_arrow("t", 0, isolation_level="read_committed").column("value").to_pylist() == \
            [b"c0", b"open"]
    p.close()


def test_linger_thread_and_keyed_send_batch_append_inside_the_transaction(eng):
    """Batches appended by the linger thread and keyed send_batch over several partitions join
    the transaction like the rest (the partitions are added before their first batch)."""
    eng.create_topic("t", partitions=3)
    p = eng.producer(transactional_id="tx", linger_ms=5)
    p.init_transactions()
    p.begin_transaction()
    fut = p.send("t", b"lingered", partition=2)
    deadline = time.monotonic() + 10
    while eng.log("t", 2).high_watermark == 0:           # appended by the linger thread
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert eng.log("t", 2).last_stable_offset == 0
    keys = [b"k%d" % i for i in range(30)]
    results = p.send_batch("t", [b"v%d" % i for i in range(30)], keys=keys)
    assert {r.partition for r in results} == {0, 1, 2}
    p.commit_transaction()
    assert fut.result().offset == 0
    c = eng.consumer(auto_offset_reset="earliest", isolation_level="read_committed")
    c.assign([("t", 0), ("t", 1), ("t", 2)])
    got = []
    for _ in range(5):
        got += [r.value for r in c.poll(timeout_ms=10)]
    assert sorted(got) == sorted([b"lingered"] + [b"v%d" % i for i in range(30)])
    for part in range(3):
        log = eng.log("t", part)
        assert log.last_stable_offset == log.high_watermark
    c.close()
    p.close()
