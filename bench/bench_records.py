"""Micro-benchmarks of the record core (engine._native): per-record producer
append, vectorised batch building from Arrow, and the columnar scanner.

    python bench/bench_records.py            # from the worktree root, after build_ext --inplace

Each figure is the best of N runs in CPU seconds of this (single-threaded)
process -- time.process_time() -- so load from other processes on the shared
machine does not count; best-of filters the rest.  Scanner figures are MB/s of record value bytes.
"""

import os
import random
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # idle BLAS threads would count as CPU time

sys.path.insert(0, os.path.abspath(os.path.dirname(os.path.dirname(__file__))))

import lz4.frame  # noqa: E402
import pyarrow as pa  # noqa: E402
import zstandard  # noqa: E402

from engine import _native  # noqa: E402
from engine.arrow import batches_to_table  # noqa: E402


def best(fn, reps):
    out = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return min(out)


def json_like(n, size, seed=1):
    rnd = random.Random(seed)
    words = [b"user", b"event", b"click", b"view", b"cart", b"session", b"2026-11-23T07:00:00Z", b"Mozilla/5.0"]
    base = []
    for _ in range(min(n, 20000)):
        parts, total = [], 0
        while total < size:
            w = rnd.choice(words) if rnd.random() < 0.6 else os.urandom(6).hex().encode()
            parts.append(w)
            total += len(w) + 1
        base.append(b" ".join(parts)[:size])
    return (base * (n // len(base) + 1))[:n]


def main():
    n = 1_000_000
    v = os.urandom(100)

    def acc_loop():
        acc = _native.RecordAccumulator(1, codec=0, batch_size=1 << 20)
        app = acc.append
        for _ in range(n):
            app(0, v)
        acc.drain(0)

    t = best(acc_loop, 5)
    print(f"RecordAccumulator.append x {n:,} (100 B values) + drain: {n / t / 1e6:.2f} M rec/s")

    vals = pa.array([os.urandom(100) for _ in range(n)], pa.binary())
    keys = pa.array([b"key-%d" % i for i in range(n)], pa.binary())
    for codec in (0, 3, 4):
        t = best(lambda codec=codec: _native.build_batches(vals, keys, codec=codec), 3)
        print(f"build_batches from Arrow, 100 B values + keys, codec {codec}: {n / t / 1e6:.2f} M rec/s")

    m = 200_000
    recs = pa.array(json_like(m, 1024), pa.binary())
    nbytes = m * 1024
    for codec in (0, 3, 4):
        batches = _native.build_batches(recs, codec=codec, max_batch_bytes=1 << 20)
        data = b"".join(batches)
        payloads = [memoryview(b)[61:] for b in batches]
        scan_t, plain_t = [], []
        for _ in range(9):   # interleaved, so both see the same machine load
            t = time.process_time()
            batches_to_table(data, "t", 0)
            scan_t.append(time.process_time() - t)
            if codec == 3:
                t = time.process_time()
                for p in payloads:
                    lz4.frame.decompress(p)
                plain_t.append(time.process_time() - t)
            elif codec == 4:
                t = time.process_time()
                for p in payloads:
                    zstandard.ZstdDecompressor().decompressobj().decompress(p)
                plain_t.append(time.process_time() - t)
        s = min(scan_t)
        line = (f"scan 1 KiB records, codec {codec}: {nbytes / s / 1e6:,.0f} MB/s "
                f"({m / s / 1e6:.2f} M rec/s, CRC checked)")
        if plain_t:
            p = min(plain_t)
            line += f"; plain decompress of the same payloads {nbytes / p / 1e6:,.0f} MB/s -> {100 * p / s:.0f}%"
        print(line)

    batches = _native.build_batches(recs, codec=0)
    t = best(lambda: [_native.decode_batch(b) for b in batches], 3)
    print(f"decode_batch to Python tuples, 1 KiB records: {m / t / 1e6:.2f} M rec/s")


if __name__ == "__main__":
    main()
