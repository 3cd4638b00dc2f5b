"""Record value object and thin helpers over the native record core.

The byte layout of records is documented once, in ``csrc/records.pyx`` (and
the batch header in ``csrc/consts.pxi``).  The native functions work on tuples
``(offset, timestamp, key, value, headers)``; :class:`Record` is the same tuple
with names, for code that prefers attributes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from engine import _native

__all__ = [
    "BatchBuilder",
    "ColumnScanner",
    "Record",
    "RecordAccumulator",
    "build_batch",
    "build_batches",
    "codec_id",
    "codec_name",
    "decode",
    "decode_batch",
    "decode_batches",
    "default_partition",
    "murmur2",
]

BatchBuilder = _native.BatchBuilder
ColumnScanner = _native.ColumnScanner
RecordAccumulator = _native.RecordAccumulator
build_batches = _native.build_batches
codec_id = _native.codec_id
codec_name = _native.codec_name
decode_batch = _native.decode_batch
decode_batches = _native.decode_batches
default_partition = _native.default_partition
murmur2 = _native.murmur2

class Record(NamedTuple):
    """One decoded record: what a consumer sees."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list  # [(str key, bytes | None value), ...]

    @classmethod
    def from_tuple(cls, t: tuple) -> Record:
        return cls._make(t)


def decode(data, start: int = 0, end: int = -1, check_crc: bool = True, skip_control: bool = True,
           path: str | None = None) -> list[Record]:
    """Every record of the complete batches in ``data[start:end]`` as :class:`Record` objects."""
    records, _ = _native.decode_batches(data, start, end, check_crc, skip_control, path)
    return [Record._make(r) for r in records]


def build_batch(
    records: Iterable[tuple | Record | bytes | None],
    codec: int | str = 0,
    base_offset: int = 0,
    **header_fields,
) -> bytes:
    """One v2 batch from ``records``: each a value (bytes/None) or a tuple
    ``(value, key, headers, timestamp)`` prefix.  ``codec`` accepts a Kafka name.
    ``header_fields`` go to :meth:`BatchBuilder.build` (producer_id, ...)."""
    b = _native.BatchBuilder()
    for r in records:
        if isinstance(r, Record):
            b.append(r.value, r.key, r.headers, r.timestamp)
        elif isinstance(r, tuple):
            b.append(*r)
        else:
            b.append(r)
    return b.build(codec_id(codec), base_offset, **header_fields)
