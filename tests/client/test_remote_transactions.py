"""engine.connect's transactional producer against our broker (``python -m engine serve``) and
Apache Kafka 4.0 (KAFKA_HOME, else <repo>/../shared/kafka; skipped with a message when absent):

- a committed transaction is visible to read_committed readers (ours: ``read_arrow``, the
  remote consumer; confluent-kafka's), an aborted one never, not even the records flushed
  before the abort (read_uncommitted sees those); records not sent at the abort fail their
  futures; calls out of order raise INVALID_TXN_STATE;
- consume-transform-produce: an aborted round changes neither outputs nor the group's offsets,
  committed rounds produce every input exactly once with the offsets; confluent-kafka's
  ``consumer_group_metadata()`` works as the group metadata too;
- fencing: a second producer with the same transactional.id (ours or confluent-kafka's) makes
  the first raise ProducerFencedError on its next call and for good, its open transaction is
  aborted; and the other way round, ours fences confluent-kafka's;
- ``transaction.timeout.ms``: the coordinator aborts a transaction left open; the producer is
  fenced and nothing of it is visible.

The broker SIGKILLed mid-transaction is in test_remote_transactions_crash.py (ours only).
"""

from __future__ import annotations

import os
import time

import pytest

import engine
from engine.errors import KafkaApiError, ProducerFencedError
from tests.serving import KafkaProcess, find_kafka, served
from tests.transactions.clients import read_all

# both brokers: a small __transaction_state, time-outs aborted within ~0.5 s, no join delay
SETTINGS = ("transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
            "transaction.state.log.num.partitions=3", "offsets.topic.num.partitions=3",
            "group.initial.rebalance.delay.ms=0")
INVALID_TXN_STATE = 48
T = 30


@pytest.fixture(scope="module", params=["ours", "kafka"])
def bootstrap(request, tmp_path_factory):
    if request.param == "ours":
        args = []
        for kv in SETTINGS:
            args += ["--config", kv]
        for srv in served(tmp_path_factory, "remote-txn", *args):
            yield srv.bootstrap
        return
    home, why_not = find_kafka()
    if home is None:
        pytest.skip(why_not)
    try:
        k = KafkaProcess(home, str(tmp_path_factory.mktemp("remote-txn-kafka")), *SETTINGS).start()
    except (FileNotFoundError, RuntimeError) as e:
        pytest.skip(f"Apache Kafka 4.0 could not be started here: {e}")
    try:
        yield k.bootstrap
    finally:
        k.stop()


@pytest.fixture
def eng(bootstrap):
    e = engine.connect(bootstrap)
    yield e
    e.close()


@pytest.fixture
def name(request) -> str:
    return f"rtx-{request.node.name.split('[')[0][5:30]}-{os.urandom(3).hex()}"


def wait_stable(eng, topic: str, parts: int, timeout: float = T) -> dict:
    """Wait until no transaction is open on the topic (LSO == high watermark everywhere); the ends."""
    c = eng._client
    tps = {(topic, p): -1 for p in range(parts)}
    deadline = time.monotonic() + timeout
    while True:
        hw = c.list_offsets(tps)
        lso = c.list_offsets(tps, isolation_level=1)
        if hw == lso:
            return {p: hw[(topic, p)][0] for p in range(parts)}
        assert time.monotonic() < deadline, f"a transaction stays open on {topic}: hw {hw}, lso {lso}"
        time.sleep(0.05)


def values(eng, topic: str, parts: int, isolation: str = "read_committed") -> dict:
    return {p: eng.read_arrow(topic, p, isolation_level=isolation).column("value").to_pylist()
            for p in range(parts)}


def wait_committed(consumer, want: dict) -> None:
    """The group's committed offsets reach `want` (Kafka applies a transaction's offsets with
    its markers, just after EndTxn was answered)."""
    deadline = time.monotonic() + T
    while True:
        got = {tuple(tp): o for tp, o in consumer.committed(list(want)).items()}
        if got == want:
            return
        assert time.monotonic() < deadline, f"committed offsets {got}, expected {want}"
        time.sleep(0.05)


