"""Group and member state of Kafka's classic group protocol (pure logic, no I/O).

States and the transitions Kafka allows (``GroupMetadata.transition_to``
refuses any other)::

    Empty ──join──> PreparingRebalance ──all joined / rebalance timeout──> CompletingRebalance
      ^                 ^     │                                                   │
      │                 │     └──(everyone left)──> Empty          leader's SyncGroup
      │                 └──────── join / leave / session timeout ──────┐          v
      └── (delete / offsets expired) ──> Dead                         Stable <─────┘

* ``members`` keeps insertion order (the leader falls to the oldest member when
  the leader leaves); ``pending_members`` are member ids handed out with
  MEMBER_ID_REQUIRED (JoinGroup v4+) that have not joined yet;
  ``static_members`` maps ``group.instance.id`` -> current member id.
* The coordinator owns everything here and runs on one event loop; these
  objects are never shared across threads.  ``join_future`` / ``sync_future``
  on a member are the coordinator's pending answers (opaque here).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import ErrorCode

__all__ = [
    "COMPLETING_REBALANCE",
    "DEAD",
    "EMPTY",
    "GroupMetadata",
    "MemberMetadata",
    "OffsetAndMetadata",
    "PREPARING_REBALANCE",
    "STABLE",
    "STATES",
    "parse_subscription_topics",
]

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)

# state -> states it may be entered from (Kafka's GroupState.validPreviousStates)
_VALID_PREVIOUS = {
    EMPTY: {PREPARING_REBALANCE},
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}

CONSUMER_PROTOCOL_TYPE = "consumer"


class OffsetAndMetadata(NamedTuple):
    """One committed offset, as stored in ``__consumer_offsets`` (OffsetCommitValue)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1       # only set by OffsetCommit v2-4 with a retention time


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]        # (name, metadata) in the member's preference order
    assignment: bytes = b""
    join_future: Any = None                   # pending JoinGroup answer
    sync_future: Any = None                   # pending SyncGroup answer
    is_new: bool = False
    join_started: float = 0.0                 # loop time the current JoinGroup arrived
    heartbeat_timer: Any = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata bytes (a rejoin that changes nothing)."""
        return len(protocols) == len(self.protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.protocols, strict=True))

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


@dataclass(eq=False)
class GroupMetadata:
    group_id: str
    partition: int = 0
    state: str = EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # transactional offset commits (TxnOffsetCommit) written but not yet committed or
    # aborted by a transaction marker: {producer_id: {(topic, partition): OffsetAndMetadata}}
    pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    current_state_timestamp: int = -1
    new_member_added: bool = False
    pending_sync: set[str] = field(default_factory=set)
    # coordinator timers (asyncio handles), not group state
    initial_join: bool = False                # the join phase is in group.initial.rebalance.delay.ms
    join_timer: Any = None
    sync_timer: Any = None
    pending_timers: dict[str, Any] = field(default_factory=dict)

    # -- state -------------------------------------------------------------
    def is_state(self, *states: str) -> bool:
        return self.state in states

    def transition_to(self, state: str, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state} -> {state}")
        self.state = state
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[PREPARING_REBALANCE]

    # -- members ---------------------------------------------------------
    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def validate_member(self, member_id: str, instance_id: str | None) -> int:
        """Whether a request of `member_id` (with its ``group.instance.id``) may act in this
        group: 0, UNKNOWN_MEMBER_ID, or FENCED_INSTANCE_ID (another member holds that instance)."""
        if instance_id is not None:
            existing = self.static_member_id(instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.NONE
        return ErrorCode.NONE if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID

    def cancel_timer(self, attr: str) -> None:
        """Cancel the coordinator timer ``join_timer`` or ``sync_timer``, if set."""
        handle = getattr(self, attr)
        if handle is not None:
            handle.cancel()
            setattr(self, attr, None)

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str) -> MemberMetadata:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def all_members_joined(self) -> bool:
        return (not self.pending_members
                and all(m.awaiting_join for m in self.members.values()))

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols ---------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        out = set(members[0].protocol_names())
        for m in members[1:]:
            out &= set(m.protocol_names())
        return out

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member with these protocols may join (INCONSISTENT_GROUP_PROTOCOL otherwise)."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        counts: dict[str, int] = {}
        for m in self.members.values():
            for name in set(m.protocol_names()):
                counts[name] = counts.get(name, 0) + 1
        n = len(self.members)
        return any(counts.get(name, 0) == n for name, _ in protocols)

    def select_protocol(self) -> str:
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: no protocol all members support")
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            v = m.vote(candidates)
            if v not in votes:
                order.append(v)
            votes[v] = votes.get(v, 0) + 1
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    def init_next_generation(self, now_ms: int) -> None:
        """After the join phase: bump the generation; CompletingRebalance, or Empty if nobody is left."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(EMPTY, now_ms)
        self.new_member_added = False

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        """(member id, group instance id, metadata of the selected protocol) for the leader."""
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    # -- consumer protocol ------------------------------------------------------------
    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (protocol type "consumer"); None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = parse_subscription_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return True if topics is None else topic in topics


def parse_subscription_topics(data: bytes) -> list[str] | None:
    """The topic list of a ConsumerProtocolSubscription (version i16, topics [STRING], ...);
    None when the bytes do not parse."""
    try:
        pos = 2
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or n > len(data):
            return None
        out = []
        for _ in range(n):
            (ln,) = struct.unpack_from(">h", data, pos)
            pos += 2
            if ln < 0 or pos + ln > len(data):
                return None
            out.append(bytes(data[pos:pos + ln]).decode())
            pos += ln
        return out
    except (struct.error, UnicodeDecodeError):
        return None
