"""The read path of a PartitionLog (log.py): fetches, the scanner's ranges, ListOffsets.

A read takes the log's ``_lock`` only to fix its bounds and find the byte
ranges: the offsets (log start, HW, LSO, log end) are read once, the start
offset checked against them (OffsetOutOfRangeError), the segments walked from
the one holding the start offset (LocalLog's floor lookup, LogSegment.read)
up to the bound -- the HW, a follower's ``max_offset``, the LSO for
read_committed -- and FileSlices returned, read by the caller after the lock
is released.  ``verify=True`` keeps complete batches only, each checked
(verify.py); read_committed also gets the aborted transactions of the range
(log_txn.py).  A read-only open (a reader beside a writer in another process)
first picks up what the writer published (``refresh``: .highwatermark, and
loader.py's ``refresh_read_only`` for new or cut segments) and never reads
above the published HW.  Module functions of the log they are given;
PartitionLog's methods of the same names call them.  Changes nothing but a
read-only open's view.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..errors import ClosedError, OffsetOutOfRangeError
from .epochs import HighWatermarkFile
from .loader import refresh_read_only
from .local_log import LocalLog
from .log_txn import LogTransactions
from .logtypes import FetchInfo
from .segment import FileSlice
from .verify import verified_slice as _verified

__all__ = ["offset_for_timestamp", "read", "refresh", "segments_for_range"]


class _Log(Protocol):
    """What the read path uses of its PartitionLog (log.py; not imported: it imports this module)."""

    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    _cuts_seen: int

    @property
    def dir(self) -> str: ...
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def gaps_allowed(self) -> bool: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def _closed(self) -> bool: ...
    @property
    def _lock(self) -> AbstractContextManager[Any]: ...
    @property
    def _local(self) -> LocalLog: ...
    @property
    def _txn(self) -> LogTransactions: ...
    @property
    def _hw_file(self) -> HighWatermarkFile: ...
    def refresh(self) -> None: ...


def refresh(log: _Log) -> None:
    """PartitionLog.refresh: a read-only open picks up the writer's new HW, bytes and segments."""
    if not log.read_only:
        return
    with log._lock:
        pub = log._hw_file.read()
        if pub is not None:
            log.high_watermark = pub[0]
            log.log_start_offset = max(log.log_start_offset, pub[1])
        if log.high_watermark > log.log_end_offset or log._hw_file.cuts() != log._cuts_seen:
            refresh_read_only(log)     # segments the writer added, or replaced by a cut below the HW


def read(log: _Log, start_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool,
         verify: bool, isolation_level: int) -> FetchInfo:
    """PartitionLog.read (its docstring)."""
    if log._closed:
        raise ClosedError(f"log {log.dir} is closed")
    if log.read_only:
        log.refresh()
    stable = log.last_stable_offset
    with log._lock:
        hw, lso, leo = log.high_watermark, log.log_start_offset, log.log_end_offset
        stable = min(stable, hw)
        visible_end = min(hw, leo) if log.read_only else leo
        if start_offset < lso or start_offset > visible_end:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside [{lso}, {visible_end}] of {log.topic}-{log.partition}")
        limit = hw if max_offset is None else min(max_offset, leo)
        if log.read_only:
            limit = min(limit, hw)
        if isolation_level == 1:
            limit = min(limit, stable)
        slices: list[FileSlice] = []
        bounds: list[tuple[int, int, int, int]] = []  # (index position, expected first base, max position, offset)
        if start_offset < limit:
            remaining = max_bytes
            local = log._local
            segs = local.segments
            i = local.floor_index(start_offset)
            offset = start_offset
            first = True
            while i < len(segs) and (remaining > 0 or (first and min_one_batch)):
                seg = segs[i]
                if seg.base_offset >= limit:
                    break
                max_pos = local.max_position(seg, limit)
                fs = seg.read(offset, remaining, max_pos, min_one_batch and first)
                if fs is not None and fs.size > 0:
                    slices.append(fs)
                    if verify:
                        ioff, ipos = seg.index.lookup(offset) if seg.index_ok else (seg.base_offset, 0)
                        bounds.append((min(ipos, fs.position), seg.base_offset if ipos == 0 else -1,
                                       max_pos, offset))
                    remaining -= fs.size
                    first = False
                    if fs.position + fs.size < max_pos:
                        break
                i += 1
                if i < len(segs):
                    offset = segs[i].base_offset
    if verify:
        slices = [_verified(s, b, log.gaps_allowed) for s, b in zip(slices, bounds, strict=True)]
        slices = [s for s in slices if s.size > 0]
    aborted: list[tuple[int, int]] | None = None
    if isolation_level == 1:
        with log._lock:
            aborted = log._txn.collect_aborted(start_offset, limit) if slices else []
    return FetchInfo(slices, start_offset, hw, lso, leo, stable, aborted)


def segments_for_range(log: _Log, start_offset: int, end_offset: int | None) -> list[FileSlice]:
    """PartitionLog.segments_for_range (its docstring)."""
    if log.read_only:
        log.refresh()
    with log._lock:
        hw = log.high_watermark
        end = hw if end_offset is None else min(end_offset, hw)
        if start_offset < log.log_start_offset or start_offset > log.log_end_offset:
            raise OffsetOutOfRangeError(f"offset {start_offset} is outside [{log.log_start_offset}, "
                                        f"{log.log_end_offset}]")
        return log._local.complete_slices(start_offset, end, hw) if start_offset < end else []


def offset_for_timestamp(log: _Log, timestamp: int) -> tuple[int, int] | None:
    """PartitionLog.offset_for_timestamp (its docstring)."""
    if log.read_only:
        log.refresh()
    with log._lock:
        if timestamp == -2:
            return log.log_start_offset, -1
        if timestamp == -1:
            return log.high_watermark, -1
        hit = log._local.find_offset_by_timestamp(timestamp, log.log_start_offset, log.high_watermark)
        return hit if hit is not None and hit[0] < log.high_watermark else None
