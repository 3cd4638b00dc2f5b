"""A LogSegment's two sparse indexes (segment.py): opening them, a reader's fresh copy,
sealing them when the segment stops taking appends, re-growing them when it takes
appends again, and checking their entries against the batches they point at.

The indexes themselves are native (``_native.OffsetIndex``: 8-byte entries,
relative offset -> position; ``_native.TimeIndex``: 12-byte entries, timestamp
-> relative offset; csrc/index.pyx).  A writable index file is preallocated to
``segment.index.bytes`` and trimmed to its used size when the segment is
sealed (Kafka's onBecomeInactiveSegment), which also appends the segment's
largest timestamp as a final time entry.  Module functions over the index
objects and paths they are given; LogSegment keeps the objects and calls
these.  Not thread-safe (PartitionLog's lock rule).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .. import _native
from ..errors import CorruptIndexError, CorruptRecordError

__all__ = ["bytes_since_last_entry", "check_entries", "open_indexes", "read_only_copy", "reactivate",
           "seal"]


def open_indexes(index_path: str, time_index_path: str, base_offset: int, max_index: int,
                 writable: bool, missing: bool) -> tuple:
    """(OffsetIndex, TimeIndex) of a segment; `max_index` -1 maps the files as they are."""
    if not writable and missing:
        # Read-only and no index (a crashed writer's leftovers): an empty index scans from 0.
        return (_native.OffsetIndex(os.devnull, base_offset, -1, False),
                _native.TimeIndex(os.devnull, base_offset, -1, False))
    return (_native.OffsetIndex(index_path, base_offset, max_index, writable),
            _native.TimeIndex(time_index_path, base_offset, max_index, writable))


def read_only_copy(index_path: str, time_index_path: str, base_offset: int) -> tuple | None:
    """A fresh read-only (OffsetIndex, TimeIndex) copy, or None when a file is missing or fails its check."""
    if not (os.path.exists(index_path) and os.path.exists(time_index_path)):
        return None
    index = _native.OffsetIndex(index_path, base_offset, -1, False)
    time_index = _native.TimeIndex(time_index_path, base_offset, -1, False)
    try:
        index.sanity_check()
        time_index.sanity_check()
    except CorruptIndexError:
        index.close()
        time_index.close()
        return None
    return index, time_index


def seal(index, time_index, max_timestamp: int, offset_of_max_timestamp: int, writable: bool) -> None:
    """Final time index entry (the segment's largest timestamp, when newer), both trimmed to their used size."""
    if max_timestamp >= 0 and writable:
        last_ts, _ = time_index.last_entry
        if max_timestamp > last_ts:
            if time_index.is_full:
                time_index.resize(time_index.file_size + 12)
            time_index.maybe_append(max_timestamp, offset_of_max_timestamp, True)
    index.trim_to_valid_size()
    time_index.trim_to_valid_size()


def bytes_since_last_entry(index, size: int) -> int:
    """The sparse-index counter of a segment of `size` bytes: bytes after the last offset index entry."""
    _o, pos = index.lookup(2**62)
    return size - pos if index.entries else size


def reactivate(index, time_index, max_index: int, size: int) -> int:
    """Preallocate both indexes to `max_index` bytes again; returns the sparse-index counter to go on from."""
    if index.file_size < max_index:
        index.resize(max_index)
    if time_index.file_size < max_index:
        time_index.resize(max_index)
    return bytes_since_last_entry(index, size)


def check_entries(data, size: int, base_offset: int, index, index_path: str, time_index, time_index_path: str,
                  translate_offset: Callable) -> None:
    """Every entry points at a real batch of `data` (the segment's `.log`), else CorruptIndexError.

    For an offset entry (O, P) the batch at P has prev_O < baseOffset <= O;
    for a time entry (T, O) the batch holding O (``translate_offset``) has
    maxTimestamp == T and last offset O.
    """
    prev = base_offset - 1
    for i in range(index.entries):
        off, pos = index.entry(i)
        try:
            h = _native.read_header(data, pos)
        except CorruptRecordError:
            raise CorruptIndexError(f"entry {i} does not point at a batch", index_path, i * 8) from None
        if not (prev < h.base_offset <= off) or pos + h.size > size:
            raise CorruptIndexError(f"entry {i} ({off}, {pos}) does not match the batch there",
                                    index_path, i * 8)
        prev = off
    for i in range(time_index.entries):
        ts, off = time_index.entry(i)
        found = translate_offset(off)
        if found is None:
            raise CorruptIndexError(f"time entry {i} points past the log", time_index_path, i * 12)
        h = _native.read_header(data, found[0])
        if h.max_timestamp != ts or h.last_offset != off:
            raise CorruptIndexError(f"time entry {i} ({ts}, {off}) does not match the batch there",
                                    time_index_path, i * 12)
