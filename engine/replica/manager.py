"""ReplicaManager: the partitions of one broker, as leader or follower (Kafka's ReplicaManager).

::

    rm = ReplicaManager(config, logs, view, log_for=...)   # view: engine/replica/view.py
    rm.start(loop, notify)                         # notify(): wake long-polling fetches
    info, log_start, waiter = await rm.append(topic, p, buf, acks)
    await rm.wait_for_acks([waiter, ...], timeout_ms)   # acks=all: raises per waiter
    info = rm.read(topic, p, offset, max_bytes, replica_id=-1, current_leader_epoch=-1)
    info = rm.local.read_from_local_log(topic, p, offset, max_bytes)   # in-process readers (local_read.py)
    rm.become_leader(topic, p, leader_epoch, replicas, isr, partition_epoch)
    rm.become_follower(topic, p, leader_id, leader_epoch, replicas, partition_epoch)
    rm.stop_replica(topic, p, delete=False)

A node alone is a cluster of one: the single-node view (``LocalClusterView``) names this node the
leader of every partition of its data directory, replicas = ISR = [node], so a partition is made
leader here by the same :meth:`become_leader` on its first use (``view.self_led``) and then served
by the same code as a cluster's: one dict lookup per partition per request.  A partition whose
only replica is this leader has its high watermark moved by the log at each append, so acks=all
answers at once (min.insync.replicas allowing, as in Kafka).

In a cluster only partitions given by ``become_leader`` / ``become_follower`` are served: a request
for another one gets NOT_LEADER_OR_FOLLOWER (or UNKNOWN_TOPIC_OR_PARTITION when the view does not
know it).  The leader tracks its followers from their Fetch requests (``read`` with
``replica_id >= 0``); ISR changes go through ``view.alter_isr`` in a worker thread; the ISR
expiration task drops followers not caught up for ``replica.lag.time.max.ms`` (30000).  Followers
replicate with one :class:`~engine.replica.fetcher.ReplicaFetcher` thread per leader broker.

Storage errors (Kafka's LogDirFailureChannel for our single data dir): an OSError of the local
log -- ENOSPC, EROFS, EIO in a leader's append, a follower's append, truncation or HW update --
answers KAFKA_STORAGE_ERROR (56) to the request.  With ``on_storage_error`` set (``serve`` sets
it; the broker then halts as Kafka's broker does when its only log dir failed) the manager also
goes *offline* at once: every partition answers KAFKA_STORAGE_ERROR, pending acks=all produces
fail with it (never acknowledged), fetchers stop, and ``on_storage_error(exc, what)`` is called
once on the loop.  Unset (embedded use) only the failing request gets the error.

Threads: ``append``/``read``/``wait_for_acks`` run on the broker's event loop;
``become_leader``/``become_follower``/``stop_replica`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading

from ..errors import (
    KafkaStorageError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RequestTimedOutError,
    UnknownTopicOrPartitionError,
)
from ..storage.logtypes import FetchInfo
from .local_read import LocalReads
from .partition import Partition, now_ms
from .verification import TransactionVerifier

__all__ = ["ReplicaManager"]

log = logging.getLogger("engine.replica")

_NO_FLUSH_POLICY = (1 << 63) - 1      # flush.messages default (Long.MAX_VALUE)
_FETCHER_KEYS = {"replica.fetch.wait.max.ms": "max_wait_ms", "replica.fetch.min.bytes": "min_bytes",
                 "replica.fetch.response.max.bytes": "max_bytes", "replica.fetch.max.bytes": "partition_max_bytes",
                 "replica.fetch.backoff.ms": "backoff_ms", "replica.socket.timeout.ms": "request_timeout_ms"}


class ReplicaManager:
    """See the module docstring; the in-process reads (``local.read_from_local_log`` & co.) are
    a :class:`~engine.replica.local_read.LocalReads` over :meth:`local_copy`."""

    def __init__(self, config, logs, view, *, log_for,
                 replica_lag_time_max_ms: int | None = None, fetcher_config: dict | None = None):
        """`config`: the broker's EngineConfig; `logs`: the LogManager (a replica removed with
        ``stop_replica(delete=True)`` is deleted there); `view`: the cluster view (for a node
        alone ``LocalClusterView``); ``log_for(topic, partition)``: the local log of a partition
        this broker is told to host, made when absent (the composition root's: engine/node.py)."""
        self.config = config
        self.logs = logs
        self.view = view
        self.node_id = view.node_id
        given = getattr(config, "explicit", {})     # Kafka's replica.* broker keys
        self.replica_lag_time_max_ms = int(replica_lag_time_max_ms if replica_lag_time_max_ms is not None
                                           else given.get("replica.lag.time.max.ms", 30_000))
        self.fetcher_config = {arg: int(given[key]) for key, arg in _FETCHER_KEYS.items() if key in given}
        self.fetcher_config.update(fetcher_config or {})
        self._log_for = log_for
        self._parts: dict[tuple[str, int], Partition] = {}
        self._lock = threading.RLock()
        self._fetchers: dict[int, object] = {}      # leader id -> ReplicaFetcher
        self._loop: asyncio.AbstractEventLoop | None = None
        self._notify = lambda: None
        self._expire_task: asyncio.Task | None = None
        self._role_listeners: list = []
        self.on_storage_error = None        # see "Storage errors" in the module docstring
        self.offline: str | None = None     # why this broker stopped serving its replicas
        self.local = LocalReads(self.local_copy)    # in-process readers (local_read.py)
        self._verifier: TransactionVerifier | None = None     # KIP-890 (verification.py)
        self._verify = False                # transaction.partition.verification.enable
        # how the fetchers connect to leaders: the inter-broker listener's TLS / SASL
        # (engine.client.security.ClientSecurity.inter_broker; None: PLAINTEXT), set by the wiring
        self.client_security = None

    def add_role_listener(self, fn) -> None:
        """Call ``fn(topic, partition, leader: bool)`` after every role change of a hosted
        partition: ``True`` after ``become_leader``, ``False`` after ``become_follower`` and
        ``stop_replica`` (the broker wiring registers the coordinators here, so they load and
        unload ``__consumer_offsets`` / ``__transaction_state`` partitions with leadership).
        Runs on the thread that changed the role (the broker's loop in cluster mode)."""
        self._role_listeners.append(fn)

    def _roles_changed(self, topic: str, partition: int, leader: bool) -> None:
        for fn in self._role_listeners:
            try:
                fn(topic, partition, leader)
            except Exception:
                log.exception("role listener failed for %s-%d", topic, partition)

    # -- lifecycle ---------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop, notify=None) -> None:
        """Bind to the broker's loop; `notify()` wakes long-polling fetches (HW moved)."""
        self._loop = loop
        if notify is not None:
            self._notify = notify
        if self._expire_task is None:
            self._expire_task = loop.create_task(self._isr_expiration())

    async def stop(self) -> None:
        if self._expire_task is not None:
            self._expire_task.cancel()
            try:
                await self._expire_task
            except BaseException:
                pass
            self._expire_task = None
        with self._lock:
            fetchers, self._fetchers = list(self._fetchers.values()), {}
            parts = list(self._parts.values())
        for f in fetchers:
            f.shutdown()
        for p in parts:
            p.fail_waiters(NotLeaderOrFollowerError, "the broker is shutting down")

    # -- lookup ------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> Partition:
        """The local replica (leader or follower); NOT_LEADER_OR_FOLLOWER when this broker
        hosts none, UNKNOWN_TOPIC_OR_PARTITION when the partition does not exist."""
        if self.offline is not None:
            raise KafkaStorageError(self.offline)
        part = self._parts.get((topic, partition))
        if part is not None and not part.log.closed:
            return part
        state = self.view.self_led(topic, partition)                # UnknownTopicOrPartitionError
        if state is not None:
            epoch, replicas, isr = state
            return self.become_leader(topic, partition, epoch, replicas, isr, 0)
        leader = self.view.partition_state(topic, partition)[0]    # UnknownTopicOrPartitionError
        raise NotLeaderOrFollowerError(f"broker {self.node_id} hosts no replica of {topic}-{partition} "
                                       f"(leader: {leader})")

    def local_copy(self, topic: str, partition: int):
        """The log of this node's replica of the partition whatever its role, or the log on disk
        of one not (yet) hosted here -- never made leader by this lookup (local_read.py: the
        in-process readers); UNKNOWN_TOPIC_OR_PARTITION when there is none here."""
        if self.offline is not None:
            raise KafkaStorageError(self.offline)
        part = self._parts.get((topic, partition))
        if part is not None and not part.log.closed:
            return part.log
        return self.logs.get_log(topic, partition)     # not hosted (yet): the log as it is

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Partition:
        """The partition if this broker leads it (NOT_LEADER_OR_FOLLOWER otherwise), after
        checking a request's current_leader_epoch (FENCED / UNKNOWN_LEADER_EPOCH)."""
        part = self.partition(topic, partition)
        part.check_leader()
        part.check_epoch(current_leader_epoch)
        return part

    def partitions(self) -> list[Partition]:
        with self._lock:
            return list(self._parts.values())

    def local_log(self, topic: str, partition: int):
        """The log of a replica hosted here, leader or follower (Kafka's getLog): what a
        coordinator replays once it leads a partition of its internal topic.
        NOT_LEADER_OR_FOLLOWER when this broker hosts none."""
        part = self._parts.get((topic, partition))
        if part is None:
            raise NotLeaderOrFollowerError(f"broker {self.node_id} hosts no replica of {topic}-{partition}")
        return part.log

    # -- produce -----------------------------------------------------------
    def use_transaction_verifier(self, ask) -> None:
        """Verify transactional produce requests with `ask` (verification.py), given by the
        composition that builds the broker: the transaction coordinator wherever the id is."""
        self._verifier = TransactionVerifier(ask)
        self._verify = bool(self.config["transaction.partition.verification.enable"])

    async def verify_transactional(self, transactional_id: str | None, entries,
                                   abortable: bool = False) -> dict[tuple[str, int], int]:
        """KIP-890, before a produce request's appends: {(topic, partition): error code} of the
        `entries` ((topic, partition, records)) whose transactional batch must not be appended
        (empty: append them all).  Off with ``transaction.partition.verification.enable=false``
        or without a verifier (an embedded node alone: its in-process producers are verified
        by their own transaction).  `abortable` (Produce v11+): TRANSACTION_ABORTABLE is answered
        as it is, not as INVALID_TXN_STATE (KIP-890)."""
        if self._verifier is None or not self._verify or transactional_id is None:
            return {}
        return await self._verifier.refused(transactional_id, entries, abortable)

    async def append(self, topic: str, partition: int, buf, acks: int):
        """Append a produce request's batches as the leader.

        Returns ``(AppendInfo, log_start_offset, waiter)``: ``waiter`` is None when nothing is
        left to wait for, else a future for :meth:`wait_for_acks` (acks=all until the ISR has
        the batch).  Raises NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (acks=all, ISR smaller
        than min.insync.replicas: nothing appended) and the log's own errors.
        """
        part = self.leader_partition(topic, partition)
        plog = part.log
        if acks == -1:
            part.check_min_isr()
        epoch = part.leader_epoch
        try:
            if plog.config["flush.messages"] < _NO_FLUSH_POLICY:
                info = await asyncio.get_running_loop().run_in_executor(
                    None, functools.partial(plog.append, buf, epoch))
            else:
                info = plog.append(buf, epoch)
        except OSError as e:          # nothing of it is in the log (or the log went offline)
            raise self.storage_error(e, f"append to {topic}-{partition}") from e
        if self.offline is not None:  # failed meanwhile (durable mode's wait): never acknowledged
            raise KafkaStorageError(self.offline)
        return info, plog.log_start_offset, self._appended(part, info.last_offset, acks)

    def append_in_process(self, topic: str, partition: int, buf):
        """An in-process producer's append (the embedded API, on the caller's thread): as the
        leader with acks=1, waiting for the log's flush policy on that thread.  Returns the
        log's AppendInfo.  NOT_LEADER_OR_FOLLOWER where this node does not lead the partition:
        a follower replica is written by its fetcher only."""
        part = self.leader_partition(topic, partition)
        plog = part.log
        try:
            info = plog.append(buf, part.leader_epoch)
        except OSError as e:          # nothing of it is in the log (or the log went offline)
            raise self.storage_error(e, f"append to {topic}-{partition}") from e
        if not plog.auto_high_watermark:   # with followers the HW and its waiters live on the loop
            self._call_on_loop(self._appended, part, info.last_offset, 1)
        return info

    def _appended(self, part: Partition, last_offset: int, acks: int):
        """After a leader's append: move the HW; the acks=all waiter of `last_offset` or None."""
        if part.maybe_advance_hw():
            part.complete_waiters()
            self._notify()
        if acks == -1 and part.log.high_watermark <= last_offset:
            if not part.is_leader:
                raise NotLeaderOrFollowerError(f"{part.topic}-{part.partition} lost its leadership")
            waiter = asyncio.get_running_loop().create_future()
            part.delayed_produce.watch(last_offset + 1, waiter)
            return waiter
        return None

    async def append_control(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                             commit: bool, coordinator_epoch: int):
        """A COMMIT/ABORT marker appended as the leader (WriteTxnMarkers in cluster mode), with
        acks=all: returns ``(offset, waiter)`` (``waiter`` for :meth:`wait_for_acks`, or None)."""
        part = self.leader_partition(topic, partition)
        plog = part.log
        epoch = part.leader_epoch
        try:
            offset = await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(plog.append_control, producer_id, producer_epoch, commit,
                                        coordinator_epoch, epoch)) \
                if plog.config["flush.messages"] < _NO_FLUSH_POLICY else \
                plog.append_control(producer_id, producer_epoch, commit, coordinator_epoch, epoch)
        except OSError as e:
            raise self.storage_error(e, f"marker append to {topic}-{partition}") from e
        if self.offline is not None:
            raise KafkaStorageError(self.offline)
        return offset, self._appended(part, offset, -1)

    async def wait_for_acks(self, waiters: list, timeout_ms: int) -> list:
        """Wait for acks=all waiters (from :meth:`append`) together, at most `timeout_ms`.
        Returns one entry per waiter: None (committed) or the KafkaApiError to answer
        (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER)."""
        live = [w for w in waiters if w is not None]
        if live:
            await asyncio.wait(live, timeout=max(timeout_ms, 0) / 1000.0)
        out = []
        for w in waiters:
            if w is None:
                out.append(None)
            elif not w.done():
                w.cancel()
                out.append(RequestTimedOutError(f"the in-sync replicas did not acknowledge within "
                                                f"{timeout_ms} ms"))
            else:
                out.append(w.exception())
        return out

    # -- DeleteRecords ------------------------------------------------------------
    def delete_records(self, topic: str, partition: int, offset: int):
        """Move the leader's log start to `offset` (-1: the high watermark).  Returns
        ``(low_watermark, waiter)``: with followers, ``waiter`` (for :meth:`wait_for_acks`) gives
        the low watermark once every live replica's log start reached it (Kafka's
        DelayedDeleteRecords), else it is None."""
        part = self.leader_partition(topic, partition)
        plog = part.log
        try:
            start = plog.delete_records_before(plog.high_watermark if offset == -1 else offset)
        except OSError as e:
            raise self.storage_error(e, f"DeleteRecords of {topic}-{partition}") from e
        if not part.followers:
            return start, None
        waiter = asyncio.get_running_loop().create_future()
        part.delayed_delete.watch(start, waiter)
        part.complete_delete_waiters(self.view.brokers())
        self._wake()           # followers learn the new log start from their next fetch
        return start, waiter

    # -- fetch ---------------------------------------------------------------
    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *, replica_id: int = -1,
             current_leader_epoch: int = -1, log_start_offset: int = -1, isolation_level: int = 0,
             min_one_batch: bool = True, last_fetched_epoch: int = -1, replica_epoch: int = -1):
        """Read as the leader: a consumer (``replica_id < 0``) up to the high watermark (the last
        stable offset with ``isolation_level`` 1, read_committed), a follower up to the log end offset
        (its fetch offset is its LEO: the ISR and the HW move from it).  Returns the log's FetchInfo
        (its ``high_watermark`` after the update).

        ``last_fetched_epoch`` >= 0 (Fetch v12+, KIP-320; followers and consumers alike) is
        checked first against the leader-epoch cache, as Kafka's Partition.readRecords: when
        the reader's log diverges from ours the answer has no records and ``diverging_epoch``
        = (epoch, end offset) to truncate to, and a follower's position is not updated;
        OFFSET_OUT_OF_RANGE when that epoch is unknown here or `offset` is below the log start.
        ``replica_epoch``: a follower's broker epoch (Fetch v15's ReplicaState, KIP-903; -1: not
        sent), recorded with its position and carried with the ISR expansion it leads to."""
        part = self.leader_partition(topic, partition, current_leader_epoch)
        plog = part.log
        if last_fetched_epoch >= 0:
            diverging = self._diverging(plog, offset, last_fetched_epoch)
            if diverging is not None:
                return diverging
        if replica_id < 0:
            return plog.read(offset, max_bytes, min_one_batch=min_one_batch, isolation_level=isolation_level)
        self._follower_fetched(part, replica_id, offset, log_start_offset, replica_epoch)
        return plog.read(offset, max_bytes, max_offset=plog.log_end_offset, min_one_batch=min_one_batch)

    @staticmethod
    def _diverging(plog, offset: int, last_fetched_epoch: int):
        """A FetchInfo carrying ``diverging_epoch`` when (`last_fetched_epoch`, `offset`) is not
        in our log, else None (see :meth:`read`)."""
        hw, start, leo = plog.high_watermark, plog.log_start_offset, plog.log_end_offset
        lso = plog.last_stable_offset
        epoch, end = plog.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0 or end < 0:
            raise OffsetOutOfRangeError(f"the end offset of leader epoch {last_fetched_epoch} is unknown "
                                        f"in {plog.topic}-{plog.partition}")
        if offset < start:
            raise OffsetOutOfRangeError(f"offset {offset} is below the log start {start} of "
                                        f"{plog.topic}-{plog.partition}")
        if epoch < last_fetched_epoch or end < offset:
            return FetchInfo([], offset, hw, start, leo, lso, None, (epoch, end))
        return None

    def _follower_fetched(self, part: Partition, replica_id: int, offset: int, log_start: int,
                          broker_epoch: int = -1) -> None:
        part.update_follower(replica_id, offset, now_ms(), log_start, broker_epoch)
        if len(part.delayed_delete):
            part.complete_delete_waiters(self.view.brokers())
        new_isr = part.isr_to_expand(replica_id)
        # (KIP-841) a follower whose broker is gone stays out: its last fetch may have been
        # caught up; (KIP-903) it is added with the broker epoch it fetched with, and the view
        # refuses an epoch that is not its current registration's (an earlier incarnation's fetch)
        if new_isr is not None and self.view.isr_eligible(replica_id):
            self._alter_isr(part, new_isr, {replica_id: broker_epoch})
        if part.maybe_advance_hw():
            part.complete_waiters()
            self._notify()

    # -- offsets and producers (ListOffsets, OffsetForLeaderEpoch, DescribeProducers) ------
    def fetch_offset_for_timestamp(self, topic: str, partition: int, timestamp: int, *,
                                   current_leader_epoch: int = -1, isolation_level: int = 0,
                                   replica_id: int = -1) -> tuple[int, int, int] | None:
        """ListOffsets as the leader: (offset, timestamp, leader epoch) or None when no record
        answers (Partition.offset_for_timestamp says which offset each timestamp gives)."""
        part = self.leader_partition(topic, partition, current_leader_epoch)
        hit = part.offset_for_timestamp(timestamp, isolation_level, replica_id != -1)
        return None if hit is None else (hit[0], hit[1], part.leader_epoch)

    def last_offset_for_leader_epoch(self, topic: str, partition: int, leader_epoch: int,
                                     current_leader_epoch: int = -1) -> tuple[int, int]:
        """OffsetForLeaderEpoch as the leader: (the largest epoch <= `leader_epoch`, its end offset)."""
        return self.leader_partition(topic, partition, current_leader_epoch).log.end_offset_for_epoch(leader_epoch)

    def active_producers(self, topic: str, partition: int) -> list:
        """DescribeProducers as the leader: the producer state entries of the partition's log."""
        return self.leader_partition(topic, partition).log.active_producers()

    # -- storage errors (any thread) -----------------------------------------------
    def storage_error(self, exc: OSError, what: str) -> KafkaStorageError:
        """An I/O error of the local log while doing `what`: returns the KafkaStorageError to
        raise; with ``on_storage_error`` set, the manager goes offline first (module docstring)."""
        err = exc if isinstance(exc, KafkaStorageError) else KafkaStorageError(
            exc.errno, f"{what} failed: {exc.strerror or exc}")
        if self.on_storage_error is None:
            return err
        with self._lock:
            if self.offline is not None:
                return err
            self.offline = (f"broker {self.node_id} is offline after an I/O error on its data "
                            f"directory ({what}: {exc})")
            fetchers, self._fetchers = list(self._fetchers.values()), {}
        log.error("%s: this broker stops serving its replicas", self.offline)
        for f in fetchers:
            f.stop()                    # no join: this may be a fetcher's own thread
        self._call_on_loop(self._went_offline, exc, what)
        return err

    def _went_offline(self, exc: OSError, what: str) -> None:
        for part in self.partitions():
            part.fail_waiters(KafkaStorageError, self.offline)
        self._notify()
        hook = self.on_storage_error
        if hook is not None:
            hook(exc, what)

    # -- ISR changes ---------------------------------------------------------
    def _alter_isr(self, part: Partition, new_isr: list[int], broker_epochs: dict[int, int] | None = None) -> None:
        """Ask the view to change the ISR (a worker thread: it may block); applied on success.
        `broker_epochs`: of the followers added, the broker epoch of their fetches (KIP-903)."""
        if part.isr_change_inflight or self._loop is None:
            return
        part.isr_change_inflight = True
        epoch, pepoch = part.leader_epoch, part.partition_epoch
        call = functools.partial(self.view.alter_isr, part.topic, part.partition, list(new_isr), epoch,
                                 pepoch, broker_epochs or None)
        fut = self._loop.run_in_executor(None, call)
        fut.add_done_callback(lambda f: self._isr_altered(part, new_isr, epoch, pepoch, f))

    def _isr_altered(self, part: Partition, new_isr, epoch, pepoch, fut) -> None:
        part.isr_change_inflight = False
        try:
            ok = fut.result()
        except Exception:
            log.exception("ISR change of %s-%d to %s failed", part.topic, part.partition, new_isr)
            return
        if not ok or not part.is_leader or part.leader_epoch != epoch or part.partition_epoch != pepoch:
            log.info("ISR change of %s-%d to %s refused (epoch %d, partition epoch %d)",
                     part.topic, part.partition, new_isr, epoch, pepoch)
            return
        log.info("ISR of %s-%d: %s -> %s", part.topic, part.partition, part.isr, new_isr)
        part.isr = list(new_isr)
        part.partition_epoch = pepoch + 1
        if part.maybe_advance_hw():
            part.complete_waiters()
            self._notify()
        if len(part.isr) < part.min_isr and len(part.delayed_produce):
            part.fail_waiters(NotEnoughReplicasAfterAppendError,
                              f"the ISR of {part.topic}-{part.partition} shrank to {part.isr}, below "
                              f"min.insync.replicas={part.min_isr}")

    async def _isr_expiration(self) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2."""
        while True:
            await asyncio.sleep(max(self.replica_lag_time_max_ms / 2000.0, 0.01))
            now = now_ms()
            for part in self.partitions():
                if part.is_leader and part.followers and not part.isr_change_inflight:
                    new_isr = part.isr_to_shrink(now, self.replica_lag_time_max_ms)
                    if new_isr is not None:
                        self._alter_isr(part, new_isr)

    # -- role changes (any thread) ---------------------------------------------
    def become_leader(self, topic: str, partition: int, leader_epoch: int, replicas: list[int],
                      isr: list[int], partition_epoch: int) -> Partition:
        """Lead `topic`-`partition` from `leader_epoch` on (creating the local log if needed):
        stop fetching it, track the other replicas as followers."""
        part = self._hosted(topic, partition)
        already = part.is_leader and part.leader_epoch == leader_epoch
        self._remove_from_fetchers(part)
        if not part.make_leader(leader_epoch, replicas, isr, partition_epoch):
            log.warning("become_leader %s-%d epoch %d ignored: epoch %d is newer", topic, partition,
                        leader_epoch, part.leader_epoch)
        else:
            # the ISR may be down to this broker (Kafka's makeLeader: maybeIncrementLeaderHW),
            # e.g. after a restart whose HW came from the checkpoint
            self._call_on_loop(self._hw_check, part)
            if not already:
                log.info("leader of %s-%d from leader epoch %d (ISR %s)", topic, partition, leader_epoch, isr)
        self._wake()
        if part.is_leader:
            self._roles_changed(topic, partition, True)
        return part

    def become_follower(self, topic: str, partition: int, leader_id: int, leader_epoch: int,
                        replicas: list[int], partition_epoch: int) -> Partition:
        """Follow `leader_id` from `leader_epoch` on: pending acks=all produces fail with
        NOT_LEADER_OR_FOLLOWER, the fetcher of that leader replicates (truncating on DivergingEpoch)."""
        part = self._hosted(topic, partition)
        was_leader = part.is_leader
        if not part.make_follower(leader_id, leader_epoch, replicas, partition_epoch):
            return part
        self._roles_changed(topic, partition, False)
        if was_leader:
            self._call_on_loop(part.fail_waiters, NotLeaderOrFollowerError,
                               f"{topic}-{partition} is now led by {leader_id}")
        self._remove_from_fetchers(part)
        if leader_id >= 0 and leader_id != self.node_id and self.offline is None:   # offline: no fetching
            self._fetcher_for(leader_id).add(part)
        return part

    def stop_replica(self, topic: str, partition: int, delete: bool = False) -> None:
        """Stop hosting a replica (stop fetching, fail its waiters); `delete` removes its log."""
        with self._lock:
            part = self._parts.pop((topic, partition), None)
        if part is not None:
            self._remove_from_fetchers(part)
            with part.lock:
                part.is_leader = False
                part.leader_id = -1
            self._call_on_loop(part.fail_waiters, NotLeaderOrFollowerError,
                               f"{topic}-{partition} is no longer hosted here")
            self._roles_changed(topic, partition, False)
        if delete:
            try:
                self.logs.delete_log(topic, partition)
            except UnknownTopicOrPartitionError:
                pass

    def _hw_check(self, part: Partition) -> None:
        if part.is_leader and part.maybe_advance_hw():
            part.complete_waiters()
            self._notify()

    def _hosted(self, topic: str, partition: int) -> Partition:
        with self._lock:
            part = self._parts.get((topic, partition))
            if part is None or part.log.closed:
                part = self._parts[(topic, partition)] = Partition(
                    topic, partition, self._log_for(topic, partition), self.node_id)
            return part

    def _fetcher_for(self, leader_id: int):
        from .fetcher import ReplicaFetcher
        with self._lock:
            f = self._fetchers.get(leader_id)
            if f is None or not f.is_alive():
                f = self._fetchers[leader_id] = ReplicaFetcher(self, leader_id, **self.fetcher_config)
                f.start()
            return f

    def _remove_from_fetchers(self, part: Partition) -> None:
        with self._lock:
            fetchers = list(self._fetchers.values())
        for f in fetchers:
            f.remove(part)

    def _call_on_loop(self, fn, *args) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            fn(*args)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(*args)
        else:
            loop.call_soon_threadsafe(fn, *args)

    def _wake(self) -> None:
        self._call_on_loop(self._notify)

    def follower_appended(self) -> None:
        """The fetcher appended (any thread): wake long-polls (nothing to commit on a follower)."""
        self._wake()
