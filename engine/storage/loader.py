"""LogLoader: open a partition directory, recovering it after an unclean shutdown.

Files handled (kafka-storage-format.md §5, §8): ``<base>.log/.index/.timeindex``,
leftovers ``*.deleted`` / ``*.cleaned`` / ``*.swap``, orphan index files,
``leader-epoch-checkpoint``, producer snapshots ``<offset>.snapshot``
(``load_producer_state``, after the segments are loaded).

Rules (Kafka's LogLoader):
* Always: delete ``.deleted`` and ``.cleaned`` files; complete a ``.log.swap``
  (the cleaner's new segment, fsync'd before it got that name): every old
  segment whose base offset lies in the swap's offset range [base, next
  offset) is deleted — it is what the swap replaces (Kafka's rule) — then the
  swap is renamed to ``.log`` and its indexes rebuilt; delete index files
  without a ``.log`` (orphans).  Each change is a RecoveryEvent.
* Clean shutdown (marker present): indexes are loaded and sanity-checked, not
  rebuilt; no segment is scanned (``stats.segments_scanned`` stays 0) unless
  an index fails its check.
* Unclean: every segment holding offsets at or above the recovery point, and
  any segment whose index is missing or fails its check, is recovered
  (``LogSegment.recover``: CRC-checked walk, `.log` cut after the last valid
  batch, indexes rebuilt).  After the first segment that lost bytes, every
  later segment is deleted (its offsets would leave a gap).
* Read-only: nothing is changed on disk; corrupt indexes are not used.  A
  ``.log.swap`` stands in for the segments it covers (a cleaner is swapping
  them right now); the listing is retried until every opened file is still
  under the name it was listed by, so a reader never mixes old and new
  segments of one swap.

Concurrency: runs inside PartitionLog's constructor, before the log is shared.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import _native
from ..errors import CorruptIndexError, CorruptRecordError
from . import checkpoint, files, producer_state
from .epochs import HighWatermarkFile, LeaderEpochCache
from .logtypes import RecoveryEvent, RecoveryStats
from .segment import LogSegment

if TYPE_CHECKING:
    from .local_log import LocalLog

__all__ = ["LoadedLog", "discover_new_segments", "load_partition", "load_producer_state", "refresh_read_only"]


@dataclass
class LoadedLog:
    segments: list
    epoch_cache: LeaderEpochCache
    stats: RecoveryStats


def _event(stats: RecoveryStats, path: str, position, dropped: int, reason: str) -> None:
    stats.events.append(RecoveryEvent(path, position, dropped, reason))


def _remove_leftovers(d: str, stats: RecoveryStats) -> None:
    names = sorted(os.listdir(d))
    for name in names:
        path = os.path.join(d, name)
        if name.endswith(files.DELETED_SUFFIX) or name.endswith(files.CLEANED_SUFFIX) or name.endswith(".tmp"):
            size = os.path.getsize(path) if os.path.isfile(path) else 0
            os.unlink(path)
            _event(stats, path, None, 0, f"removed leftover {name.rsplit('.', 1)[-1]} file ({size} bytes)")
    for name in sorted(os.listdir(d)):
        if not name.endswith(files.SWAP_SUFFIX):
            continue
        path = os.path.join(d, name)
        target = path[: -len(files.SWAP_SUFFIX)]
        if target.endswith(files.LOG_SUFFIX):
            base = files.offset_from_filename(name)
            end = _swap_next_offset(path, base)
            for old in _segment_bases(d):
                if base <= old < end:
                    stem = os.path.join(d, files.filename_prefix(old))
                    for suf in (files.LOG_SUFFIX, files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX,
                                files.TXN_INDEX_SUFFIX):
                        try:
                            os.unlink(stem + suf)
                        except FileNotFoundError:
                            pass
                    _event(stats, stem + files.LOG_SUFFIX, None, 0,
                           f"deleted: replaced by the cleaned segment {name}")
            os.replace(path, target)
            stem = target[: -len(files.LOG_SUFFIX)]
            for suf in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX):
                try:
                    os.unlink(stem + suf)
                except FileNotFoundError:
                    pass
            _event(stats, target, None, 0, "completed a .swap segment (indexes will be rebuilt)")
        else:
            os.unlink(path)
            _event(stats, path, None, 0, "removed .swap index file (rebuilt from the log)")
    logs = {n[: -len(files.LOG_SUFFIX)] for n in os.listdir(d) if n.endswith(files.LOG_SUFFIX)}
    for name in sorted(os.listdir(d)):
        for suf in (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX):
            if name.endswith(suf) and name[: -len(suf)] not in logs:
                os.unlink(os.path.join(d, name))
                _event(stats, os.path.join(d, name), None, 0, "removed orphan index file")


def _swap_next_offset(path: str, base: int) -> int:
    """One past the last offset of the batches in a `.swap` segment (base when it has none)."""
    with open(path, "rb") as f:
        data = f.read()
    r = _native.scan_segment(data, base, 0, len(data), 1 << 62, -1, False)
    return r.next_offset if r.batches else base


def _segment_bases(d: str) -> list[int]:
    out = []
    for name in os.listdir(d):
        if name.endswith(files.LOG_SUFFIX):
            try:
                out.append(files.offset_from_filename(name))
            except ValueError:
                continue
    return sorted(out)


def load_partition(log, *, had_clean_shutdown: bool, recovery_point: int, log_start_offset: int) -> LoadedLog:
    d, cfg, ro = log.dir, log.config, log.read_only
    stats = RecoveryStats()
    epoch_path = os.path.join(d, files.LEADER_EPOCH_CHECKPOINT)
    if ro:
        return _load_read_only(log, stats, epoch_path)
    _remove_leftovers(d, stats)
    hw_path = os.path.join(d, files.HIGH_WATERMARK_FILE)
    hw_file = HighWatermarkFile(hw_path, False)
    mapped_below = (hw_file.read() or (0, 0))[0]    # readers may hold maps of batches below it
    hw_file.close()
    bases = _segment_bases(d)
    segments: list[LogSegment] = []
    cache = LeaderEpochCache(epoch_path)
    epoch_ok = True
    try:
        entries = checkpoint.read_epoch_checkpoint(epoch_path)
        if entries is None:
            epoch_ok = False
        else:
            cache.entries = entries
    except checkpoint.CheckpointError as e:
        epoch_ok = False
        _event(stats, epoch_path, None, 0, f"distrusted: {e.reason}; rebuilt from the log")
    rebuild_epochs = not epoch_ok
    rebuild_cache = LeaderEpochCache(epoch_path) if rebuild_epochs else None
    truncated_at: int | None = None
    for i, base in enumerate(bases):
        if truncated_at is not None:
            # Offsets after a truncation would leave a gap: delete (Kafka §8.6).
            seg = LogSegment(d, base, cfg)
            _event(stats, seg.log_path, 0, seg.size, "deleted: follows a truncated segment")
            seg.delete()
            continue
        is_last = i == len(bases) - 1
        seg = LogSegment(d, base, cfg)
        next_base = bases[i + 1] if not is_last else None
        need = False
        reason = ""
        if not had_clean_shutdown and (next_base is None or next_base > recovery_point):
            need, reason = True, "unflushed (at or above the recovery point)"
        else:
            try:
                seg.sanity_check(deep=not had_clean_shutdown)
            except CorruptIndexError as e:
                need, reason = True, f"index failed its sanity check: {e.reason}"
                bad_index = getattr(e, "path", None) or seg.index_path
            if not need and is_last and seg.size > 0:
                _ = seg.next_offset  # the property walks the tail after the last index entry
                if seg.tail_valid_end != seg.size:
                    need, reason = True, "active segment ends in an incomplete or bad batch"
        if need and segments and not log.gaps_allowed and not had_clean_shutdown:
            prev_end = segments[-1].next_offset
            if base != prev_end:
                # The end of the previous segment was lost (power loss) but this one survived:
                # its offsets would leave a gap.  Drop it and everything after it.
                _event(stats, seg.log_path, 0, seg.size,
                       f"deleted: starts at {base} but the log before it ends at {prev_end}")
                seg.delete()
                truncated_at = prev_end
                continue
        if need:
            before = seg.size
            ecache = rebuild_cache if rebuild_cache is not None else cache
            if ecache is cache:
                cache.truncate_from_end(base)  # epochs at/after this segment come from its batches
            prior = [e for e, o in ecache.entries if o < base]
            r, truncated = seg.recover(ecache, last_epoch=prior[-1] if prior else -1,
                                       gaps_allowed=log.gaps_allowed, mapped_below=mapped_below)
            stats.segments_scanned += 1
            stats.bytes_scanned += before
            if reason.startswith("index"):
                _event(stats, bad_index, None, 0, reason + "; rebuilt")
            if truncated > 0:
                _event(stats, seg.log_path, r.valid_end, truncated,
                       f"{reason}: {r.reason}" if r.status not in (0,) else reason)
                truncated_at = seg.next_offset
                if truncated_at < mapped_below:   # read-only opens take the new files
                    cut = HighWatermarkFile(hw_path, True)
                    cut.count_cut()
                    cut.close()
        elif rebuild_cache is not None:
            _collect_epochs(seg, rebuild_cache)
        segments.append(seg)
    if rebuild_cache is not None:
        cache.entries = rebuild_cache.entries
    if not segments:
        start = max(log_start_offset, recovery_point if not bases else 0)
        segments.append(LogSegment(d, start, cfg, create=True))
    # An empty non-active segment at the end after truncation keeps its base; fine.
    segments[-1].make_active()
    leo = segments[-1].next_offset
    changed = cache.truncate_from_end(leo)
    if segments[0].base_offset > 0:
        changed |= cache.truncate_from_start(max(segments[0].base_offset, log_start_offset))
    if changed or rebuild_epochs:
        cache.flush()
    return LoadedLog(segments, cache, stats)


def _collect_epochs(seg: LogSegment, cache: LeaderEpochCache) -> None:
    if seg.size == 0:
        return
    headers, _ = _native.list_batches(seg._data(), 0, seg.size, False, seg.log_path)
    for h in headers:
        cache.assign(h.partition_leader_epoch, h.base_offset)


def _load_read_only(log, stats: RecoveryStats, epoch_path: str) -> LoadedLog:
    d, cfg = log.dir, log.config
    hw_file = HighWatermarkFile(os.path.join(d, files.HIGH_WATERMARK_FILE), False)
    # before the listing: a cut after it is seen at the next refresh, and index entries below this
    # high watermark are of batches no in-place cut can touch (segment.index_trusted_below)
    log._cuts_seen = hw_file.cuts()
    hw = (hw_file.read() or (0, 0))[0]
    hw_file.close()
    segments: list[LogSegment] = []
    for _attempt in range(100):
        segments = _read_only_snapshot(d, cfg, stats, hw)
        if segments is not None:
            break
    else:
        raise OSError(f"{d}: segments kept changing while opening read-only")
    if not segments:
        raise FileNotFoundError(f"no segments in {d}")
    try:
        entries = checkpoint.read_epoch_checkpoint(epoch_path) or []
    except checkpoint.CheckpointError as e:
        _event(stats, epoch_path, None, 0, f"distrusted: {e.reason}")
        entries = []
    return LoadedLog(segments, LeaderEpochCache(None, entries), stats)


def _read_only_snapshot(d: str, cfg, stats: RecoveryStats, hw: int) -> list[LogSegment] | None:
    """Open the segments as listed; None if a writer renamed one meanwhile (retry)."""
    names = os.listdir(d)
    swap_suffix = files.LOG_SUFFIX + files.SWAP_SUFFIX
    swaps, logs = [], []
    for name in names:
        try:
            if name.endswith(swap_suffix):
                swaps.append(files.offset_from_filename(name))
            elif name.endswith(files.LOG_SUFFIX):
                logs.append(files.offset_from_filename(name))
        except ValueError:
            continue
    opened: list[LogSegment] = []
    try:
        covered = []
        for base in sorted(swaps):
            seg = _open_read_only(d, base, cfg, stats, hw, files.SWAP_SUFFIX)
            opened.append(seg)
            covered.append((base, seg.next_offset))
        for base in sorted(logs):
            if not any(lo <= base < hi for lo, hi in covered):
                opened.append(_open_read_only(d, base, cfg, stats, hw))
        for seg in opened:
            if os.stat(seg.log_path).st_ino != os.fstat(seg.fd).st_ino:
                raise FileNotFoundError(seg.log_path)
    except FileNotFoundError:
        for seg in opened:
            seg.close()
        return None
    opened.sort(key=lambda s: s.base_offset)
    return opened


def _open_read_only(d: str, base: int, cfg, stats: RecoveryStats, hw: int, suffix: str = "") -> LogSegment:
    seg = LogSegment(d, base, cfg, writable=False, suffix=suffix)
    seg.index_trusted_below = hw
    try:
        seg.index.sanity_check()
        seg.time_index.sanity_check()
    except (CorruptIndexError, CorruptRecordError) as e:
        seg.index_ok = False
        _event(stats, seg.index_path, None, 0, f"index not used (read-only open): {e}")
    return seg


def discover_new_segments(local: LocalLog, stats: RecoveryStats, hw: int) -> None:
    """Read-only opens: add segments the writer created since (called under the PartitionLog's lock;
    `hw`: the writer's high watermark, read before)."""
    known = set(local.bases)
    for base in _segment_bases(local.dir):
        if base not in known and base > local.bases[-1]:
            local.segments[-1].refresh_size(hw)
            local.add_segment(_open_read_only(local.dir, base, local.config, stats, hw))


def refresh_read_only(log) -> None:
    """Read-only opens (PartitionLog.refresh, under its lock): after the writer cut batches below
    the high watermark (the cut count of ``.highwatermark``) take the directory's segments afresh
    -- it replaced or deleted files, and FileSlices handed out keep the old ones; then add the
    segments and bytes the writer appended since, up to the published high watermark."""
    local = log._local
    if log._hw_file.cuts() != log._cuts_seen:
        loaded = _load_read_only(log, log.recovery_stats, os.path.join(log.dir, files.LEADER_EPOCH_CHECKPOINT))
        old, local.segments, local.bases = local.segments, loaded.segments, [s.base_offset for s in loaded.segments]
        for seg in old:
            seg.close()
        log.leader_epoch_cache = loaded.epoch_cache
        log.log_end_offset = local.segments[-1].next_offset
        log.log_start_offset = min(max(log.log_start_offset, local.segments[0].base_offset), log.log_end_offset)
    if log.high_watermark > log.log_end_offset:
        discover_new_segments(local, log.recovery_stats, log.high_watermark)
        local.segments[-1].refresh_size(log.high_watermark)
        log.log_end_offset = local.segments[-1].next_offset


def load_producer_state(log, upto: int, stats: RecoveryStats, report_stale: bool = True) -> None:
    """Rebuild ``log.producer_state``: the latest valid snapshot at or below `upto`, then the log above it.

    Snapshots above the log end offset are stale (a truncation or a lost tail) and
    deleted; an unreadable one (version, CRC, size) is reported, deleted and the
    state is rebuilt from an older snapshot or from the log start.  Only batch
    headers are read (``_native.list_batches``), from the snapshot's offset on;
    after a clean shutdown the snapshot at the log end leaves nothing to replay.

    Transaction index: a segment recovered by this load (``seg.txn_rebuild``)
    gets its ``.txnindex`` rewritten from the markers replayed in it (Kafka
    rebuilds it in LogSegment.recover); the replay then starts at or below
    the first such segment, so the open transactions at its start are known.
    Called with the log's lock held (or before the log is shared).
    """
    from .txnindex import AbortedTxn

    d, state = log.dir, log.producer_state
    state.clear()
    leo = log.log_end_offset
    segments = log._local.segments
    first = segments[0].base_offset
    rebuild = [seg for seg in segments if seg.txn_rebuild]
    if rebuild:
        upto = min(upto, rebuild[0].base_offset)
    for off in producer_state.delete_snapshots(d, lambda o: o > leo):
        if report_stale:
            _event(stats, producer_state.snapshot_path(d, off), None, 0,
                   f"deleted producer snapshot above the log end offset {leo}")
    start = first
    for off in reversed(producer_state.list_snapshots(d)):
        if off > upto:
            continue
        if off < first:
            break  # the log below it is gone: replay cannot start there
        path = producer_state.snapshot_path(d, off)
        try:
            entries = producer_state.read_snapshot(path)
        except (producer_state.SnapshotError, OSError) as e:
            size = os.path.getsize(path) if os.path.exists(path) else 0
            os.unlink(path)
            _event(stats, path, None, size,
                   f"distrusted producer snapshot: {getattr(e, 'reason', e)}; rebuilt from the log")
            continue
        state.load(entries)
        start = off
        break
    for seg in segments:
        if seg.size == 0 or seg.next_offset <= start:
            if seg.txn_rebuild:
                seg.txn_index.rewrite([])
                seg.txn_rebuild = False
            continue
        pos = 0
        if seg.base_offset < start:
            found = seg.translate_offset(start)
            if found is None:
                continue
            pos = found[0]
        data = seg._data()
        try:
            headers, _ = _native.list_batches(data, pos, seg.size, False, seg.log_path, 0)
        except CorruptRecordError as e:
            # Not expected below a recovered log end; the state keeps what was read before it.
            _event(stats, seg.log_path, getattr(e, "position", None), 0,
                   f"producer state not replayed past a bad batch: {e}")
            break
        done = state.replay(headers, start, data)
        if seg.txn_rebuild:
            seg.txn_index.rewrite([AbortedTxn(c.producer_id, c.first_offset, c.last_offset, c.last_stable_offset)
                                   for c in done if c.aborted])
            seg.txn_rebuild = False
