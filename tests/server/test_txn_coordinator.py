"""The transaction coordinator with real clients against ``python -m engine serve``.

confluent-kafka's transactional producer (init / begin / produce / commit / abort,
fencing, send_offsets_to_transaction), read_committed consumers, recovery of a
PrepareCommit after kill -9, the timeout abort, Kafka's ``kafka-transactions.sh``,
and the bad-input answers of row B12 over the wire (Kafka 4.0's codes).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from engine import _native  # noqa: E402
from engine.client.wire import WireClient  # noqa: E402
from engine.coordinator.records import partition_for  # noqa: E402
from engine.protocol.messages import ApiKey  # noqa: E402
from tests.serving import ServeProcess, find_kafka  # noqa: E402

QUIET = {"log_level": 0, "logger": __import__("logging").getLogger("rdkafka-quiet")}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = ServeProcess(tmp_path_factory.mktemp("txn"), "--config", "group.initial.rebalance.delay.ms=0",
                     "--config", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200").start()
    yield s
    s.stop()


def _topic(bootstrap: str, name: str, partitions: int = 2) -> str:
    name = f"{name}-{uuid.uuid4().hex[:6]}"         # unique: the tests also run against a Kafka
    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def _producer(bootstrap: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0, **QUIET, **extra})
    p.init_transactions(30)
    return p


def _read(bootstrap: str, topic: str, partitions: int, isolation: str, expect: int | None = None,
          wait: float = 3.0) -> list[bytes]:
    """Every record value of `topic` under `isolation`, polling until `expect` arrived (or until
    `wait` seconds passed without more)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                  "isolation.level": isolation, **QUIET})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    deadline = time.monotonic() + (15 if expect is not None else wait)
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None or m.error():
                if expect is not None and len(out) >= expect:
                    break
                continue
            out.append(m.value())
    finally:
        c.close()
    return sorted(out)


def _describe(bootstrap: str, tid: str) -> dict:
    with WireClient(bootstrap) as w:
        r = w._call(None, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]}, version=0)
    return r["transaction_states"][0]


def _wait_state(bootstrap: str, tid: str, state: str, timeout: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        d = _describe(bootstrap, tid)
        if d["transaction_state"] == state or time.monotonic() > deadline:
            return d
        time.sleep(0.1)


def test_commit_and_abort(srv):
    topic = _topic(srv.bootstrap, "tx-commit-abort")
    p = _producer(srv.bootstrap, "tx-ca")
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, b"c%d" % i, partition=i % 2)
    p.commit_transaction(30)
    d = _wait_state(srv.bootstrap, "tx-ca", "CompleteCommit")
    assert d["error_code"] == 0 and d["transaction_state"] == "CompleteCommit" and d["topics"] == []
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, b"a%d" % i, partition=i % 2)
    p.flush(10)
    d = _describe(srv.bootstrap, "tx-ca")
    assert d["transaction_state"] == "Ongoing"
    assert sorted((t["topic"], sorted(t["partitions"])) for t in d["topics"]) == [(topic, [0, 1])]
    p.abort_transaction(30)
    assert _wait_state(srv.bootstrap, "tx-ca", "CompleteAbort")["transaction_state"] == "CompleteAbort"
    # committed records only under read_committed; all of them under read_uncommitted
    assert _read(srv.bootstrap, topic, 2, "read_committed") == sorted(b"c%d" % i for i in range(6))
    assert _read(srv.bootstrap, topic, 2, "read_uncommitted", expect=10) == sorted(
        [b"c%d" % i for i in range(6)] + [b"a%d" % i for i in range(4)])


def test_second_instance_fences_the_first(srv):
    topic = _topic(srv.bootstrap, "tx-fence")
    p1 = _producer(srv.bootstrap, "tx-fence-id")
    p1.begin_transaction()
    p1.produce(topic, b"zombie", partition=0)
    p1.flush(10)
    before = _describe(srv.bootstrap, "tx-fence-id")
    p2 = _producer(srv.bootstrap, "tx-fence-id")     # aborts p1's transaction, bumps the epoch
    after = _describe(srv.bootstrap, "tx-fence-id")
    assert after["producer_id"] == before["producer_id"]
    assert after["producer_epoch"] >= before["producer_epoch"] + 1
    assert after["transaction_state"] == "Empty"
    with pytest.raises(KafkaException) as ei:
        p1.commit_transaction(10)
    err = ei.value.args[0]
    assert err.fatal() and err.code() in (confluent_kafka.KafkaError._FENCED,
                                           confluent_kafka.KafkaError.PRODUCER_FENCED,
                                           confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH), err
    p2.begin_transaction()
    p2.produce(topic, b"live", partition=0)
    p2.commit_transaction(30)
    assert _read(srv.bootstrap, topic, 1, "read_committed") == [b"live"]


