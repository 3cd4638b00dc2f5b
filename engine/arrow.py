"""Arrow view of Kafka records: the schema of Spark's Kafka source and helpers
that turn RecordBatch v2 bytes into pyarrow tables without a Python object per
record (the work is done by ``engine._native.ColumnScanner``; see csrc/scan.pyx
for the buffer layout).

Transactions: control batches (markers) never become rows.  With
``isolation_level="read_committed"`` (Kafka's consumer setting) a read stops
at the partition's last stable offset and the scanner drops the records of
aborted transactions (the list comes from the partition's ``.txnindex``,
``PartitionLog.aborted_transactions``, and is applied natively in the scan).
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["HEADERS_TYPE", "KAFKA_SCHEMA", "batches_to_table", "is_read_committed", "iter_log_batches",
           "read_log_arrow", "scanner", "slices_to_table"]

#: Element type of the ``headers`` column: ``list<struct<key: string, value: binary>>``.
HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

#: Spark's Kafka source schema, column for column.
KAFKA_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", HEADERS_TYPE),
    ]
)


def scanner(check_crc: bool = True):
    """A new ``ColumnScanner`` (feed buffer ranges, then ``finish(topic, partition)``)."""
    from engine._native import ColumnScanner

    return ColumnScanner(check_crc=check_crc)


def is_read_committed(isolation_level) -> bool:
    """Kafka's isolation.level as a flag: "read_committed" / 1 -> True, "read_uncommitted" / 0 / None -> False."""
    from .errors import InvalidConfigError

    if isolation_level in (None, 0, "read_uncommitted"):
        return False
    if isolation_level in (1, "read_committed"):
        return True
    raise InvalidConfigError(f"isolation.level must be 'read_uncommitted' or 'read_committed', "
                             f"got {isolation_level!r}")


def batches_to_table(
    data,
    topic: str,
    partition: int,
    start_offset: int = 0,
    end_offset: int = 2**63 - 1,
    check_crc: bool = True,
    start: int = 0,
    end: int = -1,
    aborted_transactions=None,
) -> pa.Table:
    """All records of the complete batches in ``data[start:end]`` with
    ``start_offset <= offset < end_offset`` as a table with :data:`KAFKA_SCHEMA`.

    Control batches are skipped and a partial tail is ignored; a corrupt batch
    raises :class:`engine.errors.CorruptRecordError`.  `aborted_transactions`
    ([(producer_id, first_offset)], a read_committed Fetch's list) drops the
    records of those aborted transactions (the caller bounds `end_offset` by
    the last stable offset).
    """
    sc = scanner(check_crc)
    if aborted_transactions is not None:
        sc.set_aborted(aborted_transactions)
    sc.feed(data, start, end, start_offset, end_offset)
    return sc.finish(topic, partition)


def _resolve_range(log, start: int | None, end: int | None, committed: bool = False) -> tuple[int, int]:
    from .errors import OffsetOutOfRangeError

    log.refresh()  # a read-only open picks up the writer's published high watermark
    hw = log.high_watermark
    lso = log.log_start_offset
    start = lso if start is None else start
    if start < lso or start > hw:
        raise OffsetOutOfRangeError(
            f"start offset {start} is outside [{lso}, {hw}] of {log.topic}-{log.partition}")
    if committed:
        hw = log.last_stable_offset
    end = hw if end is None else min(end, hw)
    return start, max(start, end)


def _scanner_for(log, start: int, end: int, committed: bool, check_crc: bool):
    sc = scanner(check_crc)
    if committed:
        sc.set_aborted(log.aborted_transactions(start, end) if start < end else [])
    return sc


def iter_log_batches(log, topic: str, partition: int, start: int | None = None,
                     end: int | None = None, *, max_rows: int = 65536,
                     check_crc: bool = True, isolation_level=None):
    """Yield ``pyarrow.RecordBatch`` es of at most `max_rows` rows for offsets [start, end).

    Reads the segment files in place (read-only maps of complete batches below
    the high watermark -- the last stable offset under read_committed),
    decompressing as it goes.
    """
    committed = is_read_committed(isolation_level)
    start, end = _resolve_range(log, start, end, committed)
    if start >= end:
        return
    sc = _scanner_for(log, start, end, committed, check_crc)
    offset = start
    for sl in log.segments_for_range(start, end):
        view = sl.view()
        pos = 0
        while True:
            offset, pos = sc.feed(view, pos, -1, offset, end, sl.path, max_rows, sl.position)
            if sc.num_rows >= max_rows:
                yield sc.finish(topic, partition, False)
                continue
            break
        if offset >= end:
            break
    if sc.num_rows:
        yield sc.finish(topic, partition, False)


def read_log_arrow(log, topic: str, partition: int, start: int | None = None,
                   end: int | None = None, *, max_rows: int | None = None,
                   check_crc: bool = True, isolation_level=None) -> pa.Table:
    """Offsets [start, end) of one partition log as a table with :data:`KAFKA_SCHEMA`.

    `start` defaults to the log start offset, `end` to the high watermark (and
    is capped there; at the last stable offset under
    ``isolation_level="read_committed"``, which also drops aborted
    transactions).  `max_rows` limits the number of rows returned.
    """
    committed = is_read_committed(isolation_level)
    start, end = _resolve_range(log, start, end, committed)
    if start >= end:
        return slices_to_table([], topic, partition, start, end)
    return slices_to_table(log.segments_for_range(start, end), topic, partition, start, end,
                           aborted_transactions=log.aborted_transactions(start, end) if committed else None,
                           max_rows=max_rows, check_crc=check_crc)


def slices_to_table(slices, topic: str, partition: int, start: int, end: int, *,
                    aborted_transactions=None, max_rows: int | None = None,
                    check_crc: bool = True) -> pa.Table:
    """Offsets [start, end) of batch-aligned ``FileSlice`` s (one per segment, as a partition
    log's ``segments_for_range`` or the replica layer's ``read_local_batches`` give them) as a
    table with :data:`KAFKA_SCHEMA`, scanned in place (``FileSlice.view()``: a read-only map).
    `aborted_transactions` (read_committed) drops those transactions' records."""
    sc = scanner(check_crc)
    if aborted_transactions is not None:
        sc.set_aborted(aborted_transactions)
    offset = start
    limit = -1 if max_rows is None else max_rows
    for sl in slices:
        if offset >= end:
            break
        offset, _pos = sc.feed(sl.view(), 0, -1, offset, end, sl.path, limit, sl.position)
        if max_rows is not None and sc.num_rows >= max_rows:
            break
    return sc.finish(topic, partition)
