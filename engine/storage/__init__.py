"""The storage layer: Kafka's on-disk log format, byte for byte.

Modules: files (names), checkpoint (atomic small files), segment (LogSegment,
FileSlice), log (PartitionLog, AppendInfo, FetchInfo, LeaderEpochCache,
HighWatermarkFile), loader (startup recovery), manager (LogManager).  The
native parts (OffsetIndex, TimeIndex, syscall wrappers) live in engine._native.
"""

from .checkpoint import CheckpointError
from .log import AppendInfo, FetchInfo, HighWatermarkFile, LeaderEpochCache, PartitionLog, RecoveryEvent
from .manager import LogManager
from .segment import FileSlice, LogSegment

__all__ = [
    "AppendInfo",
    "CheckpointError",
    "FetchInfo",
    "FileSlice",
    "HighWatermarkFile",
    "LeaderEpochCache",
    "LogManager",
    "LogSegment",
    "PartitionLog",
    "RecoveryEvent",
]
