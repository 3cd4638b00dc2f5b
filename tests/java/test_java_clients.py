"""Kafka's Java clients as users run them, against one node and a 3-broker cluster of ours and
against Apache Kafka 4.0 as a 3-node cluster (the differential side): the same assertions for
every target.

- Kafka Streams exactly-once (``exactly_once_v2``, in-memory stores): a word count whose every
  update must be committed exactly once — also when an application instance is SIGKILLed and
  restarted, and (clusters) when the broker coordinating its transactions is SIGKILLed.
- The Java producer's transactional API with ``sendOffsetsToTransaction``, the group's and the
  transactional id's coordinators on different brokers (clusters).

The apps are Java sources in tests/java/apps, compiled with ``javac`` against Kafka's jars
(tests/java/jvm.py); skipped, saying why, without a JDK or Kafka's distribution.
"""

from __future__ import annotations

import collections
import os
import random
import uuid

import pytest

from tests.java import jvm as javaapps

from .conftest import TARGETS, make_target, wait_until

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, KafkaException  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

VOCAB = [f"w{i:02d}" for i in range(40)]


@pytest.fixture(scope="module", params=list(TARGETS))
def target(request, tmp_path_factory, jvm):
    t = make_target(request.param, tmp_path_factory)
    yield t
    t.close()


# -- helpers ----------------------------------------------------------------------------------
def create_topics(target, *names: str, partitions: int = 2) -> None:
    """Create the topics; a request librdkafka itself dropped (its bootstrap broker handle
    replaced once the cluster's metadata came: _DESTROY_BROKER, seen against Kafka's 3 nodes) is
    sent again by a new admin, where TOPIC_ALREADY_EXISTS means the first one got through."""
    rf = target.replication_factor
    config = {"min.insync.replicas": "2"} if rf >= 3 else {}
    todo = list(names)
    for attempt in range(3):
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        futures = admin.create_topics([NewTopic(n, partitions, rf, config=config) for n in todo],
                                      operation_timeout=30)
        retry = []
        for name, f in futures.items():
            try:
                f.result(60)
            except KafkaException as e:
                code = e.args[0].code()
                if attempt and code == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                if code != KafkaError._DESTROY_BROKER or attempt == 2:
                    raise
                retry.append(name)
        if not retry:
            return
        todo = retry


def produce(target, topic: str, items: list[tuple[str, str]]) -> None:
    p = ck.Producer({"bootstrap.servers": target.bootstrap, "enable.idempotence": True,
                     "message.timeout.ms": 120000})
    failed = []
    for k, v in items:
        p.produce(topic, key=k, value=v, on_delivery=lambda err, _m: err and failed.append(err))
    assert p.flush(120) == 0 and not failed, failed[:3]


def read_committed(target, topic: str, expected: int, timeout: float) -> list:
    """Every committed record of `topic` as (partition, offset, key, value), polling until
    `expected` are seen (then 1 s more, for any extra) or `timeout`."""
    c = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    extra_until = None
    import time
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for msg in c.consume(500, 0.5):
                if msg.error() is None:
                    out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
            if len(out) >= expected:
                extra_until = extra_until or time.monotonic() + 1.0
                if time.monotonic() >= extra_until:
                    break
    finally:
        c.close()
    return out


def word_lines(n: int, seed: int) -> list[tuple[str, str]]:
    rnd = random.Random(seed)
    return [(str(i), " ".join(rnd.choice(VOCAB) for _ in range(5))) for i in range(n)]


