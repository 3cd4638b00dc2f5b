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

Persistence (Kafka's ProducerStateManager): ``<offset>.snapshot`` files in the
partition directory, named by the offset they are taken at (20 digits), in
Kafka's own format (storage ProducerSnapshot v1, all big-endian)::

    int16  version = 1
    uint32 crc     CRC-32C of every byte after this field
    int32  count
    count x { int64 producerId, int16 epoch, int32 lastSequence, int64 lastOffset,
              int32 offsetDelta (lastSequence - firstSequence of the last batch),
              int64 timestamp (max timestamp of the last batch),
              int32 coordinatorEpoch, int64 currentTxnFirstOffset (-1: no transaction) }

Kafka writes one entry per producer (its last batch).  We write one entry per
retained batch (up to five per producer, oldest first, consecutive): Kafka's
reader keeps the last entry of a producer id, so Kafka loads the same state
from our file, while we restore all five and so still recognise a retry of
any of a producer's last five batches after a clean restart (a producer has
up to five requests in flight).  The batches above the snapshot's offset are
replayed from the log's batch headers on open (loader.load_producer_state).  A file
with a wrong version, a CRC mismatch or a size that does not match its count
raises SnapshotError: it is never trusted (reported, deleted, rebuilt).
Snapshots are written atomically (temp + fsync + rename + fsync of the dir).

Transactions (Kafka's ProducerStateManager): a transactional batch (attribute
0x10) from a producer with no open transaction opens one at its base offset
(``currentTxnFirstOffset``, persisted in the snapshot); a COMMIT or ABORT
marker (``complete_txn``; a control batch on replay) closes it.  A marker
with an epoch older than the producer's is refused (InvalidProducerEpochError,
INVALID_PRODUCER_EPOCH, as Kafka's checkProducerEpoch for transaction version
< 2), one with an older coordinator epoch too (TRANSACTION_COORDINATOR_FENCED).
A completed transaction stays "unstable" until the high watermark passes its
marker (Kafka's unreplicatedTxns).  ``first_unstable_offset(hw)`` is the
lowest first offset of an open or unreplicated transaction; the partition's
last stable offset is min(that, HW).

Expiry: ``remove_expired`` drops producers whose last timestamp is older than
``producer.id.expiration.ms``, never one with an open transaction.

Concurrency: owned by one PartitionLog and used under its lock.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from typing import NamedTuple

from .. import _native
from ..errors import ErrorCode, InvalidProducerEpochError, InvalidRecordError, OutOfOrderSequenceError, api_error
from . import checkpoint, files

__all__ = ["BatchMetadata", "CompletedTxn", "ProducerStateManager", "SnapshotEntry", "SnapshotError",
           "delete_snapshots", "list_snapshots", "read_snapshot", "snapshot_path", "write_snapshot"]

_SEQ_MOD = 1 << 31
_KEEP_BATCHES = 5
SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")        # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")   # see the module docstring
KEEP_SNAPSHOTS = 2                     # the latest two are kept (Kafka keeps the recent ones)


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


class CompletedTxn(NamedTuple):
    """A transaction a marker ended: [first_offset, last_offset = the marker's offset]."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool
    last_stable_offset: int   # the LSO right after the marker (txnindex field)


class SnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


class SnapshotError(ValueError):
    """A producer snapshot is truncated, of an unknown version or fails its CRC."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"invalid producer snapshot {path}: {reason}")


