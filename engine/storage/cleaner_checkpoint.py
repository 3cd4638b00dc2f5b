"""The cleaner checkpoint: ``<data dir>/cleaner-offset-checkpoint``.

One file per data directory, shared by its partitions: Kafka's text offset
checkpoint format (``0`` / N / ``topic partition offset``, atomic write via
checkpoint.py), mapping each compacted partition to its first dirty offset.
Written by the cleaner (cleaner_pass.py) after a cleaning, by the LogManager when a
partition goes away, and lowered by a log truncation (``truncate_checkpoint``).
Updates of one file are serialised by a per-path lock.  Re-exported from
cleaner.py.
"""

from __future__ import annotations

import os
import threading

from . import checkpoint, files

__all__ = ["checkpoint_path", "read_cleaner_checkpoint", "truncate_checkpoint", "update_cleaner_checkpoint"]

_ckpt_guard = threading.Lock()
_ckpt_locks: dict[str, threading.Lock] = {}


def _ckpt_lock(path: str) -> threading.Lock:
    with _ckpt_guard:
        lk = _ckpt_locks.get(path)
        if lk is None:
            lk = _ckpt_locks[path] = threading.Lock()
        return lk


def checkpoint_path(log) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(log.dir)), files.CLEANER_OFFSET_CHECKPOINT)


def read_cleaner_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """{(topic, partition): first dirty offset}; a garbled file counts as empty (everything dirty)."""
    try:
        return checkpoint.read_offset_checkpoint(path) or {}
    except checkpoint.CheckpointError:
        return {}


def update_cleaner_checkpoint(path: str, key: tuple[str, int], offset: int | None) -> None:
    """Set (or with None remove) one partition's entry, atomically."""
    with _ckpt_lock(path):
        entries = read_cleaner_checkpoint(path)
        if offset is None:
            if key not in entries:
                return
            entries.pop(key)
        else:
            if entries.get(key) == offset:
                return
            entries[key] = offset
        checkpoint.write_offset_checkpoint(path, entries)


def truncate_checkpoint(log, offset: int) -> None:
    """The log was truncated to `offset`: the first dirty offset may not stay above it (Kafka)."""
    path = checkpoint_path(log)
    if not os.path.exists(path):
        return
    key = (log.topic, log.partition)
    cur = read_cleaner_checkpoint(path).get(key)
    if cur is not None and cur > offset:
        update_cleaner_checkpoint(path, key, offset)
