"""LogRetention: the part of a PartitionLog (log.py) that removes data.

PartitionLog holds one as ``_retention``; its public methods of the same
names call it.  It does truncation (``truncate_to``: a follower or recovery
cutting the log end; ``truncate_fully_and_start_at``: a follower behind its
leader's log start), DeleteRecords (``delete_records_before``), retention
(``retention.ms`` / ``retention.bytes`` / log start,
``maybe_apply_retention``) and the delayed unlink of ``.deleted`` segments
(``file.delete.delay.ms``, ``maybe_delete_pending``).  The segment files
themselves are cut by the LocalLog (local_log.py); this part moves the
offsets, leader epochs, producer state, synced offset and publication that
go with them.  It follows the PartitionLog's lock rule (log.py's module
docstring): ``_delete_segments_locked`` expects the log's ``_lock`` held, the
others take it.  A truncation below the active segment first aborts a running
cleaning and pauses the log's cleaning until it is done (cleaner_state.py,
Kafka's abortAndPauseCleaning), without the lock held while it waits.  No state
of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..errors import OffsetOutOfRangeError
from . import producer_state as pstate
from .cleaner_checkpoint import truncate_checkpoint
from .cleaner_state import CleaningState
from .epochs import HighWatermarkFile, LeaderEpochCache
from .local_log import LocalLog
from .log_flush import LogFlusher
from .log_txn import LogTransactions
from .logtypes import RecoveryStats
from .producer_state import ProducerStateManager

__all__ = ["LogRetention"]


class _Log(Protocol):
    """What retention uses of its PartitionLog (log.py; not imported: it imports this module)."""

    log_start_offset: int
    high_watermark: int
    log_end_offset: int

    @property
    def dir(self) -> str: ...
    @property
    def config(self) -> Any: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def gaps_allowed(self) -> bool: ...
    @property
    def clock(self) -> Callable[[], int]: ...
    @property
    def leader_epoch_cache(self) -> LeaderEpochCache: ...
    @property
    def producer_state(self) -> ProducerStateManager: ...
    @property
    def recovery_stats(self) -> RecoveryStats: ...
    @property
    def _lock(self) -> AbstractContextManager[Any]: ...
    @property
    def _hw_file(self) -> HighWatermarkFile: ...
    @property
    def _closed(self) -> bool: ...
    @property
    def _local(self) -> LocalLog: ...
    @property
    def _cleaning(self) -> CleaningState: ...
    @property
    def _flusher(self) -> LogFlusher: ...
    @property
    def _txn(self) -> LogTransactions: ...
    def _check_writable(self) -> None: ...
    def _check_offsets(self) -> None: ...
    def _publish(self) -> None: ...


class LogRetention:
    """Truncation, DeleteRecords and retention of one PartitionLog (see the module docstring)."""

    def __init__(self, log: _Log) -> None:
        self._log = log

    def truncate_to(self, offset: int) -> int:
        """Remove everything at and above `offset` (batch granularity); returns the new log end offset.

        At or above the log end nothing is removed but the leader-epoch cache is still cut at the
        log end (Kafka's truncateTo): a replica that led an epoch without appending in it keeps
        an entry for it there, which a follower of the next leader must drop."""
        log = self._log
        log._check_writable()
        with log._lock:
            if offset >= log.log_end_offset or offset > log._local.segments[-1].base_offset:
                return self._truncate_locked(offset)     # nothing cut, or the active segment's bytes only
        # Below it a cleaning may be reading what goes (Kafka's LogManager.truncateTo): abort it,
        # wait for it to stop, truncate, then let cleaning resume (cleaner_state.py).
        with log._cleaning.paused_cleaning():
            with log._lock:
                return self._truncate_locked(offset)

    def _truncate_locked(self, offset: int) -> int:
        """truncate_to's work, with the log lock held (and cleaning paused below the active segment)."""
        log = self._log
        log._check_writable()
        if offset >= log.log_end_offset:
            if log.leader_epoch_cache.truncate_from_end(log.log_end_offset):
                log.leader_epoch_cache.flush()
            return log.log_end_offset
        # the segments go (all of them when only offsets below the log start would remain)
        # readers may hold mmaps of batches below any HW ever published: those are cut in a new
        # file, and the count in .highwatermark tells read-only opens to take the new files
        cut_mapped = max(offset, log.log_start_offset) < log._hw_file.highest
        log.log_end_offset = log._local.truncate_to(max(offset, log.log_start_offset), log.log_start_offset,
                                                    log._hw_file.highest)
        if cut_mapped:
            log._hw_file.count_cut()
        log.high_watermark = min(log.high_watermark, log.log_end_offset)
        log._flusher.truncated(log.log_end_offset)
        if log.leader_epoch_cache.truncate_from_end(log.log_end_offset):
            log.leader_epoch_cache.flush()
        # Kafka's truncateAndReload: snapshots above the new end go, the state is rebuilt.
        from .loader import load_producer_state
        load_producer_state(log, log.log_end_offset, log.recovery_stats, report_stale=False)
        log._publish()
        log._check_offsets()
        if log.gaps_allowed:
            truncate_checkpoint(log, log.log_end_offset)
        return log.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower behind its leader's log start (Kafka's truncateFullyAndStartAt): every
        segment, epoch and producer snapshot goes; the log restarts empty at `offset`."""
        log = self._log
        log._check_writable()
        with log._cleaning.paused_cleaning(), log._lock:   # as truncate_to below the active segment
            log._check_writable()
            log._local.truncate_fully_and_start_at(offset)
            log.log_start_offset = log.log_end_offset = log.high_watermark = offset
            log._flusher.restarted(offset)
            log.leader_epoch_cache.entries = []
            log.leader_epoch_cache.flush()
            pstate.delete_snapshots(log.dir, lambda _o: True)
            log.producer_state.clear()
            log._publish()  # HW, log start and LSO, like every other publication
            if log.gaps_allowed:
                truncate_checkpoint(log, offset)
            log._check_offsets()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (<= HW); returns it."""
        log = self._log
        log._check_writable()
        with log._lock:
            if offset > log.high_watermark or offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: high watermark is {log.high_watermark}")
            if offset > log.log_start_offset:
                log.log_start_offset = offset
                if log.leader_epoch_cache.truncate_from_start(offset):
                    log.leader_epoch_cache.flush()
                log._publish()
            self._delete_segments_locked(lambda seg, nxt, _total: nxt <= log.log_start_offset, "log start offset")
            log._check_offsets()
            return log.log_start_offset

    def maybe_apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole old segments by retention.ms / retention.bytes / log start; returns how many."""
        log = self._log
        if log.read_only or log._closed:
            return 0
        now = log.clock() if now_ms is None else now_ms
        cfg = log.config
        deleted = 0
        # Kafka: retention.ms / retention.bytes apply only when cleanup.policy includes delete.
        by_retention = "delete" in cfg["cleanup.policy"]
        with log._lock:
            rms = cfg["retention.ms"] if by_retention else -1
            if rms >= 0:
                def expired(seg, _nxt, _total):
                    ts = seg.max_timestamp
                    if ts < 0:
                        ts = int(os.path.getmtime(seg.log_path) * 1000)
                    return now - ts > rms
                deleted += self._delete_segments_locked(expired, "retention.ms")
            rbytes = cfg["retention.bytes"] if by_retention else -1
            if rbytes >= 0:
                state = {"diff": log._local.size - rbytes}

                def too_big(seg, _nxt, _total):
                    if state["diff"] - seg.size >= 0:
                        state["diff"] -= seg.size
                        return True
                    return False
                deleted += self._delete_segments_locked(too_big, "retention.bytes")
            deleted += self._delete_segments_locked(
                lambda seg, nxt, _t: nxt <= log.log_start_offset, "log start offset")
            log._check_offsets()
        self.maybe_delete_pending(now)
        return deleted

    def _delete_segments_locked(self, predicate, reason: str) -> int:
        """Delete leading non-active segments while predicate(seg, next_base, total) holds and next_base <= HW."""
        log = self._log
        local = log._local
        n = local.delete_leading(predicate, log.high_watermark,
                                 log.clock() + log.config["file.delete.delay.ms"])
        if n:
            new_start = local.segments[0].base_offset
            if new_start > log.log_start_offset:
                log.log_start_offset = new_start
                if log.leader_epoch_cache.truncate_from_start(new_start):
                    log.leader_epoch_cache.flush()
            log.high_watermark = max(log.high_watermark, log.log_start_offset)
            log._publish()
            log._txn.prune_snapshots()  # snapshots below the new first segment are useless
            if log.config["file.delete.delay.ms"] == 0:
                local.delete_pending(None)
        return n

    def maybe_delete_pending(self, now_ms: int | None = None) -> int:
        """Unlink `.deleted` segments whose file.delete.delay.ms has passed."""
        log = self._log
        with log._lock:
            return log._local.delete_pending(log.clock() if now_ms is None else now_ms)
