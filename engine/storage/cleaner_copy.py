"""Cleaning one group of segments into one new segment (step 3 of cleaner.py's overview;
Kafka's Cleaner.cleanSegments / cleanInto), and reading sealed segments for it.

``read_chunks`` reads a sealed segment's complete batches with ``preadv`` into
one reused buffer, chunk by chunk (``_READ_CHUNK``, grown for a batch larger
than a chunk): a read, not a mapping, because a truncation could cut the file
under the cleaning.  The offset map pass (cleaner_pass.py) reads through it too.

``clean_group`` filters a group into ``<base>.log.cleaned`` (+ its indexes;
``_native.compact_batch``): a record survives when it has a key and no later
offset of that key is in the offset map; tombstones until their delete
horizon; transactional batches and markers by cleaner_txn.py's rules; a batch
left empty goes unless it is the last of an active idempotent producer or of
the group (then the cleaned segment ends at the group's last offset, so a
``.swap`` covers exactly the segments it replaces).  Then it fsyncs the
cleaned files and swaps them in (cleaner_swap.py).  A lone segment with
nothing to remove is left as it is.  Runs without the log lock, checking for
an abort (cleaner_state.py) between chunks.
"""

from __future__ import annotations

import os
from typing import Any

from .. import _native
from ..errors import CorruptRecordError
from . import checkpoint, files
from .cleaner_swap import swap_group
from .cleaner_txn import COMPACT, KEEP, CleanedTxnMetadata, in_range, transactional_batch
from .cleaner_types import CleaningPlan, CleanStats, SegmentSnap, SimulatedCrash
from .segment import LogSegment

__all__ = ["clean_group", "read_chunks"]

_READ_CHUNK = 8 << 20


# -- reading sealed segments ---------------------------------------------------
def read_chunks(snap: SegmentSnap, check_crc: bool, headers: bool = True):
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


# -- one group -----------------------------------------------------------------
def clean_group(log, cfg, group: list[SegmentSnap], offset_map, now: int, plan: CleaningPlan,
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
            for data, headers, chunk_pos in read_chunks(snap, True):
                log._cleaning.check()
                mv = memoryview(data)
                for h in headers:
                    # The last batch of the group stays (empty if need be), so the cleaned
                    # segment ends at the group's last offset: a .swap then covers exactly
                    # the old segments it replaces (loader.py).
                    group_end = snap is last_snap and h.position + h.size == snap.size
                    rel = h.position - chunk_pos
                    piece: Any = COMPACT     # a sentinel of cleaner_txn.py, or the bytes to write
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
        swapped = swap_group(log, group, cleaned, on_step)
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
