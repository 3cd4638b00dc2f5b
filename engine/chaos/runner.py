"""``python -m engine chaos``: a local cluster under an idempotent acks=all producer while brokers
are killed (SIGKILL), stopped (SIGTERM, controlled shutdown) and restarted at random; at the end
every acknowledged value is looked for in the topic.

::

    python -m engine chaos --brokers 3 --duration 60 --seed 1
    python -m engine chaos --disk-full          # also: a broker's disk fills up (root: tmpfs)
    python -m engine chaos --scenario leader-isolated --duration 20   # a network partition
    python -m engine chaos --scenario all --seed 7

``--scenario NAME`` runs a network-partition scenario instead (engine/chaos/scenarios.py:
leader-isolated, leader-split, controller-isolated, follower-isolated, flapping, flapping-session,
txn-cut, lost-acks; engine/chaos/crash_scenarios.py: power-loss, unclean-election, unclean-election-off; or
all), each link held cut for ``--duration`` seconds (default 10), one verdict line per scenario
(docs/availability.md).  ``--keep`` keeps the data directory with the brokers' logs;
``--client-debug`` also writes the scenario producer's librdkafka debug log there (and keeps it).

Prints one line per fault and a verdict: acknowledged / lost / duplicated values, producer errors,
the longest pause between acknowledgements.  Exit code 0 only with nothing lost or duplicated.
Needs Debian's zookeeper package and confluent-kafka (the reference client, a test dependency).

``--disk-full`` (root only: each broker's data directory is then a tmpfs of ``--disk-mb``) adds a
third fault: a filler file fills the broker's disk, the broker halts on ENOSPC (KAFKA_STORAGE_ERROR,
ZooKeeper session closed, exit 1); at the next fault time the filler is removed and it restarts.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .procs import free_port, signal_and_wait, start_listening

__all__ = ["add_chaos_parser", "cmd_chaos"]


def add_chaos_parser(sub) -> None:
    c = sub.add_parser("chaos", help="a local cluster under load while brokers are killed (a checker)")
    c.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    c.add_argument("--duration", type=float, default=None,
                   help="seconds of faults (default 60; with --scenario: how long a link stays cut, default 10)")
    c.add_argument("--interval", type=float, default=8.0, help="seconds between faults (default 8)")
    c.add_argument("--partitions", type=int, default=3, help="partitions of the topic (default 3)")
    c.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    c.add_argument("--keep", action="store_true", help="keep the data directory (with the brokers' logs)")
    c.add_argument("--client-debug", action="store_true",
                   help="with --scenario: the producer's librdkafka debug log (broker,topic,msg,eos) in "
                        "the data directory, which is kept")
    c.add_argument("--disk-full", action="store_true",
                   help="also fill a broker's disk (needs root: data directories on tmpfs)")
    c.add_argument("--disk-mb", type=int, default=256, help="tmpfs size per broker with --disk-full (default 256)")
    c.add_argument("--scenario", default=None, metavar="NAME",
                   help="a network-partition scenario instead of kills: leader-isolated, leader-split, "
                        "controller-isolated, follower-isolated, flapping, flapping-session, txn-cut, lost-acks, "
                        "power-loss, unclean-election-off, leader-split-acks1 (acks=1) and "
                        "unclean-election (unclean.leader.election.enable=true): their loss reported, or all")
    c.set_defaults(func=cmd_chaos)


class _Broker:
    def __init__(self, base, n, zk_connect, session_ms):
        self.n = n
        self.dir = os.path.join(base, f"broker-{n}")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.listen = f"127.0.0.1:{self.port}"
        self.args = [sys.executable, "-m", "engine", "serve", "--data-dir", os.path.join(self.dir, "data"),
                     "--listen", self.listen, "--broker-id", str(n), "--zookeeper", zk_connect,
                     "--config", f"zookeeper.session.timeout.ms={session_ms}",
                     "--config", "replica.lag.time.max.ms=3000", "--log-level", "info"]
        self.proc = None
        self.mount = None        # --disk-full: the tmpfs holding the data directory
        self.filler = None

    def mount_tmpfs(self, size_mb: int) -> None:
        mount = os.path.join(self.dir, "data")
        os.makedirs(mount, exist_ok=True)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", mount],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"error: --disk-full needs to mount a tmpfs (root): {r.stderr.strip()}")
        self.mount = mount

    def fill(self) -> None:
        self.filler = os.path.join(self.mount, "filler")
        chunk = b"\0" * 65536
        with open(self.filler, "ab", buffering=0) as f:
            for size in (65536, 4096, 1):
                try:
                    while True:
                        f.write(chunk[:size])
                except OSError:
                    pass

    def unfill(self) -> None:
        if self.filler is not None:
            os.unlink(self.filler)
            self.filler = None

    def umount(self) -> None:
        if self.mount is not None and subprocess.run(["umount", self.mount], capture_output=True).returncode:
            subprocess.run(["umount", "-l", self.mount], capture_output=True)

    def start(self):
        self.proc = start_listening(self.args, os.path.join(self.dir, "broker.log"), self.port,
                                    f"broker {self.n} (log in {self.dir})",
                                    ready=rf"serving .* on 127\.0\.0\.1:{self.port}\b")

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        signal_and_wait(self.proc, sig, 60)


def cmd_chaos(args: argparse.Namespace) -> int:
    try:
        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import AdminClient, NewTopic
    except ImportError:
        raise SystemExit("error: the chaos runner drives confluent-kafka: pip install confluent-kafka") from None
    from ..cluster.zkserver import ZooKeeperServer, find_zookeeper
    if find_zookeeper()[0] is None:
        raise SystemExit(f"error: {find_zookeeper()[1]}")
    seed = args.seed if args.seed is not None else int(time.time())
    if args.scenario is not None:
        from .scenarios import SCENARIOS, run_scenarios
        names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
        if any(n not in SCENARIOS for n in names):
            raise SystemExit(f"error: unknown scenario {args.scenario!r} (one of {', '.join(SCENARIOS)}, all)")
        return run_scenarios(names, seed, args.duration if args.duration is not None else 10.0,
                             args.keep or args.client_debug, args.client_debug)
    if args.duration is None:
        args.duration = 60.0
    rnd = random.Random(seed)
    base = tempfile.mkdtemp(prefix="engine-chaos-")
    print(f"chaos: seed {seed}, {args.brokers} brokers, data in {base}", flush=True)
    zk = ZooKeeperServer(os.path.join(base, "zookeeper")).start()
    brokers = [_Broker(base, n, zk.connect, 6000) for n in range(1, args.brokers + 1)]
    try:
        for b in brokers:
            if args.disk_full:
                b.mount_tmpfs(args.disk_mb)
            b.start()
        bootstrap = ",".join(b.listen for b in brokers)
        admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
        topic = "chaos"
        rf = min(3, args.brokers)
        admin.create_topics([NewTopic(topic, args.partitions, rf,
                                      config={"min.insync.replicas": str(min(2, rf))})])[topic].result(60)
        acked, ack_times, errors = [], [], []
        stop = threading.Event()

        def report(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                acked.append(int(msg.value()))
                ack_times.append(time.monotonic())

        def produce():
            p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                          "enable.idempotence": True, "acks": "all", "linger.ms": 2,
                          "delivery.timeout.ms": 300000, "retry.backoff.max.ms": 500,
                          "topic.metadata.refresh.interval.ms": 2000})
            sent = 0
            while not stop.is_set():
                if sent - len(acked) - len(errors) < 500:
                    try:
                        p.produce(topic, str(sent).encode(), key=str(sent % 97).encode(), on_delivery=report)
                        sent += 1
                    except BufferError:
                        pass
                p.poll(0.001 if sent % 100 else 0)
            p.flush(300)

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.duration:
            time.sleep(args.interval)
            down = [b for b in brokers if not b.running]
            up = [b for b in brokers if b.running]
            # at most one broker down at a time (RF 3, min ISR 2: writes stay possible)
            if down:
                b = down[0]
                freed = b.filler is not None
                b.unfill()
                b.start()
                print(f"{time.monotonic() - t0:6.1f}s {'free the disk and ' if freed else ''}restart broker {b.n}"
                      f"  (acked {len(acked)})", flush=True)
            else:
                b = rnd.choice(up)
                fault = rnd.choice(["kill", "stop", "full"] if args.disk_full else ["kill", "stop"])
                t_fault = time.monotonic()
                if fault == "full":
                    b.fill()
                    try:
                        b.proc.wait(60)
                        how = f"exit {b.proc.returncode} after {time.monotonic() - t_fault:.2f}s"
                    except subprocess.TimeoutExpired:
                        how = "still running after 60 s"
                    print(f"{time.monotonic() - t0:6.1f}s disk full on broker {b.n}: {how}  (acked {len(acked)})",
                          flush=True)
                else:
                    b.signal(signal.SIGKILL if fault == "kill" else signal.SIGTERM)
                    print(f"{time.monotonic() - t0:6.1f}s {'kill -9' if fault == 'kill' else 'stop'} broker {b.n}"
                          f"  (acked {len(acked)})", flush=True)
        for b in brokers:
            if not b.running:
                b.unfill()
                b.start()
        time.sleep(args.interval)
        stop.set()
        t.join(330)
        c = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "group.id": "chaos-check",
                      "enable.auto.commit": False})
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=60)[1] for p in range(args.partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(args.partitions)])
        seen: dict[int, int] = {}
        pos = {p: 0 for p in ends}
        deadline = time.monotonic() + 120
        while any(pos[p] < ends[p] for p in pos) and time.monotonic() < deadline:
            for msg in c.consume(5000, 1.0):
                if msg.error() is None:
                    v = int(msg.value())
                    seen[v] = seen.get(v, 0) + 1
                    pos[msg.partition()] = msg.offset() + 1
        c.close()
        lost = set(acked) - set(seen)
        dup = [v for v, k in seen.items() if k > 1]
        gap = max((b - a for a, b in itertools.pairwise(ack_times)), default=0.0)
        print(f"acked={len(set(acked))} lost={len(lost)} dup={len(dup)} errors={len(errors)} "
              f"max_unavailability={gap:.2f}s", flush=True)
        if errors:
            print(f"producer errors (first 5): {errors[:5]}", flush=True)
        return 0 if not lost and not dup else 1
    finally:
        for b in brokers:
            b.signal(signal.SIGTERM)
            b.umount()
        zk.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
