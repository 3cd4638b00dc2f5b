"""One cleaning of one log (Kafka's Cleaner.clean / doClean): steps 1, 2 and 5 of
cleaner.py's overview, around cleaner_copy.py's step 3 (+ cleaner_swap.py's 4).

``clean_log`` takes the log's ``_clean_lock`` (one cleaning of a log at a
time) and begins the cleaning in its CleaningState (cleaner_state.py): a
paused log is not cleaned, and a truncation's abort, seen at a ``check``,
ends the cleaning with reason "aborted" -- nothing swapped since, no
checkpoint written.  ``_clean`` then plans (cleaner_plan.py); builds the
offset map over the dirty segments (``_native.OffsetMap`` /
``index_keys``, aborted transactions' batches left out; when it fills, the
cleaning ends at the last fully indexed segment: the *end offset*); cuts the
segments below the end offset into groups that fit one segment; cleans and
swaps each group; and moves the cleaner checkpoint (cleaner_checkpoint.py)
to the end offset.  A stop asked for (``stop``, LogCleaner.stop) ends it
between segments or groups without a checkpoint.
"""

from __future__ import annotations

import logging
import threading
import time

from .. import _native
from .cleaner_checkpoint import checkpoint_path, update_cleaner_checkpoint
from .cleaner_copy import clean_group, read_chunks
from .cleaner_plan import LONG_MAX, plan_cleaning
from .cleaner_state import LogCleaningAbortedError
from .cleaner_txn import CleanedTxnMetadata, in_range, skip_aborted
from .cleaner_types import CleanStats, SegmentSnap

__all__ = ["DEFAULT_DEDUPE_BUFFER_SIZE", "clean_log"]

_logger = logging.getLogger("engine.storage.cleaner")
DEFAULT_DEDUPE_BUFFER_SIZE = 134217728  # log.cleaner.dedupe.buffer.size
INT32_MAX = 2**31 - 1


def clean_log(log, now_ms: int | None = None, *, force: bool = True,
              dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE,
              stop: threading.Event | None = None, _on_step=None) -> CleanStats:
    """Clean one log (see the module docstring); returns what it did.

    ``force`` cleans whatever is cleanable regardless of the dirty ratio
    (on-demand cleaning); without it the ratio, max.compaction.lag.ms or a
    passed delete horizon must call for a cleaning.
    ``_on_step`` (tests) is called with the name of each file step just
    done: "cleaned", "swap", "deleted_one", "deleted", "final"; raising
    SimulatedCrash from it leaves the files as a crash there would.
    """
    t0 = time.perf_counter()
    stats = CleanStats(log.topic, log.partition)
    if "compact" not in log.config["cleanup.policy"]:
        stats.reason = "cleanup.policy does not include compact"
        return stats
    log._check_writable()
    now = log.clock() if now_ms is None else now_ms
    with log._clean_lock:
        if not log._cleaning.begin():
            stats.reason = "cleaning is paused (a truncation runs)"
            return stats
        try:
            return _clean(log, now, stats, t0, force, dedupe_buffer_size, stop, _on_step)
        except LogCleaningAbortedError:
            stats.reason = "aborted"     # by a truncation: nothing swapped since, no checkpoint
            stats.elapsed_s = time.perf_counter() - t0
            return stats
        finally:
            log._cleaning.done()


def _clean(log, now: int, stats: CleanStats, t0: float, force: bool, dedupe_buffer_size: int,
           stop: threading.Event | None, _on_step) -> CleanStats:
    """clean_log's work, with ``_clean_lock`` held and the cleaning begun (``log._cleaning``)."""
    with log._lock:
        plan = plan_cleaning(log, now)
        cfg = log.config
    if plan is None:
        stats.reason = "no cleanable segment"
        return stats
    total = plan.clean_bytes + plan.dirty_bytes
    ratio = plan.dirty_bytes / total if total else 0.0
    if not force and not plan.must_clean and (
            not plan.dirty or ratio < cfg["min.cleanable.dirty.ratio"]):
        stats.reason = f"dirty ratio {ratio:.3f} below min.cleanable.dirty.ratio"
        return stats
    stats.first_dirty_offset = plan.first_dirty
    # 1. the offset map over the dirty segments
    offset_map = _native.OffsetMap(dedupe_buffer_size)
    end_offset = plan.first_dirty
    map_txn = None
    if plan.dirty:
        dirty_aborted = in_range(plan.aborted, plan.first_dirty, plan.dirty[-1].next_base)
        map_txn = CleanedTxnMetadata(dirty_aborted) if dirty_aborted else None
    for k, snap in enumerate(plan.dirty):
        full = False
        for data, headers, pos in read_chunks(snap, False, headers=map_txn is not None):
            log._cleaning.check()
            skip = skip_aborted(map_txn, headers, data, pos) if map_txn is not None else None
            nrec, _end, _last, full = _native.index_keys(data, 0, len(data), offset_map, LONG_MAX,
                                                         snap.seg.log_path, pos, skip=skip)
            stats.records_read += nrec
            stats.bytes_read += _end
            if full:
                break
        if full:
            # The map is full inside this segment: clean up to the segment before it (its
            # keys in the map are still newer records of the log, so using them is right).
            # Kafka refuses a first segment that does not fit; we clean it part-deduplicated.
            if k == 0:
                _logger.warning("%s-%d: log.cleaner.dedupe.buffer.size holds %d keys, fewer than "
                                "segment %d has", log.topic, log.partition, len(offset_map), snap.base)
                end_offset = snap.next_base
            break
        end_offset = snap.next_base
        if stop is not None and stop.is_set():
            stats.reason = "stopped"
            return stats
    stats.map_keys = len(offset_map)
    if not plan.dirty:
        end_offset = plan.snaps[-1].next_base
    # 2. groups of consecutive segments below the end offset
    todo = [s for s in plan.snaps if s.base < end_offset]
    groups: list[list[SegmentSnap]] = []
    cur: list[SegmentSnap] = []
    cur_size = 0
    for s in todo:
        if cur and (cur_size + s.size > cfg["segment.bytes"] or s.next_base - 1 - cur[0].base > INT32_MAX):
            groups.append(cur)
            cur, cur_size = [], 0
        cur.append(s)
        cur_size += s.size
    if cur:
        groups.append(cur)
    # 3 + 4. filter and swap each group
    horizon_due: int | None = None
    for group in groups:
        if stop is not None and stop.is_set():
            stats.reason = "stopped"      # no checkpoint: the groups left are not filtered yet
            break
        res = clean_group(log, cfg, group, offset_map, now, plan, stats, _on_step)
        if res is False:
            stats.groups_aborted += 1
        elif res is not None:
            horizon_due = res if horizon_due is None else min(horizon_due, res)
    log._cleaner_horizon_due = horizon_due
    if stats.reason == "stopped":
        return stats
    # 5. the checkpoint (not after an abort: the truncation lowers it)
    log._cleaning.check()
    update_cleaner_checkpoint(checkpoint_path(log), (log.topic, log.partition),
                              min(end_offset, log.log_end_offset))
    stats.end_offset = end_offset
    stats.cleaned = True
    stats.elapsed_s = time.perf_counter() - t0
    return stats
