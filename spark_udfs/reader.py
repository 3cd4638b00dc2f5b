"""Planning (driver) and reading (tasks) of the ``kafka-engine`` source.

Driver side, :func:`plan_ranges`: open the data directory read-only (no lock,
nothing changed on disk), pick the topic-partitions (``subscribe`` /
``subscribePattern`` / ``assign``), resolve the starting and ending offsets of
each one against its log start offset and published high watermark (never
above it), honour ``failOnDataLoss`` (true: an out-of-range bound raises
:class:`OffsetOutOfRangeError` naming topic-partition and the valid range;
false: the bound is clamped and a warning logged), and, with
``minPartitions``, cut large ranges at offset-index entries.  The result is a
list of picklable :class:`OffsetRangePartition` (topic, partition, start, end,
path).

Task side, :func:`read_range`: open the directory read-only and yield
``pyarrow.RecordBatch`` es of at most ``maxRecordsPerBatch`` rows for exactly
[start, end), decoded from the segment files by the native column scanner
(no Python object per record), with the Spark schema (headers dropped unless
``includeHeaders``).  A range the log no longer holds (retention ran after
planning), a corrupt batch or a short read raise with ``failOnDataLoss=true``;
with false they are skipped and reported on the ``spark_udfs`` logger (the
executor's stderr, i.e. the Spark log): a corrupt batch skips the rest of its
segment file, the range continues at the next segment.

Network fallback (``kafka.bootstrap.servers`` instead of ``path``): the
driver resolves topics, partitions and offsets over the wire
(:class:`WireSource`: Metadata and ListOffsets through
:class:`engine.client.wire.WireClient`, the same planning code on top), and
each task fetches its range (:func:`read_range_wire`) and decodes the fetched
record batches with the same native column scanner, straight from the
response frame.  Same schema, options, bounds and ``failOnDataLoss`` rules;
``minPartitions`` cuts ranges at even offsets (there is no index to consult),
and a corrupt batch skips just that batch (its header says where the next
one starts).

Transactions (``kafka.isolation.level``, as Spark's Kafka source): control
batches never become rows; with ``read_committed`` "latest" and every bound
is the last stable offset instead of the high watermark, and the scanner is
given the partition's aborted transactions (``.txnindex``, or the Fetch
answer's list over the wire) so their records are dropped natively.
"""

from __future__ import annotations

import bisect
import logging
import re
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceReader, InputPartition

from engine.errors import (
    CorruptRecordError,
    InvalidConfigError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)

from .locality import local_log_covering, place
from .options import EARLIEST, LATEST, ReadOptions

__all__ = ["KafkaEngineBatchReader", "OffsetRangePartition", "WireSource", "plan_ranges", "read_range",
           "read_range_wire", "resolve_topic_partitions", "split_ranges"]

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


def _skip_lost(opts, t: str, p: int, start: int, end: int, lso: int) -> int:
    """[start, lso) was deleted after planning: fail (failOnDataLoss) or log and go on from lso."""
    msg = (f"offsets [{start}, {min(lso, end)}) of {t}-{p} are gone (log start offset is now "
           f"{lso}, retention or deletion ran after the query was planned)")
    if opts.fail_on_data_loss:
        raise OffsetOutOfRangeError(msg + "; set failOnDataLoss=false to skip them")
    log.warning("kafka-engine: %s; failOnDataLoss=false: skipped", msg)
    return min(lso, end)


def _open(path: str):
    import engine
    try:
        return engine.open(path, read_only=True, background=False)
    except FileNotFoundError:
        raise InvalidConfigError(f"option 'path': data directory {path!r} does not exist") from None


