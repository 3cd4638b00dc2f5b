"""The Arrow-native remote client (``engine.connect``) against confluent-kafka and
Kafka's own Java perf tools, from Python, against our broker and Apache Kafka 4.0
-- every figure beside its references from the same run, as ratios (issue 13's
goal: >= 3x confluent-kafka records/s, >= 0.8x Kafka's Java perf tools).

    python -m bench.arrow_client [--records 1000000] [--sizes 100,1024] [--brokers ours,kafka]
                                 [--codec none] [--acks all] [--skip-java]
                                 [--kafkarrow-python /path/to/venv/bin/python]

Per broker and record size, one topic of 3 partitions per producer:

* produce: the Arrow producer's ``send_batch`` (100k-record pyarrow chunks, one
  partition per chunk, idempotent), confluent-kafka ``produce()`` one record at a
  time then ``flush``, ``kafka-producer-perf-test.sh`` (linger.ms=5,
  batch.size=1 MiB, the same acks and codec for all three);
* consume (of the Arrow producer's topic): ``poll_arrow`` until every row is in a
  RecordBatch, confluent-kafka ``consume(10000)`` (a Python object per record),
  ``kafka-consumer-perf-test.sh``.

Kafka is found through KAFKA_HOME or <repo>/../shared/kafka (run-kafka.sh beside
it); the Java rows and the Kafka broker are skipped with a note when absent.
kafkarrow (a Rust/librdkafka Arrow consumer; it has no producer) is measured on the
consume rows when ``--kafkarrow-python`` names an interpreter that has it -- keep
it out of the shared environment, e.g.
``python3 -m venv --system-site-packages /tmp/kv && /tmp/kv/bin/pip install kafkarrow``.
Run on a quiet machine: the client and the broker share the cores.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import pyarrow as pa  # noqa: E402

import engine  # noqa: E402
from bench.broker_clients import produce as confluent_produce  # noqa: E402  (the same loop)

PARTS = 3
CHUNK = 100_000
_DISTINCT = 4096


def kafka_home() -> str | None:
    home = os.environ.get("KAFKA_HOME")
    if home and os.path.isdir(home):
        return home
    shared = os.path.join(ROOT, "..", "shared", "kafka", "kafka_2.13-4.0.0")
    return shared if os.path.isdir(shared) else None


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(bootstrap: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    from engine.client.wire import WireClient
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the broker exited at start")
        try:
            with WireClient(bootstrap, request_timeout_ms=5000) as c:
                c.metadata(None)
                return
        except Exception:
            time.sleep(0.5)
    raise RuntimeError("the broker did not start")


def start_ours(data: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--data-dir", data, "--listen",
                             f"127.0.0.1:{port}", "--log-level", "warning"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    bootstrap = f"127.0.0.1:{port}"
    _wait_ready(bootstrap, proc)
    return proc, bootstrap


def start_kafka(home: str, data: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    script = os.path.join(os.path.dirname(os.path.abspath(home)), "run-kafka.sh")
    proc = subprocess.Popen([script, data, str(port), str(free_port())], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    bootstrap = f"127.0.0.1:{port}"
    _wait_ready(bootstrap, proc)
    return proc, bootstrap


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _values(size: int) -> list[bytes]:
    return [os.urandom(size // 2 + 1).hex().encode()[:size] for _ in range(_DISTINCT)]


# -- producers ---------------------------------------------------------------------------
def arrow_produce(eng, topic: str, n: int, size: int, codec: str, acks: str) -> float:
    distinct = pa.array(_values(size), pa.binary())
    chunk = distinct.take(pa.array([i % _DISTINCT for i in range(min(CHUNK, n))]))
    with eng.producer(**{"compression.type": codec, "acks": acks, "batch.size": 1 << 20}) as p:
        p.partitions_for(topic)                       # metadata before the clock starts
        t0 = time.perf_counter()
        sent = 0
        while sent < n:
            k = min(CHUNK, n - sent)
            p.send_batch(topic, values=chunk if k == len(chunk) else chunk.slice(0, k),
                         partitions=(sent // CHUNK) % PARTS)
            sent += k
        return time.perf_counter() - t0


def java_produce(home: str, bootstrap: str, topic: str, n: int, size: int, codec: str, acks: str) -> float | None:
    out = subprocess.run([os.path.join(home, "bin", "kafka-producer-perf-test.sh"), "--topic", topic,
                          "--num-records", str(n), "--record-size", str(size), "--throughput", "-1",
                          "--producer-props", f"bootstrap.servers={bootstrap}", "linger.ms=5",
                          f"batch.size={1 << 20}", f"acks={acks}", f"compression.type={codec}"],
                         capture_output=True, text=True, timeout=900)
    m = re.findall(r"([\d.]+) records/sec", out.stdout)
    return float(m[-1]) if m else None


# -- consumers ---------------------------------------------------------------------------
def arrow_consume(eng, topic: str, n: int) -> float:
    c = eng.consumer(**{"fetch.max.wait.ms": 10, "max.partition.fetch.bytes": 4 << 20})
    c.assign([(topic, p) for p in range(PARTS)])
    for p in range(PARTS):
        c.seek((topic, p), 0)
    got, t0 = 0, time.perf_counter()
    deadline = time.monotonic() + 600
    while got < n and time.monotonic() < deadline:
        for b in c.poll_arrow(max_records=1 << 20, timeout_ms=1000):
            got += b.num_rows
    dt = time.perf_counter() - t0
    c.close()
    if got < n:
        raise RuntimeError(f"arrow consumer read {got} of {n}")
    return dt


def confluent_consume(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-arrow", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTS)])
    got, t0 = 0, time.perf_counter()
    deadline = time.monotonic() + 600
    while got < n and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(min(10000, n - got), timeout=1.0) if m.error() is None)
    dt = time.perf_counter() - t0
    c.close()
    if got < n:
        raise RuntimeError(f"confluent consumer read {got} of {n}")
    return dt


_KAFKARROW = r"""
import sys, time
from kafkarrow import ConsumerManager, SourceTopic
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
m = ConsumerManager(config={"bootstrap.servers": bootstrap, "group.id": "bench-kafkarrow"},
                    topics=[SourceTopic.from_earliest(topic)])