def remote_consume(bootstrap, topic, parts, expected_rows, isolation="read_committed") -> dict:
    c = engine.connect(bootstrap).consumer(**{"isolation.level": isolation, "auto.offset.reset": "earliest"})
    try:
        c.assign([(topic, p) for p in range(parts)])
        out: dict = {p: [] for p in range(parts)}
        deadline = time.monotonic() + T
        while sum(len(v) for v in out.values()) < expected_rows and time.monotonic() < deadline:
            for b in c.poll_arrow(timeout_ms=200):
                for p, v in zip(b.column("partition").to_pylist(), b.column("value").to_pylist(), strict=True):
                    out[p].append(v)
        for b in c.poll_arrow(timeout_ms=300):        # nothing more may come
            for p, v in zip(b.column("partition").to_pylist(), b.column("value").to_pylist(), strict=True):
                out[p].append(v)
        return out
    finally:
        c.close()


def test_commit_visible_abort_invisible(eng, bootstrap, name):
    eng.create_topic(name, partitions=2)
    p = eng.producer(**{"transactional.id": name, "linger.ms": 60000})   # sent at flush()/commit
    with pytest.raises(KafkaApiError) as ei:          # before init_transactions
        p.begin_transaction()
    assert ei.value.code == INVALID_TXN_STATE
    p.init_transactions(T)
    with pytest.raises(KafkaApiError) as ei:          # outside a transaction
        p.send(name, b"x", partition=0)
    assert ei.value.code == INVALID_TXN_STATE
    with pytest.raises(KafkaApiError):
        p.commit_transaction(T)

    p.begin_transaction()
    with pytest.raises(KafkaApiError):                # twice
        p.begin_transaction()
    futs = [p.send(name, b"c1-%d" % i, partition=0) for i in range(3)]
    p.send_batch(name, values=[b"c1-3", b"c1-4"], partitions=1)
    p.commit_transaction(T)
    assert [f.result(T).offset for f in futs] == [0, 1, 2]

    p.begin_transaction()
    p.send_batch(name, values=[b"a2-0", b"a2-1"], partitions=0)    # in the log, then aborted
    p.send(name, b"a2-2", partition=1)
    p.flush()
    late = p.send(name, b"a2-never", partition=1)                  # not sent at the abort
    p.abort_transaction(T)
    with pytest.raises(Exception, match="aborted"):
        late.result(T)

    p.begin_transaction()
    p.send(name, b"c3-0", partition=0)
    p.send_batch(name, values=[b"c3-1"], partitions=1)
    p.commit_transaction(T)
    p.close()

    ends = wait_stable(eng, name, 2)
    # records + one marker per partition per transaction
    assert ends == {0: 3 + 1 + 2 + 1 + 1 + 1, 1: 2 + 1 + 1 + 1 + 1 + 1}
    committed = {0: [b"c1-0", b"c1-1", b"c1-2", b"c3-0"], 1: [b"c1-3", b"c1-4", b"c3-1"]}
    assert values(eng, name, 2) == committed
    assert values(eng, name, 2, "read_uncommitted") == {0: [b"c1-0", b"c1-1", b"c1-2", b"a2-0", b"a2-1", b"c3-0"],
                                                       1: [b"c1-3", b"c1-4", b"a2-2", b"c3-1"]}
    assert remote_consume(bootstrap, name, 2, 7) == committed
    got, pos = read_all("confluent", bootstrap, name, [0, 1], "read_committed")
    assert {q: [v for _o, v in recs] for q, recs in got.items()} == committed
    assert [o for o, _v in got[0]] == [0, 1, 2, 7] and pos == ends


