"""The exception tree of the engine, one tree for storage, the embedded API and
the broker.  Every class that has a Kafka counterpart carries Kafka's
error ``code`` and whether it is ``retriable``; :func:`for_code` maps a code
back to its class.  Classes also subclass a builtin where that is natural, so
``except ValueError`` still catches a corrupt batch.

::

    EngineError
    ├── KafkaApiError                          code, retriable (Kafka's errors)
    │   ├── OffsetOutOfRangeError (1)          fetch/seek outside [log start, LEO]
    │   ├── CorruptRecordError (2)             CRC or structure check failed; names file + position
    │   │   └── CorruptIndexError              an .index/.timeindex failed its sanity check
    │   ├── UnknownTopicOrPartitionError (3)   also a KeyError
    │   ├── RecordTooLargeError (10)           batch > max.message.bytes
    │   ├── InvalidTopicError (17)             bad topic name
    │   ├── InvalidRequiredAcksError (21)      Produce acks not in {-1, 0, 1}
    │   ├── UnsupportedVersionError (35)       API key/version the broker does not serve
    │   ├── TopicAlreadyExistsError (36)
    │   ├── InvalidPartitionsError (37)
    │   ├── InvalidReplicationFactorError (38)
    │   ├── InvalidConfigError (40)            unknown key or bad value; also a ValueError
    │   ├── InvalidRequestError (42)           a frame/request that fails to parse (the broker closes)
    │   ├── OutOfOrderSequenceError (45)       idempotent batch whose sequence does not follow the last one
    │   ├── InvalidProducerEpochError (47)     idempotent batch from an older producer epoch
    │   ├── ProducerFencedError (90)           another producer took this transactional.id (fatal)
    │   ├── KafkaStorageError (56)             I/O failure (EIO, ENOSPC) on a log dir; also an OSError
    │   ├── FencedLeaderEpochError (74)        request's leader epoch older than the partition's
    │   ├── UnknownLeaderEpochError (75)       request's leader epoch newer than the partition's
    │   ├── UnsupportedCompressionTypeError (76)
    │   └── InvalidRecordError (87)            a batch a client must not send
    ├── DataDirLockedError                     a second writer opened a data directory
    ├── ReadOnlyError                          a write through a read-only open
    ├── ClosedError                            use of a closed log, engine, producer or consumer
    └── CommitFailedError                      a group member's commit refused after a rebalance

Expected outcomes (a partial batch at the live tail, the end of the log) are
return values, never exceptions.
"""

from __future__ import annotations

__all__ = [
    "ClosedError",
    "CommitFailedError",
    "CorruptIndexError",
    "CorruptRecordError",
    "DataDirLockedError",
    "EngineError",
    "FencedLeaderEpochError",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidTopicError",
    "KafkaApiError",
    "KafkaStorageError",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "ProducerFencedError",
    "ReadOnlyError",
    "RecordTooLargeError",
    "TopicAlreadyExistsError",
    "UnknownLeaderEpochError",
    "UnknownTopicOrPartitionError",
    "UnsupportedCompressionTypeError",
    "UnsupportedVersionError",
    "api_error",
    "for_code",
]


class EngineError(Exception):
    """Base of every error this package raises on purpose."""


class KafkaApiError(EngineError):
    """An error with a Kafka protocol error code (codes never change)."""

    code: int = -1
    retriable: bool = False
    name: str = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(KafkaApiError, IndexError):
    """A fetch or seek asked for an offset outside [log start offset, log end offset]."""

    code, retriable, name = 1, False, "OFFSET_OUT_OF_RANGE"


class CorruptRecordError(KafkaApiError, ValueError):
    """A record batch failed its CRC or a structural check.

    ``path`` and ``position`` name where the bad batch starts when it came from
    a file; ``reason`` says which check failed.
    """

    code, retriable, name = 2, True, "CORRUPT_MESSAGE"

    def __init__(self, reason: str, path: str | None = None, position: int | None = None):
        self.reason = reason
        self.path = path
        self.position = position
        where = ""
        if path is not None:
            where = f" in {path}"
            if position is not None:
                where += f" at byte {position}"
        super().__init__(f"corrupt record batch{where}: {reason}")


class CorruptIndexError(CorruptRecordError):
    """An offset or time index failed its sanity check (it is rebuilt from the log)."""


class UnknownTopicOrPartitionError(KafkaApiError, KeyError):
    """The topic or partition does not exist."""

    code, retriable, name = 3, True, "UNKNOWN_TOPIC_OR_PARTITION"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else self.name


class RecordTooLargeError(KafkaApiError, ValueError):
    """A batch is larger than ``max.message.bytes`` (Kafka: MESSAGE_TOO_LARGE)."""

    code, retriable, name = 10, False, "MESSAGE_TOO_LARGE"


class InvalidTopicError(KafkaApiError, ValueError):
    """A topic name is empty, too long, '.'/'..', or has characters outside [a-zA-Z0-9._-]."""

    code, retriable, name = 17, False, "INVALID_TOPIC_EXCEPTION"


