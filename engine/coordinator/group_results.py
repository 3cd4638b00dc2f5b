"""Result types and Kafka error codes of the group coordinator (shared by its modules)."""

from __future__ import annotations

from typing import NamedTuple

# Kafka error codes used here
NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
INVALID_COMMIT_OFFSET_SIZE = 28
INVALID_REQUEST = 42
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86


class JoinGroupResult(NamedTuple):
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: list = []          # leader only: [(member_id, group_instance_id, metadata bytes)]
    skip_assignment: bool = False


class SyncGroupResult(NamedTuple):
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class LeaveGroupResult(NamedTuple):
    error_code: int
    members: list = []          # [(member_id, group_instance_id, error_code)]


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


class GroupDescription(NamedTuple):
    group_id: str
    error_code: int
    state: str
    protocol_type: str
    protocol_name: str
    members: list               # [MemberDescription]


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str


def _resolve(fut, value) -> None:
    if fut is not None and not fut.done():
        fut.set_result(value)
