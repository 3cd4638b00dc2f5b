"""A cluster read from local files where this machine holds an in-sync copy, else through the leader.

With both ``kafka.bootstrap.servers`` (the cluster) and ``path`` (comma-separated data directories
of the brokers on this machine), the driver plans over the wire as the network fallback does
(offsets up to the leader's high watermark, or its last stable offset under read_committed), then
gives each offset range to a local directory whose broker (``node.id`` of its ``meta.properties``)
is in the partition's ISR, the leader's own copy first; ranges with no local in-sync copy are
fetched from the leader.  Why this is safe: the high watermark is the minimum log end offset over
the ISR, so every in-sync copy holds every offset below it, and a replica never truncates below
its high watermark, so the committed range planned on the driver stays on its disk.  The task
still checks that the copy covers the range (its log start at or below the range's start, its own
published high watermark at or above the range's end, waiting up to ``LOCAL_WAIT_S`` for a
follower that has not yet heard the leader's latest high watermark) and otherwise reads it
through the leader, so a copy that left the ISR or was moved after planning costs speed, never
rows.

Spark prints a Python data source in the query plan as ``BatchScan kafka-engine[...] (Python)``
with no room for what the source decided, so the decision is logged by the driver on the
``spark_udfs`` logger (INFO: one line per planned range, "local copy of broker 2 in /data/b2" or
"through the leader, broker 1") and returned by :func:`explain`, which plans without reading.

Layering: this module uses ``options`` and ``planning`` (what to read) and is used by ``reader``
and ``stream`` (the batch and micro-batch plans call :func:`place`; the tasks
:func:`local_log_covering`); it imports neither of those.  The data source checks the ``path``
directories at load() with :func:`local_brokers`.
"""

from __future__ import annotations

import logging
import os
import time

from engine.errors import InvalidConfigError

from .options import parse_options
from .planning import (
    OffsetRangePartition,
    _source,
    resolve_ranges,
    resolve_topic_partitions,
    split_ranges,
)

__all__ = ["LOCAL_WAIT_S", "explain", "local_brokers", "place"]

log = logging.getLogger("spark_udfs")

LOCAL_WAIT_S = 2.0


def local_brokers(dirs) -> dict[int, str]:
    """{broker id: data directory} of the given local data directories (their meta.properties)."""
    from engine.metadata import read_meta_properties

    out: dict[int, str] = {}
    for d in dirs:
        if not os.path.isdir(d):
            raise InvalidConfigError(f"option 'path': data directory {d!r} does not exist")
        props = read_meta_properties(d)
        raw = props.get("node.id", props.get("broker.id"))
        if raw is None or not raw.strip().lstrip("-").isdigit():
            raise InvalidConfigError(f"option 'path': {d!r} has no meta.properties naming its broker "
                                     "(is it a broker's data directory?)")
        node = int(raw)
        if node in out:
            raise InvalidConfigError(f"option 'path': {out[node]!r} and {d!r} both belong to broker {node}")
        out[node] = d
    return out


def _where(leader: int, isr, local: dict[int, str]) -> str | None:
    """The local directory to read from: the leader's if it is here, else an in-sync follower's."""
    for node in [leader, *[r for r in isr if r != leader]]:
        if node in isr and node in local:
            return local[node]
    return None


def place(src, opts, ranges) -> list:
    """OffsetRangePartitions for `ranges` [(topic, partition, start, end)]: `path` is the local
    directory to read (the only directory without a cluster), or None for the network fallback."""
    if not opts.bootstrap_servers:
        return [OffsetRangePartition(t, p, s, e, opts.path) for t, p, s, e in ranges]
    if not opts.local_dirs:
        return [OffsetRangePartition(t, p, s, e, None) for t, p, s, e in ranges]
    local = local_brokers(opts.local_dirs)
    out = []
    for t, p, s, e in ranges:
        leader, isr = src.roles(t, p)
        path = _where(leader, isr, local)
        out.append(OffsetRangePartition(t, p, s, e, path))
        log.info("kafka-engine: %s-%d [%d, %d): %s", t, p, s, e, _describe(path, leader, local))
    return out


def _describe(path: str | None, leader: int, local: dict[int, str]) -> str:
    if path is None:
        return f"through the leader, broker {leader} (no in-sync copy on this machine)"
    node = next(n for n, d in local.items() if d == path)
    return f"local copy of broker {node} in {path}" + (" (the leader)" if node == leader else " (in sync)")


def explain(options: dict) -> list[dict]:
    """Where a batch read with these options would read each range from, without reading:
    [{topic, partition, start, end, source}] ("local:<dir>" or "leader:<broker id>")."""
    opts = parse_options(options, streaming=False)
    src = _source(opts)
    try:
        ranges = split_ranges(src, resolve_ranges(src, opts, resolve_topic_partitions(src, opts)),
                              opts.min_partitions)
        parts = place(src, opts, ranges)
        leaders = {(p.topic, p.partition): src.roles(p.topic, p.partition)[0]
                   for p in parts if getattr(src, "is_wire", False)}
    finally:
        src.close()
    return [{"topic": p.topic, "partition": p.partition, "start": p.start, "end": p.end,
             "source": f"local:{p.path}" if p.path else f"leader:{leaders[(p.topic, p.partition)]}"}
            for p in parts]


def local_log_covering(part, opts):
    """(engine, log) of the local copy when it covers [part.start, part.end), else None (closed)."""
    import engine

    try:
        eng = engine.open(part.path, read_only=True, background=False)
    except (FileNotFoundError, OSError) as e:
        log.info("kafka-engine: %s unavailable (%s): reading %s-%d through the leader", part.path, e,
                 part.topic, part.partition)
        return None
    try:
        plog = eng.log(part.topic, part.partition)
        deadline = time.monotonic() + LOCAL_WAIT_S
        while True:
            plog.refresh()
            top = plog.last_stable_offset if opts.read_committed else plog.high_watermark
            if plog.log_start_offset <= part.start and top >= part.end:
                return eng, plog
            if plog.log_start_offset > part.start or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        log.info("kafka-engine: the copy in %s holds [%d, %d) of %s-%d, not [%d, %d): reading through "
                 "the leader", part.path, plog.log_start_offset, top, part.topic, part.partition,
                 part.start, part.end)
    except Exception as e:        # no such partition here (any more): the network has it
        log.info("kafka-engine: %s-%d not readable in %s (%s): reading through the leader",
                 part.topic, part.partition, part.path, e)
    eng.close()
    return None
