"""The swap: a cleaned segment replaces its group of old segments (step 4 of cleaner.py's overview).

Kafka's file steps, crash-safe, all under the log lock: check the group's
segments are still in the log, unchanged (the same objects, the same sizes)
and the cleaning was not aborted (cleaner_state.py); rename ``.cleaned`` ->
``.swap``; replace the group in the segment list; rename the old segments to
``.deleted`` (unlinked after ``file.delete.delay.ms``; open FileSlices keep
reading the old inode); rename ``.swap`` -> final names.  The directory is
fsync'd after each step.  After a crash at any step the loader (loader.py)
finishes or undoes it.  ``on_step`` (tests) is called after each step with
its name; raising SimulatedCrash (cleaner_types.py) from it stops there as a
crash would.
"""

from __future__ import annotations

from . import checkpoint, files
from .cleaner_types import SegmentSnap
from .segment import LogSegment

__all__ = ["swap_group"]


def swap_group(log, group: list[SegmentSnap], cleaned: LogSegment, on_step) -> bool:
    """Replace `group` by `cleaned` in the log (the module docstring's steps); False: the log changed."""
    d = log.dir
    with log._lock:
        log._cleaning.check()   # a truncation waits for this cleaning: it has not cut anything yet
        if log._closed or log._failed is not None:
            return False
        local = log._local
        segs = local.segments
        try:
            i = next(k for k, s in enumerate(segs) if s is group[0].seg)
        except StopIteration:
            return False
        if i + len(group) >= len(segs):
            return False  # the group would include the active segment
        for j, snap in enumerate(group):
            s = segs[i + j]
            if s is not snap.seg or s.size != snap.size:
                return False
        cleaned.change_suffix(files.SWAP_SUFFIX)
        checkpoint.fsync_dir(d)
        if on_step is not None:
            on_step("swap")
        local.replace(i, len(group), cleaned)
        delay = log.config["file.delete.delay.ms"]
        deadline = log.clock() + delay
        for n, snap in enumerate(group):
            local.schedule_delete(snap.seg, deadline)
            if n == 0 and on_step is not None:
                on_step("deleted_one")
        checkpoint.fsync_dir(d)
        if on_step is not None:
            on_step("deleted")
        cleaned.change_suffix("")
        checkpoint.fsync_dir(d)
        if on_step is not None:
            on_step("final")
        if delay == 0:
            local.delete_pending(None)
        return True