def test_consume_transform_produce(eng, bootstrap, name):
    src, out, group = name + "-in", name + "-out", name + "-g"
    eng.create_topic(src, partitions=2)
    eng.create_topic(out, partitions=2)
    with eng.producer() as plain:
        plain.send_batch(src, values=[b"r%d" % i for i in range(40)], partitions=0)
        plain.send_batch(src, values=[b"s%d" % i for i in range(30)], partitions=1)

    def consumer():
        c = eng.consumer(**{"group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                            "isolation.level": "read_committed", "max.poll.records": 25})
        c.subscribe([src])
        return c

    p = eng.producer(**{"transactional.id": name})
    p.init_transactions(T)
    c = consumer()
    # round 1 is aborted: neither outputs nor offsets move
    batches = []
    deadline = time.monotonic() + T
    while not batches and time.monotonic() < deadline:
        batches = c.poll_arrow(max_records=25, timeout_ms=500)
    assert batches
    meta = c.group_metadata()
    assert meta.group_id == group and meta.generation_id >= 1 and meta.member_id
    p.begin_transaction()
    for b in batches:
        p.send_batch(out, values=[v.upper() for v in b.column("value").to_pylist()],
                     partitions=b.column("partition")[0].as_py())
    p.send_offsets_to_transaction({tp: c.position(tp) for tp in c.assignment()}, meta, T)
    p.abort_transaction(T)
    assert all(v is None for v in c.committed([(src, 0), (src, 1)]).values())
    c.close()

    # rounds from the committed offsets (none: the start) until the input is consumed
    c = consumer()
    done = 0
    deadline = time.monotonic() + T
    while done < 70 and time.monotonic() < deadline:
        batches = c.poll_arrow(max_records=25, timeout_ms=500)
        if not batches:
            continue
        p.begin_transaction()
        for b in batches:
            p.send_batch(out, values=[v.upper() for v in b.column("value").to_pylist()],
                         partitions=b.column("partition")[0].as_py())
            done += b.num_rows
        p.send_offsets_to_transaction({tp: c.position(tp) for tp in c.assignment()}, c.group_metadata(), T)
        p.commit_transaction(T)
    assert done == 70
    wait_committed(c, {(src, 0): 40, (src, 1): 30})
    c.close()
    p.close()
    wait_stable(eng, out, 2)
    got = values(eng, out, 2)
    assert got == {0: [b"R%d" % i for i in range(40)], 1: [b"S%d" % i for i in range(30)]}


def test_confluent_group_metadata(eng, bootstrap, name):
    """send_offsets_to_transaction takes confluent-kafka's consumer_group_metadata() (librdkafka's
    serialized generation / member id): the offset commits within the member's generation."""
    from confluent_kafka import Consumer, TopicPartition
    eng.create_topic(name, partitions=1)
    with eng.producer() as plain:
        plain.send_batch(name, values=[b"v%d" % i for i in range(5)], partitions=0)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": name, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([name])
        got = []
        deadline = time.monotonic() + T
        while len(got) < 5 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        assert len(got) == 5
        p = eng.producer(**{"transactional.id": name})
        p.init_transactions(T)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(name, 0, 5)], c.consumer_group_metadata(), T)
        p.commit_transaction(T)
        p.close()
        deadline = time.monotonic() + T
        while True:          # the offset commit completes with the markers, just after EndTxn
            off = c.committed([TopicPartition(name, 0)], timeout=T)[0].offset
            if off == 5 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert off == 5
    finally:
        c.close()


def test_fenced_by_a_second_producer(eng, bootstrap, name):
    eng.create_topic(name, partitions=2)
    p1 = eng.producer(**{"transactional.id": name})
    p1.init_transactions(T)
    p1.begin_transaction()
    p1.send(name, b"old-0", partition=0)
    p1.flush()
    p2 = eng.producer(**{"transactional.id": name})
    p2.init_transactions(T)                 # fences p1 and aborts its transaction
    with pytest.raises(ProducerFencedError):
        p1.send(name, b"old-1", partition=1).result(T)
    for call in (lambda: p1.commit_transaction(T), lambda: p1.abort_transaction(T), p1.begin_transaction,
                 lambda: p1.send(name, b"x", partition=0)):
        with pytest.raises(ProducerFencedError):
            call()
    assert p1.transaction_state == "FATAL_ERROR"
    p1.close()
    p2.begin_transaction()
    p2.send(name, b"new-0", partition=0)
    p2.commit_transaction(T)
    p2.close()
    wait_stable(eng, name, 2)
    assert values(eng, name, 2) == {0: [b"new-0"], 1: []}
    assert values(eng, name, 2, "read_uncommitted") == {0: [b"old-0", b"new-0"], 1: []}


