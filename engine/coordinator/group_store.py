"""The group coordinator's committed offsets, admin operations, offset retention and the
replay of ``__consumer_offsets`` (a mixin of GroupCoordinator, coordinator.py; the state it
works on -- ``_groups``, the partitions, ``_append`` -- is GroupCoordinator's/CoordinatorRuntime's)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ..errors import CorruptRecordError, ErrorCode
from . import records as rec
from .group import DEAD, EMPTY, STABLE, GroupMetadata, MemberMetadata, OffsetAndMetadata
from .group_results import GroupDescription, GroupListing, JoinGroupResult, MemberDescription, SyncGroupResult, _resolve
from .runtime import LOADED as _LOADED
from .runtime import LOADING as _LOADING
from .runtime import control_type, storage_code

__all__ = ["GroupStoreMixin"]

log = logging.getLogger("engine.coordinator")


class GroupStoreMixin:
    # -- admin -------------------------------------------------------------------------
    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        out = []
        for gid in group_ids:
            err, _ = await self._route(gid)
            group = self._groups.get(gid)
            if err:
                out.append(GroupDescription(gid, err, "", "", "", []))
            elif group is None or group.state == DEAD:
                out.append(GroupDescription(gid, ErrorCode.NONE, DEAD, "", "", []))
            elif group.state == STABLE:
                out.append(GroupDescription(gid, ErrorCode.NONE, group.state, group.protocol_type or "",
                                            group.protocol_name or "", [
                    MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                      m.metadata(group.protocol_name), m.assignment)
                    for m in group.members.values()]))
            else:
                out.append(GroupDescription(gid, ErrorCode.NONE, group.state, group.protocol_type or "", "", [
                    MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                    for m in group.members.values()]))
        return out

    async def list_groups(self, states: Iterable[str] | None = None) -> tuple[int, list[GroupListing]]:
        wanted = {s.lower() for s in states} if states else None
        error = ErrorCode.NONE
        if any(st.state == _LOADING for st in self._partitions.values()):
            error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
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
                out[gid] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if group.state != EMPTY:
                out[gid] = ErrorCode.NON_EMPTY_GROUP
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
                    out[gid] = ErrorCode.NON_EMPTY_GROUP
                    continue
            except Exception as e:
                out[gid] = storage_code(e, rec.OFFSETS_TOPIC)
                continue
            self._delete_group(group)
            out[gid] = ErrorCode.NONE
        return out

    def _delete_group(self, group: GroupMetadata) -> None:
        self._members.delete_group(group)

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
            if value is None and pending and key is not None:
                # Kafka's replay: an offset tombstone also drops that offset from the open
                # transactions of its group (their COMMIT must not bring it back)
                k = rec.decode_key(key)
                if k[0] == "offset":
                    for txn in pending.values():
                        txn.get(k[1], {}).pop((k[2], k[3]), None)

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
                self._members.schedule_heartbeat(group, m)
        for pid, txn in pending.items():
            for gid, tps in txn.items():
                self._groups[gid].pending_txn_offsets.setdefault(pid, {}).update(tps)
        n = sum(g.partition == partition for g in self._groups.values())
        if n:
            log.info("loaded %d groups from %s-%d", n, rec.OFFSETS_TOPIC, partition)

    def _forget_partition(self, partition: int) -> None:
        for group in [g for g in self._groups.values() if g.partition == partition]:
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

