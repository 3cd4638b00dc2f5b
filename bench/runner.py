"""The storage benchmarks behind ``python -m engine bench``.

Each row measures the engine and its reference in the same run, interleaved,
and prints the ratio next to the issue's target.  Figures are best-of-N on a
noisy shared machine; ratios are what to compare across runs, not absolute
numbers.  Results are printed as a table and returned (and written as JSON
by the CLI).

Rows:
  1 append      1 KiB records in 1 MiB batches  vs  write() of the same bytes      target ratio >= 0.6
  2 send        per-record Producer.send(), 100 B values vs a no-op method call loop  target >= 1.5 M rec/s
    send_batch  Producer.send_batch() of pyarrow arrays vs write() of the value bytes target >= 5 M rec/s
  3 read        sequential read of raw batches  vs  read() of the same file          target ratio >= 0.6
  4 read_arrow  1 KiB uncompressed records -> pyarrow.Table                          target >= 1.5 GB/s
    read_arrow lz4  same with lz4 batches  vs  lz4.frame.decompress of the payloads  target ratio >= 0.7
  5 recovery    unclean open, full recovery scan  vs  read() of the same files       target >= 1 GB/s
  6 durable     8 threads, flush.messages=1, 1 KiB records in 128 KiB batches
                vs  one writer, fdatasync every 1 MiB, same bytes                    target ratio >= 0.5
  7 memory      peak RSS (VmHWM) of appending and producing 4x the data vs 1x,
                each in a fresh process                                           target ratio <= 1.2
  8 compaction  PartitionLog.clean() of an all-dirty log, input bytes/s
                vs  read() of the same segment files                             no target, reported
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from ._util import fmt_rate, interleave, peak_rss_mb

KiB = 1024
MiB = 1024 * 1024


def _records_batch(record_size: int, batch_bytes: int, codec: int = 0, seed: int = 0) -> bytes:
    """One batch of `record_size`-byte values filling about `batch_bytes` (hex text: lz4 ~2x)."""
    import random

    from engine import _native
    rnd = random.Random(seed)
    b = _native.BatchBuilder()
    n = max(1, (batch_bytes - 61) // (record_size + 16))
    ts = 1_700_000_000_000
    for i in range(n):
        value = rnd.randbytes(record_size // 2).hex().encode()
        b.append(value, None, None, ts + i)
    return b.build(codec)


def _fresh(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def _timed_write(path: str, chunks: Callable[[], Any], sync: bool = False) -> float:
    """Seconds to write() every chunk to a new file (fdatasync after each with `sync`)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        for chunk in chunks():
            os.write(fd, chunk)
            if sync:
                os.fdatasync(fd)
        return time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)


def _row(name: str, engine: float, reference: float, unit: str, ref_name: str,
         target: str, met: bool | None, note: str = "", ratio: float | None = None) -> dict[str, Any]:
    if ratio is None:
        ratio = engine / reference if reference else float("nan")
    return {"row": name, "engine": engine, "reference": reference, "unit": unit,
            "reference_name": ref_name, "ratio": ratio, "target": target, "met": met,
            "note": note, "peak_rss_mb": round(peak_rss_mb(), 1)}


# -- 1. append --------------------------------------------------------------
def bench_append(tmp: str, quick: bool) -> dict[str, Any]:
    import engine

    total = (128 if quick else 512) * MiB
    batch = _records_batch(1 * KiB, 1 * MiB)
    n = total // len(batch)
    nbytes = n * len(batch)
    ref_path = os.path.join(tmp, "plain.bin")

    def reference() -> float:
        return _timed_write(ref_path, lambda: (batch for _ in range(n)))

    def run_engine() -> float:
        d = _fresh(os.path.join(tmp, "append"))
        with engine.open(d, background=False) as eng:
            eng.create_topic("bench", 1)
            log = eng.log("bench", 0)
            buf = bytearray(batch)
            t0 = time.perf_counter()
            for _ in range(n):
                log.append(buf)
            dt = time.perf_counter() - t0
        shutil.rmtree(d)
        return dt

    te, tr = interleave(run_engine, reference, 3)
    e, r = nbytes / te, nbytes / tr
    return _row("1 append 1 KiB records, 1 MiB batches", e, r, "B/s", "write() same bytes",
                ">= 0.6", e / r >= 0.6)


