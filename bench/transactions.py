"""Transactions: what exactly-once costs, on our broker and on Apache Kafka 4.0 in the same run,
and in-process -- every figure beside its reference from the same run, as a ratio.

    python -m bench.transactions [--records 1000000] [--size 100] [--txn-sizes 100,10000,1000000]
                                 [--brokers ours,kafka] [--repeat 2] [--quick] [--json FILE]

Rows (3 partitions, ``--size``-byte values, random hex, no compression, acks=all):

* produce, per broker: confluent-kafka transactional producer (begin, ``produce()`` x T,
  ``commit_transaction()``) against a plain idempotent producer (``enable.idempotence=true``)
  sending the same records -- ratio txn / plain per transaction size T.  A transaction of
  100 records is mostly round trips (AddPartitionsToTxn, EndTxn, the markers), so those rows
  send fewer records (1,000 transactions; 200 with --quick).
* produce, embedded: the in-process producer (``send()`` per record) with and without
  ``transactional_id`` (the plain one is not idempotent: in-process there are no retries),
  the same transaction sizes.
* fetch, per broker: a confluent-kafka consumer reading a log where every tenth
  transaction (of 10,000 records) was aborted: read_committed against read_uncommitted,
  both timed from the first record to the end of all partitions, as log offsets
  per second (both walk the same log; read_committed delivers 10% fewer records).
* read_arrow (embedded) over a log like that: ``isolation_level="read_committed"`` against
  the default read_uncommitted, rows per second of log read.

Goals: our transactional overhead no worse than Kafka's (our txn/plain ratio >= Kafka's in the
same run), read_committed >= 0.9x read_uncommitted.  Each pair runs interleaved, best of
``--repeat``.  Kafka is found through KAFKA_HOME or <repo>/../shared/kafka (its rows are
skipped with a note when absent).  The client and broker share the machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import engine  # noqa: E402
from bench._util import send_values  # noqa: E402
from bench.arrow_client import kafka_home, start_kafka, start_ours, stop  # noqa: E402

PARTS = 3
_DISTINCT = 4096
ABORT_EVERY = 10              # fetch rows: every 10th transaction aborted
FETCH_TXN = 10_000            # records per transaction in the fetch rows' log


def _values(size: int) -> list[bytes]:
    return [os.urandom(size // 2 + 1).hex().encode()[:size] for _ in range(_DISTINCT)]


def _txn_count(txn: int, records: int, small_txns: int) -> int:
    """Records to send for transactions of `txn`: `records`, but at most `small_txns` transactions
    of up to 1,000 records (they are round-trip bound) and at least one transaction."""
    if txn <= 1000:
        return min(records, txn * small_txns)
    return max(records // txn, 1) * txn


# -- confluent-kafka ----------------------------------------------------------------------
def _producer(bootstrap: str, txid: str | None):
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1 << 20, "acks": "all",
            "enable.idempotence": True, "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2 * 1024 * 1024}
    if txid:
        conf["transactional.id"] = txid
    return Producer(conf)


def confluent_produce(bootstrap: str, topic: str, n: int, txn: int | None, values, tag: str) -> float:
    """Seconds to produce n records, in transactions of `txn` (None: plain idempotent)."""
    p = _producer(bootstrap, f"bench-{tag}" if txn else None)
    if txn:
        p.init_transactions(60)
        p.begin_transaction()                       # warm up: coordinator and partitions known
        send_values(p, topic, values, 0, PARTS)
        p.commit_transaction(60)
    else:
        send_values(p, topic, values, 0, PARTS)
        p.flush(60)
    t0 = time.perf_counter()
    if txn:
        sent = 0
        while sent < n:
            k = min(txn, n - sent)
            p.begin_transaction()
            send_values(p, topic, values, sent, k)
            p.commit_transaction(300)
            sent += k
    else:
        send_values(p, topic, values, 0, n)
        if p.flush(300) != 0:
            raise RuntimeError("records left undelivered")
    return time.perf_counter() - t0


def fill_aborted(bootstrap: str, topic: str, n: int, values) -> int:
    """n records in transactions of FETCH_TXN, every ABORT_EVERY-th aborted; returns records committed."""
    p = _producer(bootstrap, f"bench-fill-{topic}")
    p.init_transactions(60)
    sent = committed = t = 0
    while sent < n:
        k = min(FETCH_TXN, n - sent)
        p.begin_transaction()
        send_values(p, topic, values, sent, k)
        if t % ABORT_EVERY == ABORT_EVERY - 1:
            p.flush(300)                            # aborted records reach the log first
            p.abort_transaction(300)
        else:
            p.commit_transaction(300)
            committed += k
        sent += k
        t += 1
    return committed


def confluent_fetch(bootstrap: str, topic: str, isolation: str, expect: int) -> tuple[float, int, int]:
    """(seconds from the first record to the end of every partition, records, log offsets walked)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-txn", "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True, "fetch.wait.max.ms": 10,
                  "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTS)])
    got, eof, first, ends = 0, set(), None, {}
    deadline = time.monotonic() + 600
    while len(eof) < PARTS and time.monotonic() < deadline:
        for m in c.consume(10000, timeout=0.5):
            err = m.error()
            if err is None:
                got += 1
                eof.discard(m.partition())
                if first is None:
                    first = time.perf_counter()
            elif err.code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
                ends[m.partition()] = m.offset()
    dt = time.perf_counter() - (first or time.perf_counter())
    c.close()
    if got != expect:
        raise RuntimeError(f"{isolation} read {got} records, expected {expect}")
    return dt, got, sum(ends.values())


