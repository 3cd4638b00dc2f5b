"""The append path of a PartitionLog (log.py): validate, stamp, write, index, roll.

One append, under the log's ``_lock``: refuse a closed, read-only or offline
log; check a marker's epochs, a compacted topic's keys, an idempotent
producer's sequence (a retried batch answers its original offsets, nothing
written: log_txn.py); stamp offsets, leader epoch and LogAppendTime in place
(``_native.assign_offsets``: a follower's batches keep their offsets);
checkpoint the epoch's start offset before the write; roll when the active
segment says so (``roll_locked``: Kafka's roll rule, segment.py); write and
index.  An I/O error (ENOSPC, EIO, EFBIG) leaves no partial batch: the
segment cuts it back (or the log goes offline when it cannot) and
KafkaStorageError is raised.  Then the producer state, ``.txnindex``
entries, log end offset and the automatic high watermark move; a durable
append waits for its fdatasync outside the lock (log_flush.py).  Module
functions of the log they are given (PartitionLog's ``append``,
``append_control`` and ``roll`` call them); the lock rule is log.py's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .. import _native
from ..errors import KafkaStorageError
from .epochs import LeaderEpochCache
from .local_log import LocalLog
from .log_flush import LogFlusher
from .log_txn import LogTransactions
from .logtypes import AppendInfo
from .producer_state import ProducerStateManager
from .segment import LogSegment

__all__ = ["append", "roll_locked"]


class _Log(Protocol):
    """What the append path uses of its PartitionLog (log.py; not imported: it imports this module)."""

    log_end_offset: int
    _failed: BaseException | None

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def config(self) -> Any: ...
    @property
    def clock(self) -> Callable[[], int]: ...
    @property
    def leader_epoch_cache(self) -> LeaderEpochCache: ...
    @property
    def producer_state(self) -> ProducerStateManager: ...
    @property
    def _compacted(self) -> bool: ...
    @property
    def _lock(self) -> AbstractContextManager[Any]: ...
    @property
    def _local(self) -> LocalLog: ...
    @property
    def _flusher(self) -> LogFlusher: ...
    @property
    def _txn(self) -> LogTransactions: ...
    def _check_writable(self) -> None: ...
    def _check_offsets(self) -> None: ...
    def _maybe_advance_hw(self, offset: int) -> None: ...


def append(log: _Log, buf, leader_epoch, assign_offsets: bool, log_append_time, marker) -> AppendInfo:
    """PartitionLog.append / append_control (their docstrings): `marker` is (producer id, epoch, commit,
    coordinator epoch) for a transaction marker, else None."""
    log._check_writable()
    if not isinstance(buf, bytearray):
        mv = memoryview(buf)
        if mv.readonly or not mv.c_contiguous:
            buf = bytearray(mv)
    cfg = log.config
    if log_append_time is None and cfg["message.timestamp.type"] == "LogAppendTime":
        log_append_time = log.clock()
    lat = -1 if log_append_time is None else log_append_time
    with log._lock:
        log._check_writable()
        epoch = leader_epoch if leader_epoch is not None else max(log.leader_epoch_cache.latest_epoch, 0)
        idempotent = None
        if marker is not None:
            log.producer_state.check_marker(marker[0], marker[1], marker[3])
        elif log._compacted and assign_offsets:
            _native.check_keys(buf, f"{log.topic}-{log.partition}")
        # the first batch has a producerId >= 0: an idempotent producer
        if assign_offsets and marker is None and _native.batch_producer_id(buf) >= 0:
            idempotent = log._txn.check_idempotent(buf)
            if isinstance(idempotent, AppendInfo):
                return idempotent  # a retried batch: its original offsets, nothing written
        elif not assign_offsets and len(buf) >= _native.BATCH_HEADER_SIZE:
            # a follower's batches: replay them into the producer state after the write
            idempotent = _native.list_batches(buf, 0, -1, False)[0]
        first, last, maxts, off_maxts, nb, nrec = _native.assign_offsets(
            buf, log.log_end_offset, epoch, lat, marker is not None or not assign_offsets,
            cfg["max.message.bytes"], not assign_offsets)
        size = len(buf)
        local = log._local
        seg = local.segments[-1]
        try:
            # the epoch's start offset is checkpointed before the batch is written (Kafka
            # assigns it before the segment append too): a failed checkpoint writes nothing,
            # and an entry at the log end offset is what become-leader leaves anyway
            if log.leader_epoch_cache.assign(epoch, first):
                log.leader_epoch_cache.flush()
            if seg.size > 0 and seg.should_roll(size, maxts, last, log.clock()):
                seg = roll_locked(log)
            seg.append(last, maxts, off_maxts, buf)
        except OSError as e:
            try:
                if os.fstat(seg.fd).st_size != seg.size:
                    log._failed = e  # could not cut the partial batch back: go offline
            except OSError:
                log._failed = e
            raise KafkaStorageError(e.errno, f"append to {seg.log_path} failed: {e.strerror}") from e
        if marker is not None:
            done = log.producer_state.complete_txn(marker[0], marker[1], marker[3], first,
                                                    maxts, marker[2])
            if done is not None and done.aborted:
                log._txn.index_aborted(seg, [done])
        elif not assign_offsets:
            if idempotent:
                log._txn.index_aborted(seg, log.producer_state.replay(idempotent, 0, buf))
        elif idempotent:
            off = first
            for h in idempotent:
                if h.producer_id >= 0:
                    log.producer_state.update(h.producer_id, h.producer_epoch, h.base_sequence,
                                               h.last_offset_delta, off, off + h.last_offset_delta,
                                               h.max_timestamp if lat < 0 else lat,
                                               h.is_transactional)
                off += h.last_offset_delta + 1
        log.log_end_offset = last + 1
        durable = cfg["flush.messages"] <= log.log_end_offset - local.recovery_point
        if not (durable or cfg.durable):
            log._maybe_advance_hw(log.log_end_offset)
        log._check_offsets()
        end = log.log_end_offset
    if durable or cfg.durable:
        log._flusher.await_sync(end)
    return AppendInfo(first, last, maxts, off_maxts, lat, nb, nrec, size)


def roll_locked(log: _Log) -> LogSegment:
    """A new active segment at the log end offset (the same one if it is empty); caller holds ``_lock``.

    A real roll schedules the flush of the segments before it and snapshots the producer state.
    """
    old = log._local.segments[-1]
    new_base = log.log_end_offset
    seg = log._local.roll(new_base)
    if seg is not old:
        log._flusher.rolled(new_base)
        log._txn.snapshot(new_base)
    return seg
