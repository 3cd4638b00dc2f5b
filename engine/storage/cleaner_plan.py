"""What of a log is cleanable, and whether it is time to clean it (Kafka's
LogCleanerManager.cleanableOffsets and its dirty ratio, LogToClean).

``plan_cleaning`` snapshots the cleanable segments under the log lock: the
sealed segments from the log start up to the *first uncleanable offset* --
the active segment, the first segment reaching above min(high watermark, last
stable offset), and the first one whose newest record is younger than
``min.compaction.lag.ms`` are never cleaned -- split at the *first dirty
offset* (the cleaner checkpoint, cleaner_checkpoint.py) into clean and dirty
bytes.  A cleaning is called for (``must_clean``) when the first dirty batch is
older than ``max.compaction.lag.ms`` or a kept tombstone's or marker's delete
horizon (``PartitionLog._cleaner_horizon_due``) has passed.  ``cleanable`` is
the background cleaner's test: that, or dirty / (clean + dirty) >=
``min.cleanable.dirty.ratio``.  Reads only; changes nothing.
"""

from __future__ import annotations

from .cleaner_checkpoint import checkpoint_path, read_cleaner_checkpoint
from .cleaner_txn import aborted_entries
from .cleaner_types import CleaningPlan, SegmentSnap

__all__ = ["LONG_MAX", "cleanable", "plan_cleaning"]

LONG_MAX = 2**63 - 1


def plan_cleaning(log, now: int) -> CleaningPlan | None:
    """Snapshot the cleanable segments (caller holds log._lock)."""
    cfg = log.config
    segs = log._local.segments
    hw = min(log.high_watermark, log.last_stable_offset)  # open transactions are never cleaned
    snaps: list[SegmentSnap] = []
    lag = cfg["min.compaction.lag.ms"]
    for i in range(len(segs) - 1):
        seg, nxt = segs[i], segs[i + 1].base_offset
        if nxt > hw:
            break
        if lag > 0 and seg.max_timestamp >= 0 and seg.max_timestamp > now - lag:
            break  # first uncleanable: min.compaction.lag.ms
        snaps.append(SegmentSnap(seg, seg.file, seg.base_offset, seg.size, nxt))
    if not snaps:
        return None
    ck = read_cleaner_checkpoint(checkpoint_path(log)).get((log.topic, log.partition), -1)
    # at most the end of the cleanable segments (then nothing is dirty)
    first_dirty = min(max(ck, log.log_start_offset, snaps[0].base), snaps[-1].next_base)
    dirty = [s for s in snaps if s.next_base > first_dirty]
    clean_bytes = sum(s.size for s in snaps if s.next_base <= first_dirty)
    dirty_bytes = sum(s.size for s in dirty)
    must = False
    max_lag = cfg["max.compaction.lag.ms"]
    if dirty and max_lag < LONG_MAX:
        first_ts = dirty[0].seg._first_batch_timestamp()
        if first_ts is not None and first_ts >= 0 and now - first_ts > max_lag:
            must = True
    due = getattr(log, "_cleaner_horizon_due", None)
    if due is not None and now >= due:
        must = True
    last_offsets = log.producer_state.last_offsets()
    return CleaningPlan(snaps, first_dirty, dirty, clean_bytes, dirty_bytes, must, last_offsets,
                        log.producer_state.last_entries(), aborted_entries(log))


def cleanable(log, now_ms: int | None = None) -> tuple[bool, float]:
    """(should the background cleaner clean this log now, its dirty ratio)."""
    if "compact" not in log.config["cleanup.policy"] or log.read_only or log.closed or log._cleaning.paused:
        return False, 0.0
    now = log.clock() if now_ms is None else now_ms
    with log._lock:
        plan = plan_cleaning(log, now)
    if plan is None:
        return False, 0.0
    total = plan.clean_bytes + plan.dirty_bytes
    ratio = plan.dirty_bytes / total if total else 0.0
    if plan.must_clean:
        return True, ratio
    return bool(plan.dirty) and plan.dirty_bytes > 0 and ratio >= log.config["min.cleanable.dirty.ratio"], ratio