# -- 2. producer ------------------------------------------------------------
def bench_send(tmp: str, quick: bool) -> dict[str, Any]:
    import engine

    n = 300_000 if quick else 2_000_000
    value = b"v" * 100

    class NoOp:
        def send(self, topic: str, value: bytes) -> None:
            return None

    def reference() -> float:
        sink = NoOp()
        send = sink.send
        t0 = time.perf_counter()
        for _ in range(n):
            send("bench", value)
        return time.perf_counter() - t0

    def run_engine() -> float:
        d = _fresh(os.path.join(tmp, "send"))
        with engine.open(d, background=False) as eng:
            eng.create_topic("bench", 1)
            with eng.producer(linger_ms=100, batch_size=MiB) as p:
                send = p.send
                t0 = time.perf_counter()
                for _ in range(n):
                    send("bench", value)
                p.flush()
                dt = time.perf_counter() - t0
            assert eng.log("bench", 0).log_end_offset == n
        shutil.rmtree(d)
        return dt

    te, tr = interleave(run_engine, reference, 2 if quick else 3)
    e, r = n / te, n / tr
    return _row("2 send() per record, 100 B values", e, r, "rec/s", "no-op method call loop",
                ">= 1.5 M rec/s", e >= 1.5e6, ratio=e / r)


def bench_send_batch(tmp: str, quick: bool) -> dict[str, Any]:
    import numpy as np
    import pyarrow as pa

    import engine

    n = 500_000 if quick else 5_000_000
    offsets = np.arange(0, 100 * (n + 1), 100, dtype=np.int32)
    data = np.frombuffer(os.urandom(100 * n), dtype=np.uint8)
    values = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    ref_path = os.path.join(tmp, "values.bin")

    def reference() -> float:
        mv = memoryview(data)
        return _timed_write(ref_path, lambda: (mv[i:i + MiB] for i in range(0, len(mv), MiB)))

    def run_engine() -> float:
        d = _fresh(os.path.join(tmp, "send_batch"))
        with engine.open(d, background=False) as eng:
            eng.create_topic("bench", 1)
            with eng.producer(batch_size=MiB) as p:
                t0 = time.perf_counter()
                p.send_batch("bench", values, partition=0)
                p.flush()
                dt = time.perf_counter() - t0
            assert eng.log("bench", 0).log_end_offset == n
        shutil.rmtree(d)
        return dt

    te, tr = interleave(run_engine, reference, 2 if quick else 3)
    e = n / te
    return _row("2 send_batch() pyarrow, 100 B values", e, n / tr, "rec/s",
                "write() of the value bytes", ">= 5 M rec/s", e >= 5e6, ratio=(n * 100 / te) / (n * 100 / tr))