class _Entry:
    __slots__ = ("epoch", "batches", "last_timestamp", "coordinator_epoch", "current_txn_first_offset")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=_KEEP_BATCHES)
        self.last_timestamp = -1
        self.coordinator_epoch = -1
        self.current_txn_first_offset = -1   # first offset of the open transaction, -1: none

    def bumped(self, epoch: int) -> _Entry:
        """This producer at a newer epoch: batches forgotten, the open transaction kept (Kafka)."""
        e = _Entry(epoch)
        e.last_timestamp = self.last_timestamp
        e.coordinator_epoch = self.coordinator_epoch
        e.current_txn_first_offset = self.current_txn_first_offset
        return e


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, _Entry] = {}
        self._ongoing: dict[int, int] = {}                 # producer id -> first offset of its open txn
        self._unreplicated: deque[tuple[int, int]] = deque()  # (marker offset, first offset), marker order

    def __len__(self) -> int:
        return len(self._producers)

    def check(self, producer_id: int, epoch: int, base_seq: int, last_delta: int,
              staged: dict[int, tuple[int, int]] | None = None,
              transactional: bool = False) -> BatchMetadata | None:
        """Validate one batch; return the original batch if it is a duplicate, else None.

        `staged` carries (epoch, last sequence) of batches accepted earlier in
        the same append, so a multi-batch append is checked in order.  A
        non-transactional batch from a producer with an open transaction is
        INVALID_TXN_STATE (48), as Kafka's ProducerAppendInfo.
        """
        if base_seq < 0:
            raise InvalidRecordError(f"idempotent batch of producer {producer_id} has sequence {base_seq}")
        last_seq = (base_seq + last_delta) % _SEQ_MOD
        entry = self._producers.get(producer_id)
        if not transactional and entry is not None and entry.current_txn_first_offset >= 0:
            raise api_error(ErrorCode.INVALID_TXN_STATE,
                            f"expected a transactional write from producer {producer_id}: its "
                            f"transaction is open since offset {entry.current_txn_first_offset}")
        if staged and producer_id in staged:
            cur_epoch, cur_last = staged[producer_id]
        elif entry is not None and entry.batches:
            cur_epoch, cur_last = entry.epoch, entry.batches[-1].last_seq
        elif entry is not None:
            cur_epoch, cur_last = entry.epoch, None
        else:
            return None  # unknown producer: accepted at any sequence (Kafka 4.0 checkSequence)
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
               first_offset: int, last_offset: int, timestamp: int = -1,
               transactional: bool = False) -> None:
        """Record an appended batch (`timestamp`: its max timestamp).

        A transactional batch opens the producer's transaction at `first_offset`
        unless one is open already.
        """
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = _Entry(epoch)
        elif epoch > entry.epoch:
            entry = self._producers[producer_id] = entry.bumped(epoch)
        entry.batches.append(BatchMetadata(base_seq, (base_seq + last_delta) % _SEQ_MOD,
                                           first_offset, last_offset))
        entry.last_timestamp = timestamp
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self._ongoing[producer_id] = first_offset

    # -- transactions ------------------------------------------------------
    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker from a fenced producer epoch or coordinator (nothing changes)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker of producer {producer_id} has epoch {epoch}, older than its current epoch {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise api_error(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                            f"marker of producer {producer_id} has coordinator epoch {coordinator_epoch}, "
                            f"older than {entry.coordinator_epoch}")

    def complete_txn(self, producer_id: int, epoch: int, coordinator_epoch: int, marker_offset: int,
                     timestamp: int, commit: bool) -> CompletedTxn | None:
        """Apply a marker at `marker_offset`; the transaction it ended, or None when none was open."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = _Entry(epoch)
        elif epoch > entry.epoch:
            entry = self._producers[producer_id] = entry.bumped(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        if first < 0:
            return None
        entry.current_txn_first_offset = -1
        self._ongoing.pop(producer_id, None)
        self._unreplicated.append((marker_offset, first))
        lso = min(self._ongoing.values()) if self._ongoing else marker_offset + 1
        return CompletedTxn(producer_id, first, marker_offset, not commit, lso)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """Lowest first offset of an open transaction or of one whose marker is not below the HW."""
        u = self._unreplicated
        while u and u[0][0] < high_watermark:
            u.popleft()
        if not u and not self._ongoing:
            return None
        firsts = list(self._ongoing.values())
        if u:
            firsts.append(min(f for _m, f in u))
        return min(firsts)

    def ongoing_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction."""
        return dict(self._ongoing)

    def replay(self, headers, from_offset: int, data=None) -> list[CompletedTxn]:
        """Apply the batch headers (``_native.list_batches``) of the log at or above `from_offset`.

        `data`: the bytes the headers' positions refer to, needed to read the
        markers of control batches (without it control batches are skipped).
        Returns the transactions the markers in `headers` completed.
        """
        done = []
        for h in headers:
            if h.producer_id < 0 or h.base_offset < from_offset:
                continue
            if h.is_control:
                if data is None:
                    continue
                ctype, coord = _native.read_control_record(data, h.position)
                if ctype < 0:
                    continue  # not a transaction marker (Kafka ignores unknown control types)
                c = self.complete_txn(h.producer_id, h.producer_epoch, coord, h.base_offset,
                                      h.max_timestamp, ctype == 1)
                if c is not None:
                    done.append(c)
            else:
                self.update(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                            h.base_offset, h.base_offset + h.last_offset_delta, h.max_timestamp,
                            h.is_transactional)
        return done

    def last_offsets(self) -> dict[int, int]:
        """producer id -> last offset of its last batch (the cleaner keeps that batch, Kafka's rule)."""
        return {pid: e.batches[-1].last_offset for pid, e in self._producers.items() if e.batches}

    def last_entries(self) -> dict[int, tuple[int, int]]:
        """producer id -> (epoch, last offset of its last data batch or -1) (the cleaner keeps a
        marker that is its producer's last entry)."""
        return {pid: (e.epoch, e.batches[-1].last_offset if e.batches else -1)
                for pid, e in self._producers.items()}

    def active_producers(self) -> list[SnapshotEntry]:
        """Every known producer as Kafka describes it (DescribeProducers, snapshots), by producer id."""
        out = []
        for pid in sorted(self._producers):
            e = self._producers[pid]
            if e.batches:
                b = e.batches[-1]
                last_seq, last_off, delta = b.last_seq, b.last_offset, b.last_offset - b.first_offset
            else:
                last_seq, last_off, delta = -1, -1, 0
            out.append(SnapshotEntry(pid, e.epoch, last_seq, last_off, delta, e.last_timestamp,
                                     e.coordinator_epoch, e.current_txn_first_offset))
        return out

    def snapshot_entries(self) -> list[SnapshotEntry]:
        """The snapshot's entries: one per retained batch, a producer's oldest first."""
        out = []
        for pid in sorted(self._producers):
            e = self._producers[pid]
            tail = (e.last_timestamp, e.coordinator_epoch, e.current_txn_first_offset)
            if not e.batches:
                out.append(SnapshotEntry(pid, e.epoch, -1, -1, 0, *tail))
            for b in e.batches:
                out.append(SnapshotEntry(pid, e.epoch, b.last_seq, b.last_offset,
                                         b.last_offset - b.first_offset, *tail))
        return out

    def load(self, entries) -> None:
        """Replace the state with a snapshot's entries (repeated ids: that producer's batches in order)."""
        self._producers.clear()
        self._unreplicated.clear()
        for se in entries:
            e = self._producers.get(se.producer_id)
            if e is None or e.epoch != se.epoch:
                e = self._producers[se.producer_id] = _Entry(se.epoch)
            if se.last_offset >= 0:
                e.batches.append(BatchMetadata((se.last_sequence - se.offset_delta) % _SEQ_MOD, se.last_sequence,
                                               se.last_offset - se.offset_delta, se.last_offset))
            e.last_timestamp = se.timestamp
            e.coordinator_epoch = se.coordinator_epoch
            e.current_txn_first_offset = se.current_txn_first_offset
        self._ongoing = {pid: e.current_txn_first_offset for pid, e in self._producers.items()
                         if e.current_txn_first_offset >= 0}

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Drop producers idle for `expiration_ms` (producer.id.expiration.ms); returns their ids."""
        gone = [pid for pid, e in self._producers.items()
                if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self._producers[pid]
        return gone

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()


# -- snapshot files ---------------------------------------------------------------
def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, files.segment_file(offset, files.SNAPSHOT_SUFFIX))


def list_snapshots(directory: str) -> list[int]:
    """Offsets of the ``.snapshot`` files in `directory`, ascending."""
    out = []
    for name in os.listdir(directory):
        if name.endswith(files.SNAPSHOT_SUFFIX):
            try:
                out.append(files.offset_from_filename(name))
            except ValueError:
                continue
    return sorted(out)


def encode_snapshot(entries) -> bytes:
    body = bytearray(_HEADER.size)
    struct.pack_into(">i", body, 6, len(entries))
    for e in entries:
        body += _ENTRY.pack(*e)
    struct.pack_into(">hI", body, 0, SNAPSHOT_VERSION, _native.crc32c(memoryview(body)[6:]))
    return bytes(body)


def decode_snapshot(data: bytes, path: str = "<snapshot>") -> list[SnapshotEntry]:
    if len(data) < _HEADER.size:
        raise SnapshotError(path, f"{len(data)} bytes, shorter than the header")
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(path, f"unknown version {version}")
    actual = _native.crc32c(memoryview(data)[6:])
    if crc != actual:
        raise SnapshotError(path, f"CRC mismatch: stored {crc:#010x}, computed {actual:#010x}")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise SnapshotError(path, f"{len(data)} bytes do not hold {count} entries")
    return [SnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)) for i in range(count)]


def write_snapshot(directory: str, offset: int, entries) -> str:
    """Write ``<offset>.snapshot`` atomically; returns its path."""
    path = snapshot_path(directory, offset)
    checkpoint.write_atomic(path, encode_snapshot(entries))
    return path


def read_snapshot(path: str) -> list[SnapshotEntry]:
    with open(path, "rb") as f:
        return decode_snapshot(f.read(), path)


def delete_snapshots(directory: str, predicate) -> list[int]:
    """Unlink the snapshots whose offset satisfies `predicate`; returns their offsets."""
    gone = []
    for off in list_snapshots(directory):
        if predicate(off):
            try:
                os.unlink(snapshot_path(directory, off))
            except FileNotFoundError:
                pass
            gone.append(off)
    return gone
