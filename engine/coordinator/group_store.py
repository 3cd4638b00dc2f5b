"""The group coordinator's committed offsets, admin operations, offset retention and the
replay of ``__consumer_offsets`` (a mixin of GroupCoordinator, coordinator.py; the state it
works on -- ``_groups``, the partitions, ``_append`` -- is GroupCoordinator's/CoordinatorRuntime's)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ..errors import ErrorCode
from . import records as rec
from .group import DEAD, EMPTY, STABLE, GroupMetadata, OffsetAndMetadata
from .group_results import GroupDescription, GroupListing, MemberDescription
from .runtime import LOADED as _LOADED
from .runtime import LOADING as _LOADING
from .runtime import storage_code

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
