"""Plain result types of the storage layer: AppendInfo / FetchInfo (PartitionLog's
append and read answers) and RecoveryEvent / RecoveryStats (the loader's
recovery report).  No behaviour; imported by log.py and loader.py (re-exported
from engine.storage.log)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AppendInfo", "FetchInfo", "RecoveryEvent", "RecoveryStats"]


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What one append wrote: offsets [first_offset, last_offset], size bytes."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    batches: int
    records: int
    size: int


@dataclass(frozen=True, slots=True)
class FetchInfo:
    """A read: slices of complete-or-partial batches starting at the batch holding start_offset."""

    slices: list
    start_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int = -1
    aborted_transactions: list | None = None   # read_committed: [(producer_id, first_offset)]
    # a replica's answer to a reader whose log diverges (KIP-320): (epoch, end offset), no slices
    diverging_epoch: tuple[int, int] | None = None

    @property
    def size(self) -> int:
        return sum(s.size for s in self.slices)

    def read(self) -> bytes:
        return b"".join(s.read() for s in self.slices)


@dataclass(frozen=True, slots=True)
class RecoveryEvent:
    """One thing the loader changed or distrusted (the recovery report)."""

    path: str
    position: int | None
    bytes_dropped: int
    reason: str


@dataclass
class RecoveryStats:
    segments_scanned: int = 0
    bytes_scanned: int = 0
    events: list = field(default_factory=list)
