"""Streaming reads of the ``kafka-engine`` source (``spark.readStream.format("kafka-engine")``).

Contract: an offset is Spark's Kafka-source JSON shape, a dict
``{topic: {"partition": next offset to read}}``.  ``initialOffset`` resolves
``startingOffsets`` / timestamps (default ``latest``, as Spark's Kafka source)
once per query -- a restarted query resumes from its checkpointed offset
instead, so nothing is lost or read twice.  ``latestOffset`` is each
partition's published high watermark, capped by the read limit
(``maxOffsetsPerTrigger`` -> ``ReadMaxRows``, shared among partitions in
proportion to their backlog, as Spark does); partitions that appear later
(``subscribePattern``, new partitions) start at their log start offset.
``partitions(start, end)`` makes the same offset-range tasks as batch reads
(split by ``minPartitions``), ``read`` is the batch task reader, and
``commit`` keeps nothing: the offsets live in Spark's checkpoint, the segment
files are never changed by a reader.  With ``kafka.bootstrap.servers`` the
same calls go to the broker (:class:`spark_udfs.planning.WireSource`).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader

from engine.errors import OffsetOutOfRangeError

from .locality import place
from .options import LATEST, ReadOptions
from .planning import (
    _bound,
    _source,
    end_of,
    log,
    resolve_topic_partitions,
    split_ranges,
)
from .reader import read_range

try:  # pyspark >= 4.2: read limits passed to latestOffset
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows
except ImportError:  # pragma: no cover - older pyspark calls latestOffset() without arguments
    ReadAllAvailable = ReadMaxRows = None

__all__ = ["KafkaEngineStreamReader"]


def _flatten(offsets: dict) -> dict:
    return {(t, int(p)): int(o) for t, parts in (offsets or {}).items() for p, o in parts.items()}


def _nest(flat: dict) -> dict:
    out: dict = {}
    for (t, p), o in sorted(flat.items()):
        out.setdefault(t, {})[str(p)] = o
    return out


class KafkaEngineStreamReader(DataSourceStreamReader):
    """Micro-batch reader over the segment files (see the module docstring)."""

    def __init__(self, opts: ReadOptions):
        self.opts = opts

    def initialOffset(self) -> dict:
        eng = _source(self.opts)
        try:
            out = {}
            for tp in resolve_topic_partitions(eng, self.opts):
                plog = eng.log(*tp)
                plog.refresh()
                lso, hw = plog.log_start_offset, end_of(plog, self.opts)
                off = _bound(plog, self.opts, tp, "start", lso, hw, default_start=LATEST)
                if not lso <= off <= hw:
                    msg = f"starting offset {off} of {tp[0]}-{tp[1]} outside the available range [{lso}, {hw}]"
                    if self.opts.fail_on_data_loss:
                        raise OffsetOutOfRangeError(msg + "; set failOnDataLoss=false to clamp it")
                    log.warning("kafka-engine: %s; failOnDataLoss=false: clamped", msg)
                    off = min(max(off, lso), hw)
                out[tp] = off
            return _nest(out)
        finally:
            eng.close()

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger is not None and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        max_rows = None
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        elif limit is None:  # older pyspark: no read limit argument
            max_rows = self.opts.max_offsets_per_trigger
        eng = _source(self.opts)
        try:
            begin = _flatten(start) if start is not None else {}
            latest = {}
            for tp in resolve_topic_partitions(eng, self.opts):
                plog = eng.log(*tp)
                plog.refresh()
                latest[tp] = end_of(plog, self.opts)
                if tp not in begin:
                    begin[tp] = plog.log_start_offset
        finally:
            eng.close()
        if start is None or max_rows is None:
            return _nest(latest)
        backlog = {tp: max(0, latest[tp] - begin[tp]) for tp in latest}
        total = sum(backlog.values())
        if total <= max_rows:
            return _nest(latest)
        # Spark's rate limit: each partition gets its share of max_rows by backlog.
        out = {tp: begin[tp] + int(backlog[tp] * max_rows / total) for tp in latest}
        if sum(out[tp] - begin[tp] for tp in out) == 0:  # always make progress
            tp = max(backlog, key=backlog.get)
            out[tp] = begin[tp] + 1
        return _nest(out)

    def partitions(self, start: dict, end: dict):
        s, e = _flatten(start), _flatten(end)
        eng = _source(self.opts)
        try:
            ranges = []
            for tp, hi in sorted(e.items()):
                plog = eng.log(*tp)
                plog.refresh()
                lo = s.get(tp, plog.log_start_offset)
                if lo < plog.log_start_offset:
                    msg = (f"offsets [{lo}, {plog.log_start_offset}) of {tp[0]}-{tp[1]} are gone "
                           "(retention ran before this micro-batch read them)")
                    if self.opts.fail_on_data_loss:
                        raise OffsetOutOfRangeError(msg + "; set failOnDataLoss=false to skip them")
                    log.warning("kafka-engine: %s; failOnDataLoss=false: skipped", msg)
                    lo = plog.log_start_offset
                ranges.append((tp[0], tp[1], lo, max(lo, hi)))
            ranges = split_ranges(eng, ranges, self.opts.min_partitions)
            return place(eng, self.opts, ranges)
        finally:
            eng.close()

    def read(self, partition):
        return read_range(partition, self.opts)
