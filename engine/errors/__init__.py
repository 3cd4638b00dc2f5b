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
    ├── KafkaConnectionError                   a broker unreachable, gone, timed out or garbled; also a ConnectionError
    ├── TransactionAbortedError                a record dropped: its transaction aborted before its append
    ├── ClusterError                           a cluster misconfiguration (broker id taken, ZooKeeper unreachable)
    ├── ZooKeeperAuthError                     ZooKeeper refused the broker's login
    ├── ReadOnlyError                          a write through a read-only open
    ├── ClosedError                            use of a closed log, engine, producer or consumer
    └── CommitFailedError                      a group member's commit refused after a rebalance

Expected outcomes (a partial batch at the live tail, the end of the log) are
return values, never exceptions.

The package, by job (each module imports only the ones above it; import everything from
``engine.errors``, which every class reports as its ``__module__``):

::

    codes.py         ErrorCode, Kafka's table of codes and their retriable flag
    base.py          EngineError, KafkaApiError, ClosedError; the code -> class registry
                     (for_code, api_error)
    storage.py       the log, partitions, leaders and replicas, fetch sessions, log dirs
    groups.py        consumer groups and their coordinator; CommitFailedError
    transactions.py  idempotent and transactional producers, the transaction coordinator
    admin.py         topics, configuration, the controller, unparseable or unserved requests
    security.py      ACLs, SASL, SCRAM, TLS, stored ACLs, the controller mutation quota
"""

from __future__ import annotations

from .admin import (
    ClusterError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    NoReassignmentInProgressError,
    NotControllerError,
    OperationNotAttemptedError,
    PreferredLeaderNotAvailableError,
    TopicAlreadyExistsError,
    UnsupportedEndpointTypeError,
    UnsupportedVersionError,
)
from .base import _BY_CODE as _BY_CODE
from .base import (
    ClosedError,
    EngineError,
    KafkaApiError,
    KafkaConnectionError,
    api_error,
    for_code,
)
from .codes import _RETRIABLE as _RETRIABLE
from .codes import ErrorCode
from .groups import (
    CommitFailedError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupNotEmptyError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidCommitOffsetSizeError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    UnstableOffsetCommitError,
)
from .security import AclFormatError as AclFormatError
from .security import AuthorizerConfigError as AuthorizerConfigError
from .security import (
    ClusterAuthorizationError,
    GroupAuthorizationError,
    SecurityDisabledError,
    ThrottlingQuotaExceededError,
    TopicAuthorizationError,
    TransactionalIdAuthorizationError,
    ZooKeeperAuthError,
)
from .security import DuplicateResourceError as DuplicateResourceError
from .security import IllegalSaslStateError as IllegalSaslStateError
from .security import JaasConfigError as JaasConfigError
from .security import QuotaFormatError as QuotaFormatError
from .security import ResourceNotFoundError as ResourceNotFoundError
from .security import SaslAuthenticationError as SaslAuthenticationError
from .security import ScramCredentialFormatError as ScramCredentialFormatError
from .security import SslAuthenticationError as SslAuthenticationError
from .security import SslConfigError as SslConfigError
from .security import SslPrincipalMappingError as SslPrincipalMappingError
from .security import UnacceptableCredentialError as UnacceptableCredentialError
from .security import UnsupportedSaslMechanismError as UnsupportedSaslMechanismError
from .storage import (
    CorruptIndexError,
    CorruptRecordError,
    DataDirLockedError,
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
    InvalidRecordError,
    InvalidRequiredAcksError,
    KafkaStorageError,
    LeaderNotAvailableError,
    ListenerNotFoundError,
    NetworkError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    ReadOnlyError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RequestTimedOutError,
    UnknownLeaderEpochError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
)
from .transactions import (
    ConcurrentTransactionsError,
    DuplicateSequenceError,
    InvalidPidMappingError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    InvalidTxnTimeoutError,
    OutOfOrderSequenceError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionalIdNotFoundError,
    TransactionCoordinatorFencedError,
)

# ``X as X`` above: public names that were never in __all__, re-exported all the same.

__all__ = [
    "ClosedError",
    "ClusterAuthorizationError",
    "ClusterError",
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
    "KafkaConnectionError",
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
    "TransactionAbortedError",
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
    "ZooKeeperAuthError",
    "api_error",
    "for_code",
]


def _report_as_engine_errors() -> None:
    """Every class of the package reports ``engine.errors`` as its module: tracebacks and reprs
    say ``engine.errors.NotLeaderOrFollowerError``, as users import it, whichever file holds it
    (pickle finds it there too)."""
    for obj in list(globals().values()):
        if isinstance(obj, type) and obj.__module__.startswith(__name__ + "."):
            obj.__module__ = __name__


_report_as_engine_errors()
