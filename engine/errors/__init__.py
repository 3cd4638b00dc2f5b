"""The exception tree of the engine, one tree for storage, the embedded API, the client and
the broker, and the one table of Kafka's error codes.

:class:`ErrorCode` names every Kafka error code once, with Kafka's names (Errors.java:
``NONE = 0``, ``NOT_LEADER_OR_FOLLOWER = 6``, ...) and Kafka's retriable flag; code
elsewhere says ``ErrorCode.NOT_COORDINATOR``, never ``16``.  Every class that has a
Kafka counterpart carries that ``code`` (an :class:`ErrorCode`), its ``name`` and whether
it is ``retriable`` (both taken from the code unless the class says otherwise);
:func:`for_code` maps a code back to its class, :func:`api_error` builds the exception
for a code received in an answer.  Classes also subclass a builtin where that is natural,
so ``except ValueError`` still catches a corrupt batch.  Class names are Kafka's Java
exception names with ``Error`` for ``Exception``.

::

    EngineError
    ├── KafkaApiError                          code, retriable (Kafka's errors)
    │   ├── OffsetOutOfRangeError (1)          fetch/seek outside [log start, LEO]
    │   ├── CorruptRecordError (2)             CRC or structure check failed; names file + position
    │   │   └── CorruptIndexError              an .index/.timeindex failed its sanity check
    │   ├── UnknownTopicOrPartitionError (3)   also a KeyError
    │   ├── LeaderNotAvailableError (5)        no leader (an election under way)
    │   ├── NotLeaderOrFollowerError (6)       this broker does not lead the partition
    │   ├── RequestTimedOutError (7)           acks=all: the ISR did not catch up in time
    │   ├── RecordTooLargeError (10)           batch > max.message.bytes
    │   ├── InvalidTopicError (17)             bad topic name
    │   ├── NotEnoughReplicasError (19)        ISR below min.insync.replicas: nothing appended
    │   ├── NotEnoughReplicasAfterAppendError (20)
    │   ├── InvalidRequiredAcksError (21)      Produce acks not in {-1, 0, 1}
    │   ├── UnsupportedVersionError (35)       API key/version the broker does not serve
    │   ├── TopicAlreadyExistsError (36)
    │   ├── InvalidPartitionsError (37)
    │   ├── InvalidReplicationFactorError (38)
    │   ├── InvalidConfigError (40)            unknown key or bad value; also a ValueError
    │   ├── NotControllerError (41)            a controller-only request sent to another broker
    │   ├── InvalidRequestError (42)           a frame/request that fails to parse (the broker closes)
    │   ├── OutOfOrderSequenceError (45)       idempotent batch whose sequence does not follow the last one
    │   ├── InvalidProducerEpochError (47)     idempotent batch from an older producer epoch
    │   ├── KafkaStorageError (56)             I/O failure (EIO, ENOSPC) on a log dir; also an OSError
    │   ├── FencedLeaderEpochError (74)        request's leader epoch older than the partition's
    │   ├── UnknownLeaderEpochError (75)       request's leader epoch newer than the partition's
    │   ├── UnsupportedCompressionTypeError (76)
    │   ├── InvalidRecordError (87)            a batch a client must not send
    │   ├── ProducerFencedError (90)           another producer took this transactional.id (fatal)
    │   └── ... one class per other code the engine sends or raises: the group coordinator's
    │       (12, 14-16, 22-28, 68, 69, 79, 81, 82, 86, 88), the transaction coordinator's
    │       (48-55, 105, 120), the controller's (39, 80, 83-85), fetch sessions' (70, 71) and
    │       13, 18, 46, 100, 115
    ├── SslPrincipalMappingError               no ssl.principal.mapping.rules rule fits a certificate
    ├── SslAuthenticationError                 a client's TLS handshake failed (certificate not trusted, ...)
    ├── DataDirLockedError                     a second writer opened a data directory
    ├── ReadOnlyError                          a write through a read-only open
    ├── ClosedError                            use of a closed log, engine, producer or consumer
    └── CommitFailedError                      a group member's commit refused after a rebalance

Expected outcomes (a partial batch at the live tail, the end of the log) are
return values, never exceptions.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ClosedError",
    "ClusterAuthorizationError",
    "CommitFailedError",
    "ConcurrentTransactionsError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptIndexError",
    "CorruptRecordError",
    "DataDirLockedError",
    "DuplicateSequenceError",
    "ElectionNotNeededError",
    "EligibleLeadersNotAvailableError",
    "EngineError",
    "ErrorCode",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "FetchSessionIdNotFoundError",
    "GroupAuthorizationError",
    "GroupIdNotFoundError",
    "GroupMaxSizeReachedError",
    "GroupNotEmptyError",
    "GroupSubscribedToTopicError",
    "IllegalGenerationError",
    "InconsistentGroupProtocolError",
    "InvalidCommitOffsetSizeError",
    "InvalidConfigError",
    "InvalidFetchSessionEpochError",
    "InvalidGroupIdError",
    "InvalidPartitionsError",
    "InvalidPidMappingError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidReplicaAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidSessionTimeoutError",
    "InvalidTopicError",
    "InvalidTxnStateError",
    "InvalidTxnTimeoutError",
    "KafkaApiError",
    "KafkaStorageError",
    "LeaderNotAvailableError",
    "ListenerNotFoundError",
    "MemberIdRequiredError",
    "NetworkError",
    "NoReassignmentInProgressError",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderOrFollowerError",
    "OffsetMetadataTooLargeError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceError",
    "PreferredLeaderNotAvailableError",
    "ProducerFencedError",
    "ReadOnlyError",
    "RebalanceInProgressError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "RequestTimedOutError",
    "SecurityDisabledError",
    "ThrottlingQuotaExceededError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationError",
    "TransactionalIdNotFoundError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnstableOffsetCommitError",
    "UnsupportedCompressionTypeError",
    "UnsupportedEndpointTypeError",
    "UnsupportedVersionError",
    "api_error",
    "for_code",
]


class ErrorCode(IntEnum):
    """Kafka's error codes, by Kafka's names (Errors.java), each declared once.

    An ``int`` (``ErrorCode.NONE == 0``) that goes into answers as it is;
    ``code.retriable`` is Kafka's flag (its exception is a RetriableException)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE


