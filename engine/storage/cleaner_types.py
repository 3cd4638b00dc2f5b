"""The value objects of one log cleaning (cleaner.py's overview): what a cleaning did
(``CleanStats``, Kafka's CleanerStats), the sealed segments it works on
(``SegmentSnap``) and what it found cleanable (``CleaningPlan``, made by
cleaner_plan.py), plus ``SimulatedCrash``, the tests' way to stop a cleaning dead
after one of its file steps (cleaner_swap.py).  No behaviour; the counterpart of
logtypes.py for the cleaner modules.
"""

from __future__ import annotations

from dataclasses import dataclass

from .fileslice import SegmentFile
from .segment import LogSegment

__all__ = ["CleanStats", "CleaningPlan", "SegmentSnap", "SimulatedCrash"]


@dataclass
class CleanStats:
    """What one cleaning did (Kafka's CleanerStats)."""

    topic: str = ""
    partition: int = -1
    cleaned: bool = False           # False: nothing was cleanable (reason says why)
    reason: str = ""
    first_dirty_offset: int = -1
    end_offset: int = -1            # the new cleaner checkpoint
    map_keys: int = 0
    bytes_read: int = 0             # bytes of segments read (map + filter passes count once each)
    bytes_written: int = 0
    segments_read: int = 0
    segments_written: int = 0
    groups_aborted: int = 0         # groups skipped because the log changed under them
    records_read: int = 0
    records_kept: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    aborted_batches_removed: int = 0  # batches of aborted transactions removed (or emptied)
    markers_removed: int = 0          # transaction markers removed after their delete horizon
    elapsed_s: float = 0.0


class SimulatedCrash(Exception):
    """Tests: raise it from an ``on_step`` hook to stop a cleaning dead after that file step.

    Nothing is undone (no file is removed), as if the process had died there.
    """


@dataclass
class SegmentSnap:
    """A sealed segment as the cleaning found it (under the log lock, at the start)."""

    seg: LogSegment
    file: SegmentFile  # keeps the fd alive while we read
    base: int
    size: int
    next_base: int     # base offset of the following segment


@dataclass
class CleaningPlan:
    """The cleanable segments of a log and what the cleaning needs to know about them."""

    snaps: list          # every cleanable segment, from the log start
    first_dirty: int
    dirty: list          # the dirty ones (a suffix of snaps)
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool     # max.compaction.lag.ms or a passed delete horizon
    last_offsets: dict   # producer id -> last offset of its last batch (retain its batch)
    producers: dict      # producer id -> (epoch, last data offset): a marker that is a producer's last entry stays
    aborted: list        # every .txnindex entry (AbortedTxn) of the log
