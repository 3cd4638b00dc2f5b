"""Committed offsets of the group coordinator (a part GroupCoordinator owns): OffsetCommit,
OffsetFetch, OffsetDelete, and the offsets of deleted topics removed.  Each change is
appended to the group's ``__consumer_offsets`` partition first and applied to memory after
the append returned (group_context.py: the shared group table and the runtime's append)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import ErrorCode, KafkaApiError
from . import records as rec
from .group import COMPLETING_REBALANCE, DEAD, EMPTY, GroupMetadata, MemberMetadata, OffsetAndMetadata
from .group_context import GroupContext
from .runtime import storage_code

__all__ = ["OffsetStore"]

log = logging.getLogger("engine.coordinator")


class OffsetStore:
    """Given the shared group context, the membership's ``schedule_heartbeat`` (a member's
    commit counts as a heartbeat), the node's ``topic_metadata`` (a commit to a partition that
    does not exist is refused) and ``offset.metadata.max.bytes``."""

    def __init__(self, ctx: GroupContext, *, schedule_heartbeat: Callable[[GroupMetadata, MemberMetadata], None],
                 topic_metadata: Callable[[str], Any], max_metadata_bytes: int):
        self._ctx = ctx
        self._schedule_heartbeat = schedule_heartbeat
        self._topic_metadata = topic_metadata
        self.max_metadata_bytes = max_metadata_bytes

    async def commit(self, group_id: str, offsets: Mapping[tuple[str, int], Any], *,
                             generation_id: int = -1, member_id: str = "",
                             group_instance_id: str | None = None,
                             retention_ms: int = -1) -> dict[tuple[str, int], int]:
        tps = list(offsets)
        member_id = member_id or ""
        err, p = await self._ctx.route_group(group_id)
        if err:
            return dict.fromkeys(tps, err)
        group = self._ctx.groups.get(group_id)
        member = None
        if group is None:
            if generation_id >= 0 or member_id or group_instance_id is not None:
                return dict.fromkeys(tps, ErrorCode.UNKNOWN_MEMBER_ID if member_id else ErrorCode.ILLEGAL_GENERATION)
            group = self._ctx.new_group(group_id, p)
        elif group.state == DEAD:
            return dict.fromkeys(tps, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif generation_id < 0 and not member_id and group_instance_id is None:
            if group.state != EMPTY:
                return dict.fromkeys(tps, ErrorCode.UNKNOWN_MEMBER_ID)    # a simple commit to a group with live members
        else:
            err = group.validate_member(member_id, group_instance_id)
            if err:
                return dict.fromkeys(tps, err)
            if generation_id != group.generation_id:
                return dict.fromkeys(tps, ErrorCode.ILLEGAL_GENERATION)
            if group.state == COMPLETING_REBALANCE:
                return dict.fromkeys(tps, ErrorCode.REBALANCE_IN_PROGRESS)
            member = group.members[member_id]
        result, staged, records = self.stage(group_id, offsets, retention_ms)
        if member is not None:
            self._schedule_heartbeat(group, member)
        if records:
            try:
                await self._ctx.append(p, records)
            except Exception as e:
                code = storage_code(e, rec.OFFSETS_TOPIC)
                for tp in staged:
                    result[tp] = code
                return result
            if self._ctx.groups.get(group_id) is group and group.state != DEAD:
                group.offsets.update(staged)
        return result

    def stage(self, group_id: str, offsets: Mapping[tuple[str, int], Any], retention_ms: int):
        """Check each offset of a commit: (result {tp: error}, staged {tp: OffsetAndMetadata},
        the records to append for the staged ones).  Too-large metadata and unknown partitions
        are refused per partition, as Kafka does."""
        now = self._ctx.clock()
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
            return 0 <= partition < self._topic_metadata(topic).partitions
        except KafkaApiError:
            return False

    async def fetch(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None,
                            ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata]]:
        err, _ = await self._ctx.route(group_id)
        if err:
            return err, {}
        group = self._ctx.groups.get(group_id)
        committed = group.offsets if group is not None and group.state != DEAD else {}
        if partitions is None:
            return ErrorCode.NONE, dict(committed)
        missing = OffsetAndMetadata(-1, -1, "", -1)
        return ErrorCode.NONE, {tp: committed.get(tp, missing) for tp in partitions}

    async def delete(self, group_id: str, partitions: Iterable[tuple[str, int]],
                             ) -> tuple[int, dict[tuple[str, int], int]]:
        partitions = list(partitions)
        err, p = await self._ctx.route(group_id)
        if err:
            return err, {}
        group = self._ctx.groups.get(group_id)
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
                await self._ctx.append(p, [(rec.encode_offset_commit_key(group_id, t, q), None) for t, q in to_delete])
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
        for p in sorted({g.partition for g in self._ctx.groups.values()}):
            if not self._ctx.is_loaded(p):
                continue
            plan: dict = {}

            def decide(p=p, plan=plan):
                # under the append lock: commits that were in flight are in memory by now
                for group in self._ctx.groups.values():
                    if group.partition == p and group.state != DEAD:
                        tps = {tp for tp in group.offsets if tp in gone}
                        tps.update(tp for txn in group.pending_txn_offsets.values() for tp in txn if tp in gone)
                        if tps:
                            plan[group.group_id] = sorted(tps)
                return [(rec.encode_offset_commit_key(gid, t, q), None)
                        for gid, tps in plan.items() for t, q in tps]

            try:
                if not await self._ctx.append(p, None, decide=decide):
                    continue
            except Exception as e:  # noqa: BLE001 - moved away or a storage error: logged
                log.warning("offsets of deleted partitions in %s-%d not removed: %s", rec.OFFSETS_TOPIC, p, e)
                continue
            for gid, tps in plan.items():
                group = self._ctx.groups.get(gid)
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
