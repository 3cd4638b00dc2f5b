"""Result types of the group coordinator (shared by its modules)."""

from __future__ import annotations

from typing import NamedTuple


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
