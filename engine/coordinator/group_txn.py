"""Transactional offset commits of the group coordinator (a mixin of GroupCoordinator).

TxnOffsetCommit writes the offsets to the group's ``__consumer_offsets``
partition as a transactional batch of the producer (Kafka's layout), and keeps
them in ``GroupMetadata.pending_txn_offsets[producer_id]``: they are not the
group's committed offsets until the transaction's COMMIT marker is written to
that partition (:meth:`complete_txn`, called by the transaction coordinator);
an ABORT drops them.  Meanwhile OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for those partitions (:meth:`unstable_partitions`).
Replay (coordinator.py ``_replay_batch``) follows the same rule with the markers
found in the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..errors import ErrorCode, KafkaApiError, NotCoordinatorError
from . import records as rec
from .group import DEAD, GroupMetadata
from .runtime import LOADED, storage_code

__all__ = ["TxnOffsetsMixin"]


class TxnOffsetsMixin:
    """Needs GroupCoordinator's ``_route``, ``_groups``, ``_new_group``, ``_validate_member``,
    ``_append``, ``_partitions``, ``_stage_offsets``."""

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 offsets: Mapping, *, generation_id: int = -1, member_id: str = "",
                                 group_instance_id: str | None = None) -> dict[tuple[str, int], int]:
        """Write `offsets` as part of the producer's transaction: {tp: error}."""
        tps = list(offsets)
        member_id = member_id or ""

        def all_(code: int) -> dict[tuple[str, int], int]:
            return {tp: code for tp in tps}

        if not group_id:
            return all_(ErrorCode.INVALID_GROUP_ID)
        err, p = await self._route(group_id)
        if err:
            return all_(err)
        group: GroupMetadata | None = self._groups.get(group_id)
        if group is None:
            group = self._new_group(group_id, p)
        elif group.state == DEAD:
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if member_id or group_instance_id is not None or generation_id >= 0:
            # KIP-447: a consumer group member's commit is checked against the group
            if member_id and member_id not in group.members:
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)
            if member_id:
                err = self._validate_member(group, member_id, group_instance_id)
                if err:
                    return all_(err)
            if generation_id >= 0 and generation_id != group.generation_id:
                return all_(ErrorCode.ILLEGAL_GENERATION)
        result, staged, records = self._stage_offsets(group_id, offsets, -1)
        if records:
            try:
                await self._append(p, records, producer_id=producer_id, producer_epoch=producer_epoch,
                                   transactional=True)
            except Exception as e:  # noqa: BLE001 - the request's error code
                fenced = (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED)
                code = ErrorCode.PRODUCER_FENCED if isinstance(e, KafkaApiError) and e.code in fenced \
                    else storage_code(e, rec.OFFSETS_TOPIC)
                for tp in staged:
                    result[tp] = code
                return result
            if self._groups.get(group_id) is group:
                group.pending_txn_offsets.setdefault(producer_id, {}).update(staged)
        return result

    async def complete_txn(self, producer_id: int, producer_epoch: int, partition: int, commit: bool,
                           coordinator_epoch: int) -> bool:
        """Write the COMMIT/ABORT marker of the producer's transaction to our `partition` of
        ``__consumer_offsets`` and apply it: pending offsets become committed, or are dropped.
        True when written; False when ``__consumer_offsets`` does not exist (nothing to end)."""
        if self._num_partitions is None:
            await self._ensure_topic_known()
            if self._num_partitions is None:
                return False
        st = self._partitions.get(partition)
        if st is None or st.state != LOADED:
            raise NotCoordinatorError(f"partition {partition} of {rec.OFFSETS_TOPIC} is not loaded here")
        async with st.lock:
            await self.cluster.append_control(rec.OFFSETS_TOPIC, partition, producer_id, producer_epoch,
                                              commit, coordinator_epoch)
            for group in self._groups.values():
                if group.partition != partition:
                    continue
                pending = group.pending_txn_offsets.pop(producer_id, None)
                if commit and pending and group.state != DEAD:
                    group.offsets.update(pending)
        self.node.notify_appended()
        return True

    async def _ensure_topic_known(self) -> None:
        """``__consumer_offsets`` made by someone else since we started: take it up (loaded
        empty partitions), without creating it."""
        from ..errors import UnknownTopicOrPartitionError
        try:
            self.node.topic_metadata(rec.OFFSETS_TOPIC)
        except UnknownTopicOrPartitionError:
            return
        await self._ensure_topic()

    async def unstable_partitions(self, group_id: str, partitions: Iterable[tuple[str, int]] | None
                                  ) -> set[tuple[str, int]]:
        """The partitions (of `partitions`, or all) with transactional offsets not yet committed."""
        group = self._groups.get(group_id)
        if group is None or not group.pending_txn_offsets:
            return set()
        pending = {tp for txn in group.pending_txn_offsets.values() for tp in txn}
        return pending if partitions is None else pending & set(partitions)
