"""Errors of administration, configuration and the protocol itself: topic names and
creation, partitions and replica assignments, configuration values, the controller and its
elections and reassignments, requests that do not parse or whose API version is not served.

Every class here is re-exported by :mod:`engine.errors`, which is where it is
imported from and the module it reports (``__module__``)."""

from __future__ import annotations

from .base import EngineError, KafkaApiError
from .codes import ErrorCode


class InvalidTopicError(KafkaApiError, ValueError):
    """A topic name is empty, too long, '.'/'..', or has characters outside [a-zA-Z0-9._-]."""

    code = ErrorCode.INVALID_TOPIC_EXCEPTION


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


class OperationNotAttemptedError(KafkaApiError):
    """Part of a batched request not tried because another part failed."""

    code = ErrorCode.OPERATION_NOT_ATTEMPTED


class PreferredLeaderNotAvailableError(KafkaApiError):
    """A preferred-leader election whose preferred replica cannot lead (not alive or not in sync)."""

    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


class EligibleLeadersNotAvailableError(KafkaApiError):
    """An unclean election without a live replica to elect."""

    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


class ElectionNotNeededError(KafkaApiError):
    """An election for a partition whose leader is already the one it would elect."""

    code = ErrorCode.ELECTION_NOT_NEEDED


class NoReassignmentInProgressError(KafkaApiError):
    """Cancelling the reassignment of a partition that has none."""

    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


class UnsupportedEndpointTypeError(KafkaApiError):
    """DescribeCluster for an endpoint type this broker does not serve."""

    code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


class ClusterError(EngineError):
    """A cluster-level misconfiguration the broker cannot start with: its broker id already
    registered, its inter-broker listener not among its listeners, ZooKeeper unreachable."""