# -- shared data for the read rows --------------------------------------------
def _fill_topic(d: str, topic: str, total: int, codec: int, record_size: int = KiB,
                config: dict | None = None) -> int:
    import engine

    batch = _records_batch(record_size, MiB, codec=codec)
    n = max(1, total // len(batch)) if codec == 0 else max(1, total // (MiB))
    with engine.open(d, background=False) as eng:
        eng.create_topic(topic, 1, config)
        log = eng.log(topic, 0)
        buf = bytearray(batch)
        for _ in range(n):
            log.append(buf)
        return n


# -- 3. read ----------------------------------------------------------------
def bench_read(tmp: str, quick: bool) -> dict[str, Any]:
    import engine
    from engine import _native

    total = (64 if quick else 512) * MiB
    d = _fresh(os.path.join(tmp, "read"))
    _fill_topic(d, "bench", total, 0)
    seg = os.path.join(d, "bench-0", "00000000000000000000.log")
    size = os.path.getsize(seg)

    def reference() -> float:
        with open(seg, "rb", buffering=0) as f:
            t0 = time.perf_counter()
            while f.read(MiB):
                pass
            return time.perf_counter() - t0

    with engine.open(d, read_only=True) as eng:
        log = eng.log("bench", 0)

        def run_engine() -> float:
            offset = 0
            hw = log.high_watermark
            got = 0
            t0 = time.perf_counter()
            while offset < hw:
                info = log.read(offset, MiB)
                for sl in info.slices:
                    data = sl.read()
                    got += len(data)
                    headers, _ = _native.list_batches(data)
                    if headers:
                        offset = headers[-1].next_offset
            dt = time.perf_counter() - t0
            assert got >= size
            return dt

        te, tr = interleave(run_engine, reference, 3)
    shutil.rmtree(d)
    e, r = size / te, size / tr
    return _row("3 sequential read of raw batches", e, r, "B/s", "read() same file, 1 MiB",
                ">= 0.6", e / r >= 0.6)


# -- 4. read_arrow ------------------------------------------------------------
def bench_read_arrow(tmp: str, quick: bool) -> list[dict[str, Any]]:
    import lz4.frame

    import engine
    from engine import _native

    rows = []
    total = (64 if quick else 512) * MiB
    d = _fresh(os.path.join(tmp, "arrow"))
    _fill_topic(d, "plain", total, 0)
    _fill_topic(d, "lz4", total // 2, 3)
    plain_size = os.path.getsize(os.path.join(d, "plain-0", "00000000000000000000.log"))
    lz4_seg = os.path.join(d, "lz4-0", "00000000000000000000.log")
    with open(lz4_seg, "rb") as f:
        lz4_bytes = f.read()
    headers, _ = _native.list_batches(lz4_bytes)
    payloads = [memoryview(lz4_bytes)[h.position + 61:h.position + h.size] for h in headers]
    raw_total = sum(len(lz4.frame.decompress(p)) for p in payloads)

    with engine.open(d, read_only=True) as eng:
        def timed_read_arrow(topic: str) -> float:
            t0 = time.perf_counter()
            t = eng.read_arrow(topic, 0)
            dt = time.perf_counter() - t0
            assert t.num_rows > 0
            return dt

        def reference_read() -> float:
            with open(os.path.join(d, "plain-0", "00000000000000000000.log"), "rb", buffering=0) as f:
                t0 = time.perf_counter()
                while f.read(MiB):
                    pass
                return time.perf_counter() - t0

        te, tr = interleave(lambda: timed_read_arrow("plain"), reference_read, 3)
        e = plain_size / te
        rows.append(_row("4 read_arrow 1 KiB records, none", e, plain_size / tr, "B/s",
                         "read() same file", ">= 1.5 GB/s", e >= 1.5e9))

        def reference_lz4() -> float:
            t0 = time.perf_counter()
            for p in payloads:
                lz4.frame.decompress(p)
            return time.perf_counter() - t0

        te, tr = interleave(lambda: timed_read_arrow("lz4"), reference_lz4, 3)
        e, r = raw_total / te, raw_total / tr
        rows.append(_row("4 read_arrow 1 KiB records, lz4", e, r, "B/s",
                         "lz4.frame.decompress of the payloads", ">= 0.7", e / r >= 0.7,
                         note="uncompressed bytes per second"))
    shutil.rmtree(d)
    return rows


# -- 5. recovery ----------------------------------------------------------------
def bench_recovery(tmp: str, quick: bool) -> dict[str, Any]:
    import engine

    total = (64 if quick else 512) * MiB
    d = _fresh(os.path.join(tmp, "recovery"))
    _fill_topic(d, "bench", total, 0, config={"segment.bytes": 128 * MiB})
    logdir = os.path.join(d, "bench-0")
    seg_bytes = sum(os.path.getsize(os.path.join(logdir, f)) for f in os.listdir(logdir)
                    if f.endswith(".log"))

    def make_unclean() -> None:
        for name in (".kafka_cleanshutdown", "recovery-point-offset-checkpoint"):
            try:
                os.unlink(os.path.join(d, name))
            except FileNotFoundError:
                pass

    def run_engine() -> float:
        make_unclean()
        t0 = time.perf_counter()
        eng = engine.open(d, background=False)
        dt = time.perf_counter() - t0
        eng.close()
        return dt

    def reference() -> float:
        t0 = time.perf_counter()
        for f in sorted(os.listdir(logdir)):
            if f.endswith(".log"):
                with open(os.path.join(logdir, f), "rb", buffering=0) as fh:
                    while fh.read(MiB):
                        pass
        return time.perf_counter() - t0

    te, tr = interleave(run_engine, reference, 3)
    shutil.rmtree(d)
    e = seg_bytes / te
    return _row("5 unclean open, recovery scan", e, seg_bytes / tr, "B/s", "read() same files",
                ">= 1 GB/s", e >= 1e9)


# -- 6. durable ---------------------------------------------------------------
def bench_durable(tmp: str, quick: bool) -> dict[str, Any]:
    import engine

    threads = 8
    total = (32 if quick else 256) * MiB
    batch = _records_batch(KiB, 128 * KiB)
    per_thread = max(1, total // threads // len(batch))
    nbytes = per_thread * threads * len(batch)
    ref_path = os.path.join(tmp, "durable.bin")
    chunk = bytes(MiB)

    def reference() -> float:
        return _timed_write(ref_path, lambda: (chunk for _ in range(-(-nbytes // len(chunk)))), sync=True)

    def run_engine() -> float:
        d = _fresh(os.path.join(tmp, "durable"))
        with engine.open(d, background=False) as eng:
            eng.create_topic("bench", 1, {"flush.messages": 1})
            log = eng.log("bench", 0)
            start = threading.Barrier(threads + 1)

            def worker() -> None:
                buf = bytearray(batch)
                start.wait()
                for _ in range(per_thread):
                    log.append(buf)

            ts = [threading.Thread(target=worker) for _ in range(threads)]
            for t in ts:
                t.start()
            start.wait()
            t0 = time.perf_counter()
            for t in ts:
                t.join()
            dt = time.perf_counter() - t0
        shutil.rmtree(d)
        return dt

    te, tr = interleave(run_engine, reference, 2 if quick else 3)
    e, r = nbytes / te, nbytes / tr
    return _row("6 durable, 8 appenders, group commit", e, r, "B/s",
                "fdatasync every 1 MiB, plain file", ">= 0.5", e / r >= 0.5)


# -- 7. memory ------------------------------------------------------------------
# VmHWM, not ru_maxrss: on Linux ru_maxrss survives exec and would report the
# parent's peak; VmHWM belongs to the child's own address space.
_MEM_CHILD = r"""
import os, sys, shutil, tempfile
sys.path.insert(0, {root!r})
from bench.runner import _fill_topic
import engine
d = tempfile.mkdtemp(dir={tmp!r})
_fill_topic(d, "m", {size}, 0)
with engine.open(d, background=False) as eng, eng.producer(linger_ms=100) as p:
    value = b"v" * 1024
    for _ in range({size} // 1024):
        p.send("p", value)
shutil.rmtree(d)
with open("/proc/self/status") as f:
    print([line.split()[1] for line in f if line.startswith("VmHWM:")][0])
"""


def bench_memory(tmp: str, quick: bool) -> dict[str, Any]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base = (32 if quick else 128) * MiB

    def rss(size: int) -> float:
        out = subprocess.run([sys.executable, "-c", _MEM_CHILD.format(root=root, tmp=tmp, size=size)],
                             check=True, capture_output=True, text=True).stdout
        return int(out.strip().splitlines()[-1]) / 1024.0

    small = rss(base)
    large = rss(base * 4)
    return _row("7 peak RSS, 4x data vs 1x", large, small, "MB", "same run with 1x data",
                "<= 1.2", large / small <= 1.2, note=f"{small:.0f} MB vs {large:.0f} MB")


# -- 8. compaction --------------------------------------------------------------
def bench_compaction(tmp: str, quick: bool) -> dict[str, Any]:
    """Clean a dirty compacted log (100 B values, 20k keys, 16 KiB batches, all dirty).

    Throughput is input log bytes per second of PartitionLog.clean(); the
    reference reads the same segment files sequentially (1 MiB read()s).
    Each engine run cleans a fresh copy of the log (copied outside the timing).
    """
    import random

    import engine
    from engine import _native

    total = (48 if quick else 256) * MiB
    src = _fresh(os.path.join(tmp, "compaction-src"))
    rnd = random.Random(8)
    cfg = {"cleanup.policy": "compact", "segment.bytes": 32 * MiB, "file.delete.delay.ms": 0}
    with engine.open(src, background=False) as eng:
        eng.create_topic("bench", 1, cfg)
        log = eng.log("bench", 0)
        ts = 1_700_000_000_000
        while log.size < total:
            b = _native.BatchBuilder()
            for _ in range(140):
                k = rnd.randrange(20_000)
                b.append(rnd.randbytes(50).hex().encode(), b"key-%d" % k, None, ts)
                ts += 1
            log.append(b.build(0))
        log.roll()
    seg_dir = os.path.join(src, "bench-0")
    logs = [os.path.join(seg_dir, f) for f in sorted(os.listdir(seg_dir)) if f.endswith(".log")]
    size = sum(os.path.getsize(f) for f in logs)
    work = os.path.join(tmp, "compaction")
    kept = {}

    def reference() -> float:
        t0 = time.perf_counter()
        for path in logs:
            with open(path, "rb", buffering=0) as f:
                while f.read(MiB):
                    pass
        return time.perf_counter() - t0

    def run_engine() -> float:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        with engine.open(work, background=False) as eng:
            log = eng.log("bench", 0)
            t0 = time.perf_counter()
            st = log.clean()
            dt = time.perf_counter() - t0
            kept["records"], kept["out"] = st.records_kept, st.bytes_written
        return dt

    te, tr = interleave(run_engine, reference, 3)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)
    e, r = size / te, size / tr
    return _row("8 compaction 100 B records, 20k keys", e, r, "B/s", "read() same segments, 1 MiB",
                "none (reported)", None,
                note=f"{size / MiB:.0f} MiB in, {kept['records']} records / {kept['out'] / MiB:.1f} MiB out")


ROWS: list[tuple[str, Callable[[str, bool], Any]]] = [
    ("append", bench_append),
    ("send", bench_send),
    ("send_batch", bench_send_batch),
    ("read", bench_read),
    ("read_arrow", bench_read_arrow),
    ("recovery", bench_recovery),
    ("durable", bench_durable),
    ("memory", bench_memory),
    ("compaction", bench_compaction),
]


def _fmt(value: float, unit: str) -> str:
    if unit in ("B/s", "rec/s"):
        return fmt_rate(value, unit)
    return f"{value:.0f} {unit}"


def print_table(rows: list[dict[str, Any]], out=sys.stdout) -> None:
    head = (f"| {'row':<40} | {'engine':>14} | {'reference':>14} | {'reference is':<38} | {'ratio':>6} "
            f"| {'target':<15} | met |")
    print(head, file=out)
    print("|" + "|".join("-" * (len(c)) for c in head.split("|")[1:-1]) + "|", file=out)
    for r in rows:
        met = "-" if r["met"] is None else "yes" if r["met"] else "no"
        print(f"| {r['row']:<40} | {_fmt(r['engine'], r['unit']):>14} | {_fmt(r['reference'], r['unit']):>14} "
              f"| {r['reference_name']:<38} | {r['ratio']:>6.2f} | {r['target']:<15} | {met:<3} |", file=out)


def run_all(quick: bool = False, only: list[str] | None = None,
            data_dir: str | None = None) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="engine-bench-", dir=data_dir)
    rows: list[dict[str, Any]] = []
    try:
        for name, fn in ROWS:
            if only and not any(o in name for o in only):
                continue
            if sys.stderr.isatty():
                print(f"running {name} ...", file=sys.stderr)
            result = fn(tmp, quick)
            rows.extend(result if isinstance(result, list) else [result])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print_table(rows)
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python -m engine bench" + (" --quick" if quick else ""),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "rows": rows,
    }


if __name__ == "__main__":
    res = run_all(quick="--quick" in sys.argv)
    json.dump(res, sys.stdout, indent=1)
