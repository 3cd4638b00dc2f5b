"""Small per-partition state files next to the segments: the ``.highwatermark``
publication file (HighWatermarkFile) and the ``leader-epoch-checkpoint`` cache
(LeaderEpochCache).  Owned by PartitionLog (log.py), built by the loader.

::

    .highwatermark   64 bytes, little-endian int64 fields, each 8-byte aligned
        0   high watermark      (written with one atomic 8-byte store)
        8   log start offset    (atomic store)
        16  magic 0x4B48574D31  ("KHWM1"), identifies the format
        24  last stable offset  (atomic store, before the high watermark)
        32  magic 0x4B4C534F31  ("KLSO1") once field 24 is written
        40  cuts below the HW   (count, atomic store; 0 in older files): a truncation
                                cut batches readers may hold (an unclean election)

A read-only open in another process maps the file read-only and reads the
high watermark with one atomic 8-byte load (``_native.load_i64_atomic``); it
never serves an offset at or above it, and only complete batches.  When the
cut count changes, the writer replaced or deleted segment files under the
reader, which takes the directory's segments afresh (loader.refresh_read_only).
"""

from __future__ import annotations

import mmap
import os

from .. import _native
from . import checkpoint

__all__ = ["HighWatermarkFile", "LeaderEpochCache", "HWM_MAGIC", "LSO_MAGIC", "HWM_SIZE"]

HWM_MAGIC = 0x4B48574D31
LSO_MAGIC = 0x4B4C534F31
HWM_SIZE = 64


class HighWatermarkFile:
    """The `.highwatermark` publication file (layout in the module docstring)."""

    def __init__(self, path: str, writable: bool):
        self.path = path
        self.writable = writable
        self._map: mmap.mmap | None = None
        if writable:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                if os.fstat(fd).st_size != HWM_SIZE:
                    os.ftruncate(fd, HWM_SIZE)
                # blocks for the map now: a full disk is ENOSPC here, never a SIGBUS at a store
                os.posix_fallocate(fd, 0, HWM_SIZE)
                self._map = mmap.mmap(fd, HWM_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fd)
            if _native.load_i64_atomic(self._map, 16) != HWM_MAGIC:
                _native.store_i64_atomic(self._map, 16, HWM_MAGIC)
            else:               # readers may still hold maps of what the last writer published
                self.highest = max(0, _native.load_i64_atomic(self._map, 0))
        else:
            self._try_map()

    def _try_map(self) -> bool:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            if os.fstat(fd).st_size < HWM_SIZE:
                return False
            m = mmap.mmap(fd, HWM_SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        if _native.load_i64_atomic(m, 16) != HWM_MAGIC:
            m.close()
            return False
        self._map = m
        return True

    #: The highest high watermark this file ever published (the last writer's included): readers,
    #: here or in another process, may hold mmaps of any batch below it (segment.truncate_to).
    highest = 0

    def publish(self, high_watermark: int, log_start_offset: int, last_stable_offset: int | None = None) -> None:
        if high_watermark > self.highest:
            self.highest = high_watermark
        if self._map is not None:
            _native.store_i64_atomic(self._map, 8, log_start_offset)
            if last_stable_offset is not None:
                _native.store_i64_atomic(self._map, 24, last_stable_offset)
                if self._lso_magic is not True:
                    _native.store_i64_atomic(self._map, 32, LSO_MAGIC)
                    self._lso_magic = True
            _native.store_i64_atomic(self._map, 0, high_watermark)

    _lso_magic = None

    def count_cut(self) -> None:
        """Writer: a truncation cut batches below ``highest`` (field 40 grows by one)."""
        if self._map is not None:
            _native.store_i64_atomic(self._map, 40, _native.load_i64_atomic(self._map, 40) + 1)

    def cuts(self) -> int:
        """Field 40 (0 when not published)."""
        if self._map is None and not self._try_map():
            return 0
        assert self._map is not None
        return _native.load_i64_atomic(self._map, 40)

    def read(self) -> tuple[int, int] | None:
        """(high_watermark, log_start_offset) or None when not published."""
        if self._map is None and not self._try_map():
            return None
        assert self._map is not None
        return _native.load_i64_atomic(self._map, 0), _native.load_i64_atomic(self._map, 8)

    def read_lso(self, high_watermark: int) -> int:
        """The published last stable offset, at most `high_watermark` (the HW when none is published)."""
        if self._map is None and not self._try_map():
            return high_watermark
        assert self._map is not None
        if _native.load_i64_atomic(self._map, 32) != LSO_MAGIC:
            return high_watermark
        return min(_native.load_i64_atomic(self._map, 24), high_watermark)

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass
            self._map = None


class LeaderEpochCache:
    """epoch -> start offset (Kafka's LeaderEpochFileCache), persisted in leader-epoch-checkpoint."""

    def __init__(self, path: str | None, entries: list[tuple[int, int]] | None = None):
        self.path = path
        self.entries: list[tuple[int, int]] = list(entries or [])

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else -1

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the cache changed."""
        if epoch < 0:
            return False
        if self.entries and epoch <= self.entries[-1][0]:
            return False
        # Drop entries that conflict (start at or after the new epoch's start).
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove epochs starting at or after end_offset (log truncated to end_offset)."""
        n = len(self.entries)
        self.entries = [(e, o) for e, o in self.entries if o < end_offset]
        return len(self.entries) != n

    def truncate_from_start(self, start_offset: int) -> bool:
        """Log start moved: the epoch covering start_offset now starts there."""
        keep = [(e, o) for e, o in self.entries if o >= start_offset]
        older = [(e, o) for e, o in self.entries if o < start_offset]
        if older and (not keep or keep[0][1] > start_offset):
            keep.insert(0, (older[-1][0], start_offset))
        changed = keep != self.entries
        self.entries = keep
        return changed

    def end_offset_for_epoch(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(largest epoch <= `epoch`, the start of the next epoch) -- Kafka's
        LeaderEpochFileCache.endOffsetFor: the latest epoch ends at `log_end_offset`; an epoch
        older than every entry answers (`epoch`, the first entry's start offset); an unknown
        epoch (negative, or newer than the latest) or an empty cache answers (-1, -1)."""
        if epoch < 0 or not self.entries:
            return -1, -1
        if epoch == self.entries[-1][0]:
            return epoch, log_end_offset
        if epoch > self.entries[-1][0]:
            return -1, -1
        for i, (e, o) in enumerate(self.entries):
            if e > epoch:
                return (self.entries[i - 1][0] if i else epoch), o
        return -1, -1  # pragma: no cover (the latest entry is > epoch here)

    def flush(self) -> None:
        if self.path is not None:
            checkpoint.write_epoch_checkpoint(self.path, self.entries)