def check_counts(records: list, lines: list[tuple[str, str]], restarts: int = 0) -> None:
    """Each word's updates, in offset order, are exactly 1, 2, ..., its number of occurrences
    (``restarts`` + 1 times over, for runs started over from scratch): nothing lost, nothing
    counted twice, nothing from an aborted transaction."""
    want = collections.Counter(w for _k, line in lines for w in line.split())
    seen: dict[str, list[int]] = collections.defaultdict(list)
    for _p, _o, key, value in sorted(records, key=lambda r: (r[0], r[1])):
        seen[key.decode()].append(int.from_bytes(value, "big", signed=True))
    runs = restarts + 1
    bad = {w: (n, seen.get(w, [])[:5], len(seen.get(w, []))) for w, n in want.items()
           if seen.get(w) != list(range(1, n // runs + 1)) * runs}
    assert not bad, f"{len(bad)} words with wrong updates (word: occurrences, first values, count): " \
                    f"{dict(list(bad.items())[:5])}"
    assert set(seen) == set(want)


def transaction_coordinator(target, prefix: str) -> int:
    """The broker whose ListTransactions lists an id starting with `prefix` (its coordinator)."""
    from tests.differential.wire import Client

    def find():
        for node in target.node_ids:
            try:
                with Client(target.port(node)) as c:
                    r = c.call(66, 0, {"state_filters": [], "producer_id_filters": []})
            except OSError:
                continue
            if any(s["transactional_id"].startswith(prefix) for s in r.get("transaction_states", [])):
                return node
        return None
    return wait_until(find, 60, f"a transaction coordinator listing {prefix}*")


class StreamsApp:
    def __init__(self, jvm, target, tmp_path, app_id: str, source: str, sink: str):
        self.jvm, self.target, self.app_id = jvm, target, app_id
        self.args = (app_id, source, sink, str(tmp_path / "state"))
        self.log_path = str(tmp_path / "streams.log")
        self.env = {"STREAMS_REPLICATION_FACTOR": str(target.replication_factor)}
        self.proc = None

    def start(self) -> StreamsApp:
        self.proc = self.jvm.start("WordCountEos", self.target.bootstrap, *self.args,
                                   log_path=self.log_path, env=self.env)
        return self

    def log_tail(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read()[-6000:].decode("utf-8", "replace")


def run_streams(jvm, target, tmp_path, fault) -> None:
    """Word count over 2 x 300 lines; `fault(app, source)` runs once the first half's output is
    flowing, then the second half is produced; every update must be committed exactly once."""
    tag = uuid.uuid4().hex[:8]
    source, sink, app_id = f"lines-{tag}", f"counts-{tag}", f"wc-{tag}"
    create_topics(target, source, sink)
    lines = word_lines(600, seed=len(tag))
    produce(target, source, lines[:300])
    app = StreamsApp(jvm, target, tmp_path, app_id, source, sink).start()
    try:
        wait_until(lambda: len(read_committed(target, sink, 300, 3)) >= 300, 120,
                   "the first committed counts")
        fault(app, source)
        produce(target, source, lines[300:])
        records = read_committed(target, sink, 3000, 180)
        assert len(records) >= 3000, f"{len(records)} of 3000 updates committed\n{app.log_tail()}"
    finally:
        javaapps.stop(app.proc)
    check_counts(records, lines)


# -- Kafka Streams exactly-once -----------------------------------------------------------------
def test_streams_exactly_once_with_an_instance_killed_and_restarted(target, jvm, tmp_path):
    def kill_and_restart(app, _source):
        javaapps.kill9(app.proc)
        app.start()
    run_streams(jvm, target, tmp_path, kill_and_restart)


def test_streams_exactly_once_with_its_transaction_coordinator_killed(target, jvm, tmp_path):
    if len(target.node_ids) < 3:
        pytest.skip("one node: killing the transaction coordinator kills the cluster")
    killed = []

    def kill_coordinator(app, _source):
        node = transaction_coordinator(target, app.app_id)
        target.kill9(node)
        killed.append(node)
    try:
        run_streams(jvm, target, tmp_path, kill_coordinator)
    finally:
        for node in killed:
            target.restart(node)


def test_streams_exactly_once_again_after_kafkas_application_reset_tool(target, jvm, tmp_path):
    """Run, stop, ``kafka-streams-application-reset.sh``, run again: the second run starts over
    from the input's beginning with empty state, so every word's updates are 1..n twice."""
    import subprocess
    tag = uuid.uuid4().hex[:8]
    source, sink, app_id = f"lines-{tag}", f"counts-{tag}", f"wc-{tag}"
    create_topics(target, source, sink)
    lines = word_lines(200, seed=7)
    produce(target, source, lines)
    app = StreamsApp(jvm, target, tmp_path, app_id, source, sink).start()
    try:
        wait_until(lambda: len(read_committed(target, sink, 1000, 3)) >= 1000, 120, "the first run's counts")
    finally:
        assert javaapps.stop(app.proc) is not None
    tool = os.path.join(jvm.home, "bin", "kafka-streams-application-reset.sh")
    reset = subprocess.run([tool, "--bootstrap-server", target.bootstrap, "--application-id", app_id,
                            "--input-topics", source, "--force"], capture_output=True, text=True, timeout=120)
    assert reset.returncode == 0, reset.stdout[-3000:] + reset.stderr[-3000:]
    (tmp_path / "again").mkdir()
    app = StreamsApp(jvm, target, tmp_path / "again", app_id, source, sink).start()
    try:
        records = read_committed(target, sink, 2000, 180)
        assert len(records) >= 2000, f"{len(records)} of 2000 updates committed\n{app.log_tail()}"
    finally:
        javaapps.stop(app.proc)
    check_counts(records, lines + lines, restarts=1)


# -- the Java producer's transactional API ---------------------------------------------------------
def _coordinators_apart(target) -> tuple[str, str]:
    """A group id and a transactional id whose coordinators are different brokers (the leaders
    of their __consumer_offsets / __transaction_state partitions, Kafka's hash rule)."""
    from engine.coordinator.records import partition_for
    warm = ck.Producer({"bootstrap.servers": target.bootstrap, "transactional.id": "warm-up"})
    warm.init_transactions(60)          # __transaction_state exists from here on
    c = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": "warm-up"})
    c.list_topics(timeout=30)
    c.close()

    def leaders():
        md = AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(timeout=30)
        out = {}
        for name in ("__consumer_offsets", "__transaction_state"):
            t = md.topics.get(name)
            if t is None or not t.partitions or any(p.leader < 0 for p in t.partitions.values()):
                return None
            out[name] = {i: p.leader for i, p in t.partitions.items()}
        return out
    lead = wait_until(leaders, 60, "leaders of both internal topics")
    co, ts = lead["__consumer_offsets"], lead["__transaction_state"]
    for i in range(1000):
        group, tid = f"copy-group-{i}", f"copy-txn-{i}"
        if co[partition_for(group, len(co))] != ts[partition_for(tid, len(ts))]:
            return group, tid
    raise AssertionError("no group / transactional id pair on different coordinators")


def test_java_producer_send_offsets_to_transaction(target, jvm, tmp_path):
    tag = uuid.uuid4().hex[:8]
    source, sink = f"in-{tag}", f"out-{tag}"
    create_topics(target, source, sink, partitions=3)
    if len(target.node_ids) > 1:
        group, tid = _coordinators_apart(target)
    else:
        group, tid = f"copy-group-{tag}", f"copy-txn-{tag}"
    items = [(f"k{i}", f"value-{i}") for i in range(300)]
    produce(target, source, items)
    log_path = str(tmp_path / "copy.log")
    proc = jvm.start("TxnCopy", target.bootstrap, group, tid, source, sink, "300", log_path=log_path)
    try:
        code = proc.wait(150)
    finally:
        javaapps.kill9(proc)
    with open(log_path) as f:
        log = f.read()
    assert code == 0 and "COPIED 300" in log, log[-6000:]
    records = read_committed(target, sink, 300, 60)
    assert sorted(v.decode() for *_x, v in records) == sorted(v.upper() for _k, v in items)
    # the group's committed offsets are the source's end offsets (committed with the data)
    c = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": group})
    try:
        parts = [ck.TopicPartition(source, p) for p in range(3)]
        committed = {tp.partition: tp.offset for tp in c.committed(parts, timeout=30)}
        ends = {p: c.get_watermark_offsets(ck.TopicPartition(source, p), timeout=30)[1] for p in range(3)}
    finally:
        c.close()
    assert committed == ends