def test_send_offsets_visible_only_after_commit(srv):
    src = _topic(srv.bootstrap, "tx-src", 1)
    dst = _topic(srv.bootstrap, "tx-dst", 1)
    plain = Producer({"bootstrap.servers": srv.bootstrap, **QUIET})
    for i in range(5):
        plain.produce(src, b"in%d" % i, partition=0)
    plain.flush(10)
    c = Consumer({"bootstrap.servers": srv.bootstrap, "group.id": "tx-group", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed", **QUIET})
    c.subscribe([src])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == 5
    admin = AdminClient({"bootstrap.servers": srv.bootstrap})

    def committed():
        from confluent_kafka import ConsumerGroupTopicPartitions
        f = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("tx-group", [TopicPartition(src, 0)])])
        return f["tx-group"].result(10).topic_partitions[0].offset

    p = _producer(srv.bootstrap, "tx-offsets")
    # aborted first: the offsets never become the group's
    p.begin_transaction()
    p.produce(dst, b"out-aborted", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 3)], c.consumer_group_metadata(), 10)
    assert committed() < 0
    p.abort_transaction(30)
    assert committed() < 0
    # committed: visible only after the commit
    p.begin_transaction()
    p.produce(dst, b"out", partition=0)
    p.send_offsets_to_transaction([TopicPartition(src, 0, 5)], c.consumer_group_metadata(), 10)
    assert committed() < 0                           # pending, not yet the group's
    with WireClient(srv.bootstrap) as w:             # OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT
        r = w._call(None, ApiKey.OFFSET_FETCH, {"groups": [{"group_id": "tx-group", "topics": [
            {"name": src, "partition_indexes": [0]}]}], "require_stable": True}, version=8)
        part = r["groups"][0]["topics"][0]["partitions"][0]
        assert (part["error_code"], part["committed_offset"]) == (88, -1)
    p.commit_transaction(30)
    deadline = time.monotonic() + 10
    while committed() != 5 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert committed() == 5
    c.close()
    assert _read(srv.bootstrap, dst, 1, "read_committed") == [b"out"]


