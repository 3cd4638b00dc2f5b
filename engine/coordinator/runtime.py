"""CoordinatorRuntime: what the group and transaction coordinators share.

A coordinator keeps its state in memory and every change as a record of an
internal compacted topic (``__consumer_offsets``, ``__transaction_state``):
append first, apply to memory after the append returned, appends per partition
serialised so memory follows log order; on load a partition is replayed.  This
class holds that machinery, so it exists once; each coordinator owns one (its
``runtime``) and starts it with its shard (shard.py :class:`CoordinatorShard`:
the state machine the partitions are replayed into), as Kafka 4.0's
CoordinatorRuntime drives a CoordinatorShard.  The runtime has:

* the host event loop: a daemon thread of its own (:meth:`start`) or the
  broker's running loop (:meth:`start_on_running_loop`); :meth:`submit` /
  :meth:`call` run coroutines there from other threads;
* the internal topic: created on first use (:meth:`ensure_topic`, with the
  coordinator's ``topic_config``), routing of a key to its partition and the
  partition's load state (:meth:`route`: NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS; :meth:`find` for FindCoordinator);
* :meth:`append` (one batch per call, optionally transactional, with a
  ``decide`` callback run under the partition's append lock) and
  :meth:`append_marker`; :meth:`spawn` for background work awaited at stop;
* :meth:`load_partition` / :meth:`unload_partition`, the seam for moving with
  partition leadership: replay of the partition's batches into the shard
  (``new_load_state``, ``replay_batch`` on an executor thread, then
  ``apply_loaded``; corrupt batches are logged with file and byte position,
  kept in ``load_errors`` and skipped), and ``forget_partition`` when it moves
  away; the shard's ``start_timers`` / ``cancel_timers`` at start and stop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import _native
from ..errors import (
    ClosedError,
    CorruptRecordError,
    ErrorCode,
    InvalidReplicationFactorError,
    KafkaApiError,
    NotCoordinatorError,
    UnknownTopicOrPartitionError,
)
from ..storage.replay import decoded_batches
from .cluster_link import ClusterLink
from .host import CoordinatorHost
from .records import partition_for
from .shard import CoordinatorShard

__all__ = ["CoordinatorRuntime", "LOADED", "LOADING"]

log = logging.getLogger("engine.coordinator")

LOADING, LOADED = "loading", "loaded"


@dataclass
class _Partition:
    state: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def wall_ms() -> int:
    return int(time.time() * 1000)


class CoordinatorRuntime:
    """See the module docstring.  ``topic`` is the internal topic, made with
    ``configured_partitions`` partitions and ``topic_config``; ``name`` names the loop thread
    and the logs."""

    def __init__(self, node: CoordinatorHost, *, topic: str, name: str, partitions: int,
                 topic_config: Mapping[str, Any], node_id: int = 0, clock: Callable[[], int] = wall_ms,
                 cluster: ClusterLink | None = None):
        self.node = node
        self.topic = topic
        self.name = name
        self.configured_partitions = partitions
        self.topic_config = dict(topic_config)
        self.node_id = node_id
        self.clock = clock
        self.load_errors: list[CorruptRecordError] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self._shard: CoordinatorShard | None = None
        self._thread: threading.Thread | None = None
        self._partitions: dict[int, _Partition] = {}
        self._num_partitions: int | None = None
        self._topic_lock: asyncio.Lock | None = None
        self._tasks: set[asyncio.Task] = set()
        self._stopped = False
        self._owns_thread = True
        self._creating: asyncio.Task | None = None
        # how the internal topic is reached (given by the node; a node alone: ClusterLink.alone):
        # partitions load on leadership only
        self.cluster: ClusterLink = cluster if cluster is not None else ClusterLink.alone(node)

    @property
    def shard(self) -> CoordinatorShard:
        """The state machine this runtime drives (given to :meth:`start`)."""
        if self._shard is None:
            raise RuntimeError(f"the {self.name} is not started")
        return self._shard

    # -- lifecycle and the thread-safe facade ---------------------------------------------
    def start(self, shard: CoordinatorShard) -> CoordinatorRuntime:
        """Start the loop thread and begin loading the partitions of the internal topic into
        `shard` (nothing when started already)."""
        if self._thread is not None:
            return self
        self._shard = shard
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            ready.set()
            try:
                loop.run_forever()
            finally:
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                finally:
                    loop.close()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        ready.wait()
        self.call(self._startup, timeout=60)
        return self

    async def start_on_running_loop(self, shard: CoordinatorShard) -> CoordinatorRuntime:
        """Run on the calling (already running) loop instead of a thread of its own — the
        broker's, so its requests need no hop between threads.  Its owner must
        ``await stop_on_loop()`` before that loop ends."""
        if self._thread is not None:
            return self
        self._shard = shard
        self.loop = asyncio.get_running_loop()
        self._thread = threading.current_thread()
        self._owns_thread = False
        await self._startup()
        return self

    async def stop_on_loop(self) -> None:
        """:meth:`stop` for a coordinator started with :meth:`start_on_running_loop`."""
        if self._stopped:
            return
        self._stopped = True
        await self._shutdown()

    def stop(self, timeout: float = 30.0) -> None:
        """Answer waiters with NOT_COORDINATOR, finish in-flight writes, stop the thread."""
        if self._thread is None or self._stopped:
            return
        if not self._owns_thread:
            if threading.current_thread() is self._thread:
                # on the hosting loop itself (its owner did not await stop_on_loop): stop taking
                # requests and answer waiters now; in-flight appends finish on their own
                self._stopped = True
                self.shard.cancel_timers()
                for p in list(self._partitions):
                    self._drop_partition_state(p)
                return
            try:
                asyncio.run_coroutine_threadsafe(self.stop_on_loop(), self.loop).result(timeout)
            except RuntimeError:        # that loop is gone already
                self._stopped = True
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(timeout)
        finally:
            self._stopped = True
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        """Stopped (or stopping): requests get NOT_COORDINATOR, background work ends."""
        return self._stopped

    @property
    def num_partitions(self) -> int | None:
        """The internal topic's partitions as this node knows them (None: no topic seen yet)."""
        return self._num_partitions

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._stopped

    def host_loop(self) -> asyncio.AbstractEventLoop:
        """The loop the coordinator runs on (once started)."""
        if self.loop is None:
            raise RuntimeError(f"the {self.name} is not started")
        return self.loop

    @property
    def on_current_loop(self) -> bool:
        """True when the caller runs on the coordinator's loop (await its methods directly)."""
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def submit(self, coro_fn, *args, **kwargs) -> concurrent.futures.Future:
        """Run ``coro_fn(*args, **kwargs)`` on the coordinator loop; a concurrent future."""
        if not self.running:
            raise ClosedError(f"the {self.name} is stopped")
        return asyncio.run_coroutine_threadsafe(coro_fn(*args, **kwargs), self.loop)

    def call(self, coro_fn, *args, timeout: float | None = None, **kwargs) -> Any:
        """Blocking form of :meth:`submit` for threads other than the coordinator's."""
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"{self.name}.call from the coordinator's own loop would deadlock")
        return self.submit(coro_fn, *args, **kwargs).result(timeout)

    def wait_loaded(self, timeout: float = 30.0, partitions: int = 0) -> None:
        """Block until every partition of the internal topic that this node has taken up is
        loaded, and at least `partitions` of them (a node leading the whole topic takes its
        partitions up one by one after creating it: pass their number to wait for all)."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.call(self._partition_states, timeout=timeout)
            if len(states) >= partitions and all(s == LOADED for s in states.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic} is still loading")
            time.sleep(0.01)

    async def _partition_states(self) -> dict[int, str]:
        return {p: st.state for p, st in self._partitions.items()}

    async def _startup(self) -> None:
        self._topic_lock = asyncio.Lock()
        # what the local replicas hold may be stale (a cluster broker may have been a leader
        # before a crash and be a follower now): a partition is loaded only once this node leads
        # it, so nothing is replayed or written from a local copy meanwhile (markers of a
        # PrepareCommit found there, say).  A node alone leads all of them at once.
        self._join_cluster()
        self.shard.start_timers()

    async def _shutdown(self) -> None:
        self.shard.cancel_timers()
        for p in list(self._partitions):
            self._drop_partition_state(p)
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10)

    def spawn(self, coro) -> asyncio.Task:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s task failed", self.name, exc_info=task.exception())

    # -- routing ---------------------------------------------------------------------
    def partition_for(self, key: str) -> int:
        return partition_for(key, self._num_partitions or self.configured_partitions)

    async def ensure_topic(self) -> None:
        if self._num_partitions is not None:
            return
        # the topic is created like any topic (the link's ``create_topic``: through ZooKeeper,
        # or in the data directory of a node alone); partitions are loaded only when this node
        # becomes their leader
        link = self.cluster
        n = link.partition_count(self.topic)
        if n is None:
            async with self._topic_lock:
                n = link.partition_count(self.topic)
                if n is None:
                    try:
                        await self.loop.run_in_executor(None, link.create_topic, self.topic,
                                                        self.configured_partitions, self.topic_config)
                    except InvalidReplicationFactorError as e:
                        # too few brokers registered yet (a broker restarting, waiting out its old
                        # session, sees none): COORDINATOR_NOT_AVAILABLE, and the client asks again
                        log.warning("%s not created yet: %s", self.topic, e)
                        return
                    n = link.partition_count(self.topic)
                    log.info("created %s", self.topic)
        self._num_partitions = n        # None: not in this broker's metadata cache yet

    def coordinator_node(self, key: str) -> int:
        """The broker leading the partition of `key` (-1: none, or no topic yet)."""
        if self._num_partitions is None:
            return -1
        return self.cluster.leader(self.topic, self.partition_for(key))

    def _join_cluster(self) -> None:
        """At startup on the coordinator's loop: a partition is loaded when this node becomes
        its leader (``cluster.replicas`` role listener) -- or now, for those it leads already --
        and writes are replicated appends with acks=all."""
        link = self.cluster
        self._num_partitions = link.partition_count(self.topic)
        loop = self.loop

        def on_role(topic: str, partition: int, leader: bool) -> None:
            if topic != self.topic or self._stopped:
                return
            loop.call_soon_threadsafe(self._role_changed, partition, leader)
        link.replicas.add_role_listener(on_role)
        for p in link.led_partitions(self.topic):
            self._role_changed(p, True)

    def _role_changed(self, partition: int, leader: bool) -> None:
        if self._stopped:
            return
        if leader:
            if partition not in self._partitions:
                if self._num_partitions is None:
                    self._num_partitions = self.cluster.partition_count(self.topic)
                plog = self.cluster.replicas.local_log(self.topic, partition)
                if plog.log_end_offset == plog.log_start_offset:     # nothing to replay (just made)
                    self._partitions[partition] = _Partition(LOADED)
                    self.shard.apply_loaded(partition, self.shard.new_load_state())
                    return
                self._partitions[partition] = _Partition(LOADING)
                log.info("%s-%d: this broker leads it now, loading", self.topic, partition)
                self.spawn(self.load_partition(partition))
        elif partition in self._partitions:
            log.info("%s-%d: no longer led here, unloading", self.topic, partition)
            self.spawn(self.unload_partition(partition))

    async def route(self, key: str) -> tuple[int, int]:
        """(error code, partition) for a request about `key`."""
        if self._stopped:
            return ErrorCode.NOT_COORDINATOR, -1
        try:
            await self.ensure_topic()
        except Exception:
            log.exception("could not create %s", self.topic)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        if self._num_partitions is None:            # not in the metadata cache yet
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1
        p = self.partition_for(key)
        st = self._partitions.get(p)
        if st is None:
            return ErrorCode.NOT_COORDINATOR, p
        if st.state == LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, p
        return ErrorCode.NONE, p

    async def find(self, key: str) -> tuple[int, str | None]:
        """FindCoordinator for `key`: Kafka's first lookup starts creating the topic and
        answers COORDINATOR_NOT_AVAILABLE (the client retries; its connection is not held up
        behind the creation); loading partitions are still this node's."""
        if self._num_partitions is None and not self._stopped:
            self._num_partitions = self.cluster.partition_count(self.topic)
        if self._num_partitions is None and not self._stopped:
            if self._creating is None or self._creating.done():
                self._creating = self.spawn(self.ensure_topic())
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{self.topic} is being created"
        if self._stopped:
            return ErrorCode.NOT_COORDINATOR, None
        leader = self.coordinator_node(key)
        if leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{self.topic} has no leader for this key"
        return ErrorCode.NONE, None

    def loading(self) -> bool:
        """Whether a partition of the internal topic is still loading here."""
        return any(st.state == LOADING for st in self._partitions.values())

    def is_loaded(self, partition: int) -> bool:
        st = self._partitions.get(partition)
        return st is not None and st.state == LOADED

    # -- the log -------------------------------------------------------------------------
    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]] | None,
                     decide: Callable[[], list] | None = None, *, producer_id: int = -1,
                     producer_epoch: int = -1, transactional: bool = False) -> bool:
        """Append one batch to our partition of the internal topic; raises what the append raised.

        With ``decide``, the records are computed by ``decide()`` under the partition's
        append lock — after every earlier append has also updated memory — so a decision
        made from in-memory state cannot overtake a change that was in flight.  Returns
        False when ``decide`` found nothing to write.  With ``producer_id`` the batch carries
        it (and ``transactional``: a transactional offset commit), with the next sequence."""
        st = self._partitions.get(partition)
        if st is None or st.state != LOADED:
            raise NotCoordinatorError(f"partition {partition} of {self.topic} is not loaded here")
        async with st.lock:
            if self._partitions.get(partition) is not st:
                raise NotCoordinatorError(f"partition {partition} of {self.topic} moved away")
            if decide is not None:
                records = decide()
                if not records:
                    return False
            await self._append_locked(partition, records, producer_id, producer_epoch, transactional)
        self.node.notify_appended()
        return True

    async def _append_locked(self, partition: int, records, producer_id: int = -1,
                             producer_epoch: int = -1, transactional: bool = False) -> None:
        b = _native.BatchBuilder()
        now = self.clock()
        for key, value in records:
            b.append(value, key, None, now)
        seq = -1
        if producer_id >= 0:
            seq = 0
            for e in self.cluster.replicas.active_producers(self.topic, partition):
                if e.producer_id == producer_id and e.epoch == producer_epoch and e.last_sequence >= 0:
                    seq = (e.last_sequence + 1) % (1 << 31)
        buf = b.build(0, 0, producer_id, producer_epoch, seq, transactional)
        # through the replica layer with acks=all (an I/O error there is KAFKA_STORAGE_ERROR,
        # and takes a serving broker offline)
        await self.cluster.append(self.topic, partition, buf)

    async def append_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, apply: Callable[[], None]) -> bool:
        """Write the COMMIT/ABORT marker of the producer's transaction to our `partition` and
        run ``apply()`` (memory follows the marker) under the partition's append lock.  True
        when written; False when the internal topic does not exist (nothing to end)."""
        if self._num_partitions is None:
            await self._ensure_topic_known()
            if self._num_partitions is None:
                return False
        st = self._partitions.get(partition)
        if st is None or st.state != LOADED:
            raise NotCoordinatorError(f"partition {partition} of {self.topic} is not loaded here")
        async with st.lock:
            await self.cluster.append_control(self.topic, partition, producer_id, producer_epoch,
                                              commit, coordinator_epoch)
            apply()
        self.node.notify_appended()
        return True

    async def _ensure_topic_known(self) -> None:
        """The internal topic made by someone else since we started: take it up (loaded empty
        partitions), without creating it."""
        try:
            self.node.topic_metadata(self.topic)
        except UnknownTopicOrPartitionError:
            return
        await self.ensure_topic()

    def partition_lock(self, partition: int) -> asyncio.Lock | None:
        st = self._partitions.get(partition)
        return st.lock if st is not None else None

    async def load_partition(self, partition: int) -> None:
        """Become coordinator for `partition`: replay it into memory (requests for its keys
        get COORDINATOR_LOAD_IN_PROGRESS meanwhile)."""
        st = self._partitions.get(partition)
        if st is None or st.state == LOADED:
            st = self._partitions[partition] = _Partition(LOADING)
        async with st.lock:
            try:
                state, errors = await self.loop.run_in_executor(None, self._read_partition, partition)
            except Exception:
                log.exception("loading partition %d of %s failed", partition, self.topic)
                del self._partitions[partition]
                raise
        for e in errors:
            log.error("%s-%d: %s (skipped; the other records of the partition are loaded)",
                      self.topic, partition, e)
        self.load_errors.extend(errors)
        if self._partitions.get(partition) is not st:
            return              # unloaded meanwhile (leadership moved away)
        self.shard.apply_loaded(partition, state)
        if self._partitions.get(partition) is st:
            st.state = LOADED

    async def unload_partition(self, partition: int) -> None:
        """Stop coordinating `partition`: its state leaves memory; waiters get NOT_COORDINATOR."""
        st = self._partitions.get(partition)
        if st is None:
            return
        async with st.lock:
            self._drop_partition_state(partition)

    def _drop_partition_state(self, partition: int) -> None:
        self._partitions.pop(partition, None)
        self.shard.forget_partition(partition)

    def _read_partition(self, partition: int):
        """Replay one partition (executor thread; only reads): (state, [CorruptRecordError])."""
        plog = self.cluster.replicas.local_log(self.topic, partition)
        state = self.shard.new_load_state()
        errors: list[CorruptRecordError] = []
        # a new leader's high watermark may lag what the ISR had committed: read to the log end
        # offset, as Kafka's coordinators load
        end = plog.log_end_offset
        for b in decoded_batches(plog, end):
            if b.error is not None:
                errors.append(b.error)
                continue
            try:
                self.shard.replay_batch(b.header, b.records, state)
            except CorruptRecordError as e:
                errors.append(CorruptRecordError(e.reason, b.path, b.position))
        return state, errors


def control_type(records) -> int | None:
    """0 = ABORT, 1 = COMMIT: the type in the key of a control batch's record (None if unreadable)."""
    for _off, _ts, key, _value, _headers in records:
        if key is not None and len(key) >= 4:
            return int.from_bytes(bytes(key[2:4]), "big", signed=True)
    return None


def storage_code(e: BaseException, topic: str) -> int:
    """Kafka's mapping of a failed internal-topic append to a coordinator error code."""
    if isinstance(e, KafkaApiError):
        if e.code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
            return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
        if e.code in (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_LEADER_OR_FOLLOWER):   # leadership moved
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.COORDINATOR_NOT_AVAILABLE   # storage errors, unknown partition, closed log
    log.error("%s append failed", topic, exc_info=e)
    return ErrorCode.COORDINATOR_NOT_AVAILABLE
