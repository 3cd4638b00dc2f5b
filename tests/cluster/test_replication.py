"""Replication through the ZooKeeper cluster, with real clients: leader failover under an
idempotent acks=all producer, controlled shutdown without client errors, and Kafka's own
``kafka-topics.sh --describe`` reading leaders, replicas and ISR.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

from tests.cluster.conftest import SESSION_MS, wait_for, zk_json
from tests.serving import find_kafka


def _create(bootstrap, name, partitions, rf, config=None):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    admin.create_topics([NewTopic(name, partitions, rf, config=config or {})],
                        operation_timeout=20)[name].result(30)


def _state(zkc, topic, p=0):
    return zk_json(zkc, f"/brokers/topics/{topic}/partitions/{p}/state")[0]


class Load:
    """An idempotent acks=all confluent-kafka producer sending 0, 1, 2, ... as fast as its
    delivery reports allow (at most `window` unacknowledged), recording what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, window: int = 200, **conf):
        from confluent_kafka import Producer
        self.topic = topic
        self.window = window
        self.p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                           "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                           "delivery.timeout.ms": 120000, "retry.backoff.ms": 50,
                           "retry.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 2000,
                           **conf})
        self.acked: list[int] = []
        self.ack_times: list[float] = []
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _report(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append(int(msg.value()))
            self.ack_times.append(time.monotonic())

    def _run(self):
        try:
            while not self._stop.is_set():
                if self.sent - len(self.acked) - len(self.errors) < self.window:
                    try:
                        self.p.produce(self.topic, str(self.sent).encode(), key=b"k", on_delivery=self._report)
                        self.sent += 1
                    except BufferError:
                        pass
                self.p.poll(0.001 if self.sent % 50 else 0)
            self.p.flush(120)
        except Exception as e:      # noqa: BLE001 - a fatal producer error (unclean election) is
            self.errors.append(f"fatal: {e!r}")   # recorded, not left in a thread's traceback

    def start(self):
        self._t.start()
        return self

    def stop(self):
        self._stop.set()
        self._t.join(180)
        self.close()

    def close(self):
        """End the producer. Queued delivery callbacks hold bound methods of this Load, which holds
        the producer: a cycle the garbage collector cannot see through librdkafka, so a producer
        left with queued messages (after a fatal error) lived for the rest of the suite, printing
        connect errors. Purge, serve the callbacks (breaking the cycle), then close."""
        with contextlib.suppress(Exception):
            self.p.purge()
            self.p.poll(0)
            self.p.close()

    def max_gap(self) -> float:
        t = self.ack_times
        return max((b - a for a, b in itertools.pairwise(t)), default=0.0)


def _consume_all(bootstrap, topic, partitions) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                  "group.id": f"check-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    ends = {}
    for p in range(partitions):
        ends[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, pos = [], {p: 0 for p in range(partitions)}
    deadline = time.monotonic() + 60
    while any(pos[p] < ends[p] for p in pos) and time.monotonic() < deadline:
        for msg in c.consume(1000, 1.0):
            if msg.error() is None:
                got.append(int(msg.value()))
                pos[msg.partition()] = msg.offset() + 1
    c.close()
    return got


def _check(load: Load, consumed: list[int]) -> tuple[int, int]:
    acked = set(load.acked)
    seen: dict[int, int] = {}
    for v in consumed:
        seen[v] = seen.get(v, 0) + 1
    lost = sorted(acked - set(seen))
    dup = sorted(v for v, n in seen.items() if n > 1)
    print(f"acked={len(acked)} lost={len(lost)} dup={len(dup)} errors={len(load.errors)} "
          f"max_unavailability={load.max_gap():.2f}s")
    return len(lost), len(dup)


def test_leader_sigkill_idempotent_producer_loses_nothing(zk_client, cluster_factory):
    c = cluster_factory(3)
    topic = f"fo-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    st = wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state")
                  and _state(zk_client, topic), what="the partition state")
    load = Load(c.bootstrap, topic).start()
    wait_for(lambda: len(load.acked) >= 2000, timeout=60, what="2000 acknowledged records")
    wait_for(lambda: len(_state(zk_client, topic)["isr"]) == 3, timeout=30, what="a full ISR")
    old = _state(zk_client, topic)["leader"]
    before = len(load.acked)
    c.brokers[old].kill9()
    new = wait_for(lambda: _state(zk_client, topic)["leader"] not in (old, -1) and _state(zk_client, topic),
                   timeout=SESSION_MS / 1000 + 30, what="a new leader")
    assert new["leader"] in set(st["isr"]) - {old}              # from the ISR
    assert new["leader_epoch"] > st["leader_epoch"]
    # the producer chases the new leader through Metadata and goes on
    wait_for(lambda: len(load.acked) >= before + 2000, timeout=90, what="2000 more acknowledgements")
    load.stop()
    assert load.errors == []
    lost, dup = _check(load, _consume_all(c.bootstrap, topic, 1))
    assert (lost, dup) == (0, 0)


