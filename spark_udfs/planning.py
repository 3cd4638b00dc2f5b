"""Planning on the driver for the ``kafka-engine`` source: what to read, not how.

The source is a data directory opened read-only (no lock, nothing changed on disk) or, with
``kafka.bootstrap.servers`` (the network fallback), the broker: :class:`WireSource` answers the
same calls with Metadata and ListOffsets through :class:`engine.client.wire.WireClient`, so the
planning code on top is the same.  :func:`resolve_topic_partitions` picks the topic-partitions
(``subscribe`` / ``subscribePattern`` / ``assign``); :func:`resolve_ranges` resolves the starting
and ending offsets of each one against its log start offset and published high watermark (never
above it; the last stable offset under ``read_committed``) and honours ``failOnDataLoss`` (true:
an out-of-range bound raises :class:`OffsetOutOfRangeError` naming topic-partition and the valid
range; false: the bound is clamped and a warning logged); with ``minPartitions``,
:func:`split_ranges` cuts large ranges at offset-index entries (at even offsets over the wire:
there is no index to consult).  A range becomes a picklable :class:`OffsetRangePartition`
(topic, partition, start, end, path: where the task reads it, chosen by
:func:`spark_udfs.locality.place`).

Layering: ``options`` <- this module <- ``locality`` <- ``reader`` / ``stream``; the batch plan
(:func:`spark_udfs.reader.plan_ranges`) and the micro-batch plans put these pieces together.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import re
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from engine.errors import (
    InvalidConfigError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)

from .options import EARLIEST, LATEST, ReadOptions

__all__ = ["OffsetRangePartition", "WireSource", "end_of", "resolve_ranges", "resolve_topic_partitions",
           "split_ranges"]

log = logging.getLogger("spark_udfs")


@dataclass(frozen=True)
class OffsetRangePartition(InputPartition):
    """One Spark task: offsets [start, end) of topic-partition, read from the data directory
    `path`, or through the partition's leader when `path` is None (spark_udfs.locality)."""

    topic: str
    partition: int
    start: int
    end: int
    path: str | None

    @property
    def size(self) -> int:
        return self.end - self.start


def _open(path: str):
    import engine
    try:
        return engine.open(path, read_only=True, background=False)
    except FileNotFoundError:
        raise InvalidConfigError(f"option 'path': data directory {path!r} does not exist") from None


class _WireLog:
    """What planning needs of one partition, asked of the broker (ListOffsets)."""

    def __init__(self, src: WireSource, topic: str, partition: int):
        self.src, self.topic, self.partition = src, topic, partition
        self.log_start_offset = self.high_watermark = self.last_stable_offset = 0

    def refresh(self) -> None:
        tp = (self.topic, self.partition)
        self.log_start_offset = self.src.client.list_offsets({tp: EARLIEST})[tp][0]
        self.high_watermark = self.src.client.list_offsets({tp: LATEST})[tp][0]
        self.last_stable_offset = (self.src.client.list_offsets({tp: LATEST}, isolation_level=1)[tp][0]
                                   if self.src.read_committed else self.high_watermark)

    def offset_for_timestamp(self, ts: int):
        tp = (self.topic, self.partition)
        off, found_ts = self.src.client.list_offsets({tp: ts})[tp]
        return None if off < 0 else (off, found_ts)


class WireSource:
    """The read-only Engine calls planning makes, answered by a broker."""

    is_wire = True

    def __init__(self, opts: ReadOptions):
        from engine.client.wire import WireClient
        self.client = WireClient(opts.bootstrap_servers, client_id=opts.client_id,
                                 request_timeout_ms=opts.request_timeout_ms)
        self.read_committed = opts.read_committed
        self._topics: dict | None = None
        self._meta: dict[str, dict] = {}

    def _all(self) -> dict:
        if self._topics is None:
            self._topics = self.client.list_topics()
        return self._topics

    def list_topics(self) -> list[str]:
        return sorted(self._all())

    def partitions_for(self, topic: str) -> int:
        n = self._all().get(topic)
        if n is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
        return n

    def log(self, topic: str, partition: int) -> _WireLog:
        return _WireLog(self, topic, partition)

    def roles(self, topic: str, partition: int) -> tuple[int, tuple]:
        """(leader, ISR) of a partition, from one Metadata request per topic."""
        if topic not in self._meta:
            self._meta[topic] = {pm.partition: (pm.leader, pm.isr) for pm in self.client.metadata([topic])[topic]}
        return self._meta[topic].get(partition, (-1, ()))

    def close(self) -> None:
        self.client.close()


