"""Ending a transaction (a part the TransactionCoordinator owns): once PrepareCommit /
PrepareAbort is in ``__transaction_state``, the COMMIT / ABORT marker goes to every partition
of the transaction -- through the group coordinator for ``__consumer_offsets`` (it applies the
offsets too), else appended by the partition's leader, here or sent to it as WriteTxnMarkers
(cluster_link.py) -- and then the Complete state is written; both retried until done or the
id's partition moved away, as Kafka's TransactionMarkerChannelManager does.  Also the abort
that fences a producer (its epoch bumped): a timed-out transaction, or an InitProducerId
meeting an Ongoing one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import ErrorCode, KafkaApiError, UnknownTopicOrPartitionError
from . import records as group_records
from .runtime import CoordinatorRuntime
from .txn_records import COMPLETE_ABORT, COMPLETE_COMMIT, PREPARE_ABORT, TxnRecord
from .txn_state import MAX_EPOCH, TxnMetadata

__all__ = ["TxnMarkers", "on_group_loop"]

log = logging.getLogger("engine.coordinator.transactions")


async def on_group_loop(gc, fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` of the group coordinator `gc`, awaited on its loop."""
    if gc.on_current_loop:
        return await fn(*args, **kwargs)
    return await asyncio.wrap_future(gc.submit(fn, *args, **kwargs))


class TxnMarkers:
    """Given the runtime, the id table and its ``transition`` (txn_state.py), and a callable
    returning the node's GroupCoordinator."""

    def __init__(self, runtime: CoordinatorRuntime, txns: dict[str, TxnMetadata], *,
                 transition: Callable[[TxnMetadata, TxnRecord], Awaitable[int]],
                 group_coordinator: Callable[[], Any]):
        self._runtime = runtime
        self._txns = txns
        self._transition = transition
        self._group_coordinator = group_coordinator

    def complete_later(self, meta: TxnMetadata, commit: bool) -> None:
        """Write the markers and the Complete state of meta's prepared transaction in the
        background (a task the runtime awaits at stop)."""
        self._runtime.spawn(self.complete(meta, commit))

    async def fence_and_abort(self, meta: TxnMetadata) -> int:
        """Bump the producer's epoch with PrepareAbort (fencing it), then abort; an error code."""
        epoch = meta.producer_epoch + 1 if meta.producer_epoch < MAX_EPOCH else meta.producer_epoch
        target = meta.record(producer_epoch=epoch, state=PREPARE_ABORT, last_update_ms=self._runtime.clock())
        code = await self._transition(meta, target)
        if code:
            return code
        self.complete_later(meta, False)
        return ErrorCode.NONE

    async def complete(self, meta: TxnMetadata, commit: bool) -> None:
        """Write the markers of meta's transaction, then its Complete state (retried until done
        or the partition moved away)."""
        rt = self._runtime
        pid, epoch = meta.producer_id, meta.producer_epoch
        coordinator_epoch = self._coordinator_epoch(meta.partition)
        delay = 0.05
        for tp in sorted(meta.partitions):
            while not rt.stopped and self._txns.get(meta.transactional_id) is meta:
                try:
                    await self._write_marker(tp, pid, epoch, commit, coordinator_epoch)
                    break
                except UnknownTopicOrPartitionError:
                    log.info("transaction %s: %s-%d is gone; no marker", meta.transactional_id, *tp)
                    break
                except Exception as e:  # noqa: BLE001 - retried, as Kafka's marker channel does
                    log.warning("transaction %s: marker for %s-%d failed (%s); retrying",
                                meta.transactional_id, tp[0], tp[1], e)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 1.0)
        while not rt.stopped and self._txns.get(meta.transactional_id) is meta:
            target = meta.record(state=COMPLETE_COMMIT if commit else COMPLETE_ABORT, partitions=frozenset(),
                                 last_update_ms=rt.clock())
            code = await self._transition(meta, target)
            if code == ErrorCode.NONE or code == ErrorCode.NOT_COORDINATOR:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _coordinator_epoch(self, partition: int) -> int:
        try:
            # Kafka's coordinatorEpoch: the leader epoch of our partition of __transaction_state
            return max(self._runtime.cluster.replicas.partition(self._runtime.topic, partition).leader_epoch, 0)
        except KafkaApiError:
            return 0

    async def _write_marker(self, tp: tuple[str, int], pid: int, epoch: int, commit: bool,
                            coordinator_epoch: int) -> None:
        topic, partition = tp
        link = self._runtime.cluster
        if topic == group_records.OFFSETS_TOPIC and link.leader(topic, partition) == link.view.node_id:
            gc = self._group_coordinator()          # it writes the marker and applies it
            await on_group_loop(gc, gc.complete_txn, pid, epoch, partition, commit, coordinator_epoch)
            return
        # the partition's leader writes it (here, or WriteTxnMarkers to it)
        await link.write_marker(topic, partition, pid, epoch, commit, coordinator_epoch)
        self._runtime.node.notify_appended()           # read_committed readers here may move on
