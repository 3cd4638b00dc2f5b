"""RetentionMixin: the parts of PartitionLog (log.py) that remove data.

Owns truncation (``truncate_to``: a follower or recovery cutting the log end;
``truncate_fully_and_start_at``: a follower behind its leader's log start),
DeleteRecords (``delete_records_before``), retention (``retention.ms`` /
``retention.bytes`` / log start, ``maybe_apply_retention``) and the delayed
unlink of ``.deleted`` segments (``file.delete.delay.ms``).  Every method runs
on a PartitionLog and follows its lock rule (log.py's module docstring): the
``*_locked`` helpers expect ``self._lock`` held.  No state of its own.
"""

from __future__ import annotations

import os

from ..errors import OffsetOutOfRangeError
from . import producer_state as pstate
from .cleaner_checkpoint import truncate_checkpoint

__all__ = ["RetentionMixin"]


class RetentionMixin:
    """Truncation, DeleteRecords and retention of a PartitionLog (see the module docstring)."""

    def truncate_to(self, offset: int) -> int:
        """Remove everything at and above `offset` (batch granularity); returns the new log end offset.

        At or above the log end nothing is removed but the leader-epoch cache is still cut at the
        log end (Kafka's truncateTo): a replica that led an epoch without appending in it keeps
        an entry for it there, which a follower of the next leader must drop."""
        self._check_writable()
        with self._lock:
            if offset >= self.log_end_offset:
                if self.leader_epoch_cache.truncate_from_end(self.log_end_offset):
                    self._flush_epoch_cache()
                return self.log_end_offset
            # the segments go (all of them when only offsets below the log start would remain)
            self.log_end_offset = self._local.truncate_to(max(offset, self.log_start_offset),
                                                          self.log_start_offset)
            self.high_watermark = min(self.high_watermark, self.log_end_offset)
            self._flusher.truncated(self.log_end_offset)
            if self.leader_epoch_cache.truncate_from_end(self.log_end_offset):
                self._flush_epoch_cache()
            # Kafka's truncateAndReload: snapshots above the new end go, the state is rebuilt.
            from .loader import load_producer_state
            load_producer_state(self, self.log_end_offset, self.recovery_stats, report_stale=False)
            self._publish()
            self._check_offsets()
            if self.gaps_allowed:
                truncate_checkpoint(self, self.log_end_offset)
            return self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower behind its leader's log start (Kafka's truncateFullyAndStartAt): every
        segment, epoch and producer snapshot goes; the log restarts empty at `offset`."""
        self._check_writable()
        with self._lock:
            self._local.truncate_fully_and_start_at(offset)
            self.log_start_offset = self.log_end_offset = self.high_watermark = offset
            self._flusher.restarted(offset)
            self.leader_epoch_cache.entries = []
            self._flush_epoch_cache()
            pstate.delete_snapshots(self.dir, lambda _o: True)
            self.producer_state.clear()
            self._publish()  # HW, log start and LSO, like every other publication
            if self.gaps_allowed:
                truncate_checkpoint(self, offset)
            self._check_offsets()

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (<= HW); returns it."""
        self._check_writable()
        with self._lock:
            if offset > self.high_watermark or offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: high watermark is {self.high_watermark}")
            if offset > self.log_start_offset:
                self.log_start_offset = offset
                if self.leader_epoch_cache.truncate_from_start(offset):
                    self._flush_epoch_cache()
                self._publish()
            self._delete_segments_locked(lambda seg, nxt, _total: nxt <= self.log_start_offset, "log start offset")
            self._check_offsets()
            return self.log_start_offset

    def maybe_apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole old segments by retention.ms / retention.bytes / log start; returns how many."""
        if self.read_only or self._closed:
            return 0
        now = self.clock() if now_ms is None else now_ms
        cfg = self.config
        deleted = 0
        # Kafka: retention.ms / retention.bytes apply only when cleanup.policy includes delete.
        by_retention = "delete" in cfg["cleanup.policy"]
        with self._lock:
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
                state = {"diff": self._local.size - rbytes}

                def too_big(seg, _nxt, _total):
                    if state["diff"] - seg.size >= 0:
                        state["diff"] -= seg.size
                        return True
                    return False
                deleted += self._delete_segments_locked(too_big, "retention.bytes")
            deleted += self._delete_segments_locked(
                lambda seg, nxt, _t: nxt <= self.log_start_offset, "log start offset")
            self._check_offsets()
        self.maybe_delete_pending(now)
        return deleted

    def _delete_segments_locked(self, predicate, reason: str) -> int:
        """Delete leading non-active segments while predicate(seg, next_base, total) holds and next_base <= HW."""
        local = self._local
        n = local.delete_leading(predicate, self.high_watermark,
                                 self.clock() + self.config["file.delete.delay.ms"])
        if n:
            new_start = local.segments[0].base_offset
            if new_start > self.log_start_offset:
                self.log_start_offset = new_start
                if self.leader_epoch_cache.truncate_from_start(new_start):
                    self._flush_epoch_cache()
            self.high_watermark = max(self.high_watermark, self.log_start_offset)
            self._publish()
            self._txn.prune_snapshots()  # snapshots below the new first segment are useless
            if self.config["file.delete.delay.ms"] == 0:
                local.delete_pending(None)
        return n

    def maybe_delete_pending(self, now_ms: int | None = None) -> int:
        """Unlink `.deleted` segments whose file.delete.delay.ms has passed."""
        with self._lock:
            return self._local.delete_pending(self.clock() if now_ms is None else now_ms)
