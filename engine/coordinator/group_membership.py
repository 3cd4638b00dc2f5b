"""Membership of Kafka's classic group protocol (a part GroupCoordinator owns): JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, the rebalance that follows, and the timers (session,
rebalance, initial delay, pending sync, pending members).  Group changes are stored in the
group's ``__consumer_offsets`` partition (group_context.py: the shared group table and the
runtime's append) before they are answered.  Semantics: coordinator.py's docstring."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping

from ..errors import ErrorCode, KafkaApiError
from . import records as rec
from .group import COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, GroupMetadata, MemberMetadata
from .group_context import GroupContext
from .group_results import JoinGroupResult, LeaveGroupResult, SyncGroupResult, _resolve
from .runtime import storage_code

__all__ = ["Membership"]

log = logging.getLogger("engine.coordinator")

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000      # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


class Membership:
    """Given the shared group context and the group settings (``group.initial.rebalance.delay.ms``,
    ``group.min.session.timeout.ms``, ``group.max.session.timeout.ms``, ``group.max.size``)."""

    def __init__(self, ctx: GroupContext, *, initial_rebalance_delay_ms: int, min_session_timeout_ms: int,
                 max_session_timeout_ms: int, max_group_size: int):
        self._ctx = ctx
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.max_group_size = max_group_size

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
            return JoinGroupResult(ErrorCode.INVALID_GROUP_ID, member_id=member_id)
        err, p = await self._ctx.route(group_id)
        if err:
            return JoinGroupResult(err, member_id=member_id)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return JoinGroupResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        group = self._ctx.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self._ctx.new_group(group_id, p)
        if group.state == DEAD:
            return JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        is_known = member_id in group.members or member_id in group.pending_members or (
            group_instance_id is not None and group_instance_id in group.static_members)
        if not is_known and len(group.members) + len(group.pending_members) >= self.max_group_size:
            return JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=member_id)
        if not group.supports_protocols(protocol_type, protocols):
            return JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        fut = self._ctx.loop().create_future()
        args = (group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols, fut)
        if not member_id:
            self._join_unknown(group, require_known_member_id, reason, *args)
        else:
            self._join_known(group, member_id, reason, *args)
        return await asyncio.shield(fut)


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
            group.pending_timers[new_id] = self._ctx.loop().call_later(
                session_ms / 1000, self._pending_member_expired, group, new_id)
            _resolve(fut, JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
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
        err = group.validate_member(member_id, instance_id)
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
                self.schedule_heartbeat(group, member)
                _resolve(fut, self._current_join_result(group, member_id))
        else:
            _resolve(fut, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _current_join_result(self, group: GroupMetadata, member_id: str, skip: bool = False) -> JoinGroupResult:
        leader = group.is_leader(member_id)
        return JoinGroupResult(ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                               group.leader_id or "", member_id,
                               group.current_member_metadata() if leader else [], skip and leader)

    def _add_member_and_rebalance(self, group, member_id, instance_id, client_id, client_host, rebalance_ms,
                                  session_ms, protocol_type, protocols, fut, reason) -> None:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_ms, session_ms,
                                protocol_type, protocols, join_future=fut, is_new=True,
                                join_started=self._ctx.loop().time())
        if group.state == PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._rebalance_or_try_complete(group, reason or f"member {member_id} joined")

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_ms, session_ms, fut,
                                     reason) -> None:
        if member.join_future is not None and member.join_future is not fut:
            _resolve(member.join_future, JoinGroupResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_ms
        member.session_timeout_ms = session_ms
        member.join_future = fut
        member.join_started = self._ctx.loop().time()
        self._rebalance_or_try_complete(group, reason or f"member {member.member_id} rejoined")

    def _replace_static_member(self, group, old_id, new_id, instance_id, client_id, client_host,
                               rebalance_ms, session_ms, protocols, fut, reason) -> None:
        old = group.members[old_id]
        # the fenced instance's pending answers
        _resolve(old.join_future, JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        _resolve(old.sync_future, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        old.join_future = old.sync_future = None
        member = group.replace_static_member(instance_id, old_id, new_id)
        member.client_id, member.client_host = client_id, client_host
        member.protocols = protocols
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_ms, session_ms
        self.schedule_heartbeat(group, member)
        if group.state == STABLE:
            if group.select_protocol() == group.protocol_name:
                self._ctx.spawn(self._store_replaced_static(group, member, fut))
            else:
                member.join_future = fut
                member.join_started = self._ctx.loop().time()
                self._prepare_rebalance(group, reason or f"static member {instance_id} rejoined")
        elif group.state == COMPLETING_REBALANCE:
            member.join_future = fut
            member.join_started = self._ctx.loop().time()
            self._prepare_rebalance(group, reason or f"static member {instance_id} rejoined")
        else:  # PreparingRebalance: it waits for the join like everyone else
            member.join_future = fut
            member.join_started = self._ctx.loop().time()
            self._try_complete_join(group)

    async def _store_replaced_static(self, group: GroupMetadata, member: MemberMetadata, fut) -> None:
        try:
            await self._ctx.append(group.partition, [(rec.encode_group_metadata_key(group.group_id),
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
                _resolve(m.sync_future, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
                m.sync_future = None
        group.cancel_timer("sync_timer")
        group.pending_sync.clear()
        was_empty = group.state == EMPTY
        group.transition_to(PREPARING_REBALANCE, self._ctx.clock())
        log.info("group %s: preparing rebalance (generation %d): %s", group.group_id,
                 group.generation_id, reason)
        group.cancel_timer("join_timer")
        if was_empty:
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.initial_join = True
            group.join_timer = self._ctx.loop().call_later(delay / 1000, self._initial_join_expired, group,
                                                    delay, remaining)
        else:
            group.initial_join = False
            group.join_timer = self._ctx.loop().call_later(group.max_rebalance_timeout_ms() / 1000,
                                                    self._complete_join, group)
            self._try_complete_join(group)

    def _initial_join_expired(self, group: GroupMetadata, delay: int, remaining: int) -> None:
        group.join_timer = None
        if group.state != PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            d = min(delay, remaining)
            group.join_timer = self._ctx.loop().call_later(d / 1000, self._initial_join_expired, group, delay,
                                                    remaining - d)
            return
        group.initial_join = False
        self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if group.state == PREPARING_REBALANCE and not group.initial_join and group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        group.cancel_timer("join_timer")
        group.initial_join = False
        if group.state != PREPARING_REBALANCE:
            return
        for m in group.not_yet_rejoined():
            log.info("group %s: member %s did not rejoin in time: removed", group.group_id, m.member_id)
            self.drop_member(group, m)
        group.init_next_generation(self._ctx.clock())
        if group.state == EMPTY:
            log.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            self._ctx.spawn(self._store_empty(group))
            return
        log.info("group %s: generation %d, protocol %s, leader %s, %d members", group.group_id,
                 group.generation_id, group.protocol_name, group.leader_id, len(group.members))
        for m in group.members.values():
            _resolve(m.join_future, self._current_join_result(group, m.member_id))
            m.join_future = None
            m.is_new = False
            self.schedule_heartbeat(group, m)
        group.pending_sync = set(group.members)
        gen = group.generation_id
        group.sync_timer = self._ctx.loop().call_later(group.max_rebalance_timeout_ms() / 1000,
                                                self._sync_expired, group, gen)

    async def _store_empty(self, group: GroupMetadata) -> None:
        try:
            await self._ctx.append(group.partition, [(rec.encode_group_metadata_key(group.group_id),
                                                  rec.encode_group_metadata(group))])
        except KafkaApiError as e:      # e.g. leadership of the partition moved (cluster mode)
            log.warning("group %s: storing the empty group failed: %s", group.group_id, e)
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
            self.drop_member(group, m)
        self._rebalance_or_try_complete(group, "members did not sync in time")

    def _pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_timers.pop(member_id, None)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._try_complete_join(group)

    # -- heartbeats and member removal ---------------------------------------------
    def schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            timeout_ms: int | None = None) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        ms = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self._ctx.loop().call_later(ms / 1000, self._heartbeat_expired, group, member)

    def _heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            return      # the rebalance and pending-sync timeouts govern it now
        log.info("group %s: member %s %s: removed", group.group_id, member.member_id,
                 "did not finish joining" if member.is_new else "session timed out")
        self._remove_member_and_update_group(group, member, "session timeout")

    def drop_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        _resolve(member.join_future, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        _resolve(member.sync_future, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.join_future = member.sync_future = None
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        self.drop_member(group, member)
        self._rebalance_or_try_complete(group, f"member {member.member_id} left ({reason})")

    def delete_group(self, group: GroupMetadata) -> None:
        """The group goes (DeleteGroups, or expired): its timers and members (their pending
        answers: UNKNOWN_MEMBER_ID), its offsets; it becomes Dead and leaves the table."""
        for attr in ("join_timer", "sync_timer"):
            group.cancel_timer(attr)
        for t in group.pending_timers.values():
            t.cancel()
        group.pending_timers.clear()
        for m in list(group.members.values()):
            self.drop_member(group, m)
        group.transition_to(DEAD, self._ctx.clock())
        group.offsets.clear()
        if self._ctx.groups.get(group.group_id) is group:
            del self._ctx.groups[group.group_id]

    # -- SyncGroup -------------------------------------------------------------------
    def rebalance_timeout_ms(self, group_id: str) -> int:
        """The longest rebalance timeout of `group_id`'s members, which bounds a SyncGroup's wait
        (the pending-sync timer); -1 when not known.  Any thread may ask (a read)."""
        group = self._ctx.groups.get(group_id)
        try:
            return group.max_rebalance_timeout_ms() if group is not None else -1
        except RuntimeError:        # its members changed meanwhile on the coordinator's loop
            return -1

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         assignments: Mapping[str, bytes] | None = None, *,
                         group_instance_id: str | None = None, protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncGroupResult:
        err, _ = await self._ctx.route(group_id)
        if err:
            return SyncGroupResult(err)
        group = self._ctx.groups.get(group_id)
        if group is None:
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state == DEAD:
            return SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        err = group.validate_member(member_id, group_instance_id)
        if err:
            return SyncGroupResult(err)
        if generation_id != group.generation_id:
            return SyncGroupResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.cancel_timer("sync_timer")
        member = group.members[member_id]
        if group.state == PREPARING_REBALANCE:
            return SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state == STABLE:
            self.schedule_heartbeat(group, member)
            return SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        if group.state != COMPLETING_REBALANCE:
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        fut = self._ctx.loop().create_future()
        _resolve(member.sync_future, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        self.schedule_heartbeat(group, member)
        if group.is_leader(member_id):
            full = {mid: bytes((assignments or {}).get(mid, b"")) for mid in group.members}
            self._ctx.spawn(self._complete_sync(group, group.generation_id, full))
        return await asyncio.shield(fut)

    async def _complete_sync(self, group: GroupMetadata, generation: int, assignments: dict[str, bytes]) -> None:
        error: int = ErrorCode.NONE
        try:
            await self._ctx.append(group.partition, [(rec.encode_group_metadata_key(group.group_id),
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
                _resolve(m.sync_future, SyncGroupResult(ErrorCode.NONE, group.protocol_type, group.protocol_name,
                                                        m.assignment))
                m.sync_future = None
                self.schedule_heartbeat(group, m)
        group.transition_to(STABLE, self._ctx.clock())
        log.info("group %s: stable at generation %d", group.group_id, generation)

    # -- Heartbeat / LeaveGroup ---------------------------------------------------------
    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> int:
        err, _ = await self._ctx.route(group_id)
        if err:
            return err
        group = self._ctx.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state == DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        err = group.validate_member(member_id, group_instance_id)
        if err:
            return err
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member = group.members[member_id]
        if group.state == EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.schedule_heartbeat(group, member)
        if group.state == PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave_group(self, group_id: str,
                          members: Iterable[tuple[str, str | None]]) -> LeaveGroupResult:
        members = list(members)
        err, _ = await self._ctx.route(group_id)
        if err:
            return LeaveGroupResult(err, [(m, i, err) for m, i in members])
        group = self._ctx.groups.get(group_id)
        if group is None:
            return LeaveGroupResult(ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in members])
        if group.state == DEAD:
            return LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                    [(m, i, ErrorCode.COORDINATOR_NOT_AVAILABLE) for m, i in members])
        out = []
        for member_id, instance_id in members:
            member_id = member_id or ""
            code = ErrorCode.NONE
            if instance_id is not None:
                existing = group.static_member_id(instance_id)
                if existing is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                elif member_id and existing != member_id:
                    code = ErrorCode.FENCED_INSTANCE_ID
                else:
                    member_id = existing
            if code == ErrorCode.NONE:
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
                    code = ErrorCode.UNKNOWN_MEMBER_ID
            out.append((member_id, instance_id, code))
        return LeaveGroupResult(ErrorCode.NONE, out)

