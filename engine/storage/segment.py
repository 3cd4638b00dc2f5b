"""LogSegment: one `.log` file and its two sparse indexes (FileSlice, a byte range of it: fileslice.py).

On-disk format: ``<base>.log`` holds RecordBatch v2 batches back to back,
exactly as on the wire (layout: csrc/consts.pxi); ``<base>.index`` and
``<base>.timeindex`` are Kafka's sparse indexes (csrc/index.pyx);
``<base>.txnindex`` (txnindex.py) lists the transactions whose ABORT marker
is in the segment, created with its first entry (Kafka creates it lazily too),
renamed, truncated and deleted with the segment.

Sparse-index rule (kafka-storage-format.md §6, LogSegment.append): a counter
``bytes_since_last_index_entry``; on each append, BEFORE adding the append's
size, if the counter is greater than ``index.interval.bytes`` write an offset
index entry (largest offset of this append -> position where it starts) and a
time index entry if the max timestamp grew, then reset the counter.  The first
append of a segment is therefore never indexed.

Invariants: ``base_offset <= every offset in the segment < next_offset``;
relative offsets fit int32; ``size`` is the byte length of complete batches
(the writer never leaves a partial batch: a failed write is cut back).

Parts, each a module of functions LogSegment calls: segment_read.py (lookups
and the tail scan over the mapped `.log`), segment_index.py (opening,
sealing, re-growing and checking the two indexes), segment_files.py (paths,
preallocation, cuts, unlinks); SegmentFile and FileSlice: fileslice.py.

Concurrency: a LogSegment is not thread-safe.  PartitionLog serialises every
call under its lock.  A :class:`FileSlice` is immutable and may be read from
any thread after the lock is released: it keeps the file descriptor alive by
reference (the fd is closed when the segment and all its slices are gone), so
a slice of a segment deleted by retention still reads its bytes.
"""

from __future__ import annotations

import mmap
import os
import time

from .. import _native
from ..errors import CorruptIndexError, CorruptRecordError
from . import segment_read
from .fileslice import FileSlice, SegmentFile
from .segment_files import ClosedFile, cut, preallocate, segment_paths, unlink_all
from .segment_index import bytes_since_last_entry, check_entries, open_indexes, reactivate, read_only_copy, seal
from .txnindex import TransactionIndex

__all__ = ["FileSlice", "LogSegment", "SegmentFile"]

INT32_MAX = 2**31 - 1