def _source(opts: ReadOptions):
    """The data directory (read-only open) or, with kafka.bootstrap.servers, the broker."""
    return WireSource(opts) if opts.bootstrap_servers else _open(opts.path)


def end_of(plog, opts: ReadOptions) -> int:
    """Where reading ends ("latest"): the LSO under read_committed, else the high watermark."""
    return plog.last_stable_offset if opts.read_committed else plog.high_watermark


def resolve_topic_partitions(eng, opts: ReadOptions) -> list[tuple[str, int]]:
    """The (topic, partition) pairs the options select, sorted."""
    topics = eng.list_topics()
    out: list[tuple[str, int]] = []
    if opts.subscribe is not None:
        missing = [t for t in opts.subscribe if t not in topics]
        if missing:
            raise UnknownTopicOrPartitionError(
                f"option 'subscribe': topic(s) {', '.join(map(repr, missing))} do not exist in "
                f"{opts.source} (topics: {', '.join(topics) or 'none'})")
        for t in dict.fromkeys(opts.subscribe):
            out.extend((t, p) for p in range(eng.partitions_for(t)))
    elif opts.subscribe_pattern is not None:
        rx = re.compile(opts.subscribe_pattern)
        for t in topics:
            if rx.fullmatch(t):
                out.extend((t, p) for p in range(eng.partitions_for(t)))
    else:
        assert opts.assign is not None
        for t, parts in opts.assign.items():
            if t not in topics:
                raise UnknownTopicOrPartitionError(
                    f"option 'assign': topic {t!r} does not exist in {opts.source}")
            n = eng.partitions_for(t)
            bad = [p for p in parts if p >= n]
            if bad:
                raise UnknownTopicOrPartitionError(
                    f"option 'assign': {', '.join(f'{t}-{p}' for p in bad)} do not exist "
                    f"({t!r} has {n} partitions)")
            out.extend((t, p) for p in parts)
    return sorted(out)


def _check_json_covers(name: str, spec: dict, tps: list[tuple[str, int]]) -> None:
    extra = sorted(set(spec) - set(tps))
    if extra:
        raise InvalidConfigError(f"option {name!r} names {', '.join(f'{t}-{p}' for t, p in extra)}, "
                                 "which the subscription does not select")
    missing = sorted(set(tps) - set(spec))
    if missing:
        raise InvalidConfigError(f"option {name!r} must give every selected partition; missing "
                                 f"{', '.join(f'{t}-{p}' for t, p in missing)}")


def _bound(plog, opts: ReadOptions, tp, which: str, lso: int, hw: int, default_start: int = EARLIEST) -> int:
    """The starting ("start") or ending ("end") offset of one partition, unchecked
    (`default_start`: without starting options; Spark's batch default is earliest,
    its streaming default latest)."""
    t, p = tp
    if which == "start":
        glob_ts, by_ts, spec, by_ts_name = (opts.starting_timestamp, opts.starting_by_timestamp,
                                            opts.starting, "startingOffsetsByTimestamp")
        default = default_start
    else:
        glob_ts, by_ts, spec, by_ts_name = (opts.ending_timestamp, opts.ending_by_timestamp,
                                            opts.ending, "endingOffsetsByTimestamp")
        default = LATEST
    # Spark's precedence: the global timestamp, then per-partition timestamps, then offsets.
    ts = glob_ts if glob_ts is not None else (by_ts.get(tp) if by_ts is not None else None)
    if ts is not None:
        hit = plog.offset_for_timestamp(ts)
        if hit is not None:
            return hit[0]
        if which == "end" or opts.timestamp_strategy == "latest":
            return hw
        raise OffsetOutOfRangeError(
            f"no record of {t}-{p} has a timestamp >= {ts} (startingTimestamp / "
            "startingOffsetsByTimestamp; set startingOffsetsByTimestampStrategy=latest to start at the end)")
    if by_ts is not None and glob_ts is None:
        raise InvalidConfigError(f"option {by_ts_name!r} must give every selected partition; "
                                 f"missing {t}-{p}")
    off = default if spec is None else (EARLIEST if spec.kind == "earliest" else
                                        LATEST if spec.kind == "latest" else spec.per_partition[tp])
    if off == EARLIEST:
        return lso
    if off == LATEST:
        return hw
    return off


