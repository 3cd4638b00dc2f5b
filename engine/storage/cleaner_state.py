"""CleaningState: whether a partition is being cleaned, and the pause a truncation puts on it.

Kafka's LogCleaningState (LogCleanerManager): a cleaning is *in progress*
(``begin`` .. ``done``, cleaner_pass.py's ``clean_log``); a truncation that
reaches below the active segment (log_retention.py) and a partition's
deletion (manager.py) call ``abort_and_pause``: a cleaning in progress is
marked *aborted*, stops at its next ``check`` (between chunks of its reads,
and under the log lock just before a swap) without swapping or writing the
cleaner checkpoint, and ``abort_and_pause`` returns only once it has
stopped; until the matching ``resume`` the partition is *paused* (a count:
pauses nest) and no cleaning of it starts.  So a truncation never runs while
a cleaning holds segments, offsets or a checkpoint it took from the bytes
the truncation removes (the cleaner's own check before a swap -- the same
segment objects, the same sizes -- cannot see a segment cut and grown back
to the same size).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CleaningState", "LogCleaningAbortedError"]


class LogCleaningAbortedError(Exception):
    """Raised by ``check`` in the cleaning thread: stop now (Kafka's LogCleaningAbortedException).

    Never leaves ``clean_log``: the cleaning returns its stats with reason "aborted"."""


class CleaningState:
    """One partition's cleaning state (see the module docstring); thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._in_progress = False
        self._aborted = False
        self._paused = 0

    @property
    def state(self) -> str:
        """"idle", "in_progress", "aborted" (in progress, asked to stop) or "paused"."""
        with self._cond:
            if self._in_progress:
                return "aborted" if self._aborted else "in_progress"
            return "paused" if self._paused else "idle"

    @property
    def paused(self) -> bool:
        return self._paused > 0

    # -- the cleaning thread -------------------------------------------------
    def begin(self) -> bool:
        """A cleaning starts (False, and nothing starts, while the partition is paused)."""
        with self._cond:
            if self._paused:
                return False
            assert not self._in_progress, "one cleaning of a log at a time (PartitionLog._clean_lock)"
            self._in_progress = True
            return True

    def check(self) -> None:
        """LogCleaningAbortedError when an abort was asked for."""
        if self._aborted:
            raise LogCleaningAbortedError("cleaning aborted")

    def done(self) -> None:
        """The cleaning ended (finished, failed or aborted); wakes the ``abort_and_pause`` callers."""
        with self._cond:
            self._in_progress = False
            self._aborted = False
            self._cond.notify_all()

    # -- truncation, deletion ------------------------------------------------
    def abort_and_pause(self) -> None:
        """Pause the partition's cleaning; abort one in progress and wait until it has stopped."""
        with self._cond:
            self._paused += 1
            if self._in_progress:
                self._aborted = True
            while self._in_progress:
                self._cond.wait()

    def resume(self) -> None:
        """Undo one ``abort_and_pause``."""
        with self._cond:
            assert self._paused > 0, "resume without a pause"
            self._paused -= 1

    @contextmanager
    def paused_cleaning(self) -> Iterator[None]:
        """``abort_and_pause`` .. ``resume`` around a block (Kafka's LogManager.truncateTo)."""
        self.abort_and_pause()
        try:
            yield
        finally:
            self.resume()