def test_fencing_with_confluent(eng, bootstrap, name):
    from confluent_kafka import KafkaError, KafkaException, Producer
    eng.create_topic(name, partitions=1)
    # confluent-kafka fences ours
    ours = eng.producer(**{"transactional.id": name + "-a"})
    ours.init_transactions(T)
    ours.begin_transaction()
    ours.send(name, b"ours-fenced", partition=0)
    ours.flush()
    theirs = Producer({"bootstrap.servers": bootstrap, "transactional.id": name + "-a"})
    theirs.init_transactions(T)
    with pytest.raises(ProducerFencedError):
        ours.commit_transaction(T)
    ours.close()
    theirs.begin_transaction()
    theirs.produce(name, b"theirs-ok", partition=0)
    theirs.commit_transaction(T)
    # ours fences confluent-kafka's
    theirs2 = Producer({"bootstrap.servers": bootstrap, "transactional.id": name + "-b"})
    theirs2.init_transactions(T)
    theirs2.begin_transaction()
    theirs2.produce(name, b"theirs-fenced", partition=0)
    assert theirs2.flush(T) == 0
    ours2 = eng.producer(**{"transactional.id": name + "-b"})
    ours2.init_transactions(T)
    with pytest.raises(KafkaException) as ei:
        theirs2.commit_transaction(T)
    err = ei.value.args[0]
    assert err.fatal() and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                          KafkaError.INVALID_PRODUCER_EPOCH), err
    ours2.begin_transaction()
    ours2.send(name, b"ours-ok", partition=0)
    ours2.commit_transaction(T)
    ours2.close()
    wait_stable(eng, name, 1)
    assert values(eng, name, 1) == {0: [b"theirs-ok", b"ours-ok"]}
    got, _pos = read_all("confluent", bootstrap, name, [0], "read_committed")
    assert [v for _o, v in got[0]] == [b"theirs-ok", b"ours-ok"]
    del theirs, theirs2               # librdkafka's handles go now, not when the broker is gone


def test_transaction_timeout_aborts_and_fences(eng, bootstrap, name):
    eng.create_topic(name, partitions=1)
    p = eng.producer(**{"transactional.id": name, "transaction.timeout.ms": 1000})
    p.init_transactions(T)
    p.begin_transaction()
    p.send(name, b"timed-out", partition=0)
    p.flush()
    ends = wait_stable(eng, name, 1, timeout=20)     # the coordinator aborted it
    assert ends == {0: 2}
    with pytest.raises(ProducerFencedError):
        p.commit_transaction(T)
    p.close()
    assert values(eng, name, 1) == {0: []}


def test_abortable_error_then_abort_and_go_on(eng, bootstrap, name):
    """A batch the broker refuses (MESSAGE_TOO_LARGE) makes the transaction abortable: commit is
    refused (INVALID_TXN_STATE, txn_requires_abort), abort works and bumps the epoch, the next
    transaction commits; nothing of the failed one is visible."""
    eng.create_topic(name, partitions=1, config={"max.message.bytes": "2000"})
    p = eng.producer(**{"transactional.id": name})
    p.init_transactions(T)
    pid, epoch = p.producer_id
    p.begin_transaction()
    p.send(name, b"small-aborted", partition=0)
    p.flush()
    with pytest.raises(KafkaApiError) as ei:
        p.send_batch(name, values=[b"x" * 10000], partitions=0)
    assert ei.value.code == 10 and ei.value.txn_requires_abort      # MESSAGE_TOO_LARGE
    assert p.transaction_state == "ABORTABLE_ERROR"
    with pytest.raises(KafkaApiError) as ei:
        p.send(name, b"refused", partition=0)
    assert ei.value.code == INVALID_TXN_STATE
    with pytest.raises(KafkaApiError) as ei:
        p.commit_transaction(T)
    assert ei.value.code == INVALID_TXN_STATE and ei.value.txn_requires_abort
    p.abort_transaction(T)
    assert p.producer_id[0] == pid and p.producer_id[1] > epoch      # KIP-360 epoch bump
    p.begin_transaction()
    p.send(name, b"after", partition=0)
    p.commit_transaction(T)
    p.close()
    wait_stable(eng, name, 1)
    assert values(eng, name, 1) == {0: [b"after"]}
    assert values(eng, name, 1, "read_uncommitted") == {0: [b"small-aborted", b"after"]}


