"""Transactional offset commits of the group coordinator (a part GroupCoordinator owns).

TxnOffsetCommit writes the offsets to the group's ``__consumer_offsets``
partition as a transactional batch of the producer (Kafka's layout), and keeps
them in ``GroupMetadata.pending_txn_offsets[producer_id]``: they are not the
group's committed offsets until the transaction's COMMIT marker is written to
that partition (:meth:`TxnOffsets.complete_txn`, called by the transaction
coordinator); an ABORT drops them.  Meanwhile OffsetFetch with ``require_stable``
answers UNSTABLE_OFFSET_COMMIT for those partitions (:meth:`TxnOffsets.unstable_partitions`).
Replay (the loader's ``replay_batch``) follows the same rule with the markers
found in the log.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping

from ..errors import ErrorCode, KafkaApiError
from . import records as rec
from .group import DEAD, GroupMetadata
from .group_context import GroupContext
from .runtime import storage_code

__all__ = ["TxnOffsets"]


class TxnOffsets:
    """Given the shared group context, the offsets store's ``stage`` (checks a commit's offsets
    and makes their records) and the runtime's ``append_marker`` (writes a transaction marker
    to a partition of ``__consumer_offsets`` and applies it under the partition's lock)."""

    def __init__(self, ctx: GroupContext, stage: Callable, append_marker: Callable[..., Awaitable[bool]]):
        self._ctx = ctx
        self._stage = stage
        self._append_marker = append_marker

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 offsets: Mapping, *, generation_id: int = -1, member_id: str = "",
                                 group_instance_id: str | None = None) -> dict[tuple[str, int], int]:
        """Write `offsets` as part of the producer's transaction: {tp: error}."""
        tps = list(offsets)
        member_id = member_id or ""
        err, p = await self._ctx.route_group(group_id)
        if err:
            return dict.fromkeys(tps, err)
        group: GroupMetadata | None = self._ctx.groups.get(group_id)
        if group is None:
            group = self._ctx.new_group(group_id, p)
        elif group.state == DEAD:
            return dict.fromkeys(tps, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if member_id or group_instance_id is not None or generation_id >= 0:
            # KIP-447: a consumer group member's commit is checked against the group
            if member_id and member_id not in group.members:
                return dict.fromkeys(tps, ErrorCode.UNKNOWN_MEMBER_ID)
            if member_id:
                err = group.validate_member(member_id, group_instance_id)
                if err:
                    return dict.fromkeys(tps, err)
            if generation_id >= 0 and generation_id != group.generation_id:
                return dict.fromkeys(tps, ErrorCode.ILLEGAL_GENERATION)
        result, staged, records = self._stage(group_id, offsets, -1)
        if records:
            try:
                await self._ctx.append(p, records, producer_id=producer_id, producer_epoch=producer_epoch,
                                       transactional=True)
            except Exception as e:  # noqa: BLE001 - the request's error code
                fenced = (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
                code = ErrorCode.PRODUCER_FENCED if isinstance(e, KafkaApiError) and e.code in fenced \
                    else storage_code(e, rec.OFFSETS_TOPIC)
                for tp in staged:
                    result[tp] = code
                return result
            if self._ctx.groups.get(group_id) is group:
                group.pending_txn_offsets.setdefault(producer_id, {}).update(staged)
        return result

    async def complete_txn(self, producer_id: int, producer_epoch: int, partition: int, commit: bool,
                           coordinator_epoch: int) -> bool:
        """Write the COMMIT/ABORT marker of the producer's transaction to our `partition` of
        ``__consumer_offsets`` and apply it: pending offsets become committed, or are dropped.
        True when written; False when ``__consumer_offsets`` does not exist (nothing to end)."""
        def apply() -> None:
            for group in self._ctx.groups.values():
                if group.partition != partition:
                    continue
                pending = group.pending_txn_offsets.pop(producer_id, None)
                if commit and pending and group.state != DEAD:
                    group.offsets.update(pending)

        return await self._append_marker(partition, producer_id, producer_epoch, commit, coordinator_epoch,
                                         apply)

    async def unstable_partitions(self, group_id: str, partitions: Iterable[tuple[str, int]] | None
                                  ) -> set[tuple[str, int]]:
        """The partitions (of `partitions`, or all) with transactional offsets not yet committed."""
        group = self._ctx.groups.get(group_id)
        if group is None or not group.pending_txn_offsets:
            return set()
        pending = {tp for txn in group.pending_txn_offsets.values() for tp in txn}
        return pending if partitions is None else pending & set(partitions)