_RETRIABLE = frozenset({
    ErrorCode.CORRUPT_MESSAGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NOT_CONTROLLER,
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.LISTENER_NOT_FOUND, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, ErrorCode.ELECTION_NOT_NEEDED,
    ErrorCode.UNSTABLE_OFFSET_COMMIT, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID,
    ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, ErrorCode.SHARE_SESSION_NOT_FOUND,
    ErrorCode.INVALID_SHARE_SESSION_EPOCH, ErrorCode.SHARE_SESSION_LIMIT_REACHED,
})


class EngineError(Exception):
    """Base of every error this package raises on purpose."""


class KafkaApiError(EngineError):
    """An error with a Kafka protocol error code (codes never change).

    A subclass sets ``code`` (an :class:`ErrorCode`); ``name`` and ``retriable`` follow from
    it unless the class sets them too."""

    code: int = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False
    name: str = "UNKNOWN_SERVER_ERROR"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            code = ErrorCode(cls.code)          # ValueError for a code Kafka does not define
            cls.code = code
            if "name" not in cls.__dict__:
                cls.name = code.name
            if "retriable" not in cls.__dict__:
                cls.retriable = code.retriable


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


class OffsetMetadataTooLargeError(KafkaApiError):
    """An offset commit's metadata is longer than ``offset.metadata.max.bytes``."""

    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class NetworkError(KafkaApiError):
    """The connection to another broker broke before it answered (Kafka: NETWORK_EXCEPTION)."""

    code = ErrorCode.NETWORK_EXCEPTION