# -- embedded -----------------------------------------------------------------------------
def embedded_produce(eng, topic: str, n: int, txn: int | None, values, tag: str) -> float:
    settings = {"linger_ms": 5}
    if txn:
        settings["transactional_id"] = f"bench-emb-{tag}"
    with eng.producer(**settings) as p:
        if txn:
            p.init_transactions()
        t0 = time.perf_counter()
        sent = 0
        send = p.send
        while sent < n:
            k = min(txn or n, n - sent)
            if txn:
                p.begin_transaction()
            for i in range(sent, sent + k):
                send(topic, values[i & (_DISTINCT - 1)])
            if txn:
                p.commit_transaction()
            sent += k
        p.flush()
        return time.perf_counter() - t0


def embedded_fill_aborted(eng, topic: str, n: int, values) -> int:
    p = eng.producer(transactional_id=f"bench-emb-fill-{topic}", linger_ms=5)
    p.init_transactions()
    sent = committed = t = 0
    while sent < n:
        k = min(FETCH_TXN, n - sent)
        p.begin_transaction()
        p.send_batch(topic, [values[i & (_DISTINCT - 1)] for i in range(sent, sent + k)], partition=t % PARTS)
        if t % ABORT_EVERY == ABORT_EVERY - 1:
            p.abort_transaction()
        else:
            p.commit_transaction()
            committed += k
        sent += k
        t += 1
    p.close()
    return committed


def read_arrow_rate(eng, topic: str, isolation: str | None) -> tuple[float, int]:
    kw = {} if isolation is None else {"isolation_level": isolation}
    t0 = time.perf_counter()
    rows = sum(eng.read_arrow(topic, p, **kw).num_rows for p in range(PARTS))
    return time.perf_counter() - t0, rows


# -- the run --------------------------------------------------------------------------------
def _best(fn, repeat: int):
    return min((fn() for _ in range(repeat)), key=lambda r: r if isinstance(r, float) else r[0])


def run_broker(name: str, bootstrap: str, args, values, rows: list) -> None:
    eng = engine.connect(bootstrap)
    stamp = int(time.time())
    for txn in args.txn_sizes:
        n = _txn_count(txn, args.records, args.small_txns)
        best_t = best_p = float("inf")
        for r in range(args.repeat):                # interleaved: plain, txn, plain, txn
            for kind in ("plain", "txn"):
                topic = f"bench-{kind}-{txn}-{stamp}-{r}"
                eng.create_topic(topic, PARTS)
                dt = confluent_produce(bootstrap, topic, n, txn if kind == "txn" else None, values,
                                       f"{txn}-{stamp}-{r}")
                if kind == "txn":
                    best_t = min(best_t, dt)
                else:
                    best_p = min(best_p, dt)
        rows.append({"broker": name, "op": "produce", "txn": txn, "records": n,
                     "value": n / best_t, "reference": n / best_p, "ratio": best_p / best_t})
        print(f"  [{name}] produce, transactions of {txn:>9,}: {n / best_t:12,.0f} rec/s   "
              f"plain idempotent {n / best_p:12,.0f} rec/s   ratio {best_p / best_t:5.2f}", flush=True)
    topic = f"bench-fetch-{stamp}"
    eng.create_topic(topic, PARTS)
    committed = fill_aborted(bootstrap, topic, args.records, values)
    best_c = best_u = None
    for _ in range(args.repeat):
        u = confluent_fetch(bootstrap, topic, "read_uncommitted", args.records)
        c = confluent_fetch(bootstrap, topic, "read_committed", committed)
        best_u = u if best_u is None or u[0] < best_u[0] else best_u
        best_c = c if best_c is None or c[0] < best_c[0] else best_c
    walked = best_u[2]
    rc, ru = walked / best_c[0], walked / best_u[0]
    rows.append({"broker": name, "op": "fetch", "records": args.records, "log_offsets": walked,
                 "value": rc, "reference": ru, "ratio": rc / ru})
    print(f"  [{name}] fetch, 10% aborted: read_committed {rc:12,.0f} offsets/s ({best_c[1]:,} records)   "
          f"read_uncommitted {ru:12,.0f} offsets/s ({best_u[1]:,} records)   ratio {rc / ru:5.2f}", flush=True)
    eng.close()


