"""ProducerStateManager: per-partition state of idempotent producers.

For each producer id it keeps the current epoch and the last five batches
appended for it (first/last sequence and first/last offset), as Kafka does,
so that a retried batch is recognised and answered with its original offsets
instead of being written twice.

Rules for a batch with producerId >= 0 (checked before anything is written):

* baseSequence < 0 -> InvalidRecordError (INVALID_RECORD, 87).
* epoch older than the producer's -> InvalidProducerEpochError (47).
* epoch newer -> the sequence must restart at 0, else OutOfOrderSequenceError (45).
* same epoch: a batch equal to one of the last five (same first and last
  sequence) is a duplicate -> its original offsets; otherwise its first
  sequence must be the last one + 1 (wrapping at INT32_MAX to 0), else 45.
* an unknown producer (none seen since this open, or its state was dropped)
  is accepted at any sequence, as Kafka accepts one whose state expired.

Sequences are per batch: lastSequence = baseSequence + lastOffsetDelta (mod 2^31).

Not persisted yet: Kafka writes `<offset>.snapshot` files and rebuilds the rest
from the log; here the state starts empty at every open, so a retry that
spans a broker restart is not recognised as a duplicate.

Concurrency: owned by one PartitionLog and used under its lock.
"""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

from ..errors import InvalidProducerEpochError, InvalidRecordError, OutOfOrderSequenceError

__all__ = ["BatchMetadata", "ProducerStateManager"]

_SEQ_MOD = 1 << 31
_KEEP_BATCHES = 5


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


class _Entry:
    __slots__ = ("epoch", "batches")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=_KEEP_BATCHES)


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, _Entry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def check(self, producer_id: int, epoch: int, base_seq: int, last_delta: int,
              staged: dict[int, tuple[int, int]] | None = None) -> BatchMetadata | None:
        """Validate one batch; return the original batch if it is a duplicate, else None.

        `staged` carries (epoch, last sequence) of batches accepted earlier in
        the same append, so a multi-batch append is checked in order.
        """
        if base_seq < 0:
            raise InvalidRecordError(f"idempotent batch of producer {producer_id} has sequence {base_seq}")
        last_seq = (base_seq + last_delta) % _SEQ_MOD
        entry = self._producers.get(producer_id)
        if staged and producer_id in staged:
            cur_epoch, cur_last = staged[producer_id]
        elif entry is not None and entry.batches:
            cur_epoch, cur_last = entry.epoch, entry.batches[-1].last_seq
        elif entry is not None:
            cur_epoch, cur_last = entry.epoch, None
        else:
            return None  # unknown producer: accepted at any sequence
        if epoch < cur_epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id} epoch {epoch} is older than its current epoch {cur_epoch}")
        if epoch > cur_epoch:
            if base_seq != 0:
                raise OutOfOrderSequenceError(
                    f"producer {producer_id} started epoch {epoch} at sequence {base_seq}, not 0")
            return None
        if entry is not None and not (staged and producer_id in staged):
            for b in entry.batches:
                if b.first_seq == base_seq and b.last_seq == last_seq:
                    return b
        if cur_last is not None and base_seq != (cur_last + 1) % _SEQ_MOD:
            raise OutOfOrderSequenceError(
                f"producer {producer_id} sent sequence {base_seq}; expected {(cur_last + 1) % _SEQ_MOD}")
        return None

    def update(self, producer_id: int, epoch: int, base_seq: int, last_delta: int,
               first_offset: int, last_offset: int) -> None:
        """Record an appended batch."""
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self._producers[producer_id] = _Entry(epoch)
        entry.batches.append(BatchMetadata(base_seq, (base_seq + last_delta) % _SEQ_MOD,
                                           first_offset, last_offset))

    def last_offsets(self) -> dict[int, int]:
        """producer id -> last offset of its last batch (the cleaner keeps that batch, Kafka's rule)."""
        return {pid: e.batches[-1].last_offset for pid, e in self._producers.items() if e.batches}

    def truncate_from(self, offset: int) -> None:
        """Forget batches at or above `offset` (log truncation); producers left empty stay known."""
        for entry in self._producers.values():
            while entry.batches and entry.batches[-1].last_offset >= offset:
                entry.batches.pop()

    def clear(self) -> None:
        self._producers.clear()
