"""LocalLog: the file-level part of a PartitionLog (Kafka's LocalLog under its UnifiedLog).

Owns a partition directory's segments: ``segments`` (ordered by base offset,
the last one active) with ``bases`` (their base offsets, for bisect), the
``recovery_point`` (every byte below it is fdatasync'd) and the segments
renamed ``.deleted`` that wait for ``file.delete.delay.ms``
(``pending_deletes``).  It finds the segment holding an offset
(``floor_index``) and a reader's byte bound in one (``max_position``), rolls
a new active segment (``roll``), fdatasyncs the segments with unsynced bytes
(``unsynced``, ``fdatasync``, ``mark_synced``: one round of log_flush.py's
group commit), cuts the segment list (``truncate_to``,
``truncate_fully_and_start_at``, ``delete_leading``, ``replace`` for the
cleaner, ``add_segment`` for a read-only open) and closes the files.

It knows nothing of the offsets above the files (log start, high watermark,
LSO), of leader epochs or of producers: PartitionLog (log.py) and its parts
do, and the log end offset is PartitionLog's (``segments[-1].next_offset``
after a change here).  Not thread-safe: every method runs with
PartitionLog's ``_lock`` held, except ``unsynced`` and ``fdatasync``, which
the group commit runs without it (log_flush.py says why that is safe; the
lock rule is in log.py's module docstring).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Callable

from .. import _native
from ..errors import CorruptRecordError
from . import files
from .segment import FileSlice, LogSegment, SegmentFile

_SyncWork = list[tuple[LogSegment, SegmentFile, int]]

__all__ = ["LocalLog"]


class LocalLog:
    """A partition directory's segments, recovery point and delayed deletes (see the module docstring)."""

    def __init__(self, directory: str, config, segments: list[LogSegment], recovery_point: int,
                 read_only: bool) -> None:
        self.dir = directory
        self.config = config
        self.read_only = read_only
        self.segments = segments
        self.bases = [s.base_offset for s in segments]
        self.recovery_point = recovery_point
        self.pending_deletes: list[tuple[int, LogSegment]] = []

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def update_config(self, config) -> None:
        self.config = config
        for seg in self.segments:
            seg.config = config

    # -- lookup ----------------------------------------------------------
    def floor_index(self, offset: int) -> int:
        """Index in ``segments`` of the segment holding `offset` (the first one below its base)."""
        i = bisect.bisect_right(self.bases, offset) - 1
        return max(i, 0)

    def max_position(self, seg: LogSegment, limit: int) -> int:
        """Byte bound in `seg` for offsets below `limit`: the end of the batch holding `limit - 1`.

        Only batches below `limit` are touched (a reader beside a writer must
        never look past the high watermark: those bytes may be cut any time).
        """
        if limit <= seg.base_offset:
            return 0
        i = bisect.bisect_left(self.bases, seg.base_offset)
        if i + 1 < len(self.bases) and limit >= self.bases[i + 1]:
            return seg.size  # sealed, and all of it is below the limit
        if not self.read_only and limit >= seg.next_offset:
            return seg.size
        found = seg.translate_offset(limit - 1)
        if found is None:
            return seg.size if not self.read_only else 0
        position, base, last = found
        if base > limit - 1:
            return position
        return position + 12 + int.from_bytes(os.pread(seg.fd, 4, position + 8), "big", signed=True)

    def complete_slices(self, start_offset: int, end: int, hw: int) -> list[FileSlice]:
        """One FileSlice per segment of the complete batches holding [start_offset, end), none
        reaching past `hw` (the first batch may start below start_offset)."""
        segs = self.segments
        out = []
        i = self.floor_index(start_offset)
        offset = start_offset
        while i < len(segs):
            seg = segs[i]
            if seg.base_offset >= end:
                break
            fs = seg.complete_slice(offset, end, self.max_position(seg, hw))
            if fs is not None:
                out.append(fs)
            i += 1
            if i < len(segs):
                offset = segs[i].base_offset
        return out

    def find_offset_by_timestamp(self, timestamp: int, log_start_offset: int,
                                 hw: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or above `log_start_offset` with a timestamp
        >= `timestamp`, searching the bytes below `hw`; None when there is none."""
        segs = self.segments
        for seg in segs:
            if seg.max_timestamp >= 0 and seg.max_timestamp < timestamp and seg is not segs[-1]:
                continue
            hit = seg.find_offset_by_timestamp(timestamp, log_start_offset, self.max_position(seg, hw))
            if hit is not None:
                return hit
        return None

    def slices_below(self, hw: int) -> list[tuple[int, str, FileSlice]]:
        """(base offset, path, slice of the bytes below `hw`) of every segment starting below `hw`."""
        return [(s.base_offset, s.log_path, FileSlice(s.file, 0, self.max_position(s, hw)))
                for s in self.segments if s.base_offset < hw]

    @staticmethod
    def scan(work: list[tuple[int, str, FileSlice]], strict: bool) -> list[CorruptRecordError]:
        """Re-validate every batch of `work` (from ``slices_below``; no lock needed: the slices keep
        their files alive): a CorruptRecordError (path + position) per slice with a bad batch."""
        problems = []
        for base, path, fs in work:
            if fs.size == 0:
                continue
            r = _native.scan_segment(fs.view(), base, 0, fs.size, 1 << 62, -1, True, strict=strict)
            if r.valid_end < fs.size:
                problems.append(CorruptRecordError(r.reason, path, r.valid_end))
        return problems

    # -- roll and flush --------------------------------------------------
    def roll(self, new_base: int) -> LogSegment:
        """Start a new active segment at `new_base` (the log end offset); the active one if it is empty."""
        old = self.segments[-1]
        if old.size == 0:
            return old
        old.on_become_inactive()
        try:
            seg = LogSegment(self.dir, new_base, self.config, create=True)
        except OSError:
            old.make_active()  # keep appending to the old segment's (re-grown) indexes later
            raise
        self.segments.append(seg)
        self.bases.append(new_base)
        return seg

    def unsynced(self) -> _SyncWork:
        """(segment, its file, its size) of every segment with bytes not yet fdatasync'd."""
        return [(s, s.file, s.size) for s in list(self.segments) if s.flushed_size < s.size]

    @staticmethod
    def fdatasync(work: _SyncWork) -> None:
        """fdatasync the files of `work` (from ``unsynced``); OSError on a failure."""
        for _seg, f, _size in work:
            if f.fd >= 0:
                _native.fdatasync(f.fd)

    def mark_synced(self, work: _SyncWork, upto: int) -> None:
        """After ``fdatasync(work)``: the sizes of `work` are on disk, and every byte below `upto`."""
        for seg, f, size in work:
            if size > seg.flushed_size and f is seg.file:   # not a file a truncation replaced since
                seg.flushed_size = size
        if upto > self.recovery_point:
            self.recovery_point = upto

    # -- removing segments -----------------------------------------------
    def truncate_to(self, offset: int, log_start_offset: int, mapped_below: int = 0) -> int:
        """Remove the batches at and above `offset` (batch granularity); returns the new end offset.

        When only offsets below `log_start_offset` would remain, every segment
        goes and an empty one starts at `log_start_offset` (Kafka's
        truncateFullyAndStartAt).  The recovery point is cut at the new end.
        Whole segments are unlinked (a reader's mapping keeps the inode); the
        last one is cut in place unless readers may have mapped the bytes cut
        (below `mapped_below`: LogSegment.truncate_to).
        """
        segs = self.segments
        while len(segs) > 1 and segs[-1].base_offset >= offset:
            self.bases.pop()
            segs.pop().delete()
        seg = segs[-1]
        seg.truncate_to(offset, mapped_below)
        if seg.next_offset < log_start_offset:
            seg = self._restart_at(log_start_offset)
        seg.make_active()
        end = seg.next_offset
        self.recovery_point = min(self.recovery_point, end)
        return end

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment; the log restarts with one empty segment at `offset`."""
        self._restart_at(offset)
        self.recovery_point = offset

    def _restart_at(self, offset: int) -> LogSegment:
        for old in self.segments:
            old.delete()
        seg = LogSegment(self.dir, offset, self.config, create=True)
        self.segments, self.bases = [seg], [offset]
        return seg

    def delete_leading(self, predicate: Callable[[LogSegment, int, int], bool], limit: int,
                       deadline: int) -> int:
        """Remove leading non-active segments while ``predicate(seg, next_base, count)`` holds and
        next_base <= `limit`; each is renamed ``.deleted`` and unlinked at `deadline` or later
        (``delete_pending``).  Returns how many went."""
        segs = self.segments
        n = 0
        while len(segs) > 1:
            seg, nxt = segs[0], segs[1].base_offset
            if nxt > limit or not predicate(seg, nxt, len(segs)):
                break
            segs.pop(0)
            self.bases.pop(0)
            self.schedule_delete(seg, deadline)
            n += 1
        return n

    def replace(self, i: int, n: int, seg: LogSegment) -> None:
        """Put `seg` in the place of the `n` segments from index `i` (the cleaner's swap)."""
        self.segments[i:i + n] = [seg]
        self.bases[i:i + n] = [seg.base_offset]

    def add_segment(self, seg: LogSegment) -> None:
        """Append a segment above the last one (a read-only open finding the writer's new segment)."""
        self.segments.append(seg)
        self.bases.append(seg.base_offset)

    def schedule_delete(self, seg: LogSegment, deadline: int) -> None:
        """Rename a segment already out of the list ``.deleted``; ``delete_pending`` unlinks it."""
        seg.change_suffix(files.DELETED_SUFFIX)
        self.pending_deletes.append((deadline, seg))

    def delete_pending(self, now: int | None) -> int:
        """Unlink the ``.deleted`` segments due by `now` (every one when None); returns how many."""
        keep, n = [], 0
        for deadline, seg in self.pending_deletes:
            if now is None or deadline <= now:
                seg.delete()
                n += 1
            else:
                keep.append((deadline, seg))
        self.pending_deletes = keep
        return n

    def close(self) -> OSError | None:
        """Close every segment (indexes trimmed), then unlink the pending deletes of a writer.

        Every segment is closed even when one fails; the first failure is returned."""
        failed = None
        for seg in self.segments:
            try:
                seg.close()
            except OSError as e:
                failed = failed or e
        if not self.read_only:
            self.delete_pending(None)
        return failed