class CoordinatorLoadInProgressError(KafkaApiError):
    """The coordinator is still loading the partition that holds this group or transactional id."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class CoordinatorNotAvailableError(KafkaApiError):
    """No coordinator for this group or transactional id is available right now."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class NotCoordinatorError(KafkaApiError):
    """This broker is not (or no longer) the coordinator of the group or transactional id."""

    code = ErrorCode.NOT_COORDINATOR


class InvalidTopicError(KafkaApiError, ValueError):
    """A topic name is empty, too long, '.'/'..', or has characters outside [a-zA-Z0-9._-]."""

    code = ErrorCode.INVALID_TOPIC_EXCEPTION


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


class IllegalGenerationError(KafkaApiError):
    """A group request carries a generation other than the group's current one."""

    code = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(KafkaApiError):
    """A member's protocol type or protocols do not match the group's."""

    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(KafkaApiError):
    """An empty or otherwise unusable group id."""

    code = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(KafkaApiError):
    """The member id is not a member of the group (any more)."""

    code = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(KafkaApiError):
    """A session timeout outside [group.min.session.timeout.ms, group.max.session.timeout.ms]."""

    code = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(KafkaApiError):
    """The group is rebalancing: the member must rejoin."""

    code = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidCommitOffsetSizeError(KafkaApiError):
    """An offset commit too large for the offsets topic."""

    code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE


class UnsupportedVersionError(KafkaApiError):
    """An API key or version this broker does not serve (ApiVersions answers it; others close)."""

    code = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(KafkaApiError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(KafkaApiError, ValueError):
    code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaApiError, ValueError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaApiError):
    """A replica assignment that is empty, repeats a broker or names an unregistered one."""

    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(KafkaApiError, ValueError):
    """An unknown configuration key or a value of the wrong type or range."""

    code = ErrorCode.INVALID_CONFIG


class NotControllerError(KafkaApiError):
    """A request only the active controller serves, sent to another broker (Kafka's NOT_CONTROLLER:
    the client finds the controller again through Metadata and retries)."""

    code = ErrorCode.NOT_CONTROLLER


class InvalidRequestError(KafkaApiError, ValueError):
    """A frame or request that fails to parse: bad size prefix, a length past the
    frame, a null where none is allowed, tags out of order.  The broker closes
    the connection (Kafka does the same)."""

    code = ErrorCode.INVALID_REQUEST


class OutOfOrderSequenceError(KafkaApiError):
    """An idempotent producer's batch does not continue its sequence (a gap or a reordering)."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(KafkaApiError):
    """An idempotent producer's batch that was already written (its first append's offset stands)."""

    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaApiError):
    """An idempotent batch carries an older epoch than the producer's current one."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaApiError):
    """A transactional call or write out of order for the transaction's state."""

    code = ErrorCode.INVALID_TXN_STATE


class InvalidPidMappingError(KafkaApiError):
    """The producer id does not belong to this transactional id (Kafka: INVALID_PRODUCER_ID_MAPPING)."""

    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTxnTimeoutError(KafkaApiError):
    """A transaction timeout above transaction.max.timeout.ms (Kafka: INVALID_TRANSACTION_TIMEOUT)."""

    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(KafkaApiError):
    """The previous transaction of this producer is still completing."""

    code = ErrorCode.CONCURRENT_TRANSACTIONS


