"""Arrow view of Kafka records: the schema of Spark's Kafka source and helpers
that turn RecordBatch v2 bytes into pyarrow tables without a Python object per
record (the work is done by ``engine._native.ColumnScanner``; see csrc/scan.pyx
for the buffer layout).
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["KAFKA_SCHEMA", "HEADERS_TYPE", "batches_to_table", "scanner"]

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


def batches_to_table(
    data,
    topic: str,
    partition: int,
    start_offset: int = 0,
    end_offset: int = 2**63 - 1,
    check_crc: bool = True,
    start: int = 0,
    end: int = -1,
) -> pa.Table:
    """All records of the complete batches in ``data[start:end]`` with
    ``start_offset <= offset < end_offset`` as a table with :data:`KAFKA_SCHEMA`.

    Control batches are skipped and a partial tail is ignored; a corrupt batch
    raises :class:`engine.errors.CorruptRecordError`.
    """
    sc = scanner(check_crc)
    sc.feed(data, start, end, start_offset, end_offset)
    return sc.finish(topic, partition)