def test_timed_out_transaction_is_aborted_and_fenced(srv):
    topic = _topic(srv.bootstrap, "tx-timeout", 1)
    p = _producer(srv.bootstrap, "tx-timeout-id", **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce(topic, b"hung", partition=0)
    p.flush(10)
    epoch = _describe(srv.bootstrap, "tx-timeout-id")["producer_epoch"]
    d = _wait_state(srv.bootstrap, "tx-timeout-id", "CompleteAbort", timeout=10)
    assert d["transaction_state"] == "CompleteAbort" and d["producer_epoch"] == epoch + 1
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    assert _read(srv.bootstrap, topic, 1, "read_committed") == []


def test_bad_input_answers(srv):
    """Row B12 for transactions, Kafka 4.0's codes."""
    topic = _topic(srv.bootstrap, "tx-bad", 2)
    tid = f"tx-b-{uuid.uuid4().hex[:6]}"
    with WireClient(srv.bootstrap) as w:
        def call(key, body, v):
            return w._call(None, key, body, version=v)

        for _ in range(100):        # as clients do: find the coordinator (creates __transaction_state)
            if call(ApiKey.FIND_COORDINATOR, {"key_type": 1, "coordinator_keys": [tid]}, 4)[
                    "coordinators"][0]["error_code"] == 0:
                break
            time.sleep(0.1)

        def init(tid, timeout=60000, pid=-1, epoch=-1, v=4):
            for _ in range(100):
                r = call(ApiKey.INIT_PRODUCER_ID, {"transactional_id": tid, "transaction_timeout": timeout,
                                                   "producer_id": pid, "producer_epoch": epoch}, v)
                if r["error_code"] not in (14, 15, 16, 51):   # loading / being created, concurrent
                    return r
                time.sleep(0.1)
            return r

        assert init(tid, timeout=10**9)["error_code"] == 50           # INVALID_TRANSACTION_TIMEOUT
        r = init(tid)
        pid, epoch = r["producer_id"], r["producer_epoch"]
        assert r["error_code"] == 0 and pid >= 0

        def end(commit, e=None, v=1):
            return call(ApiKey.END_TXN, {"transactional_id": tid, "producer_id": pid,
                                         "producer_epoch": epoch if e is None else e, "committed": commit}, v)

        assert end(True)["error_code"] == 48                              # INVALID_TXN_STATE: no txn

        def add(parts, e=None, v=0):
            r = call(ApiKey.ADD_PARTITIONS_TO_TXN, {
                "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch if e is None else e,
                "v3_and_below_topics": [{"name": topic, "partitions": parts}]}, v)
            return [p["partition_error_code"] for t in r["results_by_topic_v3_and_below"]
                    for p in t["results_by_partition"]]

        assert add([0]) == [0]
        r = call(ApiKey.ADD_PARTITIONS_TO_TXN, {
            "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": "no-such-topic", "partitions": [0]},
                                    {"name": topic, "partitions": [1]}]}, 0)
        assert {(t["name"], p["partition_index"]): p["partition_error_code"]
                for t in r["results_by_topic_v3_and_below"] for p in t["results_by_partition"]} == \
            {("no-such-topic", 0): 3, (topic, 1): 55}       # the rest OPERATION_NOT_ATTEMPTED
        # KIP-890 verify-only (v4): partition 0 is in the transaction, 1 is not
        r = call(ApiKey.ADD_PARTITIONS_TO_TXN, {"transactions": [{
            "transactional_id": tid, "producer_id": pid, "producer_epoch": epoch, "verify_only": True,
            "topics": [{"name": topic, "partitions": [0, 1]}]}]}, 5)
        codes = {p["partition_index"]: p["partition_error_code"]
                 for p in r["results_by_transaction"][0]["topic_results"][0]["results_by_partition"]}
        assert codes == {0: 0, 1: 120}                                    # TRANSACTION_ABORTABLE
        # Produce verification: a transactional batch for partition 1 (not added) is refused
        b = _native.BatchBuilder()
        b.append(b"sneaky", None, None, int(time.time() * 1000))
        batch = b.build(0, 0, pid, epoch, 0, True)
        hw_before = w.list_offsets({(topic, 1): -1})[(topic, 1)][0]
        r = call(ApiKey.PRODUCE, {"transactional_id": tid, "acks": -1, "timeout": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 1, "records": batch}]}]}, 9)
        part = r["responses"][0]["partition_responses"][0]
        assert (part["error_code"], part["error_message"]) == (48, "Partition was not added to the transaction")
        assert w.list_offsets({(topic, 1): -1})[(topic, 1)][0] == hw_before     # nothing appended
        # stale epochs: INVALID_PRODUCER_EPOCH for old versions, PRODUCER_FENCED from v2
        assert add([0], e=epoch - 1 if epoch > 0 else epoch + 5) == [47]
        assert end(True, e=epoch + 5, v=1)["error_code"] == 47
        assert end(True, e=epoch + 5, v=3)["error_code"] == 90
        # a second instance while the transaction is Ongoing: fenced, aborted, CONCURRENT_TRANSACTIONS
        r = call(ApiKey.INIT_PRODUCER_ID, {"transactional_id": tid, "transaction_timeout": 60000,
                                           "producer_id": -1, "producer_epoch": -1}, 4)
        assert r["error_code"] == 51
        r = init(tid)
        current = r["producer_epoch"]       # bumped by the fence and again now (Kafka at TV2: thrice)
        assert r["error_code"] == 0 and r["producer_id"] == pid and current >= epoch + 2
        # the fenced instance: EndTxn and TxnOffsetCommit refused
        assert end(True, v=3)["error_code"] == 90
        for _ in range(100):         # as clients do: find the group's coordinator first
            if call(ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": ["g"]}, 4)[
                    "coordinators"][0]["error_code"] == 0:
                break
            time.sleep(0.1)
        for _ in range(100):
            r = call(ApiKey.TXN_OFFSET_COMMIT, {
                "transactional_id": tid, "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
                "generation_id": -1, "member_id": "", "group_instance_id": None,
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                           "committed_leader_epoch": -1,
                                                           "committed_metadata": ""}]}]}, 3)
            if r["topics"][0]["partitions"][0]["error_code"] not in (14, 15, 16):   # group coordinator loading
                break
            time.sleep(0.1)
        assert r["topics"][0]["partitions"][0]["error_code"] == 47      # INVALID_PRODUCER_EPOCH (Kafka 4.0)
        # KIP-360: the current id and epoch bump it; a stale pair is fenced
        r = init(tid, pid=pid, epoch=current)
        assert (r["error_code"], r["producer_id"], r["producer_epoch"]) == (0, pid, current + 1)
        assert init(tid, pid=pid, epoch=epoch)["error_code"] == 90
        assert _describe(srv.bootstrap, tid)["producer_epoch"] == current + 1
        # unknown ids
        assert _describe(srv.bootstrap, "never-seen")["error_code"] == 105
        assert call(ApiKey.END_TXN, {"transactional_id": "never-seen", "producer_id": 1, "producer_epoch": 0,
                                     "committed": True}, 1)["error_code"] == 49   # INVALID_PRODUCER_ID_MAPPING