class TransactionCoordinatorFencedError(KafkaApiError):
    """A marker from an older transaction coordinator epoch than the partition has seen."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class TopicAuthorizationError(KafkaApiError):
    """Kafka's TOPIC_AUTHORIZATION_FAILED: the caller may not do this to the topic."""

    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationError(KafkaApiError):
    """Kafka's GROUP_AUTHORIZATION_FAILED: the caller may not do this to the group."""

    code = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationError(KafkaApiError):
    """Kafka's CLUSTER_AUTHORIZATION_FAILED: the caller may not do this to the cluster."""

    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class TransactionalIdAuthorizationError(KafkaApiError):
    """Kafka's TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""

    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class SecurityDisabledError(KafkaApiError):
    """ACL requests to a broker without an authorizer."""

    code = ErrorCode.SECURITY_DISABLED


class OperationNotAttemptedError(KafkaApiError):
    """Part of a batched request not tried because another part failed."""

    code = ErrorCode.OPERATION_NOT_ATTEMPTED


class KafkaStorageError(KafkaApiError, OSError):
    """An I/O error on a log directory (EIO, ENOSPC, read-only file system)."""

    code = ErrorCode.KAFKA_STORAGE_ERROR


class GroupNotEmptyError(KafkaApiError):
    """DeleteGroups of a group that still has members (Kafka: NON_EMPTY_GROUP)."""

    code = ErrorCode.NON_EMPTY_GROUP


class GroupIdNotFoundError(KafkaApiError):
    """The group does not exist."""

    code = ErrorCode.GROUP_ID_NOT_FOUND


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


class MemberIdRequiredError(KafkaApiError):
    """A first JoinGroup: the member must join again with the member id the answer gives it."""

    code = ErrorCode.MEMBER_ID_REQUIRED


class PreferredLeaderNotAvailableError(KafkaApiError):
    """A preferred-leader election whose preferred replica cannot lead (not alive or not in sync)."""

    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


class GroupMaxSizeReachedError(KafkaApiError):
    """The group has group.max.size members already."""

    code = ErrorCode.GROUP_MAX_SIZE_REACHED


class FencedInstanceIdError(KafkaApiError):
    """Another member joined with this static group.instance.id."""

    code = ErrorCode.FENCED_INSTANCE_ID


class EligibleLeadersNotAvailableError(KafkaApiError):
    """An unclean election without a live replica to elect."""

    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


class ElectionNotNeededError(KafkaApiError):
    """An election for a partition whose leader is already the one it would elect."""

    code = ErrorCode.ELECTION_NOT_NEEDED


class NoReassignmentInProgressError(KafkaApiError):
    """Cancelling the reassignment of a partition that has none."""

    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


class GroupSubscribedToTopicError(KafkaApiError):
    """OffsetDelete of a topic the group still consumes."""

    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class InvalidRecordError(KafkaApiError, ValueError):
    """A batch that is well formed but not acceptable (control batch from a client, bad count)."""

    code = ErrorCode.INVALID_RECORD


class UnstableOffsetCommitError(KafkaApiError):
    """OffsetFetch with require_stable while a transactional offset commit is pending."""

    code = ErrorCode.UNSTABLE_OFFSET_COMMIT


class ThrottlingQuotaExceededError(KafkaApiError):
    """CreateTopics / CreatePartitions / DeleteTopics over the caller's controller_mutation_rate
    (KIP-599): the topic is refused, retriable after the response's throttle time."""

    code = ErrorCode.THROTTLING_QUOTA_EXCEEDED


class ProducerFencedError(KafkaApiError):
    """A transactional producer was fenced: another instance with the same
    ``transactional.id`` called init_transactions(), or the coordinator aborted a
    timed-out transaction with an epoch bump (Kafka's ProducerFencedException).
    Fatal: the producer can only be closed."""

    code = ErrorCode.PRODUCER_FENCED


class UnknownTopicIdError(KafkaApiError):
    """A topic id no topic of this cluster has."""

    code = ErrorCode.UNKNOWN_TOPIC_ID


class TransactionalIdNotFoundError(KafkaApiError):
    """DescribeTransactions of a transactional id the coordinator does not know."""

    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class UnsupportedEndpointTypeError(KafkaApiError):
    """DescribeCluster for an endpoint type this broker does not serve."""

    code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


class TransactionAbortableError(KafkaApiError):
    """The transaction can only be aborted (KIP-890): the producer aborts and goes on."""

    code = ErrorCode.TRANSACTION_ABORTABLE


class UnsupportedSaslMechanismError(KafkaApiError):
    """The client asked for a SASL mechanism the listener does not enable
    (``sasl.enabled.mechanisms``)."""

    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(KafkaApiError):
    """A SASL message out of turn: a second handshake, a token after the exchange ended."""

    code = ErrorCode.ILLEGAL_SASL_STATE


