"""FlushMixin: PartitionLog's durability -- fdatasync, group commit, flush policy.

Flush policy: Kafka's default leaves data in the page cache; ``flush.messages=N``
syncs when N offsets are unflushed (N=1: durable mode, group commit);
``flush.ms`` is applied by ``maybe_flush()`` (LogManager's periodic task).
As in Kafka, a roll schedules a flush of the segments before it; here
``maybe_flush()`` (the periodic task) performs it, moving the recovery point.

Owns ``_await_sync`` (what a durable append waits in), ``_sync_round`` (one
fdatasync round over the unsynced segments; moves ``recovery_point`` and, in
durable mode, the automatic high watermark), ``flush`` and ``maybe_flush``.
Its state (``_sync_cond``, ``_sync_in_progress``, ``_synced_offset``,
``sync_count``, ``_last_flush_ms``, ``_roll_flush_pending``) is set up by
PartitionLog.__init__; the lock rule, including the ``_sync_cond`` /
``_lock`` order, is in log.py's module docstring.
"""

from __future__ import annotations

from ..errors import KafkaStorageError

__all__ = ["FlushMixin"]


class FlushMixin:
    """fdatasync, group commit and the flush.messages / flush.ms policy of a PartitionLog (module docstring)."""

    def _await_sync(self, target: int) -> None:
        """Return once every byte below offset `target` is fdatasync'd (group commit)."""
        with self._sync_cond:
            while self._synced_offset < target:
                if not self._sync_in_progress:
                    self._sync_in_progress = True
                    break
                self._sync_cond.wait()
            else:
                return
        try:
            upto = self._sync_round()
        except BaseException:
            with self._sync_cond:
                self._sync_in_progress = False
                self._sync_cond.notify_all()
            raise
        with self._sync_cond:
            if upto > self._synced_offset:
                self._synced_offset = upto
            self._sync_in_progress = False
            self._sync_cond.notify_all()

    def _sync_round(self) -> int:
        """fdatasync every segment with unsynced bytes; returns the offset now covered.

        The snapshot is taken without the log lock, so a sync never waits
        behind a write in progress: the log end offset is read first, then
        the segment sizes, and append() grows a segment's size before it
        moves the log end offset, so the sizes read cover every byte below
        `upto` (reads of single attributes are atomic under the GIL).
        """
        upto = self.log_end_offset
        local = self._local
        work = local.unsynced()
        try:
            local.fdatasync(work)
        except OSError as e:
            with self._lock:
                self._failed = e
            raise KafkaStorageError(e.errno, f"fdatasync in {self.dir} failed: {e.strerror}") from e
        with self._lock:
            self.sync_count += 1
            upto = min(upto, self.log_end_offset)
            local.mark_synced(work, upto)
            self._maybe_advance_hw(upto)
            self._check_offsets()
        self._last_flush_ms = self.clock()
        return upto

    def flush(self, up_to: int | None = None) -> int:
        """fdatasync everything below `up_to` (default: the log end offset); returns the recovery point."""
        self._check_writable()
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if target > self.recovery_point:
            self._await_sync(target)
        return self.recovery_point

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """flush.ms policy (called periodically): flush if the last flush is older than flush.ms."""
        if self.read_only or self._closed:
            return False
        now = self.clock() if now_ms is None else now_ms
        if self.log_end_offset > self.recovery_point and now - self._last_flush_ms >= self.config["flush.ms"]:
            self.flush()
            return True
        if self._roll_flush_pending > self.recovery_point:
            self.flush(self._roll_flush_pending)  # the segments before the last roll
            return True
        return False
