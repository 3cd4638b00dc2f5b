"""PartitionLog: one partition's log (Kafka's UnifiedLog, over a LocalLog).

On disk (``<topic>-<partition>/``): segments ``<base>.log/.index/.timeindex``
(segment.py), ``leader-epoch-checkpoint`` (checkpoint.py), producer snapshots
``<offset>.snapshot`` (producer_state.py: written at each roll and by
``write_producer_snapshot`` at clean shutdown, the latest two kept, those above
a truncation point deleted; loaded by loader.load_producer_state) and our
``.highwatermark`` publication file (layout and readers: epochs.py).

Offsets, named and ordered (asserted after every change):
``log_start_offset <= high_watermark <= log_end_offset`` and
``recovery_point <= log_end_offset``.  The last stable offset (LSO,
read_committed's bound) is min(first offset of the oldest open transaction,
HW) -- ``last_stable_offset``; transactions are ended by ``append_control``
(a COMMIT/ABORT marker); ABORT markers go into the segment's ``.txnindex``
(``aborted_transactions`` reads them for read_committed fetches).
``recovery_point``: every byte below it is fdatasync'd.  In durable mode
(``flush.messages=1``) an append returns only after an fdatasync covered its
bytes, and the automatic high watermark moves only over synced bytes, so a
reader never sees data a power loss could take.

Composed of parts, each an object the PartitionLog holds (no mixins):
``_local`` (LocalLog, local_log.py: segments, lookup, roll, fdatasync,
truncation of segments, the recovery point), ``_flusher`` (LogFlusher,
log_flush.py: group commit and the flush.messages / flush.ms policy),
``_retention`` (LogRetention, log_retention.py: truncation, DeleteRecords,
retention) and ``_txn`` (LogTransactions, log_txn.py: idempotence checks,
``.txnindex`` entries, producer snapshots).  The append path (log_append.py:
validate, stamp, write, roll) and the read path (log_read.py: fetch bounds
and slices, ListOffsets, a read-only open's refresh) are module functions
given the log; they call the parts directly.

Lock rule: ``self._lock`` (an RLock) guards the segment list (LocalLog has no
lock of its own), every segment and index call, and every offset field.  It
is held for validation, the ``pwrite`` and index updates of an append, and
for the position lookups of a read; it is NOT held while a caller reads the
bytes of a returned FileSlice, nor during an fdatasync.  Durable appends wait
in the flusher on its ``cond`` (a separate Condition): the first waiter
becomes the sync leader, takes the list of unsynced segment files, fdatasyncs
them without ``_lock``, takes ``_lock`` to move the recovery point, then wakes
every appender whose bytes are covered (group commit).  Lock order: ``_lock``
may be taken while holding nothing; the flusher's ``cond`` is never held
while acquiring ``_lock``.
"""

from __future__ import annotations

import os
import threading
import time

from .. import _native
from ..errors import ClosedError, KafkaStorageError, ReadOnlyError
from . import files, log_append, log_read
from .cleaner_pass import clean_log
from .cleaner_state import CleaningState
from .epochs import HighWatermarkFile, LeaderEpochCache
from .loader import load_partition, load_producer_state
from .local_log import LocalLog
from .log_flush import LogFlusher
from .log_retention import LogRetention
from .log_txn import LogTransactions
from .logtypes import AppendInfo, FetchInfo, RecoveryEvent, RecoveryStats
from .producer_state import ProducerStateManager
from .segment import FileSlice, LogSegment

__all__ = ["AppendInfo", "FetchInfo", "LeaderEpochCache", "PartitionLog", "HighWatermarkFile",
           "RecoveryEvent"]


def _now_ms() -> int:
    return int(time.time() * 1000)


