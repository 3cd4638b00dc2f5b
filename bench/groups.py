"""Consumer groups on the broker, with confluent-kafka (librdkafka) members.

    python -m bench.groups [--rounds 3] [--commits 2000]

Rows, each beside a reference measured in the same run against the same broker:

* rebalance: wall time from three consumers subscribing to a 12-partition
  topic until all three hold a disjoint share covering the topic; reference:
  the same for ONE consumer (the client's own join cost, the floor), so the
  ratio is what the extra members and the relayed assignment add.
  ``group.initial.rebalance.delay.ms`` is 0 here (Kafka's default 3000 ms would
  dominate both sides).
* commit latency and commits/s: synchronous ``commit(asynchronous=False)`` of
  one offset in a loop; reference: a synchronous acks=1 produce of one small
  record in a loop (the append a commit does, without the coordinator).

The broker runs as ``python -m engine serve`` in a subprocess, as users run it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time

from .broker_clients import start_broker

TOPIC = "bench-groups"
PARTITIONS = 12


def _consumer(bootstrap: str, group: str):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 10000, "heartbeat.interval.ms": 200,
                     "fetch.wait.max.ms": 50})


def rebalance_seconds(bootstrap: str, group: str, members: int) -> float:
    """Subscribe `members` consumers at once; time until their assignments cover the topic disjointly."""
    consumers = [_consumer(bootstrap, group) for _ in range(members)]
    owned: list[set] = [set() for _ in range(members)]

    def on_assign(i):
        def cb(_c, parts):
            owned[i] = {p.partition for p in parts}
        return cb

    stop = threading.Event()

    def run(i):
        while not stop.is_set():
            consumers[i].poll(0.02)

    t0 = time.perf_counter()
    for i, c in enumerate(consumers):
        c.subscribe([TOPIC], on_assign=on_assign(i))
    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    deadline = t0 + 60
    while time.perf_counter() < deadline:
        sets = list(owned)
        if sum(len(s) for s in sets) == PARTITIONS and set().union(*sets) == set(range(PARTITIONS)) \
                and all(sets):
            break
        time.sleep(0.002)
    else:
        raise RuntimeError(f"group {group} did not settle: {owned}")
    dt = time.perf_counter() - t0
    stop.set()
    for t in threads:
        t.join()
    for c in consumers:
        c.close()
    return dt


def commit_latencies(bootstrap: str, group: str, n: int) -> list[float]:
    from confluent_kafka import TopicPartition

    c = _consumer(bootstrap, group)
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        c.commit(offsets=[TopicPartition(TOPIC, 0, i + 1)], asynchronous=False)
        out.append(time.perf_counter() - t0)
    c.close()
    return out


def produce_latencies(bootstrap: str, n: int) -> list[float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    p.produce(TOPIC, b"warm", partition=0)
    p.flush(10)
    out = []
    for _i in range(n):
        t0 = time.perf_counter()
        p.produce(TOPIC, b"x" * 64, partition=0)
        p.flush(10)
        out.append(time.perf_counter() - t0)
    del p                      # librdkafka closes its connections before the broker stops
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--commits", type=int, default=2000)
    args = ap.parse_args(argv)
    from confluent_kafka.admin import AdminClient, NewTopic

    tmp = tempfile.mkdtemp(prefix="bench-groups-")
    proc, port = start_broker(os.path.join(tmp, "data"),
                              extra=["group.initial.rebalance.delay.ms=0"])
    bootstrap = f"127.0.0.1:{port}"
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
        # warm up: the offsets topic is created by the first FindCoordinator
        rebalance_seconds(bootstrap, "warm", 1)
        three, one = [], []
        for r in range(args.rounds):
            one.append(rebalance_seconds(bootstrap, f"one-{r}", 1))
            three.append(rebalance_seconds(bootstrap, f"three-{r}", 3))
        commits = commit_latencies(bootstrap, "committer", args.commits)
        produces = produce_latencies(bootstrap, args.commits)
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)

    def ms(x: float) -> str:
        return f"{x * 1000:.1f} ms"

    b3, b1 = min(three), min(one)
    cm, pm = statistics.median(commits), statistics.median(produces)
    c99 = sorted(commits)[int(len(commits) * 0.99)]
    p99 = sorted(produces)[int(len(produces) * 0.99)]
    rows = [
        ("rebalance, 3 members join 12 partitions", ms(b3), f"{ms(b1)} (1 member joins)", b3 / b1),
        ("commit latency, median", ms(cm), f"{ms(pm)} (acks=1 produce, median)", cm / pm),
        ("commit latency, p99", ms(c99), f"{ms(p99)} (acks=1 produce, p99)", c99 / p99),
        ("commits/s, one synchronous committer", f"{len(commits) / sum(commits):,.0f}/s",
         f"{len(produces) / sum(produces):,.0f}/s (sync produces)", sum(produces) / sum(commits)),
    ]
    print(f"{'row':<42} {'engine':>14}  {'reference (same run)':<36} {'ratio':>6}")
    for name, e, ref, ratio in rows:
        print(f"{name:<42} {e:>14}  {ref:<36} {ratio:>6.2f}")


if __name__ == "__main__":
    main()