class SaslAuthenticationError(KafkaApiError):
    """Authentication failed: wrong password, unknown user, bad proof or malformed token."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class ResourceNotFoundError(KafkaApiError):
    """The named resource does not exist (e.g. deleting a SCRAM credential never set)."""

    code = ErrorCode.RESOURCE_NOT_FOUND


class DuplicateResourceError(KafkaApiError):
    """One request names the same resource twice (e.g. a user in AlterUserScramCredentials)."""

    code = ErrorCode.DUPLICATE_RESOURCE


class UnacceptableCredentialError(KafkaApiError, ValueError):
    """A credential outside what the broker accepts (empty user, iterations out of range)."""

    code = ErrorCode.UNACCEPTABLE_CREDENTIAL


class JaasConfigError(InvalidConfigError):
    """A ``sasl.jaas.config`` value that does not parse as Kafka's JAAS line
    (``<LoginModule> <flag> key=value ... ;``); the message names what is wrong."""


class ScramCredentialFormatError(InvalidConfigError):
    """A stored SCRAM credential that is not Kafka's
    ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` text."""


class SslConfigError(InvalidConfigError):
    """An ``ssl.*`` setting that cannot make a TLS context: a missing or unreadable key store or
    trust store, a wrong or missing ``ssl.key.password``, an unsupported store type (JKS), a
    protocol below TLSv1.2, no usable cipher suite.  ``key`` is the configuration key at fault
    (with its ``listener.name.<l>.`` prefix where the value came from one)."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


class AuthorizerConfigError(InvalidConfigError):
    """An authorizer setting the broker cannot take: an ``authorizer.class.name`` that names
    no authorizer this broker has, or an ``allow.everyone.if.no.acl.found`` that is not a
    boolean.  ``key`` is the configuration key at fault."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}")


class AclFormatError(InvalidConfigError):
    """A stored ACL that is not Kafka's form: the broker's ACL file, or a ZooKeeper
    ``/kafka-acl...`` node or ACL change notification; the message names the file or node."""


class SslAuthenticationError(EngineError):
    """A client's TLS handshake with a broker failed: the broker's certificate does not chain
    to the trust store or does not name the host (``ssl.endpoint.identification.algorithm=https``),
    or the broker refused the client's certificate (Kafka's SslAuthenticationException).  Not
    retried: the configuration must change."""


class SslPrincipalMappingError(EngineError):
    """No rule of ``ssl.principal.mapping.rules`` matched a client certificate's distinguished
    name (Kafka's NoMatchingRule): the TLS client cannot be given a principal, so the
    connection is not authenticated."""


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


def _registry() -> dict[int, type[KafkaApiError]]:
    """code -> class over the classes above that set their own code: one class per code."""
    by_code: dict[int, type[KafkaApiError]] = {}
    for cls in list(globals().values()):
        if isinstance(cls, type) and issubclass(cls, KafkaApiError) and "code" in cls.__dict__:
            if cls.code in by_code:
                raise TypeError(f"{cls.__name__} and {by_code[cls.code].__name__} share code {cls.code}")
            by_code[cls.code] = cls
    return by_code


_BY_CODE = _registry()


def for_code(code: int) -> type[KafkaApiError]:
    """The exception class for a Kafka error code (KafkaApiError if unknown)."""
    return _BY_CODE.get(code, KafkaApiError)


def api_error(code: int, context: str) -> KafkaApiError:
    """An exception for Kafka error `code` raised while doing `context`: our class for the code
    (for_code), or a KafkaApiError that keeps Kafka's code, name and retriable flag."""
    cls = for_code(code)
    try:
        ec = ErrorCode(code)
        name, retriable = ec.name, ec.retriable
    except ValueError:
        name, retriable = "UNKNOWN_SERVER_ERROR", False
    err = cls(f"{context}: {name} (error code {code})")
    if cls is KafkaApiError:  # no class of ours: keep Kafka's facts on the instance
        err.code, err.name, err.retriable = code, name, retriable
    return err