def run_embedded(args, values, rows: list) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-txn-emb-") as d:
        with engine.open(os.path.join(d, "data")) as eng:
            for txn in args.txn_sizes:
                n = _txn_count(txn, args.records, args.small_txns)
                best_t = best_p = float("inf")
                for r in range(args.repeat):
                    for kind in ("plain", "txn"):
                        topic = f"emb-{kind}-{txn}-{r}"
                        eng.create_topic(topic, PARTS)
                        dt = embedded_produce(eng, topic, n, txn if kind == "txn" else None, values, f"{txn}-{r}")
                        if kind == "txn":
                            best_t = min(best_t, dt)
                        else:
                            best_p = min(best_p, dt)
                rows.append({"broker": "embedded", "op": "produce", "txn": txn, "records": n,
                             "value": n / best_t, "reference": n / best_p, "ratio": best_p / best_t})
                print(f"  [embedded] produce, transactions of {txn:>9,}: {n / best_t:12,.0f} rec/s   "
                      f"plain {n / best_p:12,.0f} rec/s   ratio {best_p / best_t:5.2f}", flush=True)
            eng.create_topic("emb-fetch", PARTS)
            embedded_fill_aborted(eng, "emb-fetch", args.records, values)
            try:
                eng.read_arrow("emb-fetch", 0, isolation_level="read_committed")
            except TypeError:
                print("  [embedded] read_arrow: n/a (read_arrow has no isolation_level in this tree)")
                return
            read_arrow_rate(eng, "emb-fetch", None)          # warm-up: page cache and first touches
            best_c = best_u = None
            for _ in range(args.repeat):
                u = read_arrow_rate(eng, "emb-fetch", None)
                c = read_arrow_rate(eng, "emb-fetch", "read_committed")
                best_u = u if best_u is None or u[0] < best_u[0] else best_u
                best_c = c if best_c is None or c[0] < best_c[0] else best_c
            total = best_u[1]
            rc, ru = total / best_c[0], total / best_u[0]
            rows.append({"broker": "embedded", "op": "read_arrow", "records": total, "value": rc,
                         "reference": ru, "ratio": rc / ru})
            print(f"  [embedded] read_arrow, 10% aborted: read_committed {rc:12,.0f} rows of log/s "
                  f"({best_c[1]:,} rows)   read_uncommitted {ru:12,.0f} rows/s ({best_u[1]:,} rows)   "
                  f"ratio {rc / ru:5.2f}", flush=True)


def summary(rows: list) -> None:
    print("\n| where | row | records | value | reference (same run) | ratio | goal | met |")
    print("|---|---|---|---|---|---|---|---|")
    kafka = {(r["op"], r.get("txn")): r["ratio"] for r in rows if r["broker"] == "kafka"}
    for r in rows:
        if r["op"] == "produce":
            what = f"produce, transactions of {r['txn']:,}"
            ref = "plain embedded produce" if r["broker"] == "embedded" else "plain idempotent produce"
            k = kafka.get(("produce", r["txn"]))
            if r["broker"] == "ours" and k is not None:
                goal, met = f">= Kafka's {k:.2f}", "yes" if r["ratio"] >= k else "**no**"
            else:
                goal, met = "–", "–"
            unit = "rec/s"
        else:
            what = f"{r['op']} read_committed, 10% aborted"
            ref = "read_uncommitted"
            goal, met = ">= 0.9", "yes" if r["ratio"] >= 0.9 else "**no**"
            unit = "offsets/s" if r["op"] == "fetch" else "rows/s"
        print(f"| {r['broker']} | {what} | {r['records']:,} | {r['value']:,.0f} {unit} | "
              f"{r['reference']:,.0f} {unit} ({ref}) | {r['ratio']:.2f} | {goal} | {met} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--txn-sizes", type=lambda s: [int(x) for x in s.split(",")],
                    default=[100, 10_000, 1_000_000])
    ap.add_argument("--small-txns", type=int, default=1000,
                    help="transactions sent in the rows of transactions of <= 1,000 records")
    ap.add_argument("--brokers", type=lambda s: [b for b in s.split(",") if b], default=["ours", "kafka"])
    ap.add_argument("--no-embedded", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--quick", action="store_true",
                    help="100,000 records, transactions of 100 / 10,000 / 100,000, 200 small transactions, one run")
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.txn_sizes, args.small_txns, args.repeat = 100_000, [100, 10_000, 100_000], 200, 1
    values = _values(args.size)
    home = kafka_home()
    rows: list = []
    print(f"transactions benchmark: {args.records:,} records of {args.size} B, {PARTS} partitions, "
          f"transaction sizes {args.txn_sizes}, best of {args.repeat}", flush=True)
    for name in args.brokers:
        if name == "kafka" and home is None:
            print("note: Apache Kafka not found (KAFKA_HOME or <repo>/../shared/kafka): no Kafka rows")
            continue
        with tempfile.TemporaryDirectory(prefix=f"bench-txn-{name}-") as d:
            proc, bootstrap = start_ours(d) if name == "ours" else start_kafka(home, d)
            try:
                run_broker(name, bootstrap, args, values, rows)
            finally:
                stop(proc)
    if not args.no_embedded:
        run_embedded(args, values, rows)
    summary(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
