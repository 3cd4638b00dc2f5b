"""Kafka errors of the replica layer (codes and retriable flags are Kafka's)."""

from __future__ import annotations

from ..errors import KafkaApiError

__all__ = ["LeaderNotAvailableError", "NotEnoughReplicasAfterAppendError", "NotEnoughReplicasError",
           "NotLeaderOrFollowerError", "RequestTimedOutError"]


class LeaderNotAvailableError(KafkaApiError):
    code, retriable, name = 5, True, "LEADER_NOT_AVAILABLE"


class NotLeaderOrFollowerError(KafkaApiError):
    """Produce/Fetch/ListOffsets sent to a broker that does not lead the partition."""

    code, retriable, name = 6, True, "NOT_LEADER_OR_FOLLOWER"


class RequestTimedOutError(KafkaApiError):
    """acks=all: the ISR did not reach the batch within the request's timeout."""

    code, retriable, name = 7, True, "REQUEST_TIMED_OUT"


class NotEnoughReplicasError(KafkaApiError):
    """acks=all with fewer in-sync replicas than min.insync.replicas: nothing was appended."""

    code, retriable, name = 19, True, "NOT_ENOUGH_REPLICAS"


class NotEnoughReplicasAfterAppendError(KafkaApiError):
    """acks=all: appended on the leader, but the ISR fell below min.insync.replicas before the
    batch was committed."""

    code, retriable, name = 20, True, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
