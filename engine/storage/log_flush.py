"""LogFlusher: a PartitionLog's durability part -- group commit and the flush policy.

Flush policy: Kafka's default leaves data in the page cache; ``flush.messages=N``
syncs when N offsets are unflushed (N=1: durable mode, group commit);
``flush.ms`` is applied by ``maybe_flush()`` (LogManager's periodic task).
As in Kafka, a roll schedules a flush of the segments before it (``rolled``);
here ``maybe_flush()`` (the periodic task) performs it, moving the recovery point.

PartitionLog (log.py) holds one as ``_flusher``: a durable append waits in
``await_sync``; ``sync_round`` is one fdatasync round over the unsynced
segments (LocalLog's ``unsynced`` / ``fdatasync`` / ``mark_synced``), moving the
recovery point and, in durable mode, the automatic high watermark;
``flush`` and ``maybe_flush`` are PartitionLog's methods of those names; a
truncation lowers what counts as synced (``truncated``, ``restarted``).
Its state: ``cond`` (the group-commit Condition), whether a round is in
progress, the offset below which everything is synced, ``sync_count``,
``last_flush_ms`` and ``roll_flush_pending``.  The lock rule, with the
``cond`` / PartitionLog ``_lock`` order, is in log.py's module docstring.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..errors import KafkaStorageError
from .local_log import LocalLog

__all__ = ["LogFlusher"]


class _Log(Protocol):
    """What the flusher uses of its PartitionLog (log.py; not imported: it imports this module)."""

    log_end_offset: int
    _failed: BaseException | None

    @property
    def dir(self) -> str: ...
    @property
    def config(self) -> Any: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def clock(self) -> Callable[[], int]: ...
    @property
    def _lock(self) -> AbstractContextManager[Any]: ...
    @property
    def _local(self) -> LocalLog: ...
    @property
    def _closed(self) -> bool: ...
    def _check_writable(self) -> None: ...
    def _check_offsets(self) -> None: ...
    def _maybe_advance_hw(self, offset: int) -> None: ...


class LogFlusher:
    """fdatasync, group commit and the flush.messages / flush.ms policy of one PartitionLog (module docstring)."""

    def __init__(self, log: _Log, synced_offset: int, now_ms: int) -> None:
        self._log = log
        self.cond = threading.Condition(threading.Lock())
        self._in_progress = False
        self._synced_offset = synced_offset
        self.sync_count = 0           # fdatasync rounds (group commit shares one round)
        self.last_flush_ms = now_ms
        self.roll_flush_pending = 0   # base offset of the newest rolled segment not yet flushed below

    def await_sync(self, target: int) -> None:
        """Return once every byte below offset `target` is fdatasync'd (group commit).

        The first waiter becomes the sync leader and runs one round; the others
        wait on ``cond`` and are woken when a round covers their bytes.
        """
        cond = self.cond
        with cond:
            while self._synced_offset < target:
                if not self._in_progress:
                    self._in_progress = True
                    break
                cond.wait()
            else:
                return
        try:
            upto = self.sync_round()
        except BaseException:
            with cond:
                self._in_progress = False
                cond.notify_all()
            raise
        with cond:
            if upto > self._synced_offset:
                self._synced_offset = upto
            self._in_progress = False
            cond.notify_all()

    def sync_round(self) -> int:
        """fdatasync every segment with unsynced bytes; returns the offset now covered.

        The snapshot is taken without the log lock, so a sync never waits
        behind a write in progress: the log end offset is read first, then
        the segment sizes, and append() grows a segment's size before it
        moves the log end offset, so the sizes read cover every byte below
        `upto` (reads of single attributes are atomic under the GIL).
        """
        log = self._log
        local = log._local
        upto = log.log_end_offset
        work = local.unsynced()
        try:
            local.fdatasync(work)
        except OSError as e:
            with log._lock:
                log._failed = e
            raise KafkaStorageError(e.errno, f"fdatasync in {log.dir} failed: {e.strerror}") from e
        with log._lock:
            self.sync_count += 1
            upto = min(upto, log.log_end_offset)
            local.mark_synced(work, upto)
            log._maybe_advance_hw(upto)
            log._check_offsets()
        self.last_flush_ms = log.clock()
        return upto

    def flush(self, up_to: int | None = None) -> int:
        """fdatasync everything below `up_to` (default: the log end offset); returns the recovery point."""
        log = self._log
        log._check_writable()
        target = log.log_end_offset if up_to is None else min(up_to, log.log_end_offset)
        if target > log._local.recovery_point:
            self.await_sync(target)
        return log._local.recovery_point

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """flush.ms policy (called periodically): flush if the last flush is older than flush.ms."""
        log = self._log
        if log.read_only or log._closed:
            return False
        now = log.clock() if now_ms is None else now_ms
        recovery_point = log._local.recovery_point
        if log.log_end_offset > recovery_point and now - self.last_flush_ms >= log.config["flush.ms"]:
            self.flush()
            return True
        if self.roll_flush_pending > recovery_point:
            self.flush(self.roll_flush_pending)  # the segments before the last roll
            return True
        return False

    def rolled(self, new_base: int) -> None:
        """A roll at `new_base`: the segments below it are flushed by the next ``maybe_flush``
        (Kafka flushes a rolled segment in the background).  Called under the log's lock."""
        self.roll_flush_pending = max(self.roll_flush_pending, new_base)

    def truncated(self, end: int) -> None:
        """The log was cut at `end`: nothing at or above it counts as synced."""
        with self.cond:
            self._synced_offset = min(self._synced_offset, end)

    def restarted(self, offset: int) -> None:
        """The log restarted empty at `offset` (truncate_fully_and_start_at): synced up to it."""
        with self.cond:
            self._synced_offset = offset