class _WireLog:
    """What planning needs of one partition, asked of the broker (ListOffsets)."""

    def __init__(self, src: "WireSource", topic: str, partition: int):
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
            out.extend((t, p, a, b) for a, b in zip(bounds, bounds[1:]) if b > a)
            continue
        segs = eng.log(t, p).segments
        bases = [sg.base_offset for sg in segs]
        cuts = [_cut_at_or_below(segs, bases, s + (e - s) * k // pieces) for k in range(1, pieces)]
        bounds = [s] + sorted(set(c for c in cuts if s < c < e)) + [e]
        out.extend((t, p, a, b) for a, b in zip(bounds, bounds[1:]))
    return out


def plan_ranges(opts: ReadOptions) -> list[OffsetRangePartition]:
    """The driver's plan for a batch read (see the module docstring)."""
    eng = _source(opts)
    try:
        tps = resolve_topic_partitions(eng, opts)
        ranges = resolve_ranges(eng, opts, tps)
        ranges = split_ranges(eng, ranges, opts.min_partitions)
        return place(eng, opts, ranges)
    finally:
        eng.close()


def _spark_shape(batch, include_headers: bool):
    return batch if include_headers else batch.drop_columns(["headers"])


def read_range(part: OffsetRangePartition, opts: ReadOptions):
    """Yield the records of `part` as pyarrow.RecordBatch (see the module docstring)."""
    from engine.arrow import scanner

    if part.start >= part.end:
        return
    if opts.bootstrap_servers:       # a cluster: the local in-sync copy planned, else the leader
        opened = local_log_covering(part, opts) if part.path else None
        if opened is None:
            yield from read_range_wire(part, opts)
            return
        eng, plog = opened
    else:
        eng, plog = _open(part.path), None
    max_rows = opts.max_records_per_batch
    t, p = part.topic, part.partition
    try:
        if plog is None:
            plog = eng.log(t, p)
        plog.refresh()
        start, end = part.start, part.end
        lso = plog.log_start_offset
        if start < lso:
            start = _skip_lost(opts, t, p, start, end, lso)
            if start >= end:
                return
        sc = scanner(opts.check_crcs)
        if opts.read_committed:
            sc.set_aborted(plog.aborted_transactions(start, end))
        offset = start
        skipped = False
        slices = plog.segments_for_range(start, end)
        for k, sl in enumerate(slices):
            view = sl.view()
            pos = 0
            while True:
                try:
                    offset, pos = sc.feed(view, pos, -1, offset, end, sl.path, max_rows, sl.position)
                except CorruptRecordError as err:
                    if opts.fail_on_data_loss:
                        raise CorruptRecordError(
                            f"{err.reason} (reading offsets [{part.start}, {part.end}) of {t}-{p}; "
                            "set failOnDataLoss=false to skip it)", err.path, err.position) from err
                    # Rows of the batches before the bad one are in the scanner: keep them.
                    if sc.num_rows:
                        done = sc.finish(t, p, False)
                        offset = max(offset, done.column(4)[-1].as_py() + 1)
                        yield _spark_shape(done, opts.include_headers)
                    nxt = min(_slice_base(slices[k + 1]), end) if k + 1 < len(slices) else end
                    log.error("kafka-engine: %s; failOnDataLoss=false: skipping offsets [%d, %d) of %s-%d",
                              err, offset, nxt, t, p)
                    offset = nxt
                    skipped = True
                    break
                if sc.num_rows >= max_rows:
                    yield _spark_shape(sc.finish(t, p, False), opts.include_headers)
                    continue
                break
            if offset >= end:
                break
            if k + 1 < len(slices):
                nxt = _slice_base(slices[k + 1])
                if offset < nxt and not skipped:
                    # Segments are contiguous (no compaction yet): a hole is lost data.
                    msg = (f"offsets [{offset}, {min(nxt, end)}) of {t}-{p} are missing: {sl.path} "
                           f"ends before the next segment starts")
                    if opts.fail_on_data_loss:
                        raise OffsetOutOfRangeError(msg + "; set failOnDataLoss=false to skip them")
                    log.warning("kafka-engine: %s; failOnDataLoss=false: skipped", msg)
                skipped = False
                offset = max(offset, nxt)
        if sc.num_rows:
            yield _spark_shape(sc.finish(t, p, False), opts.include_headers)
        if offset < end and not skipped:
            msg = f"short read of {t}-{p}: offsets [{offset}, {end}) were not found in {part.path}"
            if opts.fail_on_data_loss:
                raise OffsetOutOfRangeError(msg)
            log.warning("kafka-engine: %s; failOnDataLoss=false: skipped", msg)
    finally:
        eng.close()


def read_range_wire(part: OffsetRangePartition, opts: ReadOptions):
    """:func:`read_range` over the wire: Fetch from the broker, decode with the column scanner."""
    from engine._native import read_header
    from engine.arrow import scanner
    from engine.client.wire import EARLIEST as W_EARLIEST
    from engine.client.wire import WireClient

    t, p = part.topic, part.partition
    start, end = part.start, part.end
    max_rows = opts.max_records_per_batch
    where = f"the broker at {opts.bootstrap_servers}"
    client = WireClient(opts.bootstrap_servers, client_id=opts.client_id,
                        request_timeout_ms=opts.request_timeout_ms)
    try:
        sc = scanner(opts.check_crcs)
        isolation = 1 if opts.read_committed else 0
        offset = start
        empty = 0
        while offset < end:
            res = client.fetch(t, p, offset, max_bytes=opts.max_partition_fetch_bytes, isolation_level=isolation)
            if isolation:   # each answer's list covers its range (Kafka's consumer rule)
                sc.set_aborted(res.aborted_transactions or [])
            if res.error_code == 1:  # OFFSET_OUT_OF_RANGE: retention ran after planning
                lso = client.list_offsets({(t, p): W_EARLIEST})[(t, p)][0]
                if offset >= lso:
                    raise OffsetOutOfRangeError(f"{where} refused offset {offset} of {t}-{p} as out of "
                                                f"range (log start offset {lso})")
                offset = _skip_lost(opts, t, p, offset, end, lso)
                continue
            data = res.records
            pos, before = 0, offset
            while True:
                try:
                    offset, pos = sc.feed(data, pos, -1, offset, end, None, max_rows, 0)
                except CorruptRecordError as err:
                    if opts.fail_on_data_loss:
                        raise CorruptRecordError(
                            f"{err.reason} (fetched from {where}: offsets [{part.start}, {part.end}) of "
                            f"{t}-{p}, batch at byte {err.position} of the response; set "
                            "failOnDataLoss=false to skip it)") from err
                    if sc.num_rows:
                        done = sc.finish(t, p, False)
                        offset = max(offset, done.column(4)[-1].as_py() + 1)
                        yield _spark_shape(done, opts.include_headers)
                    try:
                        nxt = min(read_header(data, err.position).next_offset, end)
                    except (CorruptRecordError, ValueError, IndexError):
                        nxt = end  # not even the header: nothing tells where the next batch starts
                    log.error("kafka-engine: %s; failOnDataLoss=false: skipping offsets [%d, %d) of %s-%d",
                              err, offset, nxt, t, p)
                    offset = max(offset, nxt)
                    break
                if sc.num_rows >= max_rows:
                    yield _spark_shape(sc.finish(t, p, False), opts.include_headers)
                    continue
                break
            if offset > before:
                empty = 0
                continue
            # Nothing usable came back below `end`.
            empty += 1
            if res.high_watermark > offset and empty < 3:
                continue
            msg = (f"short read of {t}-{p}: offsets [{offset}, {end}) were not returned by {where} "
                   f"(high watermark {res.high_watermark})")
            if opts.fail_on_data_loss:
                raise OffsetOutOfRangeError(msg)
            log.warning("kafka-engine: %s; failOnDataLoss=false: skipped", msg)
            break
        if sc.num_rows:
            yield _spark_shape(sc.finish(t, p, False), opts.include_headers)
    finally:
        client.close()


def _slice_base(sl) -> int:
    """Base offset of the segment a FileSlice belongs to (from Kafka's 20-digit file name)."""
    import os
    return int(os.path.basename(sl.path).split(".", 1)[0])


class KafkaEngineBatchReader(DataSourceReader):
    """Batch reader: ``partitions()`` on the driver, ``read()`` in the tasks."""

    def __init__(self, opts: ReadOptions):
        self.opts = opts

    def partitions(self):
        return plan_ranges(self.opts)

    def read(self, partition):
        if not isinstance(partition, OffsetRangePartition):
            return iter(())  # Spark's stand-in when partitions() planned nothing
        return read_range(partition, self.opts)
