"""LogTransactions: a PartitionLog's producer-state part -- idempotence, aborted transactions, snapshots.

PartitionLog (log.py) holds one as ``_txn``, over its producer state
(producer_state.ProducerStateManager, also ``PartitionLog.producer_state``)
and its LocalLog.  It does what the append path consults or updates about
producers beside the state itself: the idempotence check of an append
(``check_idempotent``), the ``.txnindex`` entries of aborted transactions
(``index_aborted``; ``collect_aborted`` reads them back for read_committed
fetches, PartitionLog.aborted_transactions) and producer snapshots
(``<offset>.snapshot``: ``snapshot`` at each roll, ``write_snapshot`` at clean
shutdown, ``prune_snapshots`` after deletes).  The last stable offset and
its publication with the HW are PartitionLog's (they are about its
offsets).  Not thread-safe: every method runs with PartitionLog's ``_lock``
held (log.py's module docstring has the lock rule).
"""

from __future__ import annotations

import logging

from .. import _native
from ..errors import CorruptIndexError, OutOfOrderSequenceError
from . import producer_state as pstate
from .local_log import LocalLog
from .logtypes import AppendInfo
from .segment import LogSegment

__all__ = ["LogTransactions"]

_log = logging.getLogger(__package__ + ".log")   # the logger these messages had in log.py


class LogTransactions:
    """Idempotence checks, .txnindex entries and producer snapshots of one PartitionLog (module docstring)."""

    def __init__(self, directory: str, state: pstate.ProducerStateManager, local: LocalLog) -> None:
        self.dir = directory
        self.state = state
        self._local = local

    def check_idempotent(self, buf):
        """Check the idempotent batches of an append.

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
            dup = self.state.check(h.producer_id, h.producer_epoch, h.base_sequence,
                                   h.last_offset_delta, staged, h.is_transactional)
            if dup is not None:
                if len(headers) != 1:
                    raise OutOfOrderSequenceError(
                        f"producer {h.producer_id} repeated sequence {h.base_sequence} inside one append")
                return AppendInfo(dup.first_offset, dup.last_offset, -1, -1, -1, 0, 0, 0)
            staged[h.producer_id] = (h.producer_epoch, (h.base_sequence + h.last_offset_delta) % (1 << 31))
        return headers

    # -- aborted transactions -------------------------------------------------
    @staticmethod
    def index_aborted(seg: LogSegment, done) -> None:
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

    def collect_aborted(self, start_offset: int, upper_offset: int) -> list[tuple[int, int]]:
        """[(producer_id, first_offset)] of the aborted transactions overlapping [start_offset, upper_offset).

        Kafka's collectAbortedTransactions: the ``.txnindex`` of the segment
        holding `start_offset` and of the later ones, until an entry's
        lastStableOffset reaches `upper_offset`.  (The writer appends entries
        under the log's lock; the entries are in memory once read.)
        """
        out: list[tuple[int, int]] = []
        local = self._local
        for seg in local.segments[local.floor_index(start_offset):]:
            if local.read_only:
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

    # -- producer state snapshots -------------------------------------------
    def snapshot(self, offset: int) -> None:
        """Write ``<offset>.snapshot`` (state below `offset`) at a roll, prune old ones.

        A snapshot that cannot be written is only logged: the state is rebuilt from the log.
        """
        try:
            self.write_snapshot(offset)
        except OSError as e:
            _log.warning("could not write the producer snapshot of %s at %d: %s", self.dir, offset, e)

    def write_snapshot(self, offset: int) -> None:
        """Write ``<offset>.snapshot`` (state below `offset`) and prune old ones; OSError on a failure."""
        pstate.write_snapshot(self.dir, offset, self.state.snapshot_entries())
        self.prune_snapshots()

    def prune_snapshots(self) -> None:
        """Keep the latest KEEP_SNAPSHOTS snapshots; drop those below the first segment (log start)."""
        offs = pstate.list_snapshots(self.dir)
        keep = set(offs[-pstate.KEEP_SNAPSHOTS:])
        first = self._local.segments[0].base_offset
        pstate.delete_snapshots(self.dir, lambda o: o not in keep or o < first)
