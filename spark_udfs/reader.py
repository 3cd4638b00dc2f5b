"""Planning (driver) and reading (tasks) of the ``kafka-engine`` source.

Driver side, :func:`plan_ranges`: the topic-partitions and offset ranges the options select
(:mod:`spark_udfs.planning`: bounds, ``failOnDataLoss``, ``minPartitions``), each placed by
:func:`spark_udfs.locality.place` -- a list of picklable :class:`OffsetRangePartition` (topic,
partition, start, end, path).

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
driver plans over the wire (:class:`~spark_udfs.planning.WireSource`), and
each task fetches its range (:func:`read_range_wire`) and decodes the fetched
record batches with the same native column scanner, straight from the
response frame.  Same schema, options, bounds and ``failOnDataLoss`` rules;
a corrupt batch skips just that batch (its header says where the next
one starts).

Transactions (``kafka.isolation.level``, as Spark's Kafka source): control
batches never become rows; with ``read_committed`` "latest" and every bound
is the last stable offset instead of the high watermark, and the scanner is
given the partition's aborted transactions (``.txnindex``, or the Fetch
answer's list over the wire) so their records are dropped natively.
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSourceReader

from engine.errors import CorruptRecordError, OffsetOutOfRangeError

from .locality import local_log_covering, place
from .options import ReadOptions
from .planning import (
    OffsetRangePartition,
    WireSource,
    _cut_points,  # noqa: F401  (re-exported: tests/spark/test_batch.py)
    _open,
    _source,
    resolve_ranges,
    resolve_topic_partitions,
    split_ranges,
)

__all__ = ["KafkaEngineBatchReader", "OffsetRangePartition", "WireSource", "plan_ranges", "read_range",
           "read_range_wire", "resolve_topic_partitions", "split_ranges"]

log = logging.getLogger("spark_udfs")


def _skip_lost(opts, t: str, p: int, start: int, end: int, lso: int) -> int:
    """[start, lso) was deleted after planning: fail (failOnDataLoss) or log and go on from lso."""
    msg = (f"offsets [{start}, {min(lso, end)}) of {t}-{p} are gone (log start offset is now "
           f"{lso}, retention or deletion ran after the query was planned)")
    if opts.fail_on_data_loss:
        raise OffsetOutOfRangeError(msg + "; set failOnDataLoss=false to skip them")
    log.warning("kafka-engine: %s; failOnDataLoss=false: skipped", msg)
    return min(lso, end)


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
