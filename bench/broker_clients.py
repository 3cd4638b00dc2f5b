"""Broker throughput with a real client: confluent-kafka (librdkafka) producing to
and consuming from `python -m engine serve` on loopback, the setup of the
reference figures for Apache Kafka 4.0 on this machine type
(../shared/reference/machine-limits.md §3: 3 partitions here vs 1 there,
linger.ms=5, batch.size=1 MiB).

    python -m bench.broker_clients [--records 1000000] [--sizes 100,1024] [--codecs none,lz4]
                                   [--consume-runs 1] [--max-partition-fetch-bytes N]
                                   [--consumer-config key=value ...] [--produce-only] [--acks 1,all]
                                   [--broker-pid-file PATH]

Prints records/s and MB/s for produce (acks=1 and acks=all) and consume, the
broker's and the client process's CPU time per record (user + system: steadier
than the rates on a shared machine), the broker's peak RSS, and Kafka's figures beside
them as the reference.  The client and the broker share the machine's cores,
as in the reference run.

Consume rates are the client's as much as the broker's: librdkafka stops
fetching a partition for ``fetch.queue.backoff.ms`` (default 1000 ms) whenever
its prefetch queue holds ``queued.min.messages`` (100,000) records or
``queued.max.messages.kbytes`` (64 MiB), so a run that outpaces the Python
loop sleeps whole seconds.  ``--consumer-config fetch.queue.backoff.ms=10``
shows the rate without those sleeps.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._util import consume_timed, send_values  # noqa: E402

# Apache Kafka 4.0, confluent-kafka 2.16.1, same machine type (machine-limits.md §3), records/s
CONSUMER_EXTRA: dict = {}
_DISTINCT = 4096
# (an lz4 row uses the lz4 figure where the reference has one, else the uncompressed one)
KAFKA = {("produce", 100): 934_000, ("consume", 100): 184_000,
         ("produce", 1024): 163_000, ("consume", 1024): 700_000,
         ("produce", 1024, "lz4"): 651_000}


def kafka_ref(op: str, size: int, codec: str):
    return KAFKA.get((op, size, codec), KAFKA.get((op, size)))


def start_broker(data: str, extra: list[str] = ()) -> tuple[subprocess.Popen, int]:
    """`python -m engine serve` on a free port; `extra` are more `--config key=value` settings."""
    conf = [x for kv in ["num.partitions=3", *extra] for x in ("--config", kv)]
    proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--data-dir", data,
                             "--listen", "127.0.0.1:0", "--log-level", "warning", *conf],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    seen = []
    while True:                  # log lines (warnings) may come before "serving DIR on HOST:PORT"
        line = proc.stderr.readline()
        seen.append(line)
        m = re.search(r"^serving .* on [\d.]+:(\d+)\s*$", line)
        if m:
            break
        if not line:
            raise RuntimeError(f"broker did not start: {''.join(seen)}")
    # keep draining its stderr so a chatty broker never blocks on a full pipe
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, int(m.group(1))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def produce(bootstrap: str, topic: str, n: int, size: int, codec: str, acks: str) -> float:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20,
                  "compression.type": codec, "acks": acks, "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2 * 1024 * 1024})
    # Random hex like the reference run (lz4 about 2x): 4096 distinct values, so
    # a value repeats only 4096 records later, beyond LZ4's 64 KiB window (one
    # value repeated compressed 1 KiB records about 40x).
    values = [os.urandom(size // 2).hex().encode() for _ in range(_DISTINCT)]
    t0 = time.perf_counter()
    send_values(p, topic, values, 0, n)
    if p.flush(120) != 0:
        raise RuntimeError("records left undelivered")
    return time.perf_counter() - t0


def consume(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10, **CONSUMER_EXTRA})
    c.assign([TopicPartition(topic, p, 0) for p in range(3)])
    try:
        return consume_timed(c, n)
    finally:
        c.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--max-partition-fetch-bytes", type=int, default=None,
                    help="consumer max.partition.fetch.bytes (librdkafka default 1 MiB)")
    ap.add_argument("--consumer-config", action="append", default=[], metavar="KEY=VALUE",
                    help="more consumer settings, e.g. fetch.queue.backoff.ms=20 (repeatable)")
    ap.add_argument("--consume-runs", type=int, default=1,
                    help="consume each topic this many times (one row each; the machine is noisy)")
    ap.add_argument("--produce-only", action="store_true", help="skip the consume rows")
    ap.add_argument("--acks", default="1,all", help="produce rows to run (default 1,all)")
    ap.add_argument("--broker-pid-file", default=None,
                    help="write the broker's pid here once it listens (to attach a profiler)")
    args = ap.parse_args(argv)
    if args.max_partition_fetch_bytes:
        CONSUMER_EXTRA["max.partition.fetch.bytes"] = args.max_partition_fetch_bytes
    for kv in args.consumer_config:
        key, _, value = kv.partition("=")
        CONSUMER_EXTRA[key] = value
    tmp = tempfile.mkdtemp(prefix="engine-broker-bench-")
    proc, port = start_broker(os.path.join(tmp, "data"))
    bootstrap = f"127.0.0.1:{port}"
    if args.broker_pid_file:
        with open(args.broker_pid_file, "w") as f:
            f.write(f"{proc.pid}\n")
    rows = []
    try:
        produce(bootstrap, "warmup", 50_000, 100, "none", "1")  # connections, topic creation, caches
        if not args.produce_only:
            consume(bootstrap, "warmup", 50_000)  # creates __consumer_offsets (FindCoordinator) outside the rows
        for size in (int(s) for s in args.sizes.split(",")):
            n = args.records if size <= 100 else max(args.records // 4, 1)
            for codec in args.codecs.split(","):
                for acks in args.acks.split(","):
                    topic = f"b{size}-{codec}-{acks}"
                    cpu0, own0 = cpu_seconds(proc.pid), time.process_time()
                    dt = produce(bootstrap, topic, n, size, codec, acks)
                    rows.append((f"produce {size} B {codec} acks={acks}", n / dt, n * size / dt,
                                 kafka_ref("produce", size, codec), (cpu_seconds(proc.pid) - cpu0) / n,
                                 (time.process_time() - own0) / n))
                for _ in range(0 if args.produce_only else args.consume_runs):
                    cpu0, own0 = cpu_seconds(proc.pid), time.process_time()
                    dt, timed = consume(bootstrap, f"b{size}-{codec}-1", n)
                    rows.append((f"consume {size} B {codec}", timed / dt, timed * size / dt,
                                 kafka_ref("consume", size, codec), (cpu_seconds(proc.pid) - cpu0) / n,
                                 (time.process_time() - own0) / n))
        rss = peak_rss_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"| {'row':<32} | {'records/s':>12} | {'MB/s':>8} | {'Kafka 4.0 rec/s':>15} | {'ratio':>5} "
          f"| {'CPU µs/rec broker':>17} | {'client':>6} |")
    print(f"|{'-' * 34}|{'-' * 14}|{'-' * 10}|{'-' * 17}|{'-' * 7}|{'-' * 19}|{'-' * 8}|")
    for name, rps, bps, ref, cpu, own in rows:
        ratio = f"{rps / ref:.2f}" if ref else "-"
        print(f"| {name:<32} | {rps:>12,.0f} | {bps / 1e6:>8.0f} | {ref or 0:>15,} | {ratio:>5} "
              f"| {cpu * 1e6:>17.2f} | {own * 1e6:>6.2f} |")
    print(f"broker peak RSS: {rss:.0f} MB (goal < 200 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