def _append_txn_state(data_dir: str, tid: str, record) -> None:
    """Write a __transaction_state record as the coordinator does (Kafka's format)."""
    import engine
    from engine.coordinator import txn_records as tr
    with engine.open(data_dir) as eng:
        n = eng.topic_metadata(tr.TRANSACTION_STATE_TOPIC).partitions
        b = _native.BatchBuilder()
        b.append(tr.encode_txn_value(record), tr.encode_txn_key(tid), None, int(time.time() * 1000))
        eng.log(tr.TRANSACTION_STATE_TOPIC, partition_for(tid, n)).append(b.build(0))


def test_recovery_after_kill9(tmp_path):
    """kill -9 with one transaction whose PrepareCommit is in the log but no marker written
    (the coordinator died between the two), and one Ongoing: after the restart the first
    gets its COMMIT markers and completes, the second times out and is aborted."""
    from engine.coordinator import txn_records as tr
    s = ServeProcess(tmp_path, "--config", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200").start()
    try:
        topic = _topic(s.bootstrap, "tx-crash", 2)
        p = _producer(s.bootstrap, "tx-crash-commit")
        p.begin_transaction()
        for i in range(4):
            p.produce(topic, b"k%d" % i, partition=i % 2)
        p.flush(10)
        hung = _producer(s.bootstrap, "tx-crash-hung", **{"transaction.timeout.ms": 2000})
        hung.begin_transaction()
        hung.produce(topic, b"hung", partition=0)
        hung.flush(10)
        d = _describe(s.bootstrap, "tx-crash-commit")
        assert d["transaction_state"] == "Ongoing"
        s.kill9()
        now = int(time.time() * 1000)
        parts = frozenset((t["topic"], q) for t in d["topics"] for q in t["partitions"])
        _append_txn_state(s.data, "tx-crash-commit", tr.TxnRecord(
            d["producer_id"], d["producer_epoch"], 60000, tr.PREPARE_COMMIT, parts, now, now - 1000))
        s.start()
        assert _wait_state(s.bootstrap, "tx-crash-commit", "CompleteCommit")["transaction_state"] == "CompleteCommit"
        assert _wait_state(s.bootstrap, "tx-crash-hung", "CompleteAbort")["transaction_state"] == "CompleteAbort"
        assert _read(s.bootstrap, topic, 2, "read_committed", expect=4) == [b"k0", b"k1", b"k2", b"k3"]
        with open(s.log_path) as f:
            assert "was PrepareCommit at load" in f.read()
    finally:
        s.stop()


def test_kafka_transactions_tool(srv):
    home, why = find_kafka()
    if home is None:
        pytest.skip(why)
    topic = _topic(srv.bootstrap, "tx-tool", 1)
    tid = f"tx-tool-{uuid.uuid4().hex[:6]}"
    p = _producer(srv.bootstrap, tid)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(10)

    def tool(*args):
        r = subprocess.run([os.path.join(home, "bin", "kafka-transactions.sh"), "--bootstrap-server",
                            srv.bootstrap, *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout

    d = _describe(srv.bootstrap, tid)
    pid = d["producer_id"]
    out = tool("list")
    rows = [ln.split() for ln in out.splitlines()]
    assert [tid, str(pid), "Ongoing"] in [r[:1] + r[2:4] for r in rows if len(r) >= 4], out
    out = tool("describe", "--transactional-id", tid)
    row = out.splitlines()[1].split()
    assert row[1:5] == [tid, str(pid), str(d["producer_epoch"]), "Ongoing"] and row[-1] == f"{topic}-0", out
    out = tool("describe-producers", "--topic", topic, "--partition", "0")
    lines = [ln.split() for ln in out.splitlines()[1:] if ln.strip()]
    mine = [ln for ln in lines if ln[0] == str(pid)]
    assert mine and mine[0][-1] == "0", out       # CurrentTransactionStartOffset: the open txn's first offset
    p.commit_transaction(30)
    out = tool("describe-producers", "--topic", topic, "--partition", "0")
    mine = [ln.split() for ln in out.splitlines()[1:] if ln.split() and ln.split()[0] == str(pid)]
    assert mine and mine[0][-1] == "None", out     # no open transaction