class LogSegment:
    """One segment: `.log` + OffsetIndex + TimeIndex (Kafka's LogSegment).

    Open an existing one with ``LogSegment(dir, base, config)``; pass
    ``create=True`` for a new, empty active segment (indexes preallocated to
    ``segment.index.bytes``).  ``writable=False`` opens everything read-only.
    """

    def __init__(self, directory: str, base_offset: int, config, *, create: bool = False,
                 writable: bool = True, preallocate_index: bool | None = None,
                 suffix: str = ""):
        if base_offset < 0:
            raise ValueError(f"negative base offset {base_offset}")
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        self.writable = writable
        self.suffix = suffix
        self.log_path, self.index_path, self.time_index_path, txn_path = segment_paths(directory, base_offset, suffix)
        self.txn_index = TransactionIndex(txn_path)
        self.txn_rebuild = False  # recovered: the loader rebuilds the txnindex while replaying
        if create and os.path.exists(self.log_path) and os.path.getsize(self.log_path) > 0:
            raise FileExistsError(self.log_path)
        self.index_missing = not create and not (os.path.exists(self.index_path)
                                                 and os.path.exists(self.time_index_path))
        self._file = SegmentFile(self.log_path, writable)
        self.size = os.fstat(self._file.fd).st_size
        if create and writable and config["preallocate"]:
            preallocate(self._file, config["segment.bytes"])     # freed on roll/close (segment_files.py)
        max_index = config["segment.index.bytes"] if (writable and (create if preallocate_index is None
                                                                    else preallocate_index)) else -1
        if create and writable:
            for p in (self.index_path, self.time_index_path, self.txn_index.path):
                if os.path.exists(p):
                    os.unlink(p)
        self.index, self.time_index = open_indexes(self.index_path, self.time_index_path, base_offset, max_index,
                                                   writable, self.index_missing)
        self.bytes_since_last_index_entry = 0
        self._next_offset: int | None = base_offset if self.size == 0 else None
        ts, off = self.time_index.last_entry
        self.max_timestamp = ts
        self.offset_of_max_timestamp = off if ts >= 0 else -1
        self._tail_scanned = self.size == 0
        self.rolling_based_timestamp: int | None = None
        self.created_ms = int(time.time() * 1000)
        self._map: mmap.mmap | None = None
        self._map_len = 0
        self.tail_valid_end = self.size
        self._index_loaded_at = self.size
        self.index_ok = True  # False: read-only open found a corrupt index; lookups start at 0
        # A read-only open's index copy may hold entries of batches above the high watermark it
        # was taken at, which the writer may cut in place and rewrite differently: not used.
        self.index_trusted_below = 1 << 62
        self.flushed_size = self.size  # bytes known to be fsync'd (the segment was flushed or recovered)

    # -- properties -------------------------------------------------------
    @property
    def file(self) -> SegmentFile:
        return self._file

    @property
    def fd(self) -> int:
        return self._file.fd

    @property
    def next_offset(self) -> int:
        """One past the last offset in the segment (base offset when empty)."""
        if self._next_offset is None:
            self._scan_tail()
        return self._next_offset  # type: ignore[return-value]

    def _scan_tail(self) -> None:
        """Walk the batches after the last index entry: next offset, max timestamp, valid end.

        Never raises: a torn or corrupt tail ends the walk (``tail_valid_end``
        < ``size`` tells the loader to recover the segment).
        """
        r, shift = segment_read.scan_tail(self)
        self._next_offset = r.next_offset if r.batches else self.base_offset
        self.tail_valid_end = r.valid_end + shift
        if not self._tail_scanned:
            if r.max_timestamp > self.max_timestamp:
                self.max_timestamp = r.max_timestamp
                self.offset_of_max_timestamp = r.offset_of_max_timestamp
            self._tail_scanned = True

    def _data(self):
        """A read-only mapping of [0, size) of the .log (cached; remapped as it grows)."""
        if self.size == 0:
            return b""
        if self._map is None or self._map_len < self.size:
            self._map = mmap.mmap(self._file.fd, self.size, mmap.MAP_SHARED, mmap.PROT_READ)
            self._map_len = self.size
        return self._map

    def _drop_map(self) -> None:
        self._map = None
        self._map_len = 0

    def _index_lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the trusted index entry at or below `offset` ((base, 0) if none)."""
        if not self.index_ok:
            return self.base_offset, 0
        return self.index.lookup(min(offset, self.index_trusted_below - 1))

    def refresh_size(self, high_watermark: int | None = None) -> int:
        """Read-only opens: pick up bytes the writer appended since (complete or not); an index
        copy taken afresh trusts the entries below `high_watermark` (the writer's, read before)."""
        size = os.fstat(self._file.fd).st_size
        if size != self.size:
            if size < self.size:
                self._drop_map()
            self.size = size
            self._next_offset = None
            self._tail_scanned = False
            if not self.writable and size - self._index_loaded_at > 16 * 1024 * 1024 \
                    and high_watermark is not None:
                self._reload_read_only_indexes(high_watermark)
        return size

    def _reload_read_only_indexes(self, high_watermark: int) -> None:
        """Readers hold a private copy of the indexes; take a fresh one as the segment grows."""
        fresh = read_only_copy(self.index_path, self.time_index_path, self.base_offset)
        if fresh is None:
            return
        self.index.close()
        self.time_index.close()
        self.index, self.time_index = fresh
        self.index_ok = True
        self.index_trusted_below = high_watermark
        self._index_loaded_at = self.size

    # -- append -----------------------------------------------------------
    def append(self, largest_offset: int, max_timestamp: int, offset_of_max_timestamp: int,
               buf) -> int:
        """Write `buf` (complete, offset-stamped batches) at the end; return its position.

        On an OSError (the write, or reserving index blocks: ENOSPC, EIO, EFBIG) the file is
        cut back to its previous size, this append's index entry removed and the error
        re-raised, so no partial batch stays behind and the segment takes the next append.
        """
        n = len(buf)
        if n == 0:
            return self.size
        if largest_offset - self.base_offset > INT32_MAX or largest_offset < self.base_offset:
            raise ValueError(f"offset {largest_offset} does not fit segment {self.base_offset}")
        position = self.size
        if position > INT32_MAX - n + 1 and position > 0:
            raise ValueError("segment would exceed 2 GiB")
        if position == 0:
            self.rolling_based_timestamp = max_timestamp  # Kafka: the first append's largest timestamp
        entries = self.index.entries
        if max_timestamp > self.max_timestamp:
            max_ts, off_max_ts = max_timestamp, offset_of_max_timestamp
        else:
            max_ts, off_max_ts = self.max_timestamp, self.offset_of_max_timestamp
        try:
            _native.pwrite_all(self._file.fd, buf, position)
            if self.bytes_since_last_index_entry > self.config["index.interval.bytes"]:
                # the index pages are reserved as they fill (posix_fallocate): ENOSPC lands here
                self.index.append(largest_offset, position)
                self.time_index.maybe_append(max_ts, off_max_ts)
                self.bytes_since_last_index_entry = 0
        except OSError:
            if self.index.entries > entries:
                self.index.truncate_to(largest_offset)     # the entry of this append only
            try:
                os.ftruncate(self._file.fd, position)
            except OSError:
                pass
            raise
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, off_max_ts
        self.bytes_since_last_index_entry += n
        self.size = position + n
        self._next_offset = largest_offset + 1
        return position

    # -- lookups (segment_read.py) ------------------------------------------
    def translate_offset(self, offset: int, starting_position: int = 0):
        """(position, base_offset, last_offset) of the first batch with last offset >= offset, or None."""
        return segment_read.translate_offset(self, offset, starting_position)

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_batch: bool = False) -> FileSlice | None:
        """Slice of the `.log` from the batch holding `start_offset`, at most `max_size` bytes
        (below ``max_position``; ``min_one_batch``: Kafka's minOneMessage), or None."""
        return segment_read.read(self, start_offset, max_size, max_position, min_one_batch)

    def complete_slice(self, start_offset: int, end_offset: int, max_position: int | None = None):
        """FileSlice of the complete batches holding offsets [start_offset, end_offset), below max_position."""
        return segment_read.complete_slice(self, start_offset, end_offset, max_position)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int = 0,
                                 max_position: int | None = None):
        """(offset, timestamp) of the first record with timestamp >= `timestamp` below max_position, or None."""
        return segment_read.find_offset_by_timestamp(self, timestamp, starting_offset, max_position)

    # -- roll / recovery / truncation ----------------------------------------
    def should_roll(self, messages_size: int, max_timestamp_in_messages: int,
                    max_offset_in_messages: int, now_ms: int) -> bool:
        """Kafka's roll rule for an append of `messages_size` bytes."""
        cfg = self.config
        if self.size > cfg["segment.bytes"] - messages_size:
            return True
        if self.size > 0:
            rbt = self.rolling_based_timestamp
            if rbt is None:
                rbt = self._first_batch_timestamp()
            waited = (max_timestamp_in_messages - rbt) if rbt is not None and rbt >= 0 else \
                (now_ms - self.created_ms)
            if waited > cfg["segment.ms"] - cfg["segment.jitter.ms"]:
                return True
        if self.index.is_full or self.time_index.is_full:
            return True
        return max_offset_in_messages - self.base_offset > INT32_MAX

    def _first_batch_timestamp(self):
        if self.size < _native.BATCH_HEADER_SIZE:
            return None
        try:
            h = _native.read_header(os.pread(self._file.fd, _native.BATCH_HEADER_SIZE, 0))
        except CorruptRecordError:
            return None     # not a v2 header: the roll rule falls back to the creation time
        self.rolling_based_timestamp = h.max_timestamp
        return self.rolling_based_timestamp

    def _release_preallocation(self) -> None:
        if self.writable and self.config["preallocate"] and self._file.fd >= 0:
            os.ftruncate(self._file.fd, self.size)  # frees blocks reserved past the end

    def on_become_inactive(self) -> None:
        """On roll: final time index entry, indexes trimmed to their used size (Kafka)."""
        self._release_preallocation()
        self._seal_indexes()

    def _seal_indexes(self) -> None:
        seal(self.index, self.time_index, self.max_timestamp, self.offset_of_max_timestamp, self.writable)

    def make_active(self) -> None:
        """Preallocate the indexes of the segment that takes appends again."""
        # Continue the sparse-index counter from the last entry.
        self.bytes_since_last_index_entry = reactivate(self.index, self.time_index,
                                                       self.config["segment.index.bytes"], self.size)

    def sanity_check(self, deep: bool = False) -> None:
        """Kafka's index sanity check; raises CorruptIndexError (a missing index counts as corrupt).

        ``deep`` also checks that every entry points at a real batch: for an
        offset entry (O, P) the batch at P has prev_O < baseOffset <= O; for a
        time entry (T, O) the batch holding O has maxTimestamp == T.  Used for
        segments below the recovery point after an unclean shutdown.
        """
        if self.index_missing:
            raise CorruptIndexError("index file is missing", self.index_path, None)
        self.index.sanity_check(self.size)
        self.time_index.sanity_check()
        self.txn_index.sanity_check(self.base_offset)
        if not deep or self.size == 0:
            return
        check_entries(self._data(), self.size, self.base_offset, self.index, self.index_path,
                      self.time_index, self.time_index_path, self.translate_offset)

    def recover(self, leader_epoch_cache=None, check_crc: bool = True, last_epoch: int = -1,
                gaps_allowed: bool | None = None, mapped_below: int = 0):
        """Rebuild both indexes from the `.log` and cut it after the last valid batch.

        Returns (ScanResult, truncated_bytes).  `leader_epoch_cache`, when
        given, receives every epoch start found (assign(epoch, start_offset)).
        Offsets must be contiguous and epochs non-decreasing (from
        `last_epoch`, the previous segment's) unless `gaps_allowed` (default: the
        topic is compacted; the partition log passes whether it ever was).
        A cut below `mapped_below` (the last writer's published high watermark:
        a bad batch below it) is made in a new file, as in ``truncate_to``.
        """
        size = os.fstat(self._file.fd).st_size
        self.size = size
        self._drop_map()
        data = self._data()
        if gaps_allowed is None:
            gaps_allowed = "compact" in self.config["cleanup.policy"]
        strict = not gaps_allowed
        r = _native.scan_segment(data, self.base_offset, 0, size,
                                 self.config["index.interval.bytes"], -1, check_crc,
                                 last_epoch, strict=strict)
        del data
        self._drop_map()
        self.index.load_packed(r.offset_index)
        self.time_index.load_packed(r.time_index)
        self.index_missing = False
        self.txn_rebuild = True
        truncated = size - r.valid_end
        if truncated > 0:
            self._file = cut(self._file, r.valid_end, (r.next_offset if r.batches else self.base_offset) < mapped_below)
            self.size = r.valid_end
        self._next_offset = r.next_offset if r.batches else self.base_offset
        self.max_timestamp = r.max_timestamp
        self.offset_of_max_timestamp = r.offset_of_max_timestamp
        self._tail_scanned = True
        self.bytes_since_last_index_entry = r.bytes_since_index
        self.rolling_based_timestamp = None
        if leader_epoch_cache is not None:
            for epoch, start in r.epochs:
                leader_epoch_cache.assign(epoch, start)
        self._seal_indexes()
        self.flushed_size = min(self.flushed_size, self.size)
        return r, truncated

    def truncate_to(self, offset: int, mapped_below: int = 0) -> int:
        """Remove the batch holding `offset` and everything after it; return bytes removed.

        Kafka truncates at batch granularity: when `offset` falls inside a
        batch the whole batch goes, so the new next offset is <= `offset`.
        Readers may hold mmaps of any batch below `mapped_below` (the highest
        high watermark ever published): a cut reaching one is made in a new
        file (fileslice.cut_to_new_file), since ftruncate under a mapping is
        SIGBUS for its reader; above it (a follower's uncommitted tail, the
        usual case) the file is cut in place, as Kafka does.
        """
        if offset <= self.base_offset:
            position, first_cut = 0, self.base_offset
        else:
            found = self.translate_offset(offset)
            if found is None:
                return 0
            position, first_cut, _last = found
        removed = self.size - position
        if removed <= 0:
            return 0
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self._drop_map()
        self._file = cut(self._file, position, first_cut < mapped_below)
        self.size = position
        self.flushed_size = min(self.flushed_size, position)
        # Recompute next offset / max timestamp from what remains.
        self._next_offset = None
        ts, off = self.time_index.last_entry
        self.max_timestamp, self.offset_of_max_timestamp = (ts, off) if ts >= 0 else (-1, -1)
        self._tail_scanned = False
        if position == 0:
            self._next_offset = self.base_offset
            self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = bytes_since_last_entry(self.index, position)
        return removed

    # -- durability / lifecycle ---------------------------------------------
    def flush(self) -> None:
        """fdatasync the .log, msync the indexes."""
        size = self.size
        _native.fdatasync(self._file.fd)
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()
        self.flushed_size = max(self.flushed_size, size)

    def close(self) -> None:
        """Close the files; an OSError of the final index touches (a full disk) is raised after
        everything is closed (the segment's data is intact; the next unclean open rebuilds)."""
        failed = None
        if self.writable and not self.index.closed:
            try:
                self._release_preallocation()
                self._seal_indexes()
            except OSError as e:
                failed = e
        self.index.close()
        self.time_index.close()
        self._drop_map()
        self._file = ClosedFile(self.log_path)  # type: ignore[assignment]
        if failed is not None:
            raise failed

    def change_suffix(self, new_suffix: str) -> None:
        """Rename the segment's files (e.g. to `.deleted`)."""
        for attr in ("log_path", "index_path", "time_index_path"):
            old = getattr(self, attr)
            base = old[: len(old) - len(self.suffix)] if self.suffix else old
            new = base + new_suffix
            if os.path.exists(old):
                os.rename(old, new)
            setattr(self, attr, new)
        old = self.txn_index.path
        self.txn_index.rename((old[: len(old) - len(self.suffix)] if self.suffix else old) + new_suffix)
        self.suffix = new_suffix
        f = self._file
        if f is not None and hasattr(f, "fd"):
            f.path = self.log_path          # errors from slices name the file as it is now

    def delete(self) -> None:
        """Close and unlink the files (open FileSlices keep reading the unlinked inode)."""
        self.close()
        unlink_all((self.log_path, self.index_path, self.time_index_path, self.txn_index.path))

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, path={self.log_path!r})"
