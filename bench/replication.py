"""Replication: what acks=all on replicated partitions costs, and how long a partition is
unavailable when its leader dies -- on a local 3-broker cluster of ours (ZooKeeper from Debian's
package, three ``python -m engine serve`` processes) and on a 3-node Apache Kafka 4.0 KRaft
cluster (bench/_kafka_cluster.py: three combined broker+controller nodes, static voters), all on
127.0.0.1, one cluster after the other in the same run; every row printed as ours | Kafka | ratio.

    python -m bench.replication [--brokers ours,kafka] [--records 300000] [--sizes 100,1024]
                                [--only produce|failover|paused|controlled ...] [--repeat 2]
                                [--failovers 3] [--session-ms 6000] [--quick] [--json FILE]

Kafka is found through KAFKA_HOME (the kafka_2.13-4.0.0 directory or the folder holding it) or
<repo>/../shared/kafka; without it (or java) only our rows are measured, saying so.  Kafka's
nodes get ``KAFKA_HEAP_OPTS`` (default ``-Xmx512m -Xms512m``) and are stopped by process group.

Rows (the same on both clusters):

* produce, per record size: confluent-kafka to a 3-partition topic with RF 3 and
  ``min.insync.replicas=2``, ``acks=all``, against ``acks=1`` to a 3-partition RF 1 topic on the
  same cluster (leaders spread over the three brokers in both), same records -- ratio
  all/RF3 over 1/RF1 (LinkedIn's 2014 figure for Kafka 0.8: 0.51, one machine per broker; here the
  three brokers share the client's cores, so the CPU time of the three brokers per record is
  printed too: RF 3 writes every byte three times).  After one unmeasured round of both (on each
cluster: Kafka's JVMs start cold), interleaved, best of ``--repeat``;
  ``linger.ms=5``, ``batch.size=1 MiB``, values random hex, no compression.
* failover (SIGKILL): an idempotent ``acks=all`` producer sends continuously to one RF 3
  partition (``min.insync.replicas=2``); its leader's process is SIGKILLed.  Reported: seconds from
  the kill to the first acknowledgement of a record sent after it, and the gap between the last
  acknowledgement before and the first after.  The killed broker is restarted and back in the ISR
  before the next repetition.  Bound -- ours: the peers see the killed process's connections
  close, confirm it with refused connects and remove its ZooKeeper registration, so the
  controller elects at once (engine/cluster/liveness.py; ``zookeeper.session.timeout.ms`` =
  ``--session-ms`` bounds only a paused or unreachable broker); Kafka: the
  KRaft controller fences a broker whose heartbeats stop for ``broker.session.timeout.ms``,
  measured twice, at Kafka's default (9000) and on a second Kafka cluster at ``--session-ms``
  (with ``broker.heartbeat.interval.ms`` min(2000, session/3)); a Kafka node killed while it is
  also the active controller adds a quorum election (flagged in the per-kill lines).  Then the
  client must learn the new leader from Metadata (librdkafka re-asks on the refused connection,
  backing off up to ``retry.backoff.max.ms``, set to 500 here).  The reference is the session
  timeout itself.
* failover (SIGSTOP): the same, but the leader's process is paused (``--only paused``): it closes
  nothing, so only its session timeout can tell (ours: ``zookeeper.session.timeout.ms``; Kafka:
  ``broker.session.timeout.ms``).  Reported: seconds from the stop to a new leader in the other
  brokers' Metadata (goal: within the session timeout + 1 s) and to the first acknowledgement (the
  client's request to the paused broker hangs until its own ``request.timeout.ms``, 30 s in
  librdkafka, so that row measures the client); the broker is resumed after that acknowledgement
  and must come back as a follower.  Both failover rows also read the partition back at the end:
  acknowledged values lost and values duplicated (goal 0 and 0).
* controlled shutdown (SIGTERM): the same producer over 3 partitions; the broker leading the
  most partitions gets SIGTERM (ours and Kafka both move leadership away before exiting); for
  each partition it led, the longest gap between acknowledgements from 0.5 s before the signal
  on.  Reference: the longest gap between acknowledgements of that partition in the 1.5 s before
  the signal (the producer's own rhythm).

``--quick`` (50,000 records, 1 repeat, 2 failovers, a few minutes with Kafka's cluster starts)
is a smoke run: rows that short are bound by acks=all latency (follower fetch round trips) and
move several-fold between runs.  Kafka keeps its defaults otherwise (``replica.lag.time.max.ms``
30 s; ours 3 s); its internal topics get replication factor 3.  The client, the brokers and
ZooKeeper share the machine's cores; the load average is printed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._util import send_values  # noqa: E402
from engine.chaos.runner import _Broker  # noqa: E402
from engine.chaos.workload import read_all  # noqa: E402

_DISTINCT = 4096
LINKEDIN_2014 = 0.51


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


class LocalCluster:
    """ZooKeeper + n brokers (ids 1..n) on loopback, in a temp dir."""

    name, key = "ours", "ours"
    session_name = "zookeeper.session.timeout.ms"

    def __init__(self, n: int, session_ms: int):
        self.session_ms = session_ms
        from engine.cluster.zkserver import ZooKeeperServer, find_zookeeper
        if find_zookeeper()[0] is None:
            raise SystemExit(f"error: {find_zookeeper()[1]}")
        self.base = tempfile.mkdtemp(prefix="bench-repl-")
        self.zk = ZooKeeperServer(os.path.join(self.base, "zookeeper")).start()
        self.brokers = {i: _Broker(self.base, i, self.zk.connect, session_ms) for i in range(1, n + 1)}
        for b in self.brokers.values():
            b.args[b.args.index("--log-level") + 1] = "warning"
        for b in self.brokers.values():
            b.start()
        self.bootstrap = ",".join(b.listen for b in self.brokers.values())

    def broker_cpu(self) -> float:
        """User + system CPU seconds used so far by the running brokers, together."""
        from bench.broker_clients import cpu_seconds
        return sum(cpu_seconds(b.proc.pid) for b in self.brokers.values() if b.running)

    def active_controller(self) -> int | None:
        return None                                         # not looked up (ZooKeeper's /controller)

    def close(self) -> None:
        for b in self.brokers.values():
            b.signal(signal.SIGTERM)
        self.zk.stop()
        shutil.rmtree(self.base, ignore_errors=True)


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def create_topic(bootstrap: str, name: str, parts: int, rf: int, config: dict | None = None) -> None:
    from confluent_kafka.admin import NewTopic
    a = _admin(bootstrap)                                   # keep the handle until the result
    a.create_topics([NewTopic(name, parts, rf, config=config or {})])[name].result(180)   # JVMs on a loaded machine
    wait_partitions(bootstrap, name, parts, rf)


def partitions(bootstrap: str, topic: str) -> dict:
    """{partition: (leader, isr)} from a fresh Metadata request."""
    a = _admin(bootstrap)
    md = a.list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p: (m.leader, tuple(sorted(m.isrs))) for p, m in t.partitions.items()}


def wait_partitions(bootstrap: str, topic: str, parts: int, isr: int, timeout: float = 90) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            st = partitions(bootstrap, topic)
        except Exception:                                   # noqa: BLE001 (a broker still starting)
            st = {}
        if len(st) == parts and all(ld >= 0 and len(i) >= isr for ld, i in st.values()):
            return st
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: partitions not led with ISR >= {isr} after {timeout}s: {st}")
        time.sleep(0.2)


# -- throughput ---------------------------------------------------------------------------
def produce(bootstrap: str, topic: str, n: int, values: list[bytes], acks: str) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "linger.ms": 5,
                  "batch.size": 1 << 20, "acks": acks, "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2 * 1024 * 1024})
    for i in range(64):                                     # warm up: metadata, connections
        p.produce(topic, values[i])
    p.flush(60)
    t0 = time.perf_counter()
    send_values(p, topic, values, 0, n)
    if p.flush(300) != 0:
        raise RuntimeError("records left undelivered")
    return time.perf_counter() - t0


def run_throughput(c: LocalCluster, args, rows: list) -> None:
    for i, size in enumerate(args.sizes):
        values = [os.urandom(size // 2 + 1).hex().encode()[:size] for _ in range(_DISTINCT)]
        if i == 0:                                          # unmeasured: a fresh JVM compiles its hot paths
            for kind, rf, acks in (("rf1", 1, "1"), ("rf3", 3, "all")):
                topic = f"warmup-{kind}"
                create_topic(c.bootstrap, topic, 3, rf, {"min.insync.replicas": "2"} if rf == 3 else None)
                produce(c.bootstrap, topic, args.records, values, acks)
        best = {"rf3": float("inf"), "rf1": float("inf")}
        cpu = {"rf3": float("inf"), "rf1": float("inf")}
        for r in range(args.repeat):
            for kind in ("rf1", "rf3"):
                topic = f"tp-{kind}-{size}-{r}"
                if kind == "rf3":
                    create_topic(c.bootstrap, topic, 3, 3, {"min.insync.replicas": "2"})
                else:
                    create_topic(c.bootstrap, topic, 3, 1)
                c0 = c.broker_cpu()
                dt = produce(c.bootstrap, topic, args.records, values, "all" if kind == "rf3" else "1")
                cpu[kind] = min(cpu[kind], c.broker_cpu() - c0)
                best[kind] = min(best[kind], dt)
        n = args.records
        v, ref = n / best["rf3"], n / best["rf1"]
        us3, us1 = cpu["rf3"] / n * 1e6, cpu["rf1"] / n * 1e6
        rows.append({"broker": c.key, "row": "produce", "size": size, "records": n, "value": v,
                     "reference": ref, "ratio": v / ref, "unit": "records/s",
                     "broker_cpu_us_per_record": [us3, us1]})
        print(f"  [{c.name}] produce {size:>5} B  acks=all RF3 (min ISR 2) {v:11,.0f} rec/s "
              f"{v * size / 1e6:6.1f} MB/s   "
              f"acks=1 RF1 {ref:11,.0f} rec/s {ref * size / 1e6:6.1f} MB/s   ratio {v / ref:5.2f} "
              f"(LinkedIn 2014: {LINKEDIN_2014})   CPU of the 3 brokers µs/rec {us3:.2f} vs {us1:.2f}   [{_load()}]",
              flush=True)


# -- availability ---------------------------------------------------------------------------
class Sender:
    """An idempotent acks=all producer sending continuously (up to 200 in flight) to the
    partitions given, keeping the monotonic time of every acknowledgement per partition."""

    def __init__(self, bootstrap: str, topic: str, parts: list[int]):
        from confluent_kafka import Producer
        self.topic, self.parts = topic, parts
        self.acks: dict[int, list[float]] = {p: [] for p in parts}
        self.sent_at: dict[int, list[float]] = {p: [] for p in parts}
        self.acked: dict[int, list[bytes]] = {p: [] for p in parts}     # values acknowledged, per partition
        self.errors: list[str] = []
        self.sent = self.done = 0
        self.stop_ev = threading.Event()
        self.p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                           "enable.idempotence": True, "acks": "all", "linger.ms": 1,
                           "delivery.timeout.ms": 300000, "retry.backoff.max.ms": 500})
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _report(self, err, msg, sent_at):
        self.done += 1
        if err is not None:
            self.errors.append(str(err))
        else:
            now = time.monotonic()
            self.acks[msg.partition()].append(now)
            self.sent_at[msg.partition()].append(sent_at)
            self.acked[msg.partition()].append(msg.value())

    def first_ack_of_sent_after(self, part: int, t: float) -> float:
        """Ack time of the first record of `part` produced after `t` (nan if none yet)."""
        for s, a in zip(self.sent_at[part], self.acks[part], strict=False):
            if s > t:
                return a
        return float("nan")

    def _run(self):
        p, i = self.p, 0
        while not self.stop_ev.is_set():
            if self.sent - self.done < 200:
                try:
                    sent_at = time.monotonic()
                    p.produce(self.topic, (b"%d:" % i).ljust(100, b"x"), partition=self.parts[i % len(self.parts)],
                              on_delivery=lambda e, m, t=sent_at: self._report(e, m, t))
                    self.sent += 1
                    i += 1
                except BufferError:
                    pass
            p.poll(0.0005)
        p.flush(300)

    def close(self):
        self.stop_ev.set()
        self.t.join(330)

    def lost_and_duplicated(self, bootstrap: str) -> tuple[int, int]:
        """(acknowledged values not in the topic, values in it more than once), read back to the
        high watermarks (engine/chaos/workload.py's read_all)."""
        assert self.parts == list(range(len(self.parts))), "read_all reads partitions 0..n-1"
        values, _hw = read_all(bootstrap, self.topic, len(self.parts), timeout=120)
        seen: dict[bytes, int] = {}
        for v in values:
            seen[v] = seen.get(v, 0) + 1
        lost = sum(1 for vs in self.acked.values() for v in vs if v not in seen)
        return lost, sum(1 for n in seen.values() if n > 1)


def run_failover(c: LocalCluster, args, rows: list, how: str = "SIGKILL") -> None:
    """`how` SIGKILL: the leader's process killed (restarted before the next round); SIGSTOP: it
    is paused until the first acknowledgement after the stop, then resumed (it must come back
    as a follower)."""
    topic = f"failover-{how.lower()}"
    create_topic(c.bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    s = Sender(c.bootstrap, topic, [0])
    since_kill, gaps, elected = [], [], []
    try:
        time.sleep(2)
        for rep in range(args.failovers):
            wait_partitions(c.bootstrap, topic, 1, 3)
            time.sleep(3)                                   # a preferred-leader move settles
            leader = partitions(c.bootstrap, topic)[0][0]
            ctl = " (also the active KRaft controller)" if c.active_controller() == leader else ""
            t_kill = time.monotonic()
            if how == "SIGKILL":
                c.brokers[leader].signal(signal.SIGKILL)
            else:
                os.killpg(c.brokers[leader].proc.pid, signal.SIGSTOP)
            others = ",".join(b.listen for i, b in c.brokers.items() if i != leader)
            deadline, t_elected = time.monotonic() + 120, float("nan")
            while s.first_ack_of_sent_after(0, t_kill) != s.first_ack_of_sent_after(0, t_kill) \
                    and time.monotonic() < deadline and not s.errors:
                if t_elected != t_elected:              # the others' Metadata names another leader
                    try:
                        if partitions(others, topic).get(0, (leader,))[0] not in (leader, -1):
                            t_elected = time.monotonic()
                    except Exception:                   # noqa: BLE001 (asked again)
                        pass
                time.sleep(0.01)
            elected.append(t_elected - t_kill)
            acks = s.acks[0]
            after = s.first_ack_of_sent_after(0, t_kill)   # first success of a record sent after the kill
            before = max((t for t in acks if t <= t_kill), default=float("nan"))
            since_kill.append(after - t_kill)
            gaps.append(after - before)
            print(f"  [{c.name}, {c.session_name} {c.session_ms}] failover {rep + 1}: {how} leader {leader}{ctl}: "
                  f"new leader in the others' Metadata {t_elected - t_kill:5.2f} s after it; first ack of a record "
                  f"sent after it {after - t_kill:5.2f} s after it (since the last ack before: "
                  f"{after - before:5.2f} s)   "
                  f"[{_load()}]", flush=True)
            if how == "SIGKILL":
                c.brokers[leader].start()
            else:
                os.killpg(c.brokers[leader].proc.pid, signal.SIGCONT)
            if s.errors:
                print(f"  producer errors: {len(s.errors)}, first: {s.errors[:3]}", flush=True)
                break
            wait_partitions(c.bootstrap, topic, 1, 3)
    finally:
        s.close()
    lost, dup = s.lost_and_duplicated(c.bootstrap)
    ref = c.session_ms / 1000
    # issue 20's goals: SIGKILL -> next acknowledgement < 2 s; SIGSTOP -> handled (a new leader
    # elected) within the session timeout + 1 s.  A paused leader keeps the client's connection
    # open, so the client's next acknowledgement is bound by its own request.timeout.ms, not by us.
    goals = {("SIGKILL", "kill -> first ack"): 2.0, ("SIGSTOP", "kill -> new leader in Metadata"): ref + 1.0}
    for name, xs in (("kill -> new leader in Metadata", elected), ("kill -> first ack", since_kill),
                     ("gap last ack -> first ack", gaps)):
        goal = goals.get((how, name))
        xs = [x for x in xs if x == x] or [float("nan")]
        med, mx = statistics.median(xs), max(xs)
        rows.append({"broker": c.key, "row": f"failover {how}, {name}", "session_ms": c.session_ms,
                     "session_name": c.session_name, "n": len(xs), "median_s": med, "max_s": mx,
                     "reference": ref, "ratio": med / ref, "unit": "s", "errors": len(s.errors),
                     "acked": sum(map(len, s.acked.values())), "lost": lost, "duplicated": dup})
        print(f"  [{c.name}] failover {how}, {name}: median {med:5.2f} s  max {mx:5.2f} s over {len(xs)}   "
              f"{c.session_name} {c.session_ms}   ratio median/session {med / ref:4.2f}   "
              + (f"goal every round < {goal:g} s: {'met' if mx < goal else 'NOT met'}   " if goal else "")
              + f"producer errors {len(s.errors)}   "
              + f"acked {sum(map(len, s.acked.values()))} lost {lost} duplicated {dup}", flush=True)


def run_controlled(c: LocalCluster, args, rows: list) -> None:
    topic = "controlled"
    parts = list(range(3))
    create_topic(c.bootstrap, topic, 3, 3, {"min.insync.replicas": "2"})
    s = Sender(c.bootstrap, topic, parts)
    moved_gaps, refs, stop_s = [], [], []
    try:
        time.sleep(2)
        for rep in range(args.failovers):
            st = wait_partitions(c.bootstrap, topic, 3, 3)
            counts = {b: sum(1 for ld, _ in st.values() if ld == b) for b in c.brokers}
            victim = max(counts, key=counts.get)
            led = [p for p, (ld, _) in st.items() if ld == victim]
            time.sleep(1.5)
            t_sig = time.monotonic()
            c.brokers[victim].signal(signal.SIGTERM)                  # waits for the process to exit
            stop_s.append(time.monotonic() - t_sig)
            time.sleep(1.0)
            for p in led:
                a = s.acks[p]
                pre = [y - x for x, y in itertools.pairwise(a) if t_sig - 1.5 <= x and y <= t_sig]
                win = [t for t in a if t_sig - 0.5 <= t]
                gap = max((y - x for x, y in itertools.pairwise(win)), default=float("nan"))
                moved_gaps.append(gap)
                refs.append(max(pre) if pre else float("nan"))
                print(f"  [{c.name}] controlled shutdown {rep + 1}: SIGTERM broker {victim} "
                      f"(exited after {stop_s[-1]:4.2f} s), "
                      f"partition {p}: longest gap between acks {gap * 1000:7.1f} ms "
                      f"(longest gap in the 1.5 s before: {refs[-1] * 1000:5.1f} ms)", flush=True)
            c.brokers[victim].start()
            wait_partitions(c.bootstrap, topic, 3, 3)
    finally:
        s.close()
    if s.errors:
        print(f"  producer errors: {len(s.errors)}, first: {s.errors[:3]}", flush=True)
    med, mx = statistics.median(moved_gaps), max(moved_gaps)
    ref = statistics.median(refs)
    rows.append({"broker": c.key, "row": "controlled shutdown, longest ack gap per partition moved",
                 "n": len(moved_gaps), "median_s": med, "max_s": mx, "reference": ref, "ratio": med / ref, "unit": "s",
                 "broker_exit_s": statistics.median(stop_s), "errors": len(s.errors)})
    print(f"  [{c.name}] controlled shutdown: per partition moved, longest gap median {med * 1000:.1f} ms  "
          f"max {mx * 1000:.1f} ms over {len(moved_gaps)}; longest gap in the 1.5 s before, "
          f"median {ref * 1000:.1f} ms (ratio {med / ref:.1f}); "
          f"broker exit {statistics.median(stop_s):.2f} s median; producer errors {len(s.errors)}", flush=True)


def _fmt(r: dict | None) -> str:
    if r is None:
        return "–"
    if r["unit"] == "s":
        lost = f", lost {r['lost']} dup {r['duplicated']}" if "lost" in r else ""
        return f"median {r['median_s']:.2f} s, max {r['max_s']:.2f} s ({r['n']}×){lost}"
    return f"{r['value']:,.0f} rec/s"


def summary(rows: list, session_ms: int) -> None:
    """Every row as ours | Kafka | ratio (ours over Kafka)."""
    def get(broker, row, **kw):
        return next((r for r in rows if r["broker"] == broker and r["row"] == row
                     and all(r.get(k) == v for k, v in kw.items())), None)

    print(f"\nsummary ({_load()}):\n| row | ours | Kafka 4.0 | ratio ours/Kafka |\n|---|---|---|---|")
    for size in sorted({r["size"] for r in rows if r["row"] == "produce"}):
        o, k = get("ours", "produce", size=size), get("kafka", "produce", size=size)
        for what, key in (("acks=all RF 3 (min ISR 2)", "value"), ("acks=1 RF 1", "reference"),
                          ("ratio all/RF3 over 1/RF1", "ratio")):
            a, b = (o or {}).get(key), (k or {}).get(key)
            f = (lambda x: "–" if x is None else f"{x:.2f}") if key == "ratio" else \
                (lambda x: "–" if x is None else f"{x:,.0f} rec/s")
            print(f"| produce {size} B, {what} | {f(a)} | {f(b)} | {f'{a / b:.2f}' if a and b else '–'} |")
    for how, name in itertools.product(("SIGKILL", "SIGSTOP"), ("kill -> new leader in Metadata", "kill -> first ack",
                                                                "gap last ack -> first ack")):
        row = f"failover {how}, {name}"
        o = get("ours", row)
        ks = sorted((r for r in rows if r["broker"] == "kafka" and r["row"] == row),
                    key=lambda r: r["session_ms"] != session_ms)          # the comparable setting first
        if o is None and not ks:
            continue
        for k in ks or [None]:
            label = (f"{row}, session {session_ms} ms" if k is None or k["session_ms"] == session_ms else
                     f"{row}, ours at session {session_ms} ms, Kafka at its default {k['session_ms']} ms")
            ratio = f"{o['median_s'] / k['median_s']:.2f}" if o and k and k["median_s"] else "–"
            print(f"| {label} | {_fmt(o)} | {_fmt(k)} | {ratio} |")
    row = "controlled shutdown, longest ack gap per partition moved"
    o, k = get("ours", row), get("kafka", row)
    if o is None and k is None:
        return
    ratio = f"{o['median_s'] / k['median_s']:.2f}" if o and k and k["median_s"] else "–"

    def fmt(r):
        if r is None:
            return "–"
        return (f"median {r['median_s'] * 1000:.0f} ms, max {r['max_s'] * 1000:.0f} ms "
                f"({r['n']}; before: {r['reference'] * 1000:.0f} ms; exit {r['broker_exit_s']:.2f} s)")
    print(f"| SIGTERM {row} | {fmt(o)} | {fmt(k)} | {ratio} |", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--failovers", type=int, default=3, help="repetitions of each availability row")
    ap.add_argument("--session-ms", type=int, default=6000,
                    help="our brokers' zookeeper.session.timeout.ms; Kafka's failover is measured with "
                         "broker.session.timeout.ms at its default (9000) and at this value")
    ap.add_argument("--brokers", type=lambda v: [b for b in v.split(",") if b], default=None,
                    help="ours,kafka (default: both when Apache Kafka is found, else ours)")
    ap.add_argument("--only", choices=["produce", "failover", "paused", "controlled"], action="append")
    ap.add_argument("--quick", action="store_true", help="50,000 records, 1 repeat, 2 failovers")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    args.sizes = [int(x) for x in args.sizes.split(",")]
    if args.quick:
        args.records, args.repeat, args.failovers = min(args.records, 50_000), 1, 2
    only = args.only or ["produce", "failover", "paused", "controlled"]
    from bench._kafka_cluster import KafkaCluster, find_kafka
    home = find_kafka(ROOT)
    brokers = args.brokers or ["ours", "kafka"]
    if "kafka" in brokers and home is None:
        print("note: Apache Kafka 4.0 not found (KAFKA_HOME or <repo>/../shared/kafka, and java): no Kafka rows")
        brokers = [b for b in brokers if b != "kafka"]
    print(f"replication bench: {', '.join(brokers)}; 3 brokers on 127.0.0.1 each (ours: + ZooKeeper; Kafka: "
          f"3 combined KRaft nodes), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{_load()}, {os.cpu_count()} CPUs (shared with the client and the brokers)", flush=True)
    rows: list = []
    for name in brokers:
        runs = [(lambda: LocalCluster(3, args.session_ms), only)] if name == "ours" else [
            (lambda: KafkaCluster(home, 3), only)]
        timed = [w for w in ("failover", "paused") if w in only]
        if name == "kafka" and timed and args.session_ms != KafkaCluster.DEFAULT_SESSION_MS:
            runs.append((lambda: KafkaCluster(home, 3, {
                "broker.session.timeout.ms": args.session_ms,
                "broker.heartbeat.interval.ms": min(2000, args.session_ms // 3)}), timed))
        for make, what in runs:
            t0 = time.monotonic()
            c = make()
            print(f"[{c.name}] cluster up in {time.monotonic() - t0:.0f} s ({c.session_name} {c.session_ms})   "
                  f"[{_load()}]", flush=True)
            try:
                if "produce" in what:
                    run_throughput(c, args, rows)
                if "failover" in what:
                    run_failover(c, args, rows)
                if "paused" in what:
                    run_failover(c, args, rows, how="SIGSTOP")
                if "controlled" in what:
                    run_controlled(c, args, rows)
            finally:
                c.close()
    summary(rows, args.session_ms)
    print(f"done, {_load()}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load": os.getloadavg(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
