"""ProducerStateMixin: PartitionLog's producer-state and transaction bookkeeping.

Owns what log.py's append path consults or updates about producers (the
state itself is producer_state.ProducerStateManager, ``self.producer_state``):
the idempotence check of an append (``_check_idempotent``), the ``.txnindex``
entries of aborted transactions (``_index_aborted_locked``, read back by
``aborted_transactions`` for read_committed fetches), the last stable offset
(``last_stable_offset``) and its publication with the HW and log start in
``.highwatermark`` (``_publish``, the only writer of that file), producer
snapshots (``<offset>.snapshot``: ``_snapshot_locked`` at each roll,
``write_producer_snapshot`` at clean shutdown, ``_prune_snapshots_locked``)
and DescribeProducers / producer expiry.  Every method runs on a
PartitionLog under its lock rule (log.py's module docstring); the
``*_locked`` helpers and ``_publish`` expect ``self._lock`` held.
No state of its own.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .. import _native
from ..errors import CorruptIndexError, OutOfOrderSequenceError
from . import producer_state as pstate
from .logtypes import AppendInfo

if TYPE_CHECKING:
    from .segment import LogSegment

__all__ = ["ProducerStateMixin"]

_log = logging.getLogger(__package__ + ".log")   # the logger these messages had in log.py


class ProducerStateMixin:
    """Producer state, transactions, LSO publication and snapshots of a PartitionLog (module docstring)."""

    def _publish(self) -> None:
        """Publish HW, log start and LSO in .highwatermark (caller holds _lock)."""
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

    def aborted_transactions(self, start_offset: int, upper_offset: int) -> list[tuple[int, int]]:
        """[(producer_id, first_offset)] of the aborted transactions overlapping [start_offset, upper_offset).

        Kafka's collectAbortedTransactions: the ``.txnindex`` of the segment
        holding `start_offset` and of the later ones, until an entry's
        lastStableOffset reaches `upper_offset`.  What a read_committed Fetch
        answers with, and what the scanner drops.
        """
        out: list[tuple[int, int]] = []
        with self._lock:   # the writer appends entries under it; the entries are in memory once read
            local = self._local
            for seg in local.segments[local.floor_index(start_offset):]:
                if self.read_only:
                    seg.txn_index.refresh()
                try:
                    found, complete = seg.txn_index.collect(start_offset, upper_offset)
                except (CorruptIndexError, OSError) as e:
                    _log.warning("%s", e)
                    found, complete = [], False
                out.extend((a.producer_id, a.first_offset) for a in found)
                if complete:
                    break
        return out

    def _index_aborted_locked(self, seg: LogSegment, done) -> None:
        """Add the aborted ones of `done` (CompletedTxn) to `seg`'s .txnindex."""
        from .txnindex import AbortedTxn
        for c in done:
            if c.aborted:
                try:
                    seg.txn_index.append(AbortedTxn(c.producer_id, c.first_offset, c.last_offset,
                                                    c.last_stable_offset))
                except OSError as e:
                    # the marker is in the log: a later recovery rebuilds the index from it
                    _log.error("could not write %s: %s", seg.txn_index.path, e)

    def _check_idempotent(self, buf):
        """Check the idempotent batches of an append (caller holds the lock).

        Returns the batch headers to record after the write, or an AppendInfo
        with the original offsets when the append is a retry of one batch
        already in the log.  Raises OutOfOrderSequenceError,
        InvalidProducerEpochError or InvalidRecordError (ProducerStateManager).
        """
        headers, _end = _native.list_batches(buf, 0, -1, False)
        staged: dict[int, tuple[int, int]] = {}
        for h in headers:
            if h.producer_id < 0:
                continue
            dup = self.producer_state.check(h.producer_id, h.producer_epoch, h.base_sequence,
                                            h.last_offset_delta, staged, h.is_transactional)
            if dup is not None:
                if len(headers) != 1:
                    raise OutOfOrderSequenceError(
                        f"producer {h.producer_id} repeated sequence {h.base_sequence} inside one append")
                return AppendInfo(dup.first_offset, dup.last_offset, -1, -1, -1, 0, 0, 0)
            staged[h.producer_id] = (h.producer_epoch, (h.base_sequence + h.last_offset_delta) % (1 << 31))
        return headers

    # -- producer state snapshots -------------------------------------------
    def _snapshot_locked(self, offset: int) -> None:
        """Write ``<offset>.snapshot`` (state below `offset`), prune old ones (caller holds _lock).

        A snapshot that cannot be written is only logged: the state is rebuilt from the log.
        """
        try:
            pstate.write_snapshot(self.dir, offset, self.producer_state.snapshot_entries())
            self._prune_snapshots_locked()
        except OSError as e:
            _log.warning("could not write the producer snapshot of %s at %d: %s", self.dir, offset, e)

    def _prune_snapshots_locked(self) -> None:
        """Keep the latest KEEP_SNAPSHOTS snapshots; drop those below the first segment (log start)."""
        offs = pstate.list_snapshots(self.dir)
        keep = set(offs[-pstate.KEEP_SNAPSHOTS:])
        first = self._local.segments[0].base_offset
        pstate.delete_snapshots(self.dir, lambda o: o not in keep or o < first)

    def write_producer_snapshot(self) -> None:
        """Snapshot the producer state at the log end offset (clean shutdown)."""
        self._check_writable()
        with self._lock:
            pstate.write_snapshot(self.dir, self.log_end_offset, self.producer_state.snapshot_entries())
            self._prune_snapshots_locked()

    def active_producers(self) -> list:
        """The producers this partition knows (producer_state.SnapshotEntry each), for DescribeProducers."""
        with self._lock:
            return self.producer_state.active_producers()

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> list[int]:
        """producer.id.expiration.ms: forget producers idle that long; returns their ids."""
        with self._lock:
            return self.producer_state.remove_expired(now_ms, expiration_ms)