def resolve_ranges(eng, opts: ReadOptions, tps) -> list[tuple[str, int, int, int]]:
    """(topic, partition, start, end) for each selected partition, bounded by [log start, HW]."""
    for name, spec in (("startingOffsets", opts.starting), ("endingOffsets", opts.ending)):
        if spec is not None and spec.kind == "json":
            _check_json_covers(name, spec.per_partition, tps)
    out = []
    for tp in tps:
        t, p = tp
        plog = eng.log(t, p)
        plog.refresh()
        lso, hw = plog.log_start_offset, end_of(plog, opts)
        start = _bound(plog, opts, tp, "start", lso, hw)
        end = _bound(plog, opts, tp, "end", lso, hw)
        bad = []
        if not lso <= start <= hw:
            bad.append(f"starting offset {start}")
        if not lso <= end <= hw:
            bad.append(f"ending offset {end}")
        if start > end and not bad:
            bad.append(f"starting offset {start} after ending offset {end}")
        if bad:
            msg = (f"{' and '.join(bad)} of {t}-{p} outside the available range [{lso}, {hw}] "
                   f"(log start offset, {'last stable offset' if opts.read_committed else 'high watermark'})")
            if opts.fail_on_data_loss:
                raise OffsetOutOfRangeError(msg + "; set failOnDataLoss=false to clamp the range")
            start = min(max(start, lso), hw)
            end = min(max(end, start), hw)
            log.warning("kafka-engine: %s; failOnDataLoss=false: reading [%d, %d) instead", msg, start, end)
        out.append((t, p, start, end))
    return out


def _cut_points(plog, start: int, end: int) -> list[int]:
    """Offsets in (start, end) where a task can begin on a batch boundary cheaply:
    segment base offsets and, for each offset-index entry (last offset of an
    append, position of its first batch), the offset after it."""
    pts = []
    for seg in plog.segments:
        if seg.base_offset >= end:
            break
        if start < seg.base_offset:
            pts.append(seg.base_offset)
        idx = seg.index
        for i in range(idx.entries):
            off = idx.entry(i)[0] + 1
            if start < off < end:
                pts.append(off)
    return sorted(set(pts))


def _cut_at_or_below(segs, bases, ideal: int) -> int:
    """The greatest cut point (see :func:`_cut_points`) at or below ideal + 1: one
    index lookup, so planning costs O(pieces), not O(index entries)."""
    seg = segs[max(bisect.bisect_right(bases, ideal) - 1, 0)]
    off, pos = seg.index.lookup(ideal)
    return seg.base_offset if pos == 0 else off + 1


def split_ranges(eng, ranges, min_partitions: int | None) -> list[tuple[str, int, int, int]]:
    """Spark's KafkaOffsetRangeCalculator rule, cut at index entries: with
    minPartitions above the number of non-empty ranges, each range gets
    max(1, round(size / total * minPartitions)) pieces of about equal size."""
    nonempty = [r for r in ranges if r[3] > r[2]]
    if not min_partitions or min_partitions <= len(nonempty):
        return nonempty
    total = sum(r[3] - r[2] for r in nonempty)
    out = []
    for t, p, s, e in nonempty:
        pieces = max(1, round((e - s) / total * min_partitions))
        if pieces == 1:
            out.append((t, p, s, e))
            continue
        if getattr(eng, "is_wire", False):  # no index over the wire: even offsets
            bounds = sorted({s + (e - s) * k // pieces for k in range(pieces + 1)})
            out.extend((t, p, a, b) for a, b in itertools.pairwise(bounds) if b > a)
            continue
        segs = eng.log(t, p).segments
        bases = [sg.base_offset for sg in segs]
        cuts = [_cut_at_or_below(segs, bases, s + (e - s) * k // pieces) for k in range(1, pieces)]
        bounds = [s] + sorted(set(c for c in cuts if s < c < e)) + [e]
        out.extend((t, p, a, b) for a, b in itertools.pairwise(bounds))
    return out
