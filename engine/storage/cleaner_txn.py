"""Transactions in log compaction (Kafka's CleanedTransactionMetadata and the cleaner's
batch-retention rules for transactional data), used by cleaner_copy.py and cleaner_pass.py.

One decision per batch (never per record); the records of kept batches are
filtered natively (csrc/compact.pyx).  Rules, as Kafka's LogCleaner:

* The aborted transactions overlapping the cleaned range come from the
  ``.txnindex`` files (``aborted_entries``).  Before a batch of a producer, the
  entries whose first offset is at or below the batch's last offset make that
  producer "aborted"; its transactional batches are then *aborted data*:
  left out of the offset map (their keys must not hide older committed
  records) and removed -- kept as an empty batch (header only) when it is the
  producer's last batch in the log (its last sequence) or the cleaned
  segment's last batch.
* An ABORT marker of a producer whose aborted batches were seen in this pass
  is kept, and its entry goes into the cleaned segment's ``.txnindex``; a
  COMMIT marker is kept when batches of its transaction were seen in this
  pass.  Otherwise the marker's transaction has no data left: the marker is
  kept with a delete horizon (KIP-534 attribute 0x40, baseTimestamp =
  now + ``delete.retention.ms``) and removed by the first cleaning after it --
  unless it is its producer's last entry in the log (kept, empty once
  discardable, for the epoch fencing).
* The cleanable range ends at the last stable offset (open transactions are
  never cleaned; cleaner_plan.py).
"""

from __future__ import annotations

from collections import deque

from .. import _native
from .txnindex import AbortedTxn

__all__ = ["COMPACT", "KEEP", "CleanedTxnMetadata", "aborted_entries", "in_range", "skip_aborted",
           "transactional_batch"]


def aborted_entries(log) -> list[AbortedTxn]:
    """Every .txnindex entry of the log's segments, in marker order (caller holds log._lock)."""
    from ..errors import CorruptIndexError

    out: list[AbortedTxn] = []
    for seg in log._local.segments:
        try:
            out.extend(seg.txn_index.entries)
        except (CorruptIndexError, OSError):
            continue
    return out


def in_range(entries, start: int, upper: int) -> list[AbortedTxn]:
    return [e for e in entries if e.last_offset >= start and e.first_offset < upper]


class CleanedTxnMetadata:
    """Transaction state along one pass over a range (Kafka's CleanedTransactionMetadata)."""

    __slots__ = ("_pending", "_aborted", "_committed", "cleaned_index")

    def __init__(self, aborted) -> None:
        self._pending = deque(sorted(aborted, key=lambda e: e.first_offset))
        self._aborted: dict[int, list] = {}     # producer id -> [AbortedTxn, last batch offset seen]
        self._committed: set[int] = set()       # producers with committed-txn batches seen
        self.cleaned_index: list[AbortedTxn] = []

    def _consume(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            a = pending.popleft()
            self._aborted.setdefault(a.producer_id, [a, None])

    def on_batch_read(self, h) -> bool:
        """A data batch: True when it belongs to an aborted transaction (discard it)."""
        if h.producer_id < 0:
            return False
        self._consume(h.last_offset)
        if h.is_transactional:
            m = self._aborted.get(h.producer_id)
            if m is not None:
                m[1] = h.last_offset
                return True
            self._committed.add(h.producer_id)
        return False

    def on_control_batch_read(self, h, data, rel: int) -> bool:
        """A control batch: True when no data of its transaction was seen (it may go)."""
        self._consume(h.last_offset)
        if h.records_count == 0:
            return True                          # already emptied by an earlier cleaning
        ctype, _coord = _native.read_control_record(data, rel)
        pid = h.producer_id
        if ctype == 0:
            m = self._aborted.pop(pid, None)
            if m is not None and m[1] is not None:
                self.cleaned_index.append(m[0])
                return False
            return True
        if ctype == 1:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False


def skip_aborted(meta: CleanedTxnMetadata, headers, data, chunk_pos: int):
    """Base offsets of the aborted batches among `headers` (for the offset map), or None."""
    skip = None
    for h in headers:
        if h.producer_id < 0:
            continue
        if h.is_control:
            meta.on_control_batch_read(h, data, h.position - chunk_pos)
        elif meta.on_batch_read(h):
            if skip is None:
                skip = set()
            skip.add(h.base_offset)
    return skip


KEEP = object()      # keep the batch byte for byte
COMPACT = object()   # not a transaction matter: compact its records as usual


def transactional_batch(h, data, rel: int, txn: CleanedTxnMetadata, plan, now: int,
                        retention: int, group_end: bool, stats):
    """A transactional data batch or a marker: KEEP, COMPACT (committed data), None (drop) or new bytes.

    Kafka's rules (cleaner_txn.py): aborted data goes, markers go after their
    delete horizon once no data of theirs is left; a producer's last entry and
    the cleaned segment's last batch stay (emptied when discardable).
    """
    pid = h.producer_id
    if h.is_control:
        discardable = txn.on_control_batch_read(h, data, rel)
        has_horizon = h.has_delete_horizon
        epoch, last_data = plan.producers.get(pid, (None, None))
        last_of_producer = epoch == h.producer_epoch and last_data is not None and last_data < h.base_offset
        if discardable and has_horizon and now >= h.base_timestamp:
            if last_of_producer or group_end:
                if h.records_count == 0:
                    return KEEP
                stats.markers_removed += 1
                return _native.empty_batch(data, rel)
            stats.markers_removed += 1
            return None
        if discardable and not has_horizon and h.records_count > 0:
            out = _native.with_delete_horizon(data, rel, now + retention)
            return KEEP if out is None else out
        return KEEP
    if not txn.on_batch_read(h):
        return COMPACT
    stats.aborted_batches_removed += 1
    stats.records_removed += h.records_count
    if plan.last_offsets.get(pid) == h.last_offset or group_end:
        return KEEP if h.records_count == 0 else _native.empty_batch(data, rel)
    return None