def test_controlled_shutdown_no_client_errors(zk_client, cluster_factory):
    c = cluster_factory(3)
    topic = f"cs-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 3, 3, {"min.insync.replicas": "2"})
    wait_for(lambda: len(zk_client.get_children(f"/brokers/topics/{topic}/partitions")) == 3,
             what="partition states")
    load = Load(c.bootstrap, topic).start()
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    victim = _state(zk_client, topic, 0)["leader"]
    states = {p: _state(zk_client, topic, p) for p in range(3)}
    before = len(load.acked)
    code, log = c.brokers[victim].stop()
    assert code == 0 and f"controlled shutdown of broker {victim}: no leadership left" in log
    # before it stopped, the controller moved its leaderships (epoch + 1) and took it out of the ISRs
    for p in range(3):
        st = _state(zk_client, topic, p)
        assert st["leader"] != victim and victim not in st["isr"]
        if states[p]["leader"] == victim:
            assert st["leader_epoch"] == states[p]["leader_epoch"] + 1
    wait_for(lambda: len(load.acked) >= before + 1000, timeout=60, what="1000 more acknowledgements")
    load.stop()
    assert load.errors == []
    lost, dup = _check(load, _consume_all(c.bootstrap, topic, 3))
    assert (lost, dup) == (0, 0)


def test_kafka_topics_describe_shows_leader_replicas_isr(zk_client, cluster_factory):
    home, why = find_kafka()
    if home is None:
        pytest.skip(why)
    c = cluster_factory(3)
    topic = f"desc-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[2].bootstrap, topic, 3, 3)
    wait_for(lambda: len(zk_client.get_children(f"/brokers/topics/{topic}/partitions")) == 3,
             what="partition states")
    out = subprocess.run([os.path.join(home, "bin", "kafka-topics.sh"), "--bootstrap-server",
                          c.brokers[1].bootstrap, "--describe", "--topic", topic],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if "Partition:" in ln]
    assert len(lines) == 3, out.stdout
    assert "ReplicationFactor: 3" in out.stdout
    for p, line in enumerate(sorted(lines, key=lambda s: int(s.split("Partition:")[1].split()[0]))):
        st = _state(zk_client, topic, p)
        a = zk_json(zk_client, f"/brokers/topics/{topic}")[0]["partitions"][str(p)]
        fields = {k.strip(): v.strip() for k, _, v in (part.partition(":") for part in line.split("\t"))}
        assert int(fields["Leader"]) == st["leader"]
        assert [int(x) for x in fields["Replicas"].split(",")] == a
        assert sorted(int(x) for x in fields["Isr"].split(",")) == sorted(st["isr"])


def _wait_full_isr(zkc, topic, partitions, timeout=60):
    wait_for(lambda: all(len(_state(zkc, topic, p)["isr"]) == 3 for p in range(partitions)),
             timeout=timeout, what="every ISR back to 3 replicas")


def _preferred_leaders(zkc, topic, partitions):
    a = zk_json(zkc, f"/brokers/topics/{topic}")[0]["partitions"]
    return all(_state(zkc, topic, p)["leader"] == a[str(p)][0] for p in range(partitions))


def test_preferred_leader_election_api(zk_client, cluster_factory):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient
    c = cluster_factory(3, "--config", "auto.leader.rebalance.enable=false",
                        "--config", "replica.lag.time.max.ms=2000")
    topic = f"pref-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 3, 3)
    wait_for(lambda: len(zk_client.get_children(f"/brokers/topics/{topic}/partitions")) == 3,
             what="partition states")
    a = zk_json(zk_client, f"/brokers/topics/{topic}")[0]["partitions"]
    victim = a["0"][0]
    c.brokers[victim].kill9()
    wait_for(lambda: _state(zk_client, topic, 0)["leader"] not in (victim, -1), timeout=SESSION_MS / 1000 + 30,
             what="leadership moved off the killed broker")
    c.brokers[victim].start()
    _wait_full_isr(zk_client, topic, 3)            # the returning follower caught up and rejoined
    assert _state(zk_client, topic, 0)["leader"] != victim      # no automatic move back
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4"})
    res = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(3)],
                              ).result(60)
    codes = {tp.partition: (err.code() if err is not None else 0) for tp, err in res.items()}
    for p in range(3):
        # elected now, or ELECTION_NOT_NEEDED where the preferred replica already led
        assert codes[p] in (0, 84), codes
        assert _state(zk_client, topic, p)["leader"] == a[str(p)][0]
    assert codes[0] == 0