class PartitionLog:
    """A partition's offsets, appends and reads, over its parts (see the module docstring).

    The offsets (log start, HW, LSO, log end), their ``.highwatermark``
    publication and the leader epochs are this class's own.  Normally created
    by LogManager (which runs the loader); ``PartitionLog(...)`` directly
    opens/creates the directory, recovering it when ``had_clean_shutdown`` is
    False.  See the module docstring for the lock rule.
    """

    def __init__(self, directory: str, config, *, topic: str | None = None, partition: int | None = None,
                 read_only: bool = False, auto_high_watermark: bool = True,
                 had_clean_shutdown: bool = True, recovery_point: int = 0,
                 log_start_offset: int = 0, high_watermark: int | None = None,
                 ever_cleaned: bool = False, clock=_now_ms):
        if topic is None or partition is None:
            topic, partition = files.parse_partition_dir(os.path.basename(os.path.normpath(directory)))
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self.read_only = read_only
        self.auto_high_watermark = auto_high_watermark
        self.clock = clock
        self._lock = threading.RLock()
        self._clean_lock = threading.Lock()  # one cleaning at a time (cleaner_pass.py)
        self._cleaning = CleaningState()     # its abort and pause around a truncation (cleaner_state.py)
        self._cleaner_horizon_due: int | None = None  # earliest delete horizon of a kept tombstone
        self._compacted = "compact" in config["cleanup.policy"]
        # Offset gaps are legal once the log may have been compacted: while the policy says
        # compact, and forever after a cleaning (``ever_cleaned``: the LogManager found the
        # partition in cleaner-offset-checkpoint) even if the policy went back to delete --
        # the cleaned segments keep their gaps.
        self.gaps_allowed = self._compacted or ever_cleaned
        self._closed = False
        self._failed: BaseException | None = None
        opened_ms = clock()
        self._cuts_seen = 0  # read-only: the writer's count of cuts below the HW its segments reflect
        if not read_only:
            os.makedirs(directory, exist_ok=True)
        loaded = load_partition(self, had_clean_shutdown=had_clean_shutdown,
                                recovery_point=recovery_point, log_start_offset=log_start_offset)
        segs = loaded.segments
        self.leader_epoch_cache: LeaderEpochCache = loaded.epoch_cache
        self.producer_state = ProducerStateManager()
        self.recovery_stats: RecoveryStats = loaded.stats
        self.log_end_offset: int = segs[-1].next_offset if segs else 0
        self.log_start_offset: int = min(max(log_start_offset, segs[0].base_offset if segs else 0),
                                         self.log_end_offset)
        self._local = LocalLog(directory, config, segs,
                               min(recovery_point, self.log_end_offset) if not read_only else 0, read_only)
        self._flusher = LogFlusher(self, self._local.recovery_point, opened_ms)
        self._txn = LogTransactions(directory, self.producer_state, self._local)
        self._retention = LogRetention(self)
        if not read_only:
            load_producer_state(self, self.log_end_offset if had_clean_shutdown else self.recovery_point,
                                self.recovery_stats)
        self._hw_file = HighWatermarkFile(os.path.join(directory, files.HIGH_WATERMARK_FILE), not read_only)
        if read_only:
            self.high_watermark = self._read_published_hw(high_watermark)
        else:
            hw = self.log_end_offset if auto_high_watermark else (high_watermark or 0)
            self.high_watermark = min(max(hw, self.log_start_offset), self.log_end_offset)
            self._publish()
        self._check_offsets()

    # -- offsets ---------------------------------------------------------
    def _check_offsets(self) -> None:
        if self.read_only:
            return
        assert self.log_start_offset <= self.high_watermark <= self.log_end_offset, (
            self.log_start_offset, self.high_watermark, self.log_end_offset)
        assert self._local.recovery_point <= self.log_end_offset, (self._local.recovery_point, self.log_end_offset)

    def _read_published_hw(self, fallback: int | None) -> int:
        pub = self._hw_file.read()
        if pub is not None:
            return pub[0]
        return fallback if fallback is not None else 0

    @property
    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments[-1]

    @property
    def size(self) -> int:
        with self._lock:
            return self._local.size

    @property
    def recovery_point(self) -> int:
        """Every byte below this offset is fdatasync'd (LocalLog's)."""
        return self._local.recovery_point

    @property
    def sync_count(self) -> int:
        """fdatasync rounds so far (group commit shares one round among its appenders)."""
        return self._flusher.sync_count

    # -- flush (log_flush.py) ----------------------------------------------
    def flush(self, up_to: int | None = None) -> int:
        """fdatasync everything below `up_to` (default: the log end offset); returns the recovery point."""
        return self._flusher.flush(up_to)

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """flush.ms policy (called periodically): flush if the last flush is older than flush.ms,
        or the segments below the last roll when they are not flushed yet."""
        return self._flusher.maybe_flush(now_ms)

    def _check_writable(self) -> None:
        if self._closed:
            raise ClosedError(f"log {self.dir} is closed")
        if self.read_only:
            raise ReadOnlyError(f"log {self.dir} is open read-only")
        if self._failed is not None:
            raise KafkaStorageError(f"log {self.dir} is offline after an I/O error: {self._failed}")

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (clamped to [log_start_offset, log_end_offset]) and publish it."""
        self._check_writable()
        with self._lock:
            hw = min(max(offset, self.log_start_offset), self.log_end_offset)
            self.high_watermark = hw
            self._publish()
            self._check_offsets()
            return hw

    def _maybe_advance_hw(self, offset: int) -> None:
        # called with _lock held
        if self.auto_high_watermark and offset > self.high_watermark:
            self.high_watermark = min(offset, self.log_end_offset)
            self._publish()

    def _publish(self) -> None:
        """Publish HW, log start and LSO in .highwatermark, its only writer (caller holds _lock)."""
        fu = self.producer_state.first_unstable_offset(self.high_watermark)
        lso = self.high_watermark if fu is None else max(min(fu, self.high_watermark), self.log_start_offset)
        self._hw_file.publish(self.high_watermark, self.log_start_offset, lso)

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of the oldest open or not yet replicated transaction, high watermark).

        read_committed reads stop here.  A read-only open returns what the
        writer published (the HW when the writer never published an LSO).
        """
        if self.read_only:
            self.refresh()
            with self._lock:
                return max(self._hw_file.read_lso(self.high_watermark), self.log_start_offset)
        with self._lock:
            fu = self.producer_state.first_unstable_offset(self.high_watermark)
            if fu is None:
                return self.high_watermark
            return max(min(fu, self.high_watermark), self.log_start_offset)

    # -- append (log_append.py) ------------------------------------------
    def append(self, buf, leader_epoch: int | None = None, *, assign_offsets: bool = True,
               log_append_time: int | None = None) -> AppendInfo:
        """Validate, stamp offsets (and epoch), write, index, roll; durable mode waits for fdatasync.

        `buf` holds one or more complete v2 batches.  A bytearray or writable
        memoryview is patched in place; anything else is copied once.  With
        ``assign_offsets=False`` (a follower) the batches keep their offsets,
        which must start at or above the log end offset.  On an I/O error
        (ENOSPC, EIO, EFBIG) the segment is cut back to its size before the
        append and KafkaStorageError is raised: no half batch is ever visible.
        A control batch (transaction marker) from a client is refused with
        InvalidRecordError (INVALID_RECORD, Kafka's LogValidator); a follower's
        append (``assign_offsets=False``) may carry them.
        """
        return log_append.append(self, buf, leader_epoch, assign_offsets, log_append_time, None)

    def append_control(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                       leader_epoch: int | None = None) -> int:
        """Append a transaction marker (COMMIT if `commit`, else ABORT); returns its offset.

        Writes Kafka's control batch (attributes transactional|control, the
        producer's id and epoch, baseSequence -1, one record: key version 0 +
        type 0 ABORT / 1 COMMIT, value version 0 + `coordinator_epoch`), ends
        the producer's open transaction (the LSO moves once the HW passes the
        marker), and for an ABORT of an open transaction adds its entry to the
        active segment's ``.txnindex``.  A marker for a producer with no open
        transaction is still written (Kafka does too).  Refused, nothing
        written: an epoch older than the producer's (InvalidProducerEpochError,
        INVALID_PRODUCER_EPOCH) or an older coordinator epoch
        (TRANSACTION_COORDINATOR_FENCED, code 52).  Durable mode waits for
        the fdatasync as append() does.
        """
        buf = _native.build_control_batch(producer_id, producer_epoch, bool(commit), coordinator_epoch,
                                          self.clock())
        info = log_append.append(self, buf, leader_epoch, True, None,
                                 (producer_id, producer_epoch, bool(commit), coordinator_epoch))
        return info.first_offset

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        self._check_writable()
        with self._lock:
            return log_append.roll_locked(self)

    # -- read (log_read.py) ----------------------------------------------
    def refresh(self) -> None:
        """Read-only opens: pick up the writer's new HW, bytes and segments."""
        log_read.refresh(self)

    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True, verify: bool = False, isolation_level: int = 0) -> FetchInfo:
        """Slices from the batch holding `start_offset`, about `max_bytes` long.

        Bounded by `max_offset` (default: the high watermark; a follower
        passes the log end offset).  Slices may end inside a batch (clients
        drop the partial tail) except with ``verify=True``, which returns
        complete batches only after checking each one's structure and CRC and
        raises CorruptRecordError (file + position) on a bad one — the
        consumer's checked read path.  OffsetOutOfRangeError outside
        [log_start_offset, log_end_offset].  ``isolation_level=1``
        (read_committed) stops at the last stable offset and fills
        ``aborted_transactions`` for the range read; the answer always carries
        ``last_stable_offset``.
        """
        return log_read.read(self, start_offset, max_bytes, max_offset, min_one_batch, verify, isolation_level)

    def segments_for_range(self, start_offset: int, end_offset: int | None = None) -> list[FileSlice]:
        """FileSlices of the complete batches holding [start_offset, end_offset), capped at the HW.

        For the Arrow scanner: one slice per segment, batch-aligned; the first
        batch may start below start_offset (batches are not split).
        """
        return log_read.segments_for_range(self, start_offset, end_offset)

    def scrub(self) -> list:
        """Re-validate every batch below the high watermark (structure, CRC, contiguous offsets).

        Returns a CorruptRecordError (path + position) per segment with a bad
        batch; nothing is changed (the caller quarantines or repairs).  Reads
        run outside the lock, on slices that keep their files alive.
        """
        with self._lock:
            work = self._local.slices_below(self.high_watermark)
        return self._local.scan(work, strict=not self.gaps_allowed)

    # -- removing data (log_retention.py) --------------------------------
    def truncate_to(self, offset: int) -> int:
        """Remove everything at and above `offset` (batch granularity); returns the new log end offset.

        At or above the log end nothing is removed but the leader-epoch cache is still cut at the
        log end (Kafka's truncateTo)."""
        return self._retention.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower behind its leader's log start (Kafka's truncateFullyAndStartAt): every
        segment, epoch and producer snapshot goes; the log restarts empty at `offset`."""
        self._retention.truncate_fully_and_start_at(offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (<= HW); returns it."""
        return self._retention.delete_records_before(offset)

    def maybe_apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole old segments by retention.ms / retention.bytes / log start; returns how many."""
        return self._retention.maybe_apply_retention(now_ms)

    def maybe_delete_pending(self, now_ms: int | None = None) -> int:
        """Unlink `.deleted` segments whose file.delete.delay.ms has passed."""
        return self._retention.maybe_delete_pending(now_ms)

    # -- producers (log_txn.py) ------------------------------------------
    def aborted_transactions(self, start_offset: int, upper_offset: int) -> list[tuple[int, int]]:
        """[(producer_id, first_offset)] of the aborted transactions overlapping [start_offset, upper_offset).

        Kafka's collectAbortedTransactions over the ``.txnindex`` files: what a
        read_committed Fetch answers with, and what the scanner drops.
        """
        with self._lock:
            return self._txn.collect_aborted(start_offset, upper_offset)

    def write_producer_snapshot(self) -> None:
        """Snapshot the producer state at the log end offset (clean shutdown)."""
        self._check_writable()
        with self._lock:
            self._txn.write_snapshot(self.log_end_offset)

    def active_producers(self) -> list:
        """The producers this partition knows (producer_state.SnapshotEntry each), for DescribeProducers."""
        with self._lock:
            return self.producer_state.active_producers()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """producer.id.expiration.ms: forget producers idle that long; returns their ids."""
        with self._lock:
            return self.producer_state.remove_expired(now_ms, expiration_ms)

    # -- timestamps ------------------------------------------------------
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= `timestamp` below the HW, or None.

        ``timestamp`` -2 = earliest (log start offset, -1), -1 = latest (HW, -1), as ListOffsets.
        """
        return log_read.offset_for_timestamp(self, timestamp)

    def assign_leader_epoch(self, epoch: int) -> None:
        """A new leader: record that `epoch` starts at the log end offset (Kafka's makeLeader),
        so OffsetForLeaderEpoch answers the previous epoch's end even before the first append."""
        self._check_writable()
        with self._lock:
            if self.leader_epoch_cache.assign(epoch, self.log_end_offset):
                self.leader_epoch_cache.flush()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        with self._lock:
            return self.leader_epoch_cache.end_offset_for_epoch(epoch, self.log_end_offset)

    # -- compaction ------------------------------------------------------
    def clean(self, now_ms: int | None = None, *, force: bool = True, **kw):
        """Compact the log now (cleanup.policy compact); returns a cleaner.CleanStats.

        ``force`` (default) ignores min.cleanable.dirty.ratio; the active
        segment, segments at or above the high watermark and those younger
        than min.compaction.lag.ms are never cleaned.  See cleaner.py.
        """
        return clean_log(self, now_ms, force=force, **kw)

    # -- lifecycle -------------------------------------------------------
    def update_config(self, config) -> None:
        """Apply a changed topic config (IncrementalAlterConfigs); takes effect from the next append."""
        with self._lock:
            self.config = config
            self._compacted = "compact" in config["cleanup.policy"]
            self.gaps_allowed = self.gaps_allowed or self._compacted
            self._local.update_config(config)

    def close(self, flush: bool = False) -> None:
        """Close every segment (indexes trimmed); optionally flush first."""
        if self._closed:
            return
        if flush and not self.read_only and self._failed is None:
            self.flush()
        with self._lock:
            self._closed = True
            failed = self._local.close()  # every segment is closed all the same
            self._hw_file.close()
        if failed is not None:
            raise failed

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"hw={self.high_watermark}, leo={self.log_end_offset}, segments={len(self._local.segments)})")
