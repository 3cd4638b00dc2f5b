"""File and directory names of Kafka's log layout (one module defines them all).

Format::

    <log dir>/<topic>-<partition>/            partition directory (topic may contain '-')
        00000000000000000000.log              segment data, named by base offset (20 digits)
        00000000000000000000.index            offset index    (csrc/index.pyx)
        00000000000000000000.timeindex        time index      (csrc/index.pyx)
        00000000000000000000.txnindex         aborted-transaction index (optional)
        00000000000000000000.snapshot         producer-state snapshot
        leader-epoch-checkpoint, partition.metadata, .highwatermark (ours)
    <log dir>/<topic>-<partition>.<uuid32>-delete   a partition directory being deleted
    suffixes .deleted / .cleaned / .swap            leftovers resolved on open

Invariants: the base offset is a non-negative int64 printed with 20 digits,
so lexical order is offset order.  Pure functions; no I/O; thread-safe.
"""

from __future__ import annotations

import re
import uuid

from ..errors import InvalidTopicError

__all__ = [
    "CLEANED_SUFFIX",
    "CLEANER_OFFSET_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "DELETED_SUFFIX",
    "DELETE_DIR_SUFFIX",
    "HIGH_WATERMARK_FILE",
    "INDEX_SUFFIX",
    "LEADER_EPOCH_CHECKPOINT",
    "LOCK_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "LOG_SUFFIX",
    "MAX_TOPIC_LENGTH",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "SNAPSHOT_SUFFIX",
    "SWAP_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "delete_dir_name",
    "filename_prefix",
    "offset_from_filename",
    "partition_dir_name",
    "parse_partition_dir",
    "segment_file",
    "validate_topic",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETE_DIR_SUFFIX = "-delete"

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# Ours, not Kafka's: the writer's published high watermark (8 bytes, see log.py).
HIGH_WATERMARK_FILE = ".highwatermark"

MAX_TOPIC_LENGTH = 249
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]+$")
_DELETE_DIR_RE = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})-delete$")


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded base offset."""
    if offset < 0:
        raise ValueError(f"negative base offset {offset}")
    return f"{offset:020d}"


def segment_file(offset: int, suffix: str) -> str:
    return filename_prefix(offset) + suffix


def offset_from_filename(name: str) -> int:
    """Base offset of a segment file name (`00000000000000000042.log` -> 42)."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        raise ValueError(f"not a segment file name: {name!r}")
    return int(stem)


def validate_topic(topic: str) -> str:
    """Kafka's topic rules: 1..249 chars of [a-zA-Z0-9._-], not '.' or '..'."""
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError("topic name is empty")
    if topic in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic name is longer than {MAX_TOPIC_LENGTH} characters")
    if not _TOPIC_RE.match(topic):
        raise InvalidTopicError(f"topic name {topic!r} has characters outside [a-zA-Z0-9._-]")
    return topic


def partition_dir_name(topic: str, partition: int) -> str:
    validate_topic(topic)
    if partition < 0:
        raise ValueError(f"negative partition {partition}")
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int]:
    """(topic, partition) of `<topic>-<partition>`, split at the LAST '-'.

    Also accepts a `<topic>-<p>.<uuid>-delete` directory.  Raises ValueError
    for anything else.
    """
    m = _DELETE_DIR_RE.match(name)
    if m:
        return validate_topic(m.group(1)), int(m.group(2))
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or (len(part) > 1 and part[0] == "0"):
        raise ValueError(f"not a partition directory name: {name!r}")
    try:
        validate_topic(topic)
    except InvalidTopicError as e:
        raise ValueError(f"not a partition directory name: {name!r} ({e})") from None
    return topic, int(part)


def is_delete_dir(name: str) -> bool:
    return bool(_DELETE_DIR_RE.match(name))


def delete_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<p>.<uuid32>-delete` (Kafka's name for a directory scheduled for deletion)."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