def test_close_aborts_an_open_transaction(eng, bootstrap, name):
    eng.create_topic(name, partitions=1)
    with eng.producer(**{"transactional.id": name, "linger.ms": 60000}) as p:   # sent at flush()
        p.init_transactions(T)
        p.begin_transaction()
        p.send(name, b"sent", partition=0)
        p.flush()
        unsent = p.send(name, b"unsent", partition=0)
    assert p.transaction_state == "READY"              # the abort went through
    with pytest.raises(Exception, match="aborted"):
        unsent.result(T)
    assert wait_stable(eng, name, 1) == {0: 2}          # the record and the ABORT marker
    assert values(eng, name, 1) == {0: []}
    assert values(eng, name, 1, "read_uncommitted") == {0: [b"sent"]}


def test_partitions_join_while_batches_are_in_flight(eng, bootstrap, name):
    """Partitions join the transaction (AddPartitionsToTxn) while the pipelined sender has
    Produce requests in flight to the same broker: the coordinator's requests never disturb
    the produce connection (it is never dropped and reopened), every record lands once, in order."""
    eng.create_topic(name, partitions=8)
    p = eng.producer(**{"transactional.id": name, "linger.ms": 1})
    p.init_transactions(T)
    p.begin_transaction()
    p.send(name, b"first", partition=7).result(T)
    conns = dict(p._client._conns)              # node -> the connection Produce requests use
    futs = []
    for i in range(400):                        # 60 KB records, a new partition every 50
        futs.append(p.send(name, b"%06d" % i + b"x" * 60000, partition=(i // 50) % 8))
        if i % 10 == 0:
            time.sleep(0.002)
    p.commit_transaction(T)
    assert all(f.result(T).offset == i % 50 + (1 if i >= 350 else 0) for i, f in enumerate(futs))
    assert p._client._conns == conns, "the produce connection was dropped and reopened"
    p.close()
    wait_stable(eng, name, 8)
    got = values(eng, name, 8)
    assert {q: [v[:6] for v in vs] for q, vs in got.items()} == {
        q: ([b"first"[:6]] if q == 7 else []) + [b"%06d" % i for i in range(q * 50, q * 50 + 50)] for q in range(8)}


def test_offsets_of_a_stale_generation_make_the_transaction_abortable(eng, bootstrap, name):
    """KIP-447: TxnOffsetCommit with a generation the group is not at is refused
    (ILLEGAL_GENERATION); the transaction must be aborted, and its records never show."""
    from engine.client._types import ConsumerGroupMetadata
    eng.create_topic(name, partitions=1)
    with eng.producer() as plain:
        plain.send_batch(name, values=[b"in"], partitions=0)
    c = eng.consumer(**{"group.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.subscribe([name])
    deadline = time.monotonic() + T
    while not c.poll_arrow(timeout_ms=300):
        assert time.monotonic() < deadline, "no record in time"
    meta = c.group_metadata()
    p = eng.producer(**{"transactional.id": name})
    p.init_transactions(T)
    p.begin_transaction()
    p.send(name, b"out", partition=0)
    stale = ConsumerGroupMetadata(meta.group_id, meta.generation_id + 5, meta.member_id, None)
    with pytest.raises(KafkaApiError) as ei:
        p.send_offsets_to_transaction({(name, 0): 1}, stale, T)
    assert ei.value.code == 22 and ei.value.txn_requires_abort           # ILLEGAL_GENERATION
    with pytest.raises(KafkaApiError):
        p.commit_transaction(T)
    p.abort_transaction(T)
    p.close()
    c.close()
    wait_stable(eng, name, 1)
    assert values(eng, name, 1) == {0: [b"in"]}
