"""The group coordinator's committed offsets, admin operations, offset retention and the
replay of ``__consumer_offsets`` (a mixin of GroupCoordinator, coordinator.py; the state it
works on -- ``_groups``, the partitions, ``_append`` -- is GroupCoordinator's/CoordinatorRuntime's)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import CorruptRecordError, ErrorCode, KafkaApiError
from . import records as rec
from .group import COMPLETING_REBALANCE, DEAD, EMPTY, STABLE, GroupMetadata, MemberMetadata, OffsetAndMetadata
from .group_results import GroupDescription, GroupListing, JoinGroupResult, MemberDescription, SyncGroupResult, _resolve
from .runtime import LOADED as _LOADED
from .runtime import LOADING as _LOADING
from .runtime import control_type, storage_code

__all__ = ["GroupStoreMixin"]

log = logging.getLogger("engine.coordinator")


class GroupStoreMixin:
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
            return all_(ErrorCode.INVALID_GROUP_ID)
        err, p = await self._route(group_id)
        if err:
            return all_(err)
        group = self._groups.get(group_id)
        member = None
        if group is None:
            if generation_id >= 0 or member_id or group_instance_id is not None:
                return all_(ErrorCode.ILLEGAL_GENERATION if not member_id else ErrorCode.UNKNOWN_MEMBER_ID)
            group = self._ctx.new_group(group_id, p)
        elif group.state == DEAD:
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif generation_id < 0 and not member_id and group_instance_id is None:
            if group.state != EMPTY:
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)    # a simple commit to a group with live members
        else:
            err = group.validate_member(member_id, group_instance_id)
            if err:
                return all_(err)
            if generation_id != group.generation_id:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            if group.state == COMPLETING_REBALANCE:
                return all_(ErrorCode.REBALANCE_IN_PROGRESS)
            member = group.members[member_id]
        result, staged, records = self._stage_offsets(group_id, offsets, retention_ms)
        if member is not None:
            self._members.schedule_heartbeat(group, member)
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

    def _stage_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], Any], retention_ms: int):
        """Check each offset of a commit: (result {tp: error}, staged {tp: OffsetAndMetadata},
        the records to append for the staged ones).  Too-large metadata and unknown partitions
        are refused per partition, as Kafka does."""
        now = self.clock()
        result: dict[tuple[str, int], int] = {}
        staged: dict[tuple[str, int], OffsetAndMetadata] = {}
        records = []
        for tp in offsets:
            om = _as_offset(offsets[tp], now, retention_ms)
            if len(om.metadata.encode()) > self.max_metadata_bytes:
                result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            elif not self._partition_exists(*tp):
                result[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                result[tp] = ErrorCode.NONE
                staged[tp] = om
                records.append((rec.encode_offset_commit_key(group_id, tp[0], tp[1]),
                                rec.encode_offset_commit(om)))
        return result, staged, records

    def _partition_exists(self, topic: str, partition: int) -> bool:
        try:
            return 0 <= partition < self.node.topic_metadata(topic).partitions
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
            return ErrorCode.NONE, dict(committed)
        missing = OffsetAndMetadata(-1, -1, "", -1)
        return ErrorCode.NONE, {tp: committed.get(tp, missing) for tp in partitions}

    async def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]],
                             ) -> tuple[int, dict[tuple[str, int], int]]:
        partitions = list(partitions)
        err, p = await self._route(group_id)
        if err:
            return err, {}
        group = self._groups.get(group_id)
        if group is None or group.state == DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        result: dict[tuple[str, int], int] = {}
        if group.state == EMPTY:
            deletable = list(partitions)
        elif group.protocol_type == "consumer":
            deletable = []
            for tp in partitions:
                if group.is_subscribed_to(tp[0]):
                    result[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    deletable.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        to_delete = [tp for tp in deletable if tp in group.offsets]
        if to_delete:
            try:
                await self._append(p, [(rec.encode_offset_commit_key(group_id, t, q), None) for t, q in to_delete])
            except Exception as e:
                code = storage_code(e, rec.OFFSETS_TOPIC)
                return ErrorCode.NONE, {**result, **{tp: code for tp in deletable}}
            for tp in to_delete:
                group.offsets.pop(tp, None)
        for tp in deletable:
            result[tp] = ErrorCode.NONE
        return ErrorCode.NONE, {tp: result[tp] for tp in partitions}

    async def on_partitions_deleted(self, partitions: Iterable[tuple[str, int]]) -> int:
        """The topic of `partitions` was deleted: remove every group's committed (and pending
        transactional) offsets of them, with tombstones, in the groups this coordinator has
        loaded (Kafka's ``GroupCoordinator.onPartitionsDeleted``, which every broker runs when a
        topic goes; each coordinator cleans the groups it owns).  A topic created again under
        the same name then starts with no committed offsets, as a new topic: an offset of the
        old one would make its consumers skip the new one's first records.  Returns how many
        offsets were removed."""
        gone = set(partitions)
        total = 0
        for p in sorted({g.partition for g in self._groups.values()}):
            if not self.is_loaded(p):
                continue
            plan: dict = {}

            def decide(p=p, plan=plan):
                # under the append lock: commits that were in flight are in memory by now
                for group in self._groups.values():
                    if group.partition == p and group.state != DEAD:
                        tps = {tp for tp in group.offsets if tp in gone}
                        tps.update(tp for txn in group.pending_txn_offsets.values() for tp in txn if tp in gone)
                        if tps:
                            plan[group.group_id] = sorted(tps)
                return [(rec.encode_offset_commit_key(gid, t, q), None)
                        for gid, tps in plan.items() for t, q in tps]

            try:
                if not await self._append(p, None, decide=decide):
                    continue
            except Exception as e:  # noqa: BLE001 - moved away or a storage error: logged
                log.warning("offsets of deleted partitions in %s-%d not removed: %s", rec.OFFSETS_TOPIC, p, e)
                continue
            for gid, tps in plan.items():
                group = self._groups.get(gid)
                if group is None:
                    continue
                for tp in tps:
                    group.offsets.pop(tp, None)
                    for txn in group.pending_txn_offsets.values():
                        txn.pop(tp, None)
                total += len(tps)
                log.info("group %s: offsets of deleted partitions removed: %s", gid,
                         ", ".join(f"{t}-{q}" for t, q in tps))
        return total

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
