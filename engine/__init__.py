"""kafka-engine: a Kafka-compatible commit log for Python.

Partitions are stored in Apache Kafka's own on-disk format (RecordBatch v2,
CRC-32C, segment + offset/time index files, checkpoints) by a Cython core;
this package is the thin Python layer over it.  Start with :func:`open`.
"""

from . import errors
from ._engine import Engine, PartitionDescription, TopicDescription, open
from .arrow import KAFKA_SCHEMA
from .client._types import ConsumerRecord, OffsetAndTimestamp, RawBatch, RecordMetadata, TopicPartition
from .client.consumer import Consumer
from .client.producer import Producer
from .client.remote import connect
from .config import EngineConfig, LogConfig
from .errors import (
    ClosedError,
    CorruptIndexError,
    CorruptRecordError,
    DataDirLockedError,
    EngineError,
    InvalidConfigError,
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RecordTooLargeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from .storage.manager import broker_address

__version__ = "0.1.0"

__all__ = [
    "ClosedError",
    "Consumer",
    "ConsumerRecord",
    "CorruptIndexError",
    "CorruptRecordError",
    "DataDirLockedError",
    "Engine",
    "EngineConfig",
    "EngineError",
    "InvalidConfigError",
    "InvalidRecordError",
    "KAFKA_SCHEMA",
    "KafkaStorageError",
    "LogConfig",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PartitionDescription",
    "Producer",
    "RawBatch",
    "ReadOnlyError",
    "RecordMetadata",
    "RecordTooLargeError",
    "TopicAlreadyExistsError",
    "TopicDescription",
    "TopicPartition",
    "UnknownTopicOrPartitionError",
    "broker_address",
    "connect",
    "errors",
    "open",
]
