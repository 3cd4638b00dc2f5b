"""Offsets retention of the group coordinator (a part GroupCoordinator owns; Kafka 2.1+):
offsets of an Empty group expire ``offsets.retention.minutes`` after it became Empty (of a
group that never had members: after their commit), offsets of topics a Stable consumer
group no longer subscribes to expire by commit time, a commit made with a retention time
expires at that time; an Empty group with no offsets left is deleted (tombstone)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from . import records as rec
from .group import DEAD, EMPTY, STABLE, GroupMetadata, OffsetAndMetadata
from .group_context import GroupContext

__all__ = ["OffsetRetention"]

log = logging.getLogger("engine.coordinator")


class OffsetRetention:
    """Given the shared group context, the membership's ``delete_group``, the retention
    (``offsets.retention.minutes`` in ms) and ``offsets.retention.check.interval.ms``."""

    def __init__(self, ctx: GroupContext, *, delete_group: Callable[[GroupMetadata], None],
                 retention_ms: int, check_interval_ms: int):
        self._ctx = ctx
        self._delete_group = delete_group
        self.retention_ms = retention_ms
        self.check_interval_ms = check_interval_ms
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Run a retention pass every ``offsets.retention.check.interval.ms`` from now on."""
        self._timer = self._ctx.loop().call_later(self.check_interval_ms / 1000, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _tick(self) -> None:
        self._ctx.spawn(self.expire_offsets())
        self.start()

    async def expire_offsets(self) -> int:
        """Delete expired committed offsets (and Empty groups left without any); returns how many offsets."""
        now = self._ctx.clock()
        total = 0
        for group in list(self._ctx.groups.values()):
            if not self._ctx.is_loaded(group.partition) or group.state == DEAD:
                continue
            if not self._expired(group, now):
                continue
            plan: dict = {}

            def decide(group=group, plan=plan):
                # under the append lock: commits that were in flight are in memory by now
                expired = self._expired(group, self._ctx.clock())
                plan["judged"] = {tp: group.offsets.get(tp) for tp in expired}
                plan["delete"] = group.state == EMPTY and not group.members and \
                    len(expired) == len(group.offsets)
                records = [(rec.encode_offset_commit_key(group.group_id, t, q), None) for t, q in expired]
                if records and plan["delete"]:
                    records.append((rec.encode_group_metadata_key(group.group_id), None))
                return records

            try:
                if not await self._ctx.append(group.partition, None, decide=decide):
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

    def _expired(self, group: GroupMetadata, now: int) -> list[tuple[str, int]]:
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
