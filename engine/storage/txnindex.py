"""TransactionIndex: a segment's ``<base>.txnindex`` (Kafka's aborted-transaction index).

Format (Kafka's TransactionIndex / AbortedTxn, big-endian), entries back to
back, no header::

    int16 version = 0
    int64 producerId
    int64 firstOffset        first offset of the aborted transaction
    int64 lastOffset         offset of its ABORT marker
    int64 lastStableOffset   the LSO once the marker was written
                             (first offset of the next still-open transaction, or lastOffset + 1)

34 bytes an entry.  One entry per ABORT marker, in the segment holding the
marker, in marker order (lastOffset increases).  The file is created when the
first entry is written (Kafka creates it lazily too) and rebuilt by the loader
whenever its segment is recovered.  A file whose size is not a multiple of
34 or with an unknown version is corrupt (``TxnIndexError``).

Aborted transactions are rare (one entry per abort, not per record), so the
index is plain Python: the entries are kept in memory once read.

Concurrency: owned by one LogSegment, used under the PartitionLog lock.  A
read-only open reads the file afresh when it grew (``refresh``).
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from ..errors import CorruptIndexError

__all__ = ["AbortedTxn", "TransactionIndex", "ENTRY_SIZE"]

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode(entries) -> bytes:
    return b"".join(_ENTRY.pack(0, *e) for e in entries)


def decode(data: bytes, path: str = "<txnindex>") -> list[AbortedTxn]:
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(f"size {len(data)} is not a multiple of {ENTRY_SIZE}", path, None)
    out = []
    for pos in range(0, len(data), ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != 0:
            raise CorruptIndexError(f"entry at byte {pos} has version {version}", path, pos)
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    def __init__(self, path: str):
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self._loaded_size = -1

    def _load(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if self._entries is None or len(data) != self._loaded_size:
            self._entries = decode(data, self.path)
            self._loaded_size = len(data)
        return self._entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._entries if self._entries is not None else self._load())

    def refresh(self) -> None:
        """Read-only opens: re-read the file (a writer may have appended)."""
        self._entries = None
        self._loaded_size = -1

    def sanity_check(self) -> None:
        """Raise CorruptIndexError when the file is unreadable or not in lastOffset order."""
        self._entries = None
        prev = -1
        for i, e in enumerate(self._load()):
            if e.last_offset < prev or e.first_offset > e.last_offset:
                raise CorruptIndexError(f"entry {i} is out of order", self.path, i * ENTRY_SIZE)
            prev = e.last_offset

    def append(self, entry: AbortedTxn) -> None:
        entries = self._entries if self._entries is not None else self._load()
        if entries and entry.last_offset < entries[-1].last_offset:
            raise ValueError(f"aborted txn ending at {entry.last_offset} is below the last entry "
                             f"{entries[-1].last_offset} of {self.path}")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            data = encode([entry])
            os.write(fd, data)
        finally:
            os.close(fd)
        entries.append(AbortedTxn(*entry))
        self._loaded_size += ENTRY_SIZE

    def rewrite(self, entries) -> None:
        """Replace the file with `entries` (none: the file is removed)."""
        entries = [AbortedTxn(*e) for e in entries]
        if not entries:
            self.delete()
        else:
            tmp = self.path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(encode(entries))
            os.replace(tmp, self.path)
        self._entries = entries
        self._loaded_size = len(entries) * ENTRY_SIZE

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above `offset` (Kafka's truncateTo)."""
        try:
            entries = self._load()
        except CorruptIndexError:
            entries = []
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) != len(entries) or not keep:
            if keep or os.path.exists(self.path):
                self.rewrite(keep)

    def collect(self, start_offset: int, upper_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [start_offset, upper_offset); True when no later segment can add one.

        Kafka's TransactionIndex.collectAbortedTxns: an entry overlaps when its
        lastOffset >= start_offset and firstOffset < upper_offset; the search
        stops at the first entry (overlapping or not) whose lastStableOffset >=
        upper_offset: every transaction aborted later started above it.
        """
        out = []
        for e in self._entries if self._entries is not None else self._load():
            if e.last_offset >= start_offset and e.first_offset < upper_offset:
                out.append(e)
            if e.last_stable_offset >= upper_offset:
                return out, True
        return out, False

    def flush(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.rename(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
