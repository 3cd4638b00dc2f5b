"""Errors of consumer groups and their coordinator: finding and loading the coordinator,
joining and syncing (generations, member ids, static members, group size), committing and
fetching offsets, deleting groups; and the client's CommitFailedError.

Every class here is re-exported by :mod:`engine.errors`, which is where it is
imported from and the module it reports (``__module__``)."""

from __future__ import annotations

from .base import EngineError, KafkaApiError
from .codes import ErrorCode


class OffsetMetadataTooLargeError(KafkaApiError):
    """An offset commit's metadata is longer than ``offset.metadata.max.bytes``."""

    code = ErrorCode.OFFSET_METADATA_TOO_LARGE


class CoordinatorLoadInProgressError(KafkaApiError):
    """The coordinator is still loading the partition that holds this group or transactional id."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class CoordinatorNotAvailableError(KafkaApiError):
    """No coordinator for this group or transactional id is available right now."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE


class NotCoordinatorError(KafkaApiError):
    """This broker is not (or no longer) the coordinator of the group or transactional id."""

    code = ErrorCode.NOT_COORDINATOR


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


class GroupNotEmptyError(KafkaApiError):
    """DeleteGroups of a group that still has members (Kafka: NON_EMPTY_GROUP)."""

    code = ErrorCode.NON_EMPTY_GROUP


class GroupIdNotFoundError(KafkaApiError):
    """The group does not exist."""

    code = ErrorCode.GROUP_ID_NOT_FOUND


class MemberIdRequiredError(KafkaApiError):
    """A first JoinGroup: the member must join again with the member id the answer gives it."""

    code = ErrorCode.MEMBER_ID_REQUIRED


class GroupMaxSizeReachedError(KafkaApiError):
    """The group has group.max.size members already."""

    code = ErrorCode.GROUP_MAX_SIZE_REACHED


class FencedInstanceIdError(KafkaApiError):
    """Another member joined with this static group.instance.id."""

    code = ErrorCode.FENCED_INSTANCE_ID


class GroupSubscribedToTopicError(KafkaApiError):
    """OffsetDelete of a topic the group still consumes."""

    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class UnstableOffsetCommitError(KafkaApiError):
    """OffsetFetch with require_stable while a transactional offset commit is pending."""

    code = ErrorCode.UNSTABLE_OFFSET_COMMIT


class CommitFailedError(EngineError):
    """A group member's offset commit was refused because the group rebalanced
    (stale generation or unknown member; Kafka's CommitFailedException).  The
    member rejoins on its next poll; the records since the last commit may be
    delivered again to whoever owns the partitions now."""
