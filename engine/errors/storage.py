"""Errors of the log, its partitions and the data path: offsets out of range, corrupt
batches, unknown partitions, leaders and replicas (acks, the ISR, leader epochs), fetch
sessions, log-directory I/O, and the engine-only errors of a data directory (locked, read-only).

Every class here is re-exported by :mod:`engine.errors`, which is where it is
imported from and the module it reports (``__module__``)."""

from __future__ import annotations

from .base import EngineError, KafkaApiError
from .codes import ErrorCode


class OffsetOutOfRangeError(KafkaApiError, IndexError):
    """A fetch or seek asked for an offset outside [log start offset, log end offset]."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptRecordError(KafkaApiError, ValueError):
    """A record batch failed its CRC or a structural check (Kafka: CORRUPT_MESSAGE).

    ``path`` and ``position`` name where the bad batch starts when it came from
    a file; ``reason`` says which check failed.
    """

    code = ErrorCode.CORRUPT_MESSAGE

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

    def __reduce__(self):            # pickled (a Spark executor's error): rebuilt from its parts
        return (type(self), (self.reason, self.path, self.position), self.__dict__)


class CorruptIndexError(CorruptRecordError):
    """An offset or time index failed its sanity check (it is rebuilt from the log)."""


class UnknownTopicOrPartitionError(KafkaApiError, KeyError):
    """The topic or partition does not exist."""

    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else self.name


class LeaderNotAvailableError(KafkaApiError):
    """The partition has no leader (an election is under way)."""

    code = ErrorCode.LEADER_NOT_AVAILABLE


class NotLeaderOrFollowerError(KafkaApiError):
    """Produce/Fetch/ListOffsets sent to a broker that does not lead the partition."""

    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class RequestTimedOutError(KafkaApiError):
    """acks=all: the ISR did not reach the batch within the request's timeout."""

    code = ErrorCode.REQUEST_TIMED_OUT


class RecordTooLargeError(KafkaApiError, ValueError):
    """A batch is larger than ``max.message.bytes`` (Kafka: MESSAGE_TOO_LARGE)."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class NetworkError(KafkaApiError):
    """The connection to another broker broke before it answered (Kafka: NETWORK_EXCEPTION)."""

    code = ErrorCode.NETWORK_EXCEPTION


class RecordBatchTooLargeError(KafkaApiError):
    """A record batch is larger than the segment can hold (Kafka: RECORD_LIST_TOO_LARGE)."""

    code = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(KafkaApiError):
    """acks=all with fewer in-sync replicas than min.insync.replicas: nothing was appended."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(KafkaApiError):
    """acks=all: appended on the leader, but the ISR fell below min.insync.replicas before the
    batch was committed."""

    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class InvalidRequiredAcksError(KafkaApiError, ValueError):
    """Produce with acks other than -1, 0 or 1."""

    code = ErrorCode.INVALID_REQUIRED_ACKS


class KafkaStorageError(KafkaApiError, OSError):
    """An I/O error on a log directory (EIO, ENOSPC, read-only file system)."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class FetchSessionIdNotFoundError(KafkaApiError):
    """The broker has no fetch session with this id (any more)."""

    code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND


class InvalidFetchSessionEpochError(KafkaApiError):
    """A fetch session request with an epoch other than the next one."""

    code = ErrorCode.INVALID_FETCH_SESSION_EPOCH


class ListenerNotFoundError(KafkaApiError):
    """The partition's leader has no endpoint on the listener the request came in on (a cluster
    whose brokers do not all share that listener)."""

    code = ErrorCode.LISTENER_NOT_FOUND


class FencedLeaderEpochError(KafkaApiError):
    """A fetch or list-offsets carried a leader epoch older than the partition's."""

    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(KafkaApiError):
    """A fetch or list-offsets carried a leader epoch newer than the partition's."""

    code = ErrorCode.UNKNOWN_LEADER_EPOCH


class UnsupportedCompressionTypeError(KafkaApiError, ValueError):
    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class InvalidRecordError(KafkaApiError, ValueError):
    """A batch that is well formed but not acceptable (control batch from a client, bad count)."""

    code = ErrorCode.INVALID_RECORD


class UnknownTopicIdError(KafkaApiError):
    """A topic id no topic of this cluster has."""

    code = ErrorCode.UNKNOWN_TOPIC_ID


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

    def __reduce__(self):
        return (type(self), (self.path, self.holder), self.__dict__)


class ReadOnlyError(EngineError):
    """A write was attempted through a read-only open."""
