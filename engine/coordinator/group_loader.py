"""Loading the groups of a partition of ``__consumer_offsets`` (a part GroupCoordinator owns;
the runtime's load hooks, runtime.py, come here): the replay of its batches (latest record
per key wins, tombstones delete, transactional offsets wait for their marker), the groups
restored from it, and a partition's groups dropped when it moves away."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..errors import CorruptRecordError, ErrorCode
from . import records as rec
from .group import STABLE, GroupMetadata, MemberMetadata
from .group_context import GroupContext
from .group_results import JoinGroupResult, SyncGroupResult, _resolve
from .runtime import control_type

__all__ = ["GroupLoader"]

log = logging.getLogger("engine.coordinator")


class GroupLoader:
    """Given the shared group context and the membership's ``schedule_heartbeat`` (a restored
    member's session runs from its load)."""

    def __init__(self, ctx: GroupContext, *, schedule_heartbeat: Callable[[GroupMetadata, MemberMetadata], None]):
        self._ctx = ctx
        self._schedule_heartbeat = schedule_heartbeat

    def new_load_state(self):
        # offsets {gid: {tp: om}}, groups {gid: record | None}, pending txn offsets
        # {pid: {gid: {tp: om}}}
        return ({}, {}, {})

    def replay_batch(self, header, records, state) -> None:
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
            if value is None and pending and key is not None:
                # Kafka's replay: an offset tombstone also drops that offset from the open
                # transactions of its group (their COMMIT must not bring it back)
                k = rec.decode_key(key)
                if k[0] == "offset":
                    for txn in pending.values():
                        txn.get(k[1], {}).pop((k[2], k[3]), None)

    def apply_loaded(self, partition: int, state) -> None:
        offsets, groups, pending = state
        groups = {g: x for g, x in groups.items() if x is not None}
        pending_gids = {gid for txn in pending.values() for gid in txn}
        for gid in set(offsets) | set(groups) | pending_gids:
            group = self._restore_group(gid, partition, groups.get(gid), offsets.get(gid, {}))
            if group is None:
                if gid not in pending_gids:
                    continue
                group = GroupMetadata(gid, partition, current_state_timestamp=self._ctx.clock())
            self._ctx.groups[gid] = group
            for m in group.members.values():
                self._schedule_heartbeat(group, m)
        for pid, txn in pending.items():
            for gid, tps in txn.items():
                self._ctx.groups[gid].pending_txn_offsets.setdefault(pid, {}).update(tps)
        n = sum(g.partition == partition for g in self._ctx.groups.values())
        if n:
            log.info("loaded %d groups from %s-%d", n, rec.OFFSETS_TOPIC, partition)

    def forget_partition(self, partition: int) -> None:
        for group in [g for g in self._ctx.groups.values() if g.partition == partition]:
            for attr in ("join_timer", "sync_timer"):
                group.cancel_timer(attr)
            for t in group.pending_timers.values():
                t.cancel()
            for m in group.members.values():
                if m.heartbeat_timer is not None:
                    m.heartbeat_timer.cancel()
                _resolve(m.join_future, JoinGroupResult(ErrorCode.NOT_COORDINATOR, member_id=m.member_id))
                _resolve(m.sync_future, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
                m.join_future = m.sync_future = None
            del self._ctx.groups[group.group_id]

    def _restore_group(self, gid: str, partition: int, meta: rec.GroupMetadataRecord | None,
                       offsets: dict) -> GroupMetadata | None:
        if meta is None and not offsets:
            return None
        group = GroupMetadata(gid, partition, current_state_timestamp=self._ctx.clock())
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

