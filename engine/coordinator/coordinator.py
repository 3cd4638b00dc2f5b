"""GroupCoordinator: Kafka's classic group protocol and committed offsets for one Engine.

One coordinator per writable Engine (``Engine.group_coordinator``, created on
first use), shared by the wire broker and in-process consumers.  It runs on
its own event loop in a daemon thread (or the broker's loop); all group state
lives on that loop.  The loop, the internal-topic appends and the replay are
runtime.py's :class:`CoordinatorRuntime`, shared with the transaction coordinator.

Public API (stable; every result carries Kafka error codes, 0 = success)::

    coord = eng.group_coordinator               # started; loading of __consumer_offsets begins
    coord.call(coord.join_group, "g", "", protocol_type="consumer",
               protocols=[("range", sub_bytes)], session_timeout_ms=10000,
               timeout=30)                       # sync facade, from any thread
    fut = coord.submit(coord.heartbeat, "g", gen, member_id)   # concurrent.futures.Future
    # in the broker (another loop): await asyncio.wrap_future(coord.submit(...))

    async join_group(group_id, member_id, *, protocol_type, protocols, session_timeout_ms,
                     rebalance_timeout_ms=-1, group_instance_id=None, client_id="",
                     client_host="", require_known_member_id=True, reason=None) -> JoinGroupResult
    async sync_group(group_id, generation_id, member_id, assignments: dict[str, bytes], *,
                     group_instance_id=None, protocol_type=None, protocol_name=None) -> SyncGroupResult
    async heartbeat(group_id, generation_id, member_id, group_instance_id=None) -> int
    async leave_group(group_id, members: list[tuple[member_id, group_instance_id]]) -> LeaveGroupResult
    async commit_offsets(group_id, offsets: {(topic, partition): OffsetAndMetadata | offset | (offset, leader_epoch, metadata)},
                         *, generation_id=-1, member_id="", group_instance_id=None,
                         retention_ms=-1) -> {(topic, partition): error_code}
    async fetch_offsets(group_id, partitions: list[(topic, partition)] | None = None)
                        -> (error_code, {(topic, partition): OffsetAndMetadata})   # offset -1 = none
    async describe_groups(group_ids) -> list[GroupDescription]
    async list_groups(states=None) -> (error_code, list[GroupListing])
    async delete_groups(group_ids) -> {group_id: error_code}
    async delete_offsets(group_id, partitions) -> (error_code, {(topic, partition): error_code})
    async find_coordinator(key, key_type=0) -> (error_code, message)   # creates __consumer_offsets
    async load_partition(p) / unload_partition(p)     # the seam for moving leadership later
    async expire_offsets() -> int                     # one retention pass now (also periodic)
    partition_for(group_id) -> int;  load_errors: list[CorruptRecordError];  stop()

Semantics follow Kafka's classic GroupCoordinator: MEMBER_ID_REQUIRED on a
first JoinGroup v4+, generations, the leader's JoinGroup answer carries all
members' metadata of the chosen protocol, SyncGroup only relays the leader's
assignment (client-side assignors), REBALANCE_IN_PROGRESS to heartbeats during
a rebalance, static members (``group.instance.id``, FENCED_INSTANCE_ID),
``group.initial.rebalance.delay.ms`` for a group leaving Empty, session
timeouts, rebalance timeouts (members not rejoining are removed), and a
pending-sync timeout (members not sending SyncGroup are removed).

Durability: every change is a record in ``__consumer_offsets`` (records.py),
written as one batch per request to the group's partition and answered only
after the append returned (the topic's flush policy applies); commits and
group changes are applied to memory after a successful append, appends per
partition are serialised so memory follows log order.  ``load_partition``
replays a partition (latest record per key wins, tombstones delete); a corrupt
batch is logged with file and byte position, kept in ``load_errors`` and
skipped, the rest of the partition still loads.

Offsets retention (Kafka 2.1+): offsets of an Empty group expire
``offsets.retention.minutes`` after it became Empty (of a group that never had
members: after their commit), offsets of topics a Stable consumer group no
longer subscribes to expire by commit time; a commit made with a retention time
(OffsetCommit v2-4) expires at that time.  An Empty group with no offsets left
is deleted (tombstone).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from ..errors import CorruptRecordError, KafkaApiError
from . import records as rec
from .group_txn import TxnOffsetsMixin
from .runtime import LOADED as _LOADED
from .runtime import LOADING as _LOADING
from .runtime import CoordinatorRuntime, control_type, storage_code, wall_ms
from .group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
)

__all__ = [
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "JoinGroupResult",
    "LeaveGroupResult",
    "MemberDescription",
    "SyncGroupResult",
]

log = logging.getLogger("engine.coordinator")

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

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000      # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


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


class GroupCoordinator(TxnOffsetsMixin, CoordinatorRuntime):
    """See the module docstring.  ``clock`` gives wall time in ms (commit and state
    timestamps, offset expiry); timers (session, rebalance, delay) use the loop clock."""

    TOPIC = rec.OFFSETS_TOPIC
    NAME = "group-coordinator"

    def __init__(self, engine, *, node_id: int = 0, clock: Callable[[], int] = wall_ms):
        super().__init__(engine, node_id=node_id, clock=clock)
        cfg = engine.config
        self.initial_rebalance_delay_ms = cfg["group.initial.rebalance.delay.ms"]
        self.min_session_timeout_ms = cfg["group.min.session.timeout.ms"]
        self.max_session_timeout_ms = cfg["group.max.session.timeout.ms"]
        self.max_group_size = cfg["group.max.size"]
        self.configured_partitions = cfg["offsets.topic.num.partitions"]
        self.retention_ms = cfg["offsets.retention.minutes"] * 60_000
        self.retention_check_interval_ms = cfg["offsets.retention.check.interval.ms"]
        self.max_metadata_bytes = cfg["offset.metadata.max.bytes"]
        self._groups: dict[str, GroupMetadata] = {}
        self._expire_timer = None

    # -- runtime hooks -------------------------------------------------------------------
    async def _on_startup(self) -> None:
        self._schedule_expiry()

    def _cancel_timers(self) -> None:
        if self._expire_timer is not None:
            self._expire_timer.cancel()

    async def find_coordinator(self, key: str, key_type: int = 0) -> tuple[int, str | None]:
        """Whether this node coordinates group `key` (creates ``__consumer_offsets`` on first
        use).  Key type 1 (transactions) is the TransactionCoordinator's."""
        if key_type != 0:
            return INVALID_REQUEST, f"key type {key_type} is not a group"
        return await self._find(key)

    # -- JoinGroup -------------------------------------------------------------------
    async def join_group(self, group_id: str, member_id: str, *, protocol_type: str,
                         protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int = -1, group_instance_id: str | None = None,
                         client_id: str = "", client_host: str = "",
                         require_known_member_id: bool = True, reason: str | None = None) -> JoinGroupResult:
        member_id = member_id or ""
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        protocols = [(name, bytes(meta)) for name, meta in protocols]
        if not group_id:
            return JoinGroupResult(INVALID_GROUP_ID, member_id=member_id)
        err, p = await self._route(group_id)
        if err:
            return JoinGroupResult(err, member_id=member_id)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return JoinGroupResult(INVALID_SESSION_TIMEOUT, member_id=member_id)
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return JoinGroupResult(UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self._new_group(group_id, p)
        if group.state == DEAD:
            return JoinGroupResult(COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        is_known = member_id in group.members or member_id in group.pending_members or (
            group_instance_id is not None and group_instance_id in group.static_members)
        if not is_known and len(group.members) + len(group.pending_members) >= self.max_group_size:
            return JoinGroupResult(GROUP_MAX_SIZE_REACHED, member_id=member_id)
        if not group.supports_protocols(protocol_type, protocols):
            return JoinGroupResult(INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        fut = self.loop.create_future()
        args = (group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols, fut)
        if not member_id:
            self._join_unknown(group, require_known_member_id, reason, *args)
        else:
            self._join_known(group, member_id, reason, *args)
        return await asyncio.shield(fut)

    def _new_group(self, group_id: str, partition: int) -> GroupMetadata:
        group = GroupMetadata(group_id, partition, current_state_timestamp=self.clock())
        self._groups[group_id] = group
        return group

    def _join_unknown(self, group: GroupMetadata, require_known: bool, reason, instance_id, client_id,
                      client_host, rebalance_ms, session_ms, protocol_type, protocols, fut) -> None:
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                self._replace_static_member(group, old_id, new_id, instance_id, client_id, client_host,
                                            rebalance_ms, session_ms, protocols, fut, reason)
            else:
                self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                               rebalance_ms, session_ms, protocol_type, protocols, fut,
                                               reason)
        elif require_known:
            group.pending_members.add(new_id)
            old = group.pending_timers.pop(new_id, None)
            if old is not None:
                old.cancel()
            group.pending_timers[new_id] = self.loop.call_later(
                session_ms / 1000, self._pending_member_expired, group, new_id)
            _resolve(fut, JoinGroupResult(MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(group, new_id, None, client_id, client_host, rebalance_ms,
                                           session_ms, protocol_type, protocols, fut, reason)

    def _join_known(self, group: GroupMetadata, member_id: str, reason, instance_id, client_id,
                    client_host, rebalance_ms, session_ms, protocol_type, protocols, fut) -> None:
        if member_id in group.pending_members and instance_id is None:
            timer = group.pending_timers.pop(member_id, None)
            if timer is not None:
                timer.cancel()
            self._add_member_and_rebalance(group, member_id, None, client_id, client_host, rebalance_ms,
                                           session_ms, protocol_type, protocols, fut, reason)
            return
        err = self._validate_member(group, member_id, instance_id)
        if err:
            _resolve(fut, JoinGroupResult(err, member_id=member_id))
            return
        member = group.members[member_id]
        if group.state == PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, fut, reason)
        elif group.state == COMPLETING_REBALANCE:
            if member.matches(protocols):
                _resolve(fut, self._current_join_result(group, member_id))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, fut,
                                                  reason)
        elif group.state == STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                self._update_member_and_rebalance(group, member, protocols, rebalance_ms, session_ms, fut,
                                                  reason)
            else:
                self._schedule_heartbeat(group, member)
                _resolve(fut, self._current_join_result(group, member_id))
        else:
            _resolve(fut, JoinGroupResult(UNKNOWN_MEMBER_ID, member_id=member_id))

    def _current_join_result(self, group: GroupMetadata, member_id: str, skip: bool = False) -> JoinGroupResult:
        leader = group.is_leader(member_id)
        return JoinGroupResult(NONE, group.generation_id, group.protocol_type, group.protocol_name,
                               group.leader_id or "", member_id,
                               group.current_member_metadata() if leader else [], skip and leader)

    @staticmethod
    def _validate_member(group: GroupMetadata, member_id: str, instance_id: str | None) -> int:
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is None:
                return UNKNOWN_MEMBER_ID
            if existing != member_id:
                return FENCED_INSTANCE_ID
            return NONE
        return NONE if member_id in group.members else UNKNOWN_MEMBER_ID

    def _add_member_and_rebalance(self, group, member_id, instance_id, client_id, client_host, rebalance_ms,
                                  session_ms, protocol_type, protocols, fut, reason) -> None:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                                protocol_type, protocols, join_future=fut, is_new=True,
                                join_started=self.loop.time())
        if group.state == PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._rebalance_or_try_complete(group, reason or f"member {member_id} joined")

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_ms, session_ms, fut,
                                     reason) -> None:
        if member.join_future is not None and member.join_future is not fut:
            _resolve(member.join_future, JoinGroupResult(REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_ms
        member.session_timeout_ms = session_ms
        member.join_future = fut
        member.join_started = self.loop.time()
        self._rebalance_or_try_complete(group, reason or f"member {member.member_id} rejoined")

    def _replace_static_member(self, group, old_id, new_id, instance_id, client_id, client_host,
                               rebalance_ms, session_ms, protocols, fut, reason) -> None:
        old = group.members[old_id]
        # the fenced instance's pending answers
        _resolve(old.join_future, JoinGroupResult(FENCED_INSTANCE_ID, member_id=old_id))
        _resolve(old.sync_future, SyncGroupResult(FENCED_INSTANCE_ID))
        old.join_future = old.sync_future = None
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.client_id, member.client_host = client_id, client_host
        member.protocols = protocols
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_ms, session_ms
        self._schedule_heartbeat(group, member)
        if group.state == STABLE:
            if group.select_protocol() == group.protocol_name:
                self._spawn(self._store_replaced_static(group, member, fut))
            else:
                member.join_future = fut
                member.join_started = self.loop.time()
                self._prepare_rebalance(group, reason or f"static member {instance_id} rejoined")
        elif group.state == COMPLETING_REBALANCE:
            member.join_future = fut
            member.join_started = self.loop.time()
            self._prepare_rebalance(group, reason or f"static member {instance_id} rejoined")
        else:  # PreparingRebalance: it waits for the join like everyone else
            member.join_future = fut
            member.join_started = self.loop.time()
            self._try_complete_join(group)

    async def _store_replaced_static(self, group: GroupMetadata, member: MemberMetadata, fut) -> None:
        try:
            await self._append(group.partition, [(rec.encode_group_metadata_key(group.group_id),
                                                  rec.encode_group_metadata(group))])
        except Exception as e:
            _resolve(fut, JoinGroupResult(storage_code(e, rec.OFFSETS_TOPIC), member_id=member.member_id))
            return
        _resolve(fut, self._current_join_result(group, member.member_id, skip=True))

    def _rebalance_or_try_complete(self, group: GroupMetadata, reason: str) -> None:
        if group.state in (STABLE, COMPLETING_REBALANCE, EMPTY):
            self._prepare_rebalance(group, reason)
        elif group.state == PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if not group.can_rebalance():
            return
        if group.state == COMPLETING_REBALANCE:
            for m in group.members.values():
                m.assignment = b""
                _resolve(m.sync_future, SyncGroupResult(REBALANCE_IN_PROGRESS))
                m.sync_future = None
        self._cancel(group, "sync_timer")
        group.pending_sync.clear()
        was_empty = group.state == EMPTY
        group.transition_to(PREPARING_REBALANCE, self.clock())
        log.info("group %s: preparing rebalance (generation %d): %s", group.group_id,
                 group.generation_id, reason)
        self._cancel(group, "join_timer")
        if was_empty:
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.initial_join = True
            group.join_timer = self.loop.call_later(delay / 1000, self._initial_join_expired, group,
                                                    delay, remaining)
        else:
            group.initial_join = False
            group.join_timer = self.loop.call_later(group.max_rebalance_timeout_ms() / 1000,
                                                    self._complete_join, group)
            self._try_complete_join(group)

    def _initial_join_expired(self, group: GroupMetadata, delay: int, remaining: int) -> None:
        group.join_timer = None
        if group.state != PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            d = min(delay, remaining)
            group.join_timer = self.loop.call_later(d / 1000, self._initial_join_expired, group, delay,
                                                    remaining - d)
            return
        group.initial_join = False
        self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if group.state == PREPARING_REBALANCE and not group.initial_join and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        self._cancel(group, "join_timer")
        group.initial_join = False
        if group.state != PREPARING_REBALANCE:
            return
        for m in group.not_yet_rejoined():
            log.info("group %s: member %s did not rejoin in time: removed", group.group_id, m.member_id)
            self._drop_member(group, m)
        group.init_next_generation(self.clock())
        if group.state == EMPTY:
            log.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            self._spawn(self._store_empty(group))
            return
        log.info("group %s: generation %d, protocol %s, leader %s, %d members", group.group_id,
                 group.generation_id, group.protocol_name, group.leader_id, len(group.members))
        for m in group.members.values():
            _resolve(m.join_future, self._current_join_result(group, m.member_id))
            m.join_future = None
            m.is_new = False
            self._schedule_heartbeat(group, m)
        group.pending_sync = set(group.members)
        gen = group.generation_id
        group.sync_timer = self.loop.call_later(group.max_rebalance_timeout_ms() / 1000,
                                                self._sync_expired, group, gen)

    async def _store_empty(self, group: GroupMetadata) -> None:
        try:
            await self._append(group.partition, [(rec.encode_group_metadata_key(group.group_id),
                                                  rec.encode_group_metadata(group))])
        except Exception:
            log.exception("group %s: storing the empty group failed", group.group_id)

    def _sync_expired(self, group: GroupMetadata, generation: int) -> None:
        group.sync_timer = None
        if group.generation_id != generation or group.state not in (COMPLETING_REBALANCE, STABLE):
            return
        missing = [group.members[m] for m in group.pending_sync if m in group.members]
        group.pending_sync.clear()
        if not missing:
            return
        for m in missing:
            log.info("group %s: member %s sent no SyncGroup in time: removed", group.group_id, m.member_id)
            self._drop_member(group, m)
        self._rebalance_or_try_complete(group, "members did not sync in time")

    def _pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_timers.pop(member_id, None)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group)

    # -- heartbeats and member removal ---------------------------------------------
    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            timeout_ms: int | None = None) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        ms = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self.loop.call_later(ms / 1000, self._heartbeat_expired, group, member)

    def _heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            return      # the rebalance and pending-sync timeouts govern it now
        log.info("group %s: member %s %s: removed", group.group_id, member.member_id,
                 "did not finish joining" if member.is_new else "session timed out")
        self._remove_member_and_update_group(group, member, "session timeout")

    def _drop_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        _resolve(member.join_future, JoinGroupResult(UNKNOWN_MEMBER_ID, member_id=member.member_id))
        _resolve(member.sync_future, SyncGroupResult(UNKNOWN_MEMBER_ID))
        member.join_future = member.sync_future = None
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        self._drop_member(group, member)
        self._rebalance_or_try_complete(group, f"member {member.member_id} left ({reason})")

    @staticmethod
    def _cancel(group: GroupMetadata, attr: str) -> None:
        handle = getattr(group, attr)
        if handle is not None:
            handle.cancel()
            setattr(group, attr, None)

    # -- SyncGroup -------------------------------------------------------------------
    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         assignments: Mapping[str, bytes] | None = None, *,
                         group_instance_id: str | None = None, protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncGroupResult:
        err, _ = await self._route(group_id)
        if err:
            return SyncGroupResult(err)
        group = self._groups.get(group_id)
        if group is None:
            return SyncGroupResult(UNKNOWN_MEMBER_ID)
        if group.state == DEAD:
            return SyncGroupResult(COORDINATOR_NOT_AVAILABLE)
        err = self._validate_member(group, member_id, group_instance_id)
        if err:
            return SyncGroupResult(err)
        if generation_id != group.generation_id:
            return SyncGroupResult(ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncGroupResult(INCONSISTENT_GROUP_PROTOCOL)
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel(group, "sync_timer")
        member = group.members[member_id]
        if group.state == PREPARING_REBALANCE:
            return SyncGroupResult(REBALANCE_IN_PROGRESS)
        if group.state == STABLE:
            self._schedule_heartbeat(group, member)
            return SyncGroupResult(NONE, group.protocol_type, group.protocol_name, member.assignment)
        if group.state != COMPLETING_REBALANCE:
            return SyncGroupResult(UNKNOWN_MEMBER_ID)
        fut = self.loop.create_future()
        _resolve(member.sync_future, SyncGroupResult(REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        self._schedule_heartbeat(group, member)
        if group.is_leader(member_id):
            full = {mid: bytes((assignments or {}).get(mid, b"")) for mid in group.members}
            self._spawn(self._complete_sync(group, group.generation_id, full))
        return await asyncio.shield(fut)

    async def _complete_sync(self, group: GroupMetadata, generation: int, assignments: dict[str, bytes]) -> None:
        error = NONE
        try:
            await self._append(group.partition, [(rec.encode_group_metadata_key(group.group_id),
                                                  rec.encode_group_metadata(group, assignments))])
        except Exception as e:
            log.warning("group %s: storing generation %d failed: %s", group.group_id, generation, e)
            error = storage_code(e, rec.OFFSETS_TOPIC)
        if group.state != COMPLETING_REBALANCE or group.generation_id != generation:
            return
        if error:
            for m in group.members.values():
                m.assignment = b""
                _resolve(m.sync_future, SyncGroupResult(error))
                m.sync_future = None
            self._prepare_rebalance(group, "storing the assignment failed")
            return
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
            if m.sync_future is not None:
                _resolve(m.sync_future, SyncGroupResult(NONE, group.protocol_type, group.protocol_name,
                                                        m.assignment))
                m.sync_future = None
                self._schedule_heartbeat(group, m)
        group.transition_to(STABLE, self.clock())
        log.info("group %s: stable at generation %d", group.group_id, generation)

    # -- Heartbeat / LeaveGroup ---------------------------------------------------------
    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> int:
        err, _ = await self._route(group_id)
        if err:
            return err
        group = self._groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.state == DEAD:
            return COORDINATOR_NOT_AVAILABLE
        err = self._validate_member(group, member_id, group_instance_id)
        if err:
            return err
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        member = group.members[member_id]
        if group.state == EMPTY:
            return UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, member)
        if group.state == PREPARING_REBALANCE:
            return REBALANCE_IN_PROGRESS
        return NONE

    async def leave_group(self, group_id: str,
                          members: Iterable[tuple[str, str | None]]) -> LeaveGroupResult:
        members = list(members)
        err, _ = await self._route(group_id)
        if err:
            return LeaveGroupResult(err, [(m, i, err) for m, i in members])
        group = self._groups.get(group_id)
        if group is None:
            return LeaveGroupResult(NONE, [(m, i, UNKNOWN_MEMBER_ID) for m, i in members])
        if group.state == DEAD:
            return LeaveGroupResult(COORDINATOR_NOT_AVAILABLE,
                                    [(m, i, COORDINATOR_NOT_AVAILABLE) for m, i in members])
        out = []
        for member_id, instance_id in members:
            member_id = member_id or ""
            code = NONE
            if instance_id is not None:
                existing = group.static_member_id(instance_id)
                if existing is None:
                    code = UNKNOWN_MEMBER_ID
                elif member_id and existing != member_id:
                    code = FENCED_INSTANCE_ID
                else:
                    member_id = existing
            if code == NONE:
                if member_id in group.pending_members:
                    group.pending_members.discard(member_id)
                    timer = group.pending_timers.pop(member_id, None)
                    if timer is not None:
                        timer.cancel()
                    self._try_complete_join(group)
                elif member_id in group.members:
                    log.info("group %s: member %s left", group.group_id, member_id)
                    self._remove_member_and_update_group(group, group.members[member_id], "LeaveGroup")
                else:
                    code = UNKNOWN_MEMBER_ID
            out.append((member_id, instance_id, code))
        return LeaveGroupResult(NONE, out)

    # -- offsets -------------------------------------------------------------------
    async def commit_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], Any], *,
                             generation_id: int = -1, member_id: str = "",
                             group_instance_id: str | None = None,
                             retention_ms: int = -1) -> dict[tuple[str, int], int]:
        tps = list(offsets)
        member_id = member_id or ""

        def all_(code: int) -> dict[tuple[str, int], int]:
            return {tp: code for tp in tps}

        if not group_id:
            return all_(INVALID_GROUP_ID)
        err, p = await self._route(group_id)
        if err:
            return all_(err)
        group = self._groups.get(group_id)
        member = None
        if group is None:
            if generation_id >= 0 or member_id or group_instance_id is not None:
                return all_(ILLEGAL_GENERATION if not member_id else UNKNOWN_MEMBER_ID)
            group = self._new_group(group_id, p)
        elif group.state == DEAD:
            return all_(COORDINATOR_NOT_AVAILABLE)
        elif generation_id < 0 and not member_id and group_instance_id is None:
            if group.state != EMPTY:
                return all_(UNKNOWN_MEMBER_ID)    # a simple commit to a group with live members
        else:
            err = self._validate_member(group, member_id, group_instance_id)
            if err:
                return all_(err)
            if generation_id != group.generation_id:
                return all_(ILLEGAL_GENERATION)
            if group.state == COMPLETING_REBALANCE:
                return all_(REBALANCE_IN_PROGRESS)
            member = group.members[member_id]
        now = self.clock()
        result: dict[tuple[str, int], int] = {}
        records = []
        staged: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp in tps:
            om = _as_offset(offsets[tp], now, retention_ms)
            if len(om.metadata.encode()) > self.max_metadata_bytes:
                result[tp] = OFFSET_METADATA_TOO_LARGE
                continue
            if not self._partition_exists(*tp):
                result[tp] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            result[tp] = NONE
            staged[tp] = om
            records.append((rec.encode_offset_commit_key(group_id, tp[0], tp[1]), rec.encode_offset_commit(om)))
        if member is not None:
            self._schedule_heartbeat(group, member)
        if records:
            try:
                await self._append(p, records)
            except Exception as e:
                code = storage_code(e, rec.OFFSETS_TOPIC)
                for tp in staged:
                    result[tp] = code
                return result
            if self._groups.get(group_id) is group and group.state != DEAD:
                group.offsets.update(staged)
        return result

    def _partition_exists(self, topic: str, partition: int) -> bool:
        try:
            return 0 <= partition < self.engine.topic_metadata(topic).partitions
        except KafkaApiError:
            return False

    async def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None,
                            ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata]]:
        err, _ = await self._route(group_id)
        if err:
            return err, {}
        group = self._groups.get(group_id)
        committed = group.offsets if group is not None and group.state != DEAD else {}
        if partitions is None:
            return NONE, dict(committed)
        missing = OffsetAndMetadata(-1, -1, "", -1)
        return NONE, {tp: committed.get(tp, missing) for tp in partitions}

    async def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]],
                             ) -> tuple[int, dict[tuple[str, int], int]]:
        partitions = list(partitions)
        err, p = await self._route(group_id)
        if err:
            return err, {}
        group = self._groups.get(group_id)
        if group is None or group.state == DEAD:
            return GROUP_ID_NOT_FOUND, {}
        result: dict[tuple[str, int], int] = {}
        if group.state == EMPTY:
            deletable = list(partitions)
        elif group.protocol_type == "consumer":
            deletable = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    result[tp] = GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    deletable.append(tp)
        else:
            return NON_EMPTY_GROUP, {}
        to_delete = [tp for tp in deletable if tp in group.offsets]
        if to_delete:
            try:
                await self._append(p, [(rec.encode_offset_commit_key(group_id, t, q), None) for t, q in to_delete])
            except Exception as e:
                code = storage_code(e, rec.OFFSETS_TOPIC)
                return NONE, {**result, **{tp: code for tp in deletable}}
            for tp in to_delete:
                group.offsets.pop(tp, None)
        for tp in deletable:
            result[tp] = NONE
        return NONE, {tp: result[tp] for tp in partitions}

    # -- admin -------------------------------------------------------------------------
    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        out = []
        for gid in group_ids:
            err, _ = await self._route(gid)
            group = self._groups.get(gid)
            if err:
                out.append(GroupDescription(gid, err, "", "", "", []))
            elif group is None or group.state == DEAD:
                out.append(GroupDescription(gid, NONE, DEAD, "", "", []))
            elif group.state == STABLE:
                out.append(GroupDescription(gid, NONE, group.state, group.protocol_type or "",
                                            group.protocol_name or "", [
                    MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                      m.metadata(group.protocol_name), m.assignment)
                    for m in group.members.values()]))
            else:
                out.append(GroupDescription(gid, NONE, group.state, group.protocol_type or "", "", [
                    MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                    for m in group.members.values()]))
        return out

    async def list_groups(self, states: Iterable[str] | None = None) -> tuple[int, list[GroupListing]]:
        wanted = {s.lower() for s in states} if states else None
        error = NONE
        if any(st.state == _LOADING for st in self._partitions.values()):
            error = COORDINATOR_LOAD_IN_PROGRESS
        out = []
        for g in self._groups.values():
            st = self._partitions.get(g.partition)
            if st is None or st.state != _LOADED or g.state == DEAD:
                continue
            if wanted is not None and g.state.lower() not in wanted:
                continue
            out.append(GroupListing(g.group_id, g.protocol_type or "", g.state))
        return error, out

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for gid in group_ids:
            err, p = await self._route(gid)
            if err:
                out[gid] = err
                continue
            group = self._groups.get(gid)
            if group is None or group.state == DEAD:
                out[gid] = GROUP_ID_NOT_FOUND
                continue
            if group.state != EMPTY:
                out[gid] = NON_EMPTY_GROUP
                continue
            def decide(group=group, gid=gid):
                # under the append lock, so an offset committed meanwhile gets its tombstone too
                if group.state != EMPTY:
                    return []
                records = [(rec.encode_offset_commit_key(gid, t, q), None) for t, q in group.offsets]
                records.append((rec.encode_group_metadata_key(gid), None))
                return records

            try:
                if not await self._append(p, None, decide=decide):
                    out[gid] = NON_EMPTY_GROUP
                    continue
            except Exception as e:
                out[gid] = storage_code(e, rec.OFFSETS_TOPIC)
                continue
            self._delete_group(group)
            out[gid] = NONE
        return out

    def _delete_group(self, group: GroupMetadata) -> None:
        for attr in ("join_timer", "sync_timer"):
            self._cancel(group, attr)
        for t in group.pending_timers.values():
            t.cancel()
        group.pending_timers.clear()
        for m in list(group.members.values()):
            self._drop_member(group, m)
        group.transition_to(DEAD, self.clock())
        group.offsets.clear()
        if self._groups.get(group.group_id) is group:
            del self._groups[group.group_id]

    # -- offsets retention ------------------------------------------------------------------
    def _schedule_expiry(self) -> None:
        self._expire_timer = self.loop.call_later(self.retention_check_interval_ms / 1000, self._expiry_tick)

    def _expiry_tick(self) -> None:
        self._spawn(self.expire_offsets())
        self._schedule_expiry()

    async def expire_offsets(self) -> int:
        """Delete expired committed offsets (and Empty groups left without any); returns how many offsets."""
        now = self.clock()
        total = 0
        for group in list(self._groups.values()):
            st = self._partitions.get(group.partition)
            if st is None or st.state != _LOADED or group.state == DEAD:
                continue
            if not self._expired_offsets(group, now):
                continue
            plan: dict = {}

            def decide(group=group, plan=plan):
                # under the append lock: commits that were in flight are in memory by now
                expired = self._expired_offsets(group, self.clock())
                plan["judged"] = {tp: group.offsets.get(tp) for tp in expired}
                plan["delete"] = group.state == EMPTY and not group.members and \
                    len(expired) == len(group.offsets)
                records = [(rec.encode_offset_commit_key(group.group_id, t, q), None) for t, q in expired]
                if records and plan["delete"]:
                    records.append((rec.encode_group_metadata_key(group.group_id), None))
                return records

            try:
                if not await self._append(group.partition, None, decide=decide):
                    continue
            except Exception:
                log.exception("group %s: expiring offsets failed", group.group_id)
                continue
            expired = list(plan["judged"])
            delete_group = plan["delete"]
            for tp, judged in plan["judged"].items():
                if group.offsets.get(tp) is judged:     # a later commit stays
                    group.offsets.pop(tp, None)
            total += len(expired)
            if expired:
                log.info("group %s: %d committed offsets expired", group.group_id, len(expired))
            if delete_group and group.state == EMPTY and not group.offsets:
                self._delete_group(group)
        return total

    def _expired_offsets(self, group: GroupMetadata, now: int) -> list[tuple[str, int]]:
        retention = self.retention_ms

        def expired(om: OffsetAndMetadata, base: int) -> bool:
            if om.expire_timestamp >= 0:
                return now >= om.expire_timestamp
            return base + retention <= now

        if group.state == EMPTY:
            if group.protocol_type is not None and group.current_state_timestamp >= 0:
                return [tp for tp, om in group.offsets.items() if expired(om, group.current_state_timestamp)]
            return [tp for tp, om in group.offsets.items() if expired(om, om.commit_timestamp)]
        if group.state == STABLE and group.protocol_type == "consumer":
            topics = group.subscribed_topics()
            if topics is not None:
                return [tp for tp, om in group.offsets.items()
                        if tp[0] not in topics and expired(om, om.commit_timestamp)]
        return []

    # -- replay and partition moves ------------------------------------------------------
    def _new_load_state(self):
        # offsets {gid: {tp: om}}, groups {gid: record | None}, pending txn offsets
        # {pid: {gid: {tp: om}}}
        return ({}, {}, {})

    def _replay_batch(self, header, records, state) -> None:
        offsets, groups, pending = state
        if header.is_control:
            kind = control_type(records)
            txn = pending.pop(header.producer_id, {})
            if kind == 1:                               # COMMIT
                for gid, tps in txn.items():
                    offsets.setdefault(gid, {}).update(tps)
            return
        if header.is_transactional:
            txn = pending.setdefault(header.producer_id, {})
            for _off, _ts, key, value, _headers in records:
                k = rec.decode_key(key) if key is not None else None
                if k is not None and k[0] == "offset" and value is not None:
                    txn.setdefault(k[1], {})[(k[2], k[3])] = rec.decode_offset_commit(value)
            return
        for _off, _ts, key, value, _headers in records:
            self._replay(key, value, offsets, groups)

    def _apply_loaded(self, partition: int, state) -> None:
        offsets, groups, pending = state
        groups = {g: x for g, x in groups.items() if x is not None}
        pending_gids = {gid for txn in pending.values() for gid in txn}
        for gid in set(offsets) | set(groups) | pending_gids:
            group = self._restore_group(gid, partition, groups.get(gid), offsets.get(gid, {}))
            if group is None:
                if gid not in pending_gids:
                    continue
                group = GroupMetadata(gid, partition, current_state_timestamp=self.clock())
            self._groups[gid] = group
            for m in group.members.values():
                self._schedule_heartbeat(group, m)
        for pid, txn in pending.items():
            for gid, tps in txn.items():
                self._groups[gid].pending_txn_offsets.setdefault(pid, {}).update(tps)
        n = sum(1 for g in self._groups.values() if g.partition == partition)
        if n:
            log.info("loaded %d groups from %s-%d", n, rec.OFFSETS_TOPIC, partition)

    def _forget_partition(self, partition: int) -> None:
        for group in [g for g in self._groups.values() if g.partition == partition]:
            for attr in ("join_timer", "sync_timer"):
                self._cancel(group, attr)
            for t in group.pending_timers.values():
                t.cancel()
            for m in group.members.values():
                if m.heartbeat_timer is not None:
                    m.heartbeat_timer.cancel()
                _resolve(m.join_future, JoinGroupResult(NOT_COORDINATOR, member_id=m.member_id))
                _resolve(m.sync_future, SyncGroupResult(NOT_COORDINATOR))
                m.join_future = m.sync_future = None
            del self._groups[group.group_id]

    def _restore_group(self, gid: str, partition: int, meta: rec.GroupMetadataRecord | None,
                       offsets: dict) -> GroupMetadata | None:
        if meta is None and not offsets:
            return None
        group = GroupMetadata(gid, partition, current_state_timestamp=self.clock())
        if meta is not None:
            group.generation_id = meta.generation
            group.protocol_type = meta.protocol_type or None
            group.protocol_name = meta.protocol
            group.leader_id = meta.leader
            if meta.current_state_timestamp >= 0:
                group.current_state_timestamp = meta.current_state_timestamp
            for mr in meta.members:
                m = MemberMetadata(mr.member_id, mr.group_instance_id, mr.client_id, mr.client_host,
                                   mr.rebalance_timeout_ms, mr.session_timeout_ms, meta.protocol_type,
                                   [(meta.protocol or "", mr.subscription)], mr.assignment)
                group.members[m.member_id] = m
                if m.group_instance_id is not None:
                    group.static_members[m.group_instance_id] = m.member_id
            if group.members:
                group.state = STABLE
                if group.leader_id not in group.members:
                    group.leader_id = next(iter(group.members))
            else:
                group.leader_id = None
        group.offsets.update(offsets)
        return group

    @staticmethod
    def _replay(key, value, offsets: dict, groups: dict) -> None:
        if key is None:
            raise CorruptRecordError("record without a key")
        k = rec.decode_key(key)
        if k[0] == "offset":
            _, gid, topic, part = k
            if value is None:
                offsets.get(gid, {}).pop((topic, part), None)
            else:
                offsets.setdefault(gid, {})[(topic, part)] = rec.decode_offset_commit(value)
        elif k[0] == "group":
            gid = k[1]
            if value is None:
                # as Kafka's loader: the group's offsets go only with their own tombstones
                # (deleting or expiring a group writes one per offset before this one)
                groups[gid] = None
            else:
                groups[gid] = rec.decode_group_metadata(value)
        # other key versions (KIP-848 consumer groups, share groups, ...) are not ours: skipped


def _as_offset(value, now: int, retention_ms: int) -> OffsetAndMetadata:
    if isinstance(value, OffsetAndMetadata):
        om = value
    elif isinstance(value, int):
        om = OffsetAndMetadata(value)
    else:
        t = tuple(value)
        om = OffsetAndMetadata(t[0], t[1] if len(t) > 1 else -1, (t[2] if len(t) > 2 else "") or "")
    commit_ts = om.commit_timestamp if om.commit_timestamp >= 0 else now
    expire = om.expire_timestamp
    if retention_ms >= 0 and expire < 0:
        expire = commit_ts + retention_ms
    return OffsetAndMetadata(om.offset, om.leader_epoch, om.metadata or "", commit_ts, expire)
