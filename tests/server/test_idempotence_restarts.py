"""Acceptance: an idempotent confluent-kafka producer (acks=all) keeps sending while the broker
process is SIGKILLed and restarted on the same port several times; afterwards every acked record
is in the log exactly once and no record is there twice.

Why it can fail: a batch written but not yet acknowledged survives the kill (page cache, or the
disk with flush.messages=1); the producer retries it after the restart, and only producer state
rebuilt from the log (snapshot + replay of the batch headers above it) recognises the retry.
Before producer snapshots existed this test saw duplicates in both modes.
"""

from __future__ import annotations

import collections
import threading
import time

import pytest

from tests.serving import ServeProcess

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "acc"
PARTITIONS = 2
KILLS = 5


def _run(tmp_path, *args: str) -> None:
    srv = ServeProcess(tmp_path, "--config", f"num.partitions={PARTITIONS}", *args).start()
    acked: list[bytes] = []
    failed: list[tuple[bytes, str]] = []
    fatal: list[str] = []

    def on_delivery(err, msg):
        (failed.append((msg.value(), str(err))) if err is not None else acked.append(msg.value()))

    def on_error(err):
        if err.fatal():
            fatal.append(str(err))

    p = confluent_kafka.Producer({
        "bootstrap.servers": srv.bootstrap, "enable.idempotence": True, "acks": "all",
        "linger.ms": 2, "batch.num.messages": 50, "message.timeout.ms": 120000,
        "retry.backoff.ms": 20, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
        "topic.metadata.refresh.interval.ms": 1000, "error_cb": on_error})
    stop = threading.Event()
    kills = [0]

    def killer():
        while not stop.is_set() and kills[0] < KILLS:
            if stop.wait(2.5):
                break
            srv.kill9()
            kills[0] += 1
            time.sleep(0.2)
            srv.start()

    t = threading.Thread(target=killer, daemon=True)
    try:
        p.produce(TOPIC, b"warmup", on_delivery=on_delivery)
        assert p.flush(30) == 0, "the first record was not acked"
        t.start()
        i = 0
        while t.is_alive() and not fatal:
            try:
                p.produce(TOPIC, b"v%09d" % i, key=b"k%d" % (i % 7), on_delivery=on_delivery)
                i += 1
            except BufferError:
                p.poll(0.05)
            p.poll(0)
            if i % 200 == 0:
                time.sleep(0.005)   # a steady stream, not one burst
        left = p.flush(90)
        assert not fatal, f"fatal producer error: {fatal}"
        assert left == 0, f"{left} records never delivered"
    finally:
        stop.set()
        t.join(60)
    assert kills[0] == KILLS
    assert len(acked) > 1000, f"only {len(acked)} records acked"
    code, _log = srv.stop()

    import engine

    with engine.open(srv.data, read_only=True) as ro:
        values = []
        for part in range(PARTITIONS):
            values += ro.read_arrow(TOPIC, part).column("value").to_pylist()
    counts = collections.Counter(values)
    dups = {v: n for v, n in counts.items() if n > 1}
    lost = [v for v in acked if counts[v] == 0]
    assert not dups, f"{len(dups)} values stored more than once, e.g. {list(dups.items())[:5]} " \
                     f"({len(acked)} acked, {len(failed)} failed, {len(values)} stored)"
    assert not lost, f"{len(lost)} acked values missing, e.g. {lost[:5]}"
    assert len(set(acked)) == len(acked)


def test_idempotent_producer_across_kill9_restarts(tmp_path):
    _run(tmp_path)


def test_idempotent_producer_across_kill9_restarts_durable(tmp_path):
    _run(tmp_path, "--config", "log.flush.interval.messages=1")
