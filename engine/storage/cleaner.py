"""Log compaction: Kafka's LogCleaner for topics with ``cleanup.policy`` compact (or compact,delete).

Terms (Kafka's): the log below the active segment splits at the *first dirty
offset* (the cleaner checkpoint) into the *clean* part, already compacted,
and the *dirty* part.  A log is cleanable when dirty / (clean + dirty) bytes
>= ``min.cleanable.dirty.ratio``, or when a dirty segment is older than
``max.compaction.lag.ms``, or when a tombstone's delete horizon has passed.
Segments whose newest record is younger than ``min.compaction.lag.ms``, the
active segment and anything at or above the high watermark are never
cleaned (the *first uncleanable offset* is the lowest of those bounds).

One cleaning of a log:

1. **Offset map** (``_native.OffsetMap``, ``_native.index_keys``): key ->
   offset of its latest record over the dirty segments, 24 bytes a key
   (128-bit key hash + offset, Kafka's SkimpyOffsetMap) within
   ``log.cleaner.dedupe.buffer.size``; when it fills, the cleaning stops at
   the last fully indexed segment: its end is the *end offset*.
2. **Groups**: the segments from the log start to the end offset, cut into
   runs of consecutive segments whose total size fits ``segment.bytes`` (and
   whose offsets fit one segment's int32 relative offsets).
3. **Filter** each group into ``<base>.log.cleaned`` (+ ``.index.cleaned``,
   ``.timeindex.cleaned``; ``_native.compact_batch``): a record survives when
   it has a key and no later offset of that key is in the map.  Tombstones
   (null value) survive until their batch's delete horizon
   (``delete.retention.ms`` after the cleaning that first kept them, KIP-534
   attribute 0x40 + baseTimestamp); control batches are kept as they are; a
   batch left empty is dropped unless it is the last batch of an active
   idempotent producer (kept as an empty batch so its last sequence stays in
   the log).  Kept batches keep their offsets, timestamps, codec and
   producer fields; offset gaps are normal in a compacted log.
   Transactions (cleaner_txn.py, Kafka's rules): aborted transactions' batches
   are removed (and left out of the offset map), markers whose transaction
   has no data left get a delete horizon and go after it; retained ABORT
   markers keep their ``.txnindex`` entry in the cleaned segment.  Nothing at
   or above the last stable offset is cleaned.
4. **Swap** (crash-safe, Kafka's file steps): fsync the cleaned files; under
   the log lock check the group's segments are still in the log, unchanged;
   rename ``.cleaned`` -> ``.swap``; replace the group in the segment list;
   rename the old segments to ``.deleted`` (unlinked after
   ``file.delete.delay.ms``, like retention: open FileSlices keep reading the
   old inode); rename ``.swap`` -> final names.  The directory is fsync'd after
   each step.  After a crash the loader (loader.py) deletes ``.cleaned``,
   completes a ``.swap`` (deleting the old segments its offset range covers)
   and deletes ``.deleted``.
5. The checkpoint ``<data dir>/cleaner-offset-checkpoint`` (Kafka's text
   format: ``0`` / N / ``topic partition offset``; atomic write) moves to the
   end offset (cleaner_checkpoint.py).

Concurrency: a cleaning reads sealed segments with ``pread`` and writes the
cleaned files without the log lock; appends and reads go on.  The lock is
held only for the snapshot at the start and for the swap.  Only one cleaning
of a log runs at a time (``PartitionLog._clean_lock``).  A truncation below the
active segment or a deletion aborts it and pauses cleaning until done
(``PartitionLog._cleaning``, cleaner_state.py).  Retention and DeleteRecords
remove leading segments only, which the swap's check sees.  Readers in another
process (read-only opens) never list ``.cleaned`` files and take a ``.swap``
as the replacement of the segments it covers (loader.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

from .. import _native
from ..errors import ClosedError, CorruptRecordError
from . import checkpoint, files
from .cleaner_checkpoint import checkpoint_path, read_cleaner_checkpoint, truncate_checkpoint, update_cleaner_checkpoint
from .cleaner_state import LogCleaningAbortedError
from .cleaner_txn import COMPACT, KEEP, CleanedTxnMetadata, aborted_entries, in_range, skip_aborted, transactional_batch
from .segment import LogSegment

__all__ = ["CleanStats", "LogCleaner", "clean_log", "cleanable", "read_cleaner_checkpoint",
           "checkpoint_path", "update_cleaner_checkpoint", "truncate_checkpoint"]

_logger = logging.getLogger(__name__)
DEFAULT_DEDUPE_BUFFER_SIZE = 134217728  # log.cleaner.dedupe.buffer.size
_READ_CHUNK = 8 << 20
LONG_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1


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


# -- what is cleanable ---------------------------------------------------------
@dataclass
class _Snap:
    seg: LogSegment
    file: object       # SegmentFile: keeps the fd alive while we read
    base: int
    size: int
    next_base: int     # base offset of the following segment


@dataclass
class _Plan:
    snaps: list          # every cleanable segment, from the log start
    first_dirty: int
    dirty: list          # the dirty ones (a suffix of snaps)
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool     # max.compaction.lag.ms or a passed delete horizon
    last_offsets: dict   # producer id -> last offset of its last batch (retain its batch)
    producers: dict      # producer id -> (epoch, last data offset): a marker that is a producer's last entry stays
    aborted: list        # every .txnindex entry (AbortedTxn) of the log


def _plan(log, now: int) -> _Plan | None:
    """Snapshot the cleanable segments (caller holds log._lock)."""
    cfg = log.config
    segs = log._local.segments
    hw = min(log.high_watermark, log.last_stable_offset)  # open transactions are never cleaned
    snaps: list[_Snap] = []
    lag = cfg["min.compaction.lag.ms"]
    for i in range(len(segs) - 1):
        seg, nxt = segs[i], segs[i + 1].base_offset
        if nxt > hw:
            break
        if lag > 0 and seg.max_timestamp >= 0 and seg.max_timestamp > now - lag:
            break  # first uncleanable: min.compaction.lag.ms
        snaps.append(_Snap(seg, seg.file, seg.base_offset, seg.size, nxt))
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
    return _Plan(snaps, first_dirty, dirty, clean_bytes, dirty_bytes, must, last_offsets,
                 log.producer_state.last_entries(), aborted_entries(log))


def cleanable(log, now_ms: int | None = None) -> tuple[bool, float]:
    """(should the background cleaner clean this log now, its dirty ratio)."""
    if "compact" not in log.config["cleanup.policy"] or log.read_only or log.closed or log._cleaning.paused:
        return False, 0.0
    now = log.clock() if now_ms is None else now_ms
    with log._lock:
        plan = _plan(log, now)
    if plan is None:
        return False, 0.0
    total = plan.clean_bytes + plan.dirty_bytes
    ratio = plan.dirty_bytes / total if total else 0.0
    if plan.must_clean:
        return True, ratio
    return bool(plan.dirty) and plan.dirty_bytes > 0 and ratio >= log.config["min.cleanable.dirty.ratio"], ratio


# -- reading sealed segments ---------------------------------------------------
def _chunks(snap: _Snap, check_crc: bool, headers: bool = True):
    """(data, headers, file_position): the complete batches of a sealed segment, chunk by chunk.

    ``data`` is a view of one reused buffer (read with preadv: no fresh pages
    per chunk), valid until the next chunk; ``headers`` is None unless asked.
    A read (not a mapping) because a truncation could cut the file under us.
    """
    fd, path = snap.file.fd, snap.seg.log_path
    pos, want = 0, _READ_CHUNK
    buf = bytearray(min(_READ_CHUNK, snap.size))
    while pos < snap.size:
        n = min(want, snap.size - pos)
        if len(buf) < n:
            buf = bytearray(n)
        data = memoryview(buf)[:n]
        got = os.preadv(fd, [data], pos)
        if got < n:
            raise CorruptRecordError("segment shrank while being cleaned", path, pos + got)
        if headers:
            hs, end = _native.list_batches(data, 0, n, check_crc, path, pos)
        else:
            hs, end = None, _complete_end(data, n)  # index_keys checks every batch itself
        if end == 0:
            if n == snap.size - pos:
                raise CorruptRecordError("incomplete batch in a sealed segment", path, pos)
            want = max(want * 2, _native.batch_size(data))     # -1 below 12 bytes
            continue
        yield data, hs, pos
        pos += end
        want = _READ_CHUNK


def _complete_end(data, n: int) -> int:
    """End of the last complete batch in data[:n] (header walk, no objects)."""
    pos = 0
    while True:
        size = _native.batch_size(data, pos)    # -1 below 12 bytes
        if size < _native.BATCH_HEADER_SIZE or pos + size > n:
            break
        pos += size
    return pos


# -- cleaning ------------------------------------------------------------------
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
        plan = _plan(log, now)
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
        for data, headers, pos in _chunks(snap, False, headers=map_txn is not None):
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
    groups: list[list[_Snap]] = []
    cur: list[_Snap] = []
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
        res = _clean_group(log, cfg, group, offset_map, now, plan, stats, _on_step)
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


def _clean_group(log, cfg, group: list[_Snap], offset_map, now: int, plan: _Plan,
                 stats: CleanStats, on_step):
    """Write one cleaned segment for `group` and swap it in.

    Returns False when the log changed under the group (nothing swapped),
    else the earliest delete horizon of a kept tombstone (or None).  A lone
    segment with nothing to remove is left as it is.
    """
    base = group[0].base
    d = log.dir
    retention = cfg["delete.retention.ms"]
    interval = cfg["index.interval.bytes"]
    last_offsets = plan.last_offsets
    txn = CleanedTxnMetadata(in_range(plan.aborted, base, group[-1].next_base))
    for suffix in (files.LOG_SUFFIX, files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX):
        stale = os.path.join(d, files.segment_file(base, suffix) + files.CLEANED_SUFFIX)
        if os.path.exists(stale):
            os.unlink(stale)
    cleaned = LogSegment(d, base, cfg, create=True, suffix=files.CLEANED_SUFFIX, preallocate_index=True)
    horizon_due: int | None = None
    changed = len(group) > 1
    try:
        pending: list = []
        pend_bytes = 0
        pend_max_ts, pend_max_off, pend_last = -1, -1, -1

        def flush_pending() -> None:
            nonlocal pending, pend_bytes, pend_max_ts, pend_max_off, pend_last
            if pending:
                buf = pending[0] if len(pending) == 1 else b"".join(pending)
                cleaned.append(pend_last, pend_max_ts, pend_max_off, buf)
            pending, pend_bytes, pend_max_ts, pend_max_off, pend_last = [], 0, -1, -1, -1

        last_snap = group[-1]
        for snap in group:
            for data, headers, chunk_pos in _chunks(snap, True):
                log._cleaning.check()
                mv = memoryview(data)
                for h in headers:
                    # The last batch of the group stays (empty if need be), so the cleaned
                    # segment ends at the group's last offset: a .swap then covers exactly
                    # the old segments it replaces (loader.py).
                    group_end = snap is last_snap and h.position + h.size == snap.size
                    rel = h.position - chunk_pos
                    piece = COMPACT
                    if h.producer_id >= 0 and (h.is_transactional or h.is_control):
                        piece = transactional_batch(h, data, rel, txn, plan, now, retention, group_end, stats)
                    if piece is not COMPACT:
                        if piece is KEEP:
                            piece = mv[rel:rel + h.size]
                        else:
                            changed = True
                            if piece is None:
                                continue
                        max_ts = h.max_timestamp
                        # a marker with a delete horizon (baseTimestamp holds it)
                        ph = _native.read_header(piece)
                        due = ph.base_timestamp if ph.is_control and ph.has_delete_horizon else None
                    else:
                        out, kept, removed, tomb_removed, tomb_kept = _native.compact_batch(
                            data, rel, offset_map, now, retention, True, snap.seg.log_path)
                        stats.records_kept += kept
                        stats.records_removed += removed
                        stats.tombstones_removed += tomb_removed
                        if out is not None:
                            changed = True
                        if out is None:
                            piece = mv[rel:rel + h.size]
                            max_ts = h.max_timestamp
                            horizon = h.base_timestamp if h.has_delete_horizon else None
                        elif len(out) == 0:
                            continue
                        else:
                            emptied = len(out) == _native.BATCH_HEADER_SIZE      # a header, no records
                            if emptied and h.records_count > 0 and not group_end and (
                                    h.producer_id < 0 or last_offsets.get(h.producer_id) != h.last_offset):
                                continue  # emptied, and not the last batch of an active producer
                            piece = out
                            oh = _native.read_header(out)
                            max_ts = oh.max_timestamp
                            horizon = oh.base_timestamp if oh.has_delete_horizon else None
                        due = horizon if tomb_kept else None
                    if due is not None:
                        horizon_due = due if horizon_due is None else min(horizon_due, due)
                    pending.append(piece)
                    pend_bytes += len(piece)
                    pend_last = h.last_offset
                    if max_ts > pend_max_ts:
                        pend_max_ts, pend_max_off = max_ts, h.last_offset
                    if pend_bytes > interval:
                        flush_pending()
                flush_pending()  # the pieces are views of the chunk buffer, reused next
            stats.bytes_read += snap.size
            stats.segments_read += 1
        flush_pending()
        if not changed:
            cleaned.delete()  # one segment, nothing to remove: leave it as it is
            return horizon_due
        if txn.cleaned_index:
            cleaned.txn_index.rewrite(txn.cleaned_index)
        cleaned.on_become_inactive()
        cleaned.flush()
        checkpoint.fsync_dir(d)
        if on_step is not None:
            on_step("cleaned")
        swapped = _swap(log, group, cleaned, on_step)
    except SimulatedCrash:
        raise
    except BaseException:
        cleaned.delete()
        raise
    if not swapped:
        cleaned.delete()
        return False
    stats.segments_written += 1
    stats.bytes_written += cleaned.size
    return horizon_due


def _swap(log, group: list[_Snap], cleaned: LogSegment, on_step) -> bool:
    """Replace `group` by `cleaned` in the log (the file steps of the module docstring)."""
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


# -- the background cleaner ----------------------------------------------------
class LogCleaner:
    """One background thread cleaning the compacted logs of a LogManager (Kafka's LogCleaner).

    Each round picks the cleanable log with the highest dirty ratio (logs
    that ``max.compaction.lag.ms`` or a passed delete horizon force come
    first) and cleans it; when none is cleanable it waits
    ``log.cleaner.backoff.ms``.  A log whose cleaning failed on corrupt data is
    skipped until the next start (Kafka's "uncleanable" partitions).
    """

    def __init__(self, manager, backoff_ms: int = 15000,
                 dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE):
        self.manager = manager
        self.backoff_ms = backoff_ms
        self.dedupe_buffer_size = dedupe_buffer_size
        self.uncleanable: dict[tuple[str, int], str] = {}
        self.last_stats: CleanStats | None = None
        self.rounds = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def clean_once(self, now_ms: int | None = None) -> CleanStats | None:
        """One round: clean the dirtiest cleanable log, if any; returns its stats."""
        best = None
        for key, log in self.manager.logs().items():
            if key in self.uncleanable or log.closed:
                continue
            try:
                ok, ratio = cleanable(log, now_ms)
            except ClosedError:
                continue
            if ok and (best is None or ratio > best[0]):
                best = (ratio, key, log)
        if best is None:
            return None
        _ratio, key, log = best
        try:
            stats = clean_log(log, now_ms, force=True, dedupe_buffer_size=self.dedupe_buffer_size,
                              stop=self._stop)
        except ClosedError:
            return None
        except Exception as e:  # corrupt data, I/O error: skip this log, keep the thread alive
            _logger.error("cleaning %s-%d failed, marked uncleanable: %s", key[0], key[1], e)
            self.uncleanable[key] = str(e)
            hook = getattr(self.manager, "on_io_error", None)
            if isinstance(e, OSError) and hook is not None:     # Kafka: the log dir goes offline
                hook(e, f"cleaning {key[0]}-{key[1]}")
            return None
        self.last_stats = stats
        self.rounds += 1
        return stats

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    stats = self.clean_once()
                except ClosedError:
                    return
                if stats is None or not stats.cleaned:
                    self._wake.wait(self.backoff_ms / 1000.0)
                    self._wake.clear()

        self._thread = threading.Thread(target=loop, name=f"log-cleaner-{self.manager.data_dir}", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        t, self._thread = self._thread, None
        if t is not None:
            self._stop.set()
            self._wake.set()
            t.join()
