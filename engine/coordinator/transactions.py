"""TransactionCoordinator: Kafka's transaction coordinator for one node (engine/node.py).

State per transactional id lives in ``__transaction_state`` (compacted,
``transaction.state.log.num.partitions`` = 50 partitions, the id's partition is
``abs(String.hashCode(id)) % n``), in Kafka's TransactionLogKey/Value format
(txn_records.py), replayed on start.  It runs on the same kind of host loop as
the group coordinator: runtime.py's :class:`CoordinatorRuntime`, a part it owns
(``runtime``) and starts with its shard (shard.py).  This class keeps the API and the
requests' state transitions; its parts: txn_state.py (the id table, its writes),
txn_markers.py (ending a transaction: markers, then Complete), txn_expiry.py (timeouts and
id expiry, periodic) and txn_loader.py (the replay of a partition).

Python API (in-process producers use it as the wire handlers do; every method is
a coroutine on the coordinator's loop — from another thread use
``coord.call(coord.init_producer_id, "tx", 60000)`` or ``coord.submit(...)``;
results carry Kafka error codes, 0 = success)::

    init_producer_id(transactional_id, timeout_ms, producer_id=-1, producer_epoch=-1)
        -> (error, producer_id, producer_epoch)        # bumps the epoch, fences the old instance
    add_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)])
        -> {(topic, partition): error}                 # the transaction becomes Ongoing
    verify_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)])
        -> {(topic, partition): error}                 # KIP-890 verify-only: nothing changes
    verify_anywhere(...same...) -> {(topic, partition): error}   # here or at the id's coordinator
    add_offsets(transactional_id, producer_id, producer_epoch, group_id) -> error
    txn_offset_commit(transactional_id, group_id, producer_id, producer_epoch,
                      {(topic, partition): OffsetAndMetadata | offset}, generation_id=-1,
                      member_id="", group_instance_id=None) -> {(topic, partition): error}
    end_txn(transactional_id, producer_id, producer_epoch, commit: bool) -> error
    list_transactions(states=None, producer_ids=None, min_duration_ms=-1) -> (error, [TxnListing])
    describe_transactions([transactional_id]) -> [TxnDescription]
    find_coordinator(transactional_id) -> (error, message)   # creates __transaction_state
    abort_timed_out() / expire_transactional_ids()           # one pass now (also periodic)

Semantics (Kafka 4.0, transaction.version 0): EndTxn is answered once PrepareCommit /
PrepareAbort is in the log; the markers (``PartitionLog.append_control`` for data
partitions, the group coordinator for ``__consumer_offsets``) and the Complete state follow
on their own, and requests meanwhile get CONCURRENT_TRANSACTIONS.  An InitProducerId for an
id with an Ongoing transaction bumps the epoch (the old instance is fenced: PRODUCER_FENCED),
aborts that transaction and answers CONCURRENT_TRANSACTIONS (the client retries).  A
transaction older than its ``transaction.timeout.ms`` is aborted with a bumped epoch
(``transaction.abort.timed.out.transaction.cleanup.interval.ms``); an id idle for
``transactional.id.expiration.ms`` is removed (tombstone).  On load, transactions in
PrepareCommit / PrepareAbort get their markers and complete; Ongoing ones time out.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from ..errors import CorruptRecordError, ErrorCode, KafkaApiError
from . import records as group_records
from . import txn_records as tr
from .host import CoordinatorHost
from .runtime import CoordinatorRuntime, wall_ms
from .shard import ShardHooks, internal_topic_config
from .txn_expiry import TxnExpiry
from .txn_loader import TxnLoader
from .txn_markers import TxnMarkers, on_group_loop
from .txn_records import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    STATE_NAMES,
)
from .txn_state import MAX_EPOCH, TxnMetadata, TxnTable

__all__ = ["TransactionCoordinator", "TxnDescription", "TxnListing"]

log = logging.getLogger("engine.coordinator.transactions")


class TxnListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


class TxnDescription(NamedTuple):
    transactional_id: str
    error_code: int
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple = ()


class TransactionCoordinator:
    """See the module docstring.  ``group_coordinator`` is a callable returning the node's
    GroupCoordinator (transactional offset commits and their markers go through it)."""

    TOPIC = tr.TRANSACTION_STATE_TOPIC
    NAME = "transaction-coordinator"

    def __init__(self, node: CoordinatorHost, *, node_id: int = 0, clock: Callable[[], int] = wall_ms,
                 group_coordinator: Callable[[], Any] | None = None, cluster=None):
        cfg = node.config
        self.node = node
        # the loop, __transaction_state and its loading (runtime.py), started with the shard below
        rt = self.runtime = CoordinatorRuntime(
            node, topic=self.TOPIC, name=self.NAME, partitions=cfg["transaction.state.log.num.partitions"],
            topic_config=internal_topic_config("uncompressed"), node_id=node_id, clock=clock, cluster=cluster)
        self.clock = rt.clock
        self.max_timeout_ms = cfg["transaction.max.timeout.ms"]
        self._group_coordinator = group_coordinator or (lambda: node.group_coordinator)
        # the parts: the id table and its writes (txn_state.py), ending transactions
        # (txn_markers.py), timeouts and expiry (txn_expiry.py), loading (txn_loader.py)
        table = TxnTable(rt)
        self._txns = table.txns
        self._transition = table.transition
        self._markers = TxnMarkers(rt, self._txns, transition=table.transition,
                                   group_coordinator=self._group_coordinator)
        self._expiry = TxnExpiry(
            rt, self._txns, abort=self._markers.fence_and_abort,
            abort_interval_ms=cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
            expire_interval_ms=cfg["transaction.remove.expired.transaction.cleanup.interval.ms"],
            id_expiration_ms=cfg["transactional.id.expiration.ms"])
        loader = TxnLoader(self._txns, resume=self._markers.complete_later)
        self._shard = ShardHooks(new_load_state=loader.new_load_state, replay_batch=loader.replay_batch,
                                 apply_loaded=loader.apply_loaded, forget_partition=loader.forget_partition,
                                 start_timers=self._expiry.start, cancel_timers=self._expiry.stop)

    # -- the runtime (runtime.py): lifecycle, the thread-safe facade, routing, loading ------
    def start(self) -> TransactionCoordinator:
        """Start on a loop thread of its own; loading of ``__transaction_state`` begins."""
        self.runtime.start(self._shard)
        return self

    async def start_on_running_loop(self) -> TransactionCoordinator:
        """Run on the calling loop (a broker's); ``await stop_on_loop()`` before it ends."""
        await self.runtime.start_on_running_loop(self._shard)
        return self

    async def stop_on_loop(self) -> None:
        await self.runtime.stop_on_loop()

    def stop(self, timeout: float = 30.0) -> None:
        """Answer waiters with NOT_COORDINATOR, finish in-flight writes, stop the loop."""
        self.runtime.stop(timeout)

    @property
    def running(self) -> bool:
        return self.runtime.running

    @property
    def on_current_loop(self) -> bool:
        """True when the caller runs on the coordinator's loop (await its methods directly)."""
        return self.runtime.on_current_loop

    def submit(self, coro_fn, *args, **kwargs) -> concurrent.futures.Future:
        """Run ``coro_fn(*args, **kwargs)`` on the coordinator's loop; a concurrent future."""
        return self.runtime.submit(coro_fn, *args, **kwargs)

    def call(self, coro_fn, *args, timeout: float | None = None, **kwargs) -> Any:
        """Blocking :meth:`submit`, for threads other than the coordinator's."""
        return self.runtime.call(coro_fn, *args, timeout=timeout, **kwargs)

    def wait_loaded(self, timeout: float = 30.0, partitions: int = 0) -> None:
        """Block until the partitions of ``__transaction_state`` taken up here are loaded."""
        self.runtime.wait_loaded(timeout, partitions)

    def partition_for(self, transactional_id: str) -> int:
        return self.runtime.partition_for(transactional_id)

    def coordinator_node(self, transactional_id: str) -> int:
        """The broker leading the partition of `transactional_id` (-1: none, or no topic yet)."""
        return self.runtime.coordinator_node(transactional_id)

    @property
    def load_errors(self) -> list[CorruptRecordError]:
        """The corrupt batches skipped while loading (file and byte position)."""
        return self.runtime.load_errors

    async def load_partition(self, partition: int) -> None:
        await self.runtime.load_partition(partition)

    async def unload_partition(self, partition: int) -> None:
        await self.runtime.unload_partition(partition)

    # -- routing -------------------------------------------------------------------------
    async def find_coordinator(self, transactional_id: str, key_type: int = 1) -> tuple[int, str | None]:
        """Whether this node coordinates `transactional_id` (creates ``__transaction_state``
        on first use, answering COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, "empty transactional id"
        return await self.runtime.find(transactional_id)

    async def _lookup(self, tid: str, producer_id: int, producer_epoch: int) -> tuple[int, TxnMetadata | None]:
        if not tid:
            return ErrorCode.INVALID_REQUEST, None
        err, _ = await self.runtime.route(tid)
        if err:
            return err, None
        meta = self._txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, meta

    # -- InitProducerId ------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1) -> tuple[int, int, int]:
        """(error, producer_id, epoch) for a transactional producer starting up (or recovering
        with its current id and epoch, KIP-360)."""
        tid = transactional_id
        if not tid:
            return ErrorCode.INVALID_REQUEST, -1, -1
        if timeout_ms <= 0 or timeout_ms > self.max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        err, p = await self.runtime.route(tid)
        if err:
            return err, -1, -1
        meta = self._txns.get(tid)
        if meta is None:
            pid = await self._new_producer_id()
            if pid is None:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, -1
            meta = self._txns.get(tid)
            if meta is None:
                meta = self._txns[tid] = TxnMetadata(tid, p, pid, timeout_ms=timeout_ms)
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        if producer_id >= 0 and meta.producer_epoch >= 0:
            # KIP-360 (Kafka's isValidProducerId): a new id (epoch -1) takes any pair; else the
            # pair must be the current one, or the previous one whose bump it did not hear of
            if (producer_id, producer_epoch) == (meta.last_producer_id, meta.last_producer_epoch) \
                    and meta.state == EMPTY and meta.pending is None:
                return ErrorCode.NONE, meta.producer_id, meta.producer_epoch  # a retry that already took
            if (producer_id, producer_epoch) != (meta.producer_id, meta.producer_epoch):
                return ErrorCode.PRODUCER_FENCED, -1, -1
        if meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS, -1, -1
        now = self.clock()
        if meta.state == ONGOING:
            # fence the running instance: bump the epoch and abort its transaction with it
            code = await self._markers.fence_and_abort(meta)
            return (code or ErrorCode.CONCURRENT_TRANSACTIONS), -1, -1
        if meta.state not in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT):
            return ErrorCode.INVALID_TXN_STATE, -1, -1
        pid, epoch = meta.producer_id, meta.producer_epoch + 1
        if epoch > MAX_EPOCH - 1:
            new_pid = await self._new_producer_id()
            if new_pid is None:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1, -1
            pid, epoch = new_pid, 0
        target = meta.record(producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms, state=EMPTY,
                             partitions=frozenset(), start_ms=-1, last_update_ms=now)
        code = await self._transition(meta, target)
        if code:
            if not meta.persisted and self._txns.get(tid) is meta:
                del self._txns[tid]
            return code, -1, -1
        return ErrorCode.NONE, meta.producer_id, meta.producer_epoch

    async def _new_producer_id(self) -> int | None:
        """A producer id never handed out before; None when none can be had now: in a cluster a
        new block comes from ZooKeeper, bounded by its session timeout (engine/cluster/zk.py), and
        one that does not come in time is COORDINATOR_LOAD_IN_PROGRESS, as Kafka's producer id
        manager answers while it has no block (the client retries)."""
        try:
            return await self.runtime.host_loop().run_in_executor(None, self.node.allocate_producer_id)
        except KafkaApiError as e:
            if not e.retriable:
                raise
            log.warning("no producer id for now: %s", e)
            return None

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------
    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Add partitions to the producer's transaction (starting it); {tp: error}."""
        tps = list(dict.fromkeys((t, int(p)) for t, p in partitions))
        missing = [tp for tp in tps if not self._partition_exists(*tp)]
        if missing:
            # Kafka: the unknown ones UNKNOWN_TOPIC_OR_PARTITION, the rest not attempted
            return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in missing
                    else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in tps}
        code = await self._add(transactional_id, producer_id, producer_epoch, tps)
        return {tp: code for tp in tps}

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> int:
        """Add the ``__consumer_offsets`` partition of `group_id` to the transaction."""
        if not group_id:
            return ErrorCode.INVALID_REQUEST
        gc = self._group_coordinator()
        tp = (group_records.OFFSETS_TOPIC, gc.partition_for(group_id))
        return await self._add(transactional_id, producer_id, producer_epoch, [tp])

    async def _add(self, tid: str, producer_id: int, producer_epoch: int, tps: list) -> int:
        err, meta = await self._lookup(tid, producer_id, producer_epoch)
        if err:
            return err
        if meta.pending is not None or meta.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if meta.state not in (EMPTY, ONGOING, COMPLETE_COMMIT, COMPLETE_ABORT):
            return ErrorCode.INVALID_TXN_STATE
        if meta.state == ONGOING and set(tps) <= meta.partitions:
            return ErrorCode.NONE
        now = self.clock()
        start = meta.start_ms if meta.state == ONGOING else now
        target = meta.record(state=ONGOING, partitions=frozenset(meta.partitions | set(tps)),
                             start_ms=start, last_update_ms=now)
        return await self._transition(meta, target)

    async def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """KIP-890 verification: NONE for partitions in the producer's ongoing transaction,
        TRANSACTION_ABORTABLE for the others (PRODUCER_FENCED / INVALID_PRODUCER_ID_MAPPING
        for a stale producer).  Changes nothing."""
        tps = list(partitions)
        err, meta = await self._lookup(transactional_id, producer_id, producer_epoch)
        if err:
            return {tp: err for tp in tps}
        ok = meta.state == ONGOING
        return {tp: ErrorCode.NONE if ok and tp in meta.partitions else ErrorCode.TRANSACTION_ABORTABLE for tp in tps}

    async def verify_anywhere(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """KIP-890 verification wherever the transaction's coordinator is: here
        (:meth:`verify_partitions`), or, in cluster mode, the broker that leads the id's
        ``__transaction_state`` partition (AddPartitionsToTxn v4 verify-only, as Kafka's
        AddPartitionsToTxnManager asks it).  {tp: that coordinator's code}; NETWORK_EXCEPTION
        when it cannot be asked, COORDINATOR_LOAD_IN_PROGRESS when the id is moving here.

        Partition leaders (Produce) and group coordinators (TxnOffsetCommit) verify through
        this: neither may assume that the transaction coordinator is the broker they run on."""
        tps = list(partitions)
        res = await self.verify_partitions(transactional_id, producer_id, producer_epoch, tps)
        link = self.runtime.cluster
        if not any(code == ErrorCode.NOT_COORDINATOR for code in res.values()):
            return res
        node = self.coordinator_node(transactional_id)
        if node < 0:
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in tps}
        if node == link.view.node_id:           # it is moving here: not loaded yet
            return {tp: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for tp in tps}
        try:
            return await self.runtime.host_loop().run_in_executor(
                None, link.verify_remote, node, transactional_id, producer_id, producer_epoch, tps)
        except Exception as e:                  # noqa: BLE001 - unreachable, timed out, garbled
            log.info("KIP-890 verification of %s with broker %d failed: %s", transactional_id, node, e)
            return {tp: ErrorCode.NETWORK_EXCEPTION for tp in tps}

    def _partition_exists(self, topic: str, partition: int) -> bool:
        try:
            return 0 <= partition < self.node.topic_metadata(topic).partitions
        except KafkaApiError:
            return False

    # -- TxnOffsetCommit --------------------------------------------------------------------
    async def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int,
                                producer_epoch: int, offsets: Mapping, *, generation_id: int = -1,
                                member_id: str = "", group_instance_id: str | None = None,
                                ) -> dict[tuple[str, int], int]:
        """Write offsets of `group_id` as part of the transaction; they become the group's
        committed offsets with the COMMIT marker (dropped on abort)."""
        tps = list(offsets)
        gc = self._group_coordinator()
        gtp = (group_records.OFFSETS_TOPIC, gc.partition_for(group_id))
        # the transaction coordinator of `transactional_id` may be another broker than this
        # group coordinator (cluster mode): verify where it is, never only here
        check = await self.verify_anywhere(transactional_id, producer_id, producer_epoch, [gtp])
        code = check[gtp]
        if code == ErrorCode.TRANSACTION_ABORTABLE:
            code = ErrorCode.INVALID_TXN_STATE      # the group was not added (AddOffsetsToTxn)
        elif code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                      ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS):
            # verification that could not complete: retriable for the client, as Kafka's group
            # coordinator answers its NOT_ENOUGH_REPLICAS (COORDINATOR_NOT_AVAILABLE)
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        if code:
            return {tp: code for tp in tps}
        return await on_group_loop(gc, gc.txn_commit_offsets, group_id, producer_id, producer_epoch,
                                         offsets, generation_id=generation_id, member_id=member_id,
                                         group_instance_id=group_instance_id)

    # -- EndTxn -------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        """Commit or abort the producer's transaction: answered once PrepareCommit/PrepareAbort
        is written; markers and the Complete state follow (CONCURRENT_TRANSACTIONS meanwhile)."""
        err, meta = await self._lookup(transactional_id, producer_id, producer_epoch)
        if err:
            return err
        if meta.pending is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = meta.state
        if state == ONGOING:
            target = meta.record(state=PREPARE_COMMIT if commit else PREPARE_ABORT, last_update_ms=self.clock())
            code = await self._transition(meta, target)
            if code:
                return code
            self._markers.complete_later(meta, commit)
            return ErrorCode.NONE
        if state == PREPARE_COMMIT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
        if state == PREPARE_ABORT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE
        if state == COMPLETE_COMMIT:
            return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE   # a retried EndTxn
        if state == COMPLETE_ABORT:
            return ErrorCode.NONE if not commit else ErrorCode.INVALID_TXN_STATE
        return ErrorCode.INVALID_TXN_STATE                      # Empty: no transaction

    # -- timeouts and expiry (txn_expiry.py) ------------------------------------------------
    async def abort_timed_out(self) -> int:
        """One pass now (also periodic): abort every Ongoing transaction older than its
        timeout, fencing its producer; returns how many."""
        return await self._expiry.abort_timed_out()

    async def expire_transactional_ids(self) -> int:
        """One pass now (also periodic): remove the ids idle longer than
        ``transactional.id.expiration.ms`` (tombstones); returns how many."""
        return await self._expiry.expire_transactional_ids()

    # -- admin ---------------------------------------------------------------------------------
    async def list_transactions(self, states: Iterable[str] | None = None,
                                producer_ids: Iterable[int] | None = None,
                                min_duration_ms: int = -1) -> tuple[int, list[TxnListing]]:
        states = set(states or ())
        pids = set(producer_ids or ())
        now = self.clock()
        code = ErrorCode.NONE
        if self.runtime.loading():
            code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        out = []
        for tid, meta in sorted(self._txns.items()):
            if not meta.persisted:
                continue
            if states and meta.state not in states:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if min_duration_ms >= 0 and now - meta.start_ms < min_duration_ms:
                continue                    # Kafka's duration filter: running at least this long
            out.append(TxnListing(tid, meta.producer_id, meta.state))
        return code, out

    async def describe_transactions(self, transactional_ids: Iterable[str]) -> list[TxnDescription]:
        out = []
        for tid in transactional_ids:
            if not tid:
                out.append(TxnDescription(tid, ErrorCode.INVALID_REQUEST))
                continue
            err, _ = await self.runtime.route(tid) if self.runtime.num_partitions is not None else (ErrorCode.NONE, -1)
            meta = self._txns.get(tid)
            if err:
                out.append(TxnDescription(tid, err))
            elif meta is None or not meta.persisted:
                out.append(TxnDescription(tid, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
            else:
                out.append(TxnDescription(tid, ErrorCode.NONE, meta.state, meta.timeout_ms, meta.start_ms,
                                          meta.producer_id, meta.producer_epoch,
                                          tuple(sorted(meta.partitions))))
        return out


STATES = frozenset(STATE_NAMES)
