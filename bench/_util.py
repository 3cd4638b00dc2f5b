"""Timing helpers shared by the benchmark runner and the pytest-benchmark suites.

Every row measures the engine and its reference in the same run, interleaved
(reference, engine, reference, engine, ...), and reports the best of each:
on a noisy shared machine the best run is the least disturbed one.
"""

from __future__ import annotations

import gc
import os
import resource
import time
from collections.abc import Callable


def best_of(fn: Callable[[], float | None], repeat: int) -> float:
    """Best (smallest) wall time of `repeat` calls; fn may return its own measured seconds."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        own = fn()
        dt = own if own is not None else time.perf_counter() - t0
        best = min(best, dt)
    return best


def interleave(engine: Callable[[], float | None], reference: Callable[[], float | None],
               repeat: int) -> tuple[float, float]:
    """Best times of engine and reference, run alternately `repeat` times each."""
    be = br = float("inf")
    for _ in range(repeat):
        br = min(br, best_of(reference, 1))
        be = min(be, best_of(engine, 1))
    return be, br


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def drop_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def fmt_rate(value: float, unit: str) -> str:
    if unit == "B/s":
        if value >= 1e9:
            return f"{value / 1e9:.2f} GB/s"
        return f"{value / 1e6:.0f} MB/s"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M rec/s"
    return f"{value / 1e3:.0f} k rec/s"



def send_values(producer, topic: str, values: list, start: int, n: int) -> None:
    """confluent-kafka: produce records start..start+n-1 of the cycling `values` to `topic`,
    polling while librdkafka's queue is full (BufferError)."""
    for i in range(start, start + n):
        while True:
            try:
                producer.produce(topic, values[i % len(values)])
                break
            except BufferError:
                producer.poll(0.01)


def consume_timed(consumer, n: int, timeout: float = 300.0) -> tuple[float, int]:
    """confluent-kafka: consume ``n`` records; (seconds from the first record, records counted in
    that time), as the reference run times it.  RuntimeError when fewer arrive in ``timeout``."""
    got = timed = 0
    first = None
    deadline = time.monotonic() + timeout
    while got < n and time.monotonic() < deadline:
        # Never ask for more than what is left: consume() waits out its whole
        # timeout when fewer records than asked for arrive, which would add up
        # to 1 s of idle time to the clock at the end of every run.
        msgs = consumer.consume(min(10000, n - got), timeout=1.0)
        ok = sum(1 for m in msgs if m.error() is None)
        got += ok
        if first is None:
            if ok:
                first = time.perf_counter()      # timed from the first message, like the reference
        else:
            timed += ok
    dt = time.perf_counter() - (first or time.perf_counter())
    if got < n:
        raise RuntimeError(f"consumed {got} of {n}")
    return dt, timed

