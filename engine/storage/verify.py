"""The consumer's checked read (``PartitionLog.read(..., verify=True)``):
``verified_slice`` re-validates the batches of a FileSlice before it is served
(structure, CRC-32C, offsets) and cuts it after the last complete batch.
A pure function over the segment file; log.py calls it (as ``_verified``).
"""

from __future__ import annotations

import os

from .. import _native
from .fileslice import FileSlice

__all__ = ["verified_slice"]


def verified_slice(fs: FileSlice, bound, compacted: bool = False) -> FileSlice:
    """The consumer's checked read: structure + CRC of every complete batch, contiguous offsets.

    Checks from the offset-index entry at or before the slice (so a corrupt
    baseOffset just before the fetch position is seen too) up to the slice
    end; a batch that claims to run past `max_position` (below the high
    watermark every batch is complete) is corrupt, not a partial tail.
    Raises CorruptRecordError naming the file and the byte position.
    """
    from ..errors import CorruptRecordError

    start_pos, first_base, max_pos, start_offset = bound
    end_pos = fs.position + fs.size
    data = os.pread(fs.fd, end_pos - start_pos, start_pos) if end_pos > start_pos else b""
    headers, end = _native.list_batches(data, 0, len(data), True, fs.path, start_pos)
    expect = first_base
    for h in headers:
        if compacted:
            # A compacted log has offset gaps (between and inside batches); offsets still increase.
            if expect >= 0 and h.base_offset < expect:
                raise CorruptRecordError("offsets not increasing", fs.path, h.position)
        elif (expect >= 0 and h.base_offset != expect) or h.records_count != h.last_offset_delta + 1:
            raise CorruptRecordError("offsets not contiguous", fs.path, h.position)
        expect = h.next_offset
    if end < len(data):
        # the partial tail: -1 = shorter than the bytes up to the magic, 0 = not a v2 batch start
        size = _native.batch_size(data, end, strict=True)
        if size == 0 or (size > 0 and start_pos + end + size > max_pos):
            raise CorruptRecordError("batch runs past the end of the log below the high watermark"
                                     if size > 0 else "bad batch header", fs.path, start_pos + end)
    if headers:
        served = [h for h in headers if h.position >= fs.position]
        if served and not ((compacted or served[0].base_offset <= start_offset)
                           and start_offset <= served[0].last_offset):
            raise CorruptRecordError("batch offsets do not cover the fetch offset", fs.path, served[0].position)
    cut = start_pos + end - fs.position
    return FileSlice(fs._file, fs.position, max(cut, 0), fs.start_offset, fs.end_offset)
