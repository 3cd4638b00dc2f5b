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

Expiry: ``remove_expired`` drops producers whose last timestamp is older than
``producer.id.expiration.ms`` (no transactions yet, so none is kept for one).

Concurrency: owned by one PartitionLog and used under its lock.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from typing import NamedTuple

from .. import _native
from ..errors import InvalidProducerEpochError, InvalidRecordError, OutOfOrderSequenceError
from . import checkpoint, files

__all__ = ["BatchMetadata", "ProducerStateManager", "SnapshotEntry", "SnapshotError",
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
        self.current_txn_first_offset = -1   # transactions: not served yet


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
               first_offset: int, last_offset: int, timestamp: int = -1) -> None:
        """Record an appended batch (`timestamp`: its max timestamp)."""
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self._producers[producer_id] = _Entry(epoch)
        entry.batches.append(BatchMetadata(base_seq, (base_seq + last_delta) % _SEQ_MOD,
                                           first_offset, last_offset))
        entry.last_timestamp = timestamp

    def replay(self, headers, from_offset: int) -> None:
        """Apply the batch headers (``_native.list_batches``) of the log at or above `from_offset`."""
        for h in headers:
            if h.producer_id >= 0 and h.base_offset >= from_offset and not (h.attributes & 0x20):
                self.update(h.producer_id, h.producer_epoch, h.base_sequence, h.last_offset_delta,
                            h.base_offset, h.base_offset + h.last_offset_delta, h.max_timestamp)

    def last_offsets(self) -> dict[int, int]:
        """producer id -> last offset of its last batch (the cleaner keeps that batch, Kafka's rule)."""
        return {pid: e.batches[-1].last_offset for pid, e in self._producers.items() if e.batches}

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

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Drop producers idle for `expiration_ms` (producer.id.expiration.ms); returns their ids."""
        gone = [pid for pid, e in self._producers.items()
                if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self._producers[pid]
        return gone

    def clear(self) -> None:
        self._producers.clear()


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