got, t0 = 0, time.perf_counter()
deadline = time.monotonic() + 600
while got < n and time.monotonic() < deadline:
    got += m.poll(timeout_ms=1000).num_rows
print(got, time.perf_counter() - t0)
"""


def kafkarrow_consume(python: str, bootstrap: str, topic: str, n: int) -> float | None:
    out = subprocess.run([python, "-c", _KAFKARROW, bootstrap, topic, str(n)], capture_output=True,
                         text=True, timeout=900)
    try:
        got, dt = out.stdout.split()[-2:]
    except ValueError:
        print(f"  (kafkarrow failed: {out.stderr.strip()[-300:]})")
        return None
    return n / float(dt) if int(got) >= n else None


def java_consume(home: str, bootstrap: str, topic: str, n: int) -> float | None:
    out = subprocess.run([os.path.join(home, "bin", "kafka-consumer-perf-test.sh"), "--bootstrap-server",
                          bootstrap, "--topic", topic, "--messages", str(n), "--timeout", "120000"],
                         capture_output=True, text=True, timeout=900)
    lines = [ln for ln in out.stdout.splitlines() if re.match(r"\d{4}-\d\d-\d\d", ln)]
    if not lines:
        return None
    fields = [f.strip() for f in lines[-1].split(",")]
    return float(fields[5])      # nMsg.sec


# -- the run -----------------------------------------------------------------------------
def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:5.2f}x" if a and b else "  n/a"


def run_broker(name: str, bootstrap: str, args, home: str | None) -> None:
    eng = engine.connect(bootstrap)
    for size in args.sizes:
        n = args.records
        print(f"\n[{name}] {n:,} records of {size} B, codec {args.codec}, acks={args.acks}")
        topics = {k: f"bench-{k}-{size}-{int(time.time())}" for k in ("arrow", "ck", "java")}
        for t in topics.values():
            eng.create_topic(t, PARTS)
        a = n / arrow_produce(eng, topics["arrow"], n, size, args.codec, args.acks)
        c = n / confluent_produce(bootstrap, topics["ck"], n, size, args.codec, args.acks)
        j = None if (home is None or args.skip_java) else \
            java_produce(home, bootstrap, topics["java"], n, size, args.codec, args.acks)
        print(f"  produce  arrow {a:12,.0f} rec/s   confluent {c:12,.0f} ({_ratio(a, c)})   "
              f"java perf {j or float('nan'):12,.0f} ({_ratio(a, j)})")
        a = n / arrow_consume(eng, topics["arrow"], n)
        c = n / confluent_consume(bootstrap, topics["arrow"], n)
        j = None if (home is None or args.skip_java) else java_consume(home, bootstrap, topics["arrow"], n)
        k = kafkarrow_consume(args.kafkarrow_python, bootstrap, topics["arrow"], n) \
            if args.kafkarrow_python else None
        print(f"  consume  arrow {a:12,.0f} rec/s   confluent {c:12,.0f} ({_ratio(a, c)})   "
              f"java perf {j or float('nan'):12,.0f} ({_ratio(a, j)})"
              + (f"   kafkarrow {k or float('nan'):12,.0f} ({_ratio(a, k)})" if args.kafkarrow_python else ""))
    eng.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[100, 1024])
    ap.add_argument("--brokers", type=lambda s: s.split(","), default=["ours", "kafka"])
    ap.add_argument("--codec", default="none")
    ap.add_argument("--acks", default="all")
    ap.add_argument("--skip-java", action="store_true")
    ap.add_argument("--kafkarrow-python", help="an interpreter (venv) with kafkarrow installed")
    args = ap.parse_args(argv)
    home = kafka_home()
    if home is None:
        print("note: Apache Kafka not found (KAFKA_HOME or <repo>/../shared/kafka): "
              "no Kafka broker, no Java perf tools")
    if not args.kafkarrow_python:
        print("note: kafkarrow not measured (give --kafkarrow-python; see the docstring)")
    for name in args.brokers:
        if name == "kafka" and home is None:
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-arrow-{name}-") as d:
            proc, bootstrap = start_ours(d) if name == "ours" else start_kafka(home, d)
            try:
                run_broker(name, bootstrap, args, home)
            finally:
                stop(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