class InvalidRequiredAcksError(KafkaApiError, ValueError):
    """Produce with acks other than -1, 0 or 1."""

    code, retriable, name = 21, False, "INVALID_REQUIRED_ACKS"


class UnsupportedVersionError(KafkaApiError):
    """An API key or version this broker does not serve (ApiVersions answers it; others close)."""

    code, retriable, name = 35, False, "UNSUPPORTED_VERSION"


class TopicAlreadyExistsError(KafkaApiError):
    code, retriable, name = 36, False, "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(KafkaApiError, ValueError):
    code, retriable, name = 37, False, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(KafkaApiError, ValueError):
    code, retriable, name = 38, False, "INVALID_REPLICATION_FACTOR"


class InvalidConfigError(KafkaApiError, ValueError):
    """An unknown configuration key or a value of the wrong type or range."""

    code, retriable, name = 40, False, "INVALID_CONFIG"


class InvalidRequestError(KafkaApiError, ValueError):
    """A frame or request that fails to parse: bad size prefix, a length past the
    frame, a null where none is allowed, tags out of order.  The broker closes
    the connection (Kafka does the same)."""

    code, retriable, name = 42, False, "INVALID_REQUEST"


class OutOfOrderSequenceError(KafkaApiError):
    """An idempotent producer's batch does not continue its sequence (a gap or a reordering)."""

    code, retriable, name = 45, False, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(KafkaApiError):
    """An idempotent batch carries an older epoch than the producer's current one."""

    code, retriable, name = 47, False, "INVALID_PRODUCER_EPOCH"


class ProducerFencedError(KafkaApiError):
    """A transactional producer was fenced: another instance with the same
    ``transactional.id`` called init_transactions(), or the coordinator aborted a
    timed-out transaction with an epoch bump (Kafka's ProducerFencedException).
    Fatal: the producer can only be closed."""

    code, retriable, name = 90, False, "PRODUCER_FENCED"


class KafkaStorageError(KafkaApiError, OSError):
    """An I/O error on a log directory (EIO, ENOSPC, read-only file system)."""

    code, retriable, name = 56, True, "KAFKA_STORAGE_ERROR"


class FencedLeaderEpochError(KafkaApiError):
    """A fetch or list-offsets carried a leader epoch older than the partition's."""

    code, retriable, name = 74, True, "FENCED_LEADER_EPOCH"


class UnknownLeaderEpochError(KafkaApiError):
    """A fetch or list-offsets carried a leader epoch newer than the partition's."""

    code, retriable, name = 75, True, "UNKNOWN_LEADER_EPOCH"


class UnsupportedCompressionTypeError(KafkaApiError, ValueError):
    code, retriable, name = 76, False, "UNSUPPORTED_COMPRESSION_TYPE"


class InvalidRecordError(KafkaApiError, ValueError):
    """A batch that is well formed but not acceptable (control batch from a client, bad count)."""

    code, retriable, name = 87, False, "INVALID_RECORD"


class DataDirLockedError(EngineError):
    """Another process holds the writer lock of a data directory.

    ``holder`` is what the holder wrote in the lock file (pid, host, start time).
    """

    def __init__(self, path: str, holder: str):
        self.path = path
        self.holder = holder
        super().__init__(
            f"data directory {path} is already open for writing by {holder or 'another process'}; "
            "open it with read_only=True, or stop that writer"
        )


class ReadOnlyError(EngineError):
    """A write was attempted through a read-only open."""


class ClosedError(EngineError, RuntimeError):
    """The log, engine, producer or consumer is closed."""


class CommitFailedError(EngineError):
    """A group member's offset commit was refused because the group rebalanced
    (stale generation or unknown member; Kafka's CommitFailedException).  The
    member rejoins on its next poll; the records since the last commit may be
    delivered again to whoever owns the partitions now."""


_BY_CODE: dict[int, type[KafkaApiError]] = {}
for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, KafkaApiError) and _cls.code >= 0:
        _BY_CODE.setdefault(_cls.code, _cls)


def for_code(code: int) -> type[KafkaApiError]:
    """The exception class for a Kafka error code (KafkaApiError if unknown)."""
    return _BY_CODE.get(code, KafkaApiError)


def api_error(code: int, context: str) -> KafkaApiError:
    """An exception for Kafka error `code` raised while doing `context`: our class for the code
    (for_code), or a KafkaApiError that keeps Kafka's code, name and retriable flag."""
    from kio.schema.errors import ErrorCode

    cls = for_code(code)
    try:
        ec = ErrorCode(code)
        name, retriable = ec.name.upper(), bool(ec.retriable)
    except ValueError:
        name, retriable = "UNKNOWN_SERVER_ERROR", False
    err = cls(f"{context}: {name} (error code {code})")
    if cls is KafkaApiError:  # no class of ours: keep Kafka's facts on the instance
        err.code, err.name, err.retriable = code, name, retriable
    return err