def test_auto_leader_rebalance(zk_client, cluster_factory):
    c = cluster_factory(3, "--config", "leader.imbalance.check.interval.seconds=1",
                        "--config", "replica.lag.time.max.ms=2000")
    topic = f"auto-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 3, 3)
    wait_for(lambda: len(zk_client.get_children(f"/brokers/topics/{topic}/partitions")) == 3,
             what="partition states")
    a = zk_json(zk_client, f"/brokers/topics/{topic}")[0]["partitions"]
    victim = a["1"][0]
    c.brokers[victim].kill9()
    wait_for(lambda: _state(zk_client, topic, 1)["leader"] not in (victim, -1), timeout=SESSION_MS / 1000 + 30,
             what="leadership moved off the killed broker")
    epoch = _state(zk_client, topic, 1)["leader_epoch"]
    c.brokers[victim].start()
    wait_for(lambda: _preferred_leaders(zk_client, topic, 3), timeout=60,
             what="the preferred replicas leading again")
    assert _state(zk_client, topic, 1)["leader_epoch"] == epoch + 1


def test_zookeeper_restart_loses_nothing(zk, zk_client, cluster_factory):
    """ZooKeeper itself stopped and restarted (same data, same port) under an idempotent acks=all
    producer: the brokers get their sessions back, leadership resumes, nothing acknowledged is
    lost or duplicated, and the producer sees no error (only a pause)."""
    c = cluster_factory(3)
    topic = f"zkr-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 2, 3, {"min.insync.replicas": "2"})
    wait_for(lambda: all(zk_client.exists(f"/brokers/topics/{topic}/partitions/{p}/state") for p in (0, 1)),
             what="the partition states")
    load = Load(c.bootstrap, topic).start()
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    zk.stop()
    time.sleep(2.0)                              # well within the brokers' session timeout
    zk.start()
    before = len(load.acked)
    wait_for(lambda: len(load.acked) >= before + 2000, timeout=90,
             what="2000 more acknowledgements after ZooKeeper's restart")
    load.stop()
    assert load.errors == []
    assert sorted(zk_client.get_children("/brokers/ids"), key=int) == ["1", "2", "3"]
    lost, dup = _check(load, _consume_all(c.bootstrap, topic, 2))
    assert (lost, dup) == (0, 0)


@pytest.mark.skipif(os.environ.get("ENGINE_SLOW") != "1",
                    reason="slow: set ENGINE_SLOW=1 (one run of an earlier, 60 s-pause variant saw a broker "
                           "log a traceback after SIGCONT, not reproduced since: 9 runs of this one and 4 "
                           "of the 60 s variant; kept out of CI until explained)")
def test_leader_stopped_past_its_session_loses_nothing(zk_client, cluster_factory):
    """The leader SIGSTOPped (a GC pause, a frozen VM) past the ZooKeeper session timeout: the
    controller elects another leader from the ISR; on SIGCONT the old leader finds itself deposed,
    follows, truncates by leader epoch and rejoins the ISR. Nothing acknowledged is lost or
    duplicated."""
    c = cluster_factory(3)
    topic = f"stop-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state") and _state(zk_client, topic),
             what="the partition state")
    # requests in flight to the stopped leader hang until the client gives up on them
    # (librdkafka's socket.timeout.ms, 60 s by default; Kafka's own leader would hang the same way)
    load = Load(c.bootstrap, topic, **{"socket.timeout.ms": 10000}).start()
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    wait_for(lambda: len(_state(zk_client, topic)["isr"]) == 3, timeout=30, what="a full ISR")
    old = _state(zk_client, topic)["leader"]
    pid = c.brokers[old].proc.pid
    os.killpg(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: _state(zk_client, topic)["leader"] not in (old, -1), timeout=SESSION_MS / 1000 + 30,
                 what="a new leader while the old one is stopped")
        before = len(load.acked)
        wait_for(lambda: len(load.acked) >= before + 1000, timeout=90, what="1000 acknowledgements from the new leader")
    finally:
        os.killpg(pid, signal.SIGCONT)
    wait_for(lambda: old in _state(zk_client, topic)["isr"], timeout=60, what="the old leader back in the ISR")
    load.stop()
    assert load.errors == []
    lost, dup = _check(load, _consume_all(c.bootstrap, topic, 1))
    assert (lost, dup) == (0, 0)
