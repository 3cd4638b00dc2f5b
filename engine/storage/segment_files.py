"""A LogSegment's files on disk (segment.py): their paths, the space reserved ahead of
appends, cutting the `.log`, unlinking them all, and what a closed segment holds in
place of its `.log` handle.

Paths: ``<base>`` as 20 digits + ``.log`` / ``.index`` / ``.timeindex`` /
``.txnindex`` (files.py), then the segment's state suffix, if any
(``.cleaned``, ``.swap``, ``.deleted``).  Space: with ``preallocate`` a new
active segment reserves ``segment.bytes`` without changing its size
(``FALLOC_FL_KEEP_SIZE``), so a power loss never leaves a zero-filled tail
that looks like data; the segment frees it on roll and close (``ftruncate``
to its size).  Cuts: in place, or in a new file when a reader may have the
cut bytes mapped (fileslice.py's ``cut_to_new_file``).  Module functions over
the paths and handles they are given; not thread-safe (PartitionLog's lock
rule).
"""

from __future__ import annotations

import errno
import os

from .. import _native
from . import files
from .fileslice import SegmentFile, cut_to_new_file

__all__ = ["ClosedFile", "cut", "preallocate", "segment_paths", "unlink_all"]


def segment_paths(directory: str, base_offset: int, suffix: str) -> tuple[str, str, str, str]:
    """The (.log, .index, .timeindex, .txnindex) paths of a segment, each + `suffix`."""
    return (os.path.join(directory, files.segment_file(base_offset, files.LOG_SUFFIX) + suffix),
            os.path.join(directory, files.segment_file(base_offset, files.INDEX_SUFFIX) + suffix),
            os.path.join(directory, files.segment_file(base_offset, files.TIME_INDEX_SUFFIX) + suffix),
            os.path.join(directory, files.segment_file(base_offset, files.TXN_INDEX_SUFFIX) + suffix))


def preallocate(file: SegmentFile, nbytes: int) -> None:
    """Reserve `nbytes` for `file`, its size unchanged; nothing where the file system cannot.

    On any other OSError the file is closed and the error raised (the segment is not opened).
    """
    try:
        _native.fallocate(file.fd, 0, nbytes, _native.FALLOC_FL_KEEP_SIZE)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS):
            file.close()
            raise


def cut(file: SegmentFile, length: int, in_new_file: bool) -> SegmentFile:
    """`file` cut to `length` bytes, in a new file (see the module docstring) or in place; the file to use."""
    if in_new_file:
        return cut_to_new_file(file, length)
    os.ftruncate(file.fd, length)
    return file


def unlink_all(paths) -> None:
    """Unlink each path; one already gone is no error (open FileSlices keep reading the inode)."""
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


class ClosedFile:
    """What a closed LogSegment holds in place of its SegmentFile: fd -1, the path for messages."""

    fd = -1

    def __init__(self, path: str):
        self.path = path
