"""Replaying a partition: every batch of a PartitionLog from its log start up to an offset,
decoded, in offset order -- how the group and transaction coordinators load
``__consumer_offsets`` / ``__transaction_state`` (Kafka's CoordinatorLoaderImpl walks the log
the same way).

::

    for b in decoded_batches(plog, end_offset):
        if b.error is not None:        # CorruptRecordError with the file and position
            ...
        else:
            use(b.header, b.records)   # records: decode_batch's (offset, ts, key, value, headers)

A batch that does not decode is yielded with its error and the walk goes on; a header that
cannot be read (no trustworthy length) ends the walk of that segment, yielded as an error
with ``header`` None.  Only reads: safe on an executor thread beside the log's writers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from .. import _native
from ..errors import CorruptRecordError
from .segment import FileSlice

__all__ = ["ReplayedBatch", "decoded_batches"]


class ReplayedBatch(NamedTuple):
    header: object | None                  # _native.BatchHeader, None when unreadable
    records: list | None                   # decode_batch's records, None on an error
    error: CorruptRecordError | None
    path: str
    position: int


def decoded_batches(plog, end_offset: int) -> Iterator[ReplayedBatch]:
    """The batches of `plog` holding offsets in [log start, `end_offset`), decoded."""
    start = plog.log_start_offset
    header_size = _native.BATCH_HEADER_SIZE
    for seg in plog.segments:
        size = seg.size
        if size == 0 or seg.base_offset >= end_offset:
            continue
        path = seg.log_path
        data = FileSlice(seg.file, 0, size).read()
        pos = 0
        while pos + header_size <= size:
            try:
                h = _native.read_header(data, pos)
                total = h.size
                if total < header_size or pos + total > size:
                    raise CorruptRecordError(f"batch length {h.batch_length} runs past the segment", path, pos)
            except CorruptRecordError as e:
                yield ReplayedBatch(None, None, CorruptRecordError(e.reason, path, pos), path, pos)
                break           # no trustworthy length: the rest of this segment is unreadable
            if h.next_offset <= start:
                pos += total
                continue
            if h.base_offset >= end_offset:
                break
            try:
                records = _native.decode_batch(data, pos, True, path)
            except CorruptRecordError as e:
                yield ReplayedBatch(h, None, CorruptRecordError(e.reason, path, pos), path, pos)
            else:
                yield ReplayedBatch(h, records, None, path, pos)
            pos += total
