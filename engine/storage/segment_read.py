"""Lookups in a LogSegment's `.log` (segment.py): offset -> batch position, the slice a
read returns, complete batches for a range, and offset by timestamp.

Each starts at the segment's sparse index entry at or below what it looks for
(``_index_lookup``: only the entries a reader may trust) and walks the batch
headers of the mapped `.log` from there (``_native.seek_offset`` /
``seek_timestamp``).  They read the segment, never change it; LogSegment's
methods of the same names call them.  Not thread-safe (PartitionLog's lock
rule); the FileSlices they return may be read from any thread (fileslice.py).
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from .. import _native
from .fileslice import FileSlice, SegmentFile

__all__ = ["complete_slice", "find_offset_by_timestamp", "read", "scan_tail", "translate_offset"]


class _Segment(Protocol):
    """What the lookups use of a LogSegment (segment.py; not imported: it imports this module)."""

    size: int
    base_offset: int
    writable: bool
    log_path: str
    index_ok: bool
    index_trusted_below: int

    @property
    def time_index(self) -> Any: ...
    @property
    def file(self) -> SegmentFile: ...
    def _data(self) -> Any: ...
    def _index_lookup(self, offset: int) -> tuple[int, int]: ...


def translate_offset(seg: _Segment, offset: int, starting_position: int = 0):
    """(position, base_offset, last_offset) of the first batch with last offset >= offset, or None."""
    if seg.size == 0:
        return None
    _o, pos = seg._index_lookup(offset)
    pos = max(pos, starting_position)
    if pos >= seg.size:
        pos = starting_position
    position, base, last = _native.seek_offset(seg._data(), offset, pos, seg.size)
    if base < 0:
        return None
    return position, base, last


def read(seg: _Segment, start_offset: int, max_size: int, max_position: int | None = None,
         min_one_batch: bool = False) -> FileSlice | None:
    """Slice of the `.log` from the batch holding `start_offset`, at most `max_size` bytes.

    Ends at ``max_position`` (default: the segment size).  ``min_one_batch``
    widens the slice to the whole first batch (Kafka's minOneMessage).
    None when no batch at or above start_offset is in the segment.
    """
    if max_size < 0:
        raise ValueError(f"invalid max_size {max_size}")
    if max_position is None:
        max_position = seg.size
    found = translate_offset(seg, start_offset)
    if found is None:
        return None
    position, base, _last = found
    if position >= max_position:
        return None
    data = seg._data()
    first_size = _native.batch_size(data, position)
    limit = max(max_size, first_size) if min_one_batch else max_size
    size = min(max_position - position, limit)
    return FileSlice(seg.file, position, size, base, -1)


def complete_slice(seg: _Segment, start_offset: int, end_offset: int, max_position: int | None = None):
    """FileSlice of the complete batches holding offsets [start_offset, end_offset), below max_position."""
    if max_position is None:
        max_position = seg.size
    found = translate_offset(seg, start_offset)
    if found is None or found[0] >= max_position:
        return None
    position, base, _ = found
    data = seg._data()
    p, b, last = _native.seek_offset(data, end_offset, position, max_position)
    end_off = -1
    if b < 0:
        stop = p
    elif b >= end_offset:
        stop, end_off = p, b
    else:
        stop = p + _native.batch_size(data, p)
        end_off = last + 1
    if stop <= position:
        return None
    return FileSlice(seg.file, position, stop - position, base, end_off)


def find_offset_by_timestamp(seg: _Segment, timestamp: int, starting_offset: int = 0,
                             max_position: int | None = None):
    """(offset, timestamp) of the first record with timestamp >= `timestamp` below max_position, or None."""
    end = seg.size if max_position is None else min(max_position, seg.size)
    _ts, off = seg.time_index.lookup(timestamp) if seg.index_ok else (-1, seg.base_offset)
    if off >= seg.index_trusted_below:
        off = seg.base_offset
    _o, pos = seg._index_lookup(max(off, starting_offset))
    data = seg._data()
    while True:
        if pos >= end:
            return None
        position, base, last = _native.seek_timestamp(data, timestamp, pos, end)
        if base < 0:
            return None
        # record-level like Kafka: the first record at or after both bounds (after
        # DeleteRecords the log may start inside a batch)
        hit = _native.first_record_at_or_after(data, position, timestamp, starting_offset,
                                               seg.log_path)
        if hit is not None:
            return hit
        pos = position + _native.batch_size(data, position)


def scan_tail(seg: _Segment) -> tuple[Any, int]:
    """(ScanResult, shift) of the batches after the last index entry (from 0 when none is found there).

    The result's positions are relative to ``shift`` (its ``valid_end`` + shift
    is the end of the last valid batch in the file).  Never raises: a torn or
    corrupt tail ends the walk.
    """
    _off, pos = seg._index_lookup(2**62)
    if pos >= seg.size:
        pos = 0
    if seg.writable:
        data, shift = seg._data(), 0
    else:
        # A reader beside a writer copies the tail (pread): the writer may cut bytes past
        # its high watermark at any time, and a mapped page past EOF would be SIGBUS.
        data, shift = os.pread(seg.file.fd, seg.size - pos, pos), pos
    r = _native.scan_segment(data, seg.base_offset, pos - shift, seg.size - shift, 1 << 62, -1, False)
    if r.batches == 0 and pos > 0:
        if not seg.writable:
            data, shift = os.pread(seg.file.fd, seg.size, 0), 0
        r = _native.scan_segment(data, seg.base_offset, 0, seg.size, 1 << 62, -1, False)
    return r, shift
