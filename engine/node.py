"""Node: the composition root of one node's data path (Kafka's ``BrokerServer``).

Kafka's ``BrokerServer`` builds the ``LogManager``, the ``ReplicaManager`` and the coordinators
and hands them to the request handlers; a :class:`Node` does the same for one data directory::

    node = Node("./data", {"num.partitions": 3})   # engine.open(...).node is one
    node.logs                      # the LogManager (engine/storage/manager.py): the partition logs
    node.create_topic("t", 3)      # topic administration and lookups over the local metadata
    node.replicas                  # the ReplicaManager: every partition write and read
    node.group_coordinator         # GroupCoordinator (__consumer_offsets), started on first use
    node.transaction_coordinator   # TransactionCoordinator (__transaction_state), likewise
    await node.host_coordinator("group")   # a broker runs it on its own loop instead
    node.topics                    # where topic decisions are recorded: this directory, or ZooKeeper
    node.close()

The node builds the storage: the ``LogManager`` (which takes the data directory's lock) and the
topic metadata (engine/metadata.py ``LocalMetadataStore``: names, ids, partition counts,
overrides); it administers topics and partitions, hands out producer ids, and wakes waiters
after appends (:meth:`notify_appended`, the append listeners a broker registers).  The layers
below -- the replica manager, its cluster views, the coordinators -- and the broker above are
given the node; the embedded ``Engine`` (engine/_engine.py) is a thin facade owning one.

The replica manager serves the cluster view given by the composition before first use
(:meth:`use_view`: a cluster broker's membership); by default the single-node view, in which
this node leads every partition of the data directory.  A coordinator runs either on a
broker's loop (:meth:`host_coordinator`, released by :meth:`release_coordinator` when the
broker stops) or, when nobody hosts one, on a thread of its own started on first use; the
handover between the two waits for in-flight writes.

Topic decisions that a cluster records elsewhere -- producer-id blocks, topic config changes,
what Metadata does for an unknown topic -- go through ``node.topics`` (engine/topics.py):
``LocalTopics`` (this data directory) by default, or the ZooKeeper-backed one the cluster
composition gives (engine/cluster/local.py ``ZkTopics``, via :meth:`Node.use_topics`).

Threads: every method may be called from any thread; admin operations and state changes hold
one admin lock; produce and in-process reads go through the replica manager to the partition
logs, which are thread-safe.
Appenders wake waiting consumers through one condition variable.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .config import EngineConfig, LogConfig
from .coordinator import GroupCoordinator, TransactionCoordinator
from .errors import (
    ClosedError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    ReadOnlyError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from .metadata import LocalMetadataStore, TopicMetadata, new_topic_id, validate_topic_name, write_partition_metadata
from .replica import LocalClusterView, ReplicaManager
from .storage.manager import LogManager
from .topics import LocalTopics, Topics

__all__ = ["LocalTopics", "Node", "Topics"]

log = logging.getLogger("engine.node")

_KINDS = {"group": GroupCoordinator, "transaction": TransactionCoordinator}
_PRODUCER_ID_BLOCK = 1000


class Node:
    """One data directory's node (see the module docstring).  `config` takes Kafka's broker
    keys; `replicated` (default: whether ``zookeeper.connect`` is set) makes high watermarks the
    replica layer's, starting at ``replication-offset-checkpoint``."""

    def __init__(self, path: str | os.PathLike[str], config: Mapping[str, Any] | None = None, *,
                 read_only: bool = False, background: bool = True, replicated: bool | None = None):
        self.path = os.fspath(path)
        self.read_only = read_only
        settings = dict(config or {})
        settings["log.dirs"] = self.path
        self.config = EngineConfig.from_mapping(settings)
        # replicated (cluster mode): high watermarks belong to the replica layer and start at
        # replication-offset-checkpoint; single node: every appended record is committed
        self.replicated = bool(self.config["zookeeper.connect"]) if replicated is None else replicated
        if not read_only:
            os.makedirs(self.path, exist_ok=True)
        elif not os.path.isdir(self.path):
            raise FileNotFoundError(f"data directory {self.path} does not exist")
        self._admin = threading.RLock()       # topic administration, producer ids, the composition
        self._replicas: ReplicaManager | None = None
        self._view = None
        self._coordinators: dict[str, Any] = {"group": None, "transaction": None}
        self._handover = threading.Event()    # set unless a hosted coordinator is stopping
        self._handover.set()
        self.topics: Topics = LocalTopics(self)
        self.cluster = None                   # cluster mode: the coordinators' ClusterLink
        self._next_producer_id = 0
        self._producer_id_limit = 0
        self._arrived = threading.Condition(threading.Lock())
        self._append_listeners: list = []
        self._closed = False
        # The lock is taken by the LogManager before the metadata is touched.
        self.logs = LogManager(self.path, self.config, read_only=read_only,
                               config_for=self._log_config_for, auto_high_watermark=not self.replicated)
        try:
            in_cluster = bool(self.config.values.get("zookeeper.connect"))
            self._meta = LocalMetadataStore(self.path, read_only=read_only,
                                            broker_id=self.config["broker.id"] if in_cluster else None)
            self._adopt_unregistered_partitions()
            if background and not read_only:
                self.logs.start_background(1.0)
        except BaseException:
            self.logs.close()
            raise

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the coordinators, then flush, write checkpoints and the clean-shutdown marker and
        release the data directory's lock."""
        if not self._closed:
            self.stop_coordinators()    # before the logs close: one may be finishing a write
        with self._admin:
            if self._closed:
                return
            self._closed = True
            self.logs.close()
        with self._arrived:
            self._arrived.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the engine is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyError(f"{self.path} is open read-only")

    def advertise_listener(self, address: str | None) -> None:
        """Record ``HOST:PORT`` of the broker serving this directory (None clears it);
        other processes find it with :func:`engine.broker_address`."""
        self._check_writable()
        self.logs.advertise_listener(address)

    @property
    def recovery_report(self) -> list:
        """What the open found and repaired after an unclean shutdown (empty after a clean one)."""
        return list(self.logs.recovery_report)


    # -- metadata -----------------------------------------------------------------------------
    def _log_config_for(self, topic: str) -> LogConfig:
        store: LocalMetadataStore | None = self.__dict__.get("_meta")
        if store is None:
            # LogManager loading (it holds the data dir lock): the logs need their topic config at
            # load time (cleanup.policy=compact changes what recovery accepts), so read it now.
            store = self.__dict__.get("_meta_at_load")
            if store is None:
                store = self._meta_at_load = LocalMetadataStore(self.path, read_only=True)
        meta = store.topics().get(topic)
        return self.config.log_config(meta.config if meta else None)

    def _adopt_unregistered_partitions(self) -> None:
        """Partition directories with no metadata entry (e.g. copied from Kafka) become topics."""
        known = self._meta.topics()
        found: dict[str, int] = {}
        for topic, partition in self.logs.logs():
            found[topic] = max(found.get(topic, 0), partition + 1)
        for topic, n in found.items():
            if topic not in known and not self.read_only:
                self._meta.put_topic(TopicMetadata(topic, new_topic_id(), n, {}))

    def topic_metadata(self, name: str) -> TopicMetadata:
        """Id, partition count and config overrides of a topic (UnknownTopicOrPartitionError if absent)."""
        if self.read_only:
            self._meta.reload()
        meta = self._meta.topics().get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return meta

    @property
    def cluster_id(self) -> str | None:
        """The ``cluster.id`` of ``meta.properties`` (None for a read-only open of a fresh directory)."""
        return self._meta.cluster_id

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before in this data directory (InitProducerId)."""
        self._check_writable()
        with self._admin:
            if self._next_producer_id >= self._producer_id_limit:
                self._next_producer_id = self.topics.reserve_producer_ids(_PRODUCER_ID_BLOCK)
                self._producer_id_limit = self._next_producer_id + _PRODUCER_ID_BLOCK
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid

    def topic_config(self, name: str) -> LogConfig:
        return self.config.log_config(self.topic_metadata(name).config)

    def partitions_for(self, topic: str) -> int:
        return self.topic_metadata(topic).partitions

    def list_topics(self) -> list[str]:
        self._check_open()
        if self.read_only:
            self._meta.reload()
        return sorted(self._meta.topics())

    def log(self, topic: str, partition: int):
        """The PartitionLog of one partition (UnknownTopicOrPartitionError if absent)."""
        self._check_open()
        return self.logs.get_log(topic, partition)

    # -- topic administration -----------------------------------------------------------------
    def create_topic(self, name: str, partitions: int | None = None,
                     config: Mapping[str, Any] | None = None, replication_factor: int = 1) -> None:
        """Create a topic (Kafka config keys in `config`; unknown keys raise InvalidConfigError)."""
        self._check_writable()
        validate_topic_name(name)
        n = self.config["num.partitions"] if partitions is None else partitions
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InvalidPartitionsError(f"partitions must be a positive integer, got {partitions!r}")
        if replication_factor != 1:
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is larger than the 1 available broker")
        log_config = self.config.log_config(config)  # validates keys and values
        with self._admin:
            if name in self._meta.topics():
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            topic_id = new_topic_id()
            for p in range(n):
                log = self.logs.create_log(name, p, log_config)
                write_partition_metadata(log.dir, topic_id)
            self._meta.put_topic(TopicMetadata(name, topic_id, n, dict(log_config.overrides)))

    def ensure_topic(self, name: str) -> TopicMetadata:
        """The topic's metadata, creating it when `auto.create.topics.enable` allows (through
        the node's topics: in a cluster, ZooKeeper)."""
        try:
            return self.topic_metadata(name)
        except UnknownTopicOrPartitionError:
            return self.topics.missing_topic(name)

    def delete_topic(self, name: str) -> None:
        """Remove the topic and its logs here (a cluster broker: once ZooKeeper says it is
        deleted); the running group coordinator then drops the groups' committed offsets of
        its partitions (Kafka's ``onPartitionsDeleted``, run by every broker), in the
        background."""
        self._check_writable()
        with self._admin:
            meta = self.topic_metadata(name)
            for p in range(meta.partitions):
                try:
                    self.logs.delete_log(name, p)
                except UnknownTopicOrPartitionError:
                    pass
            self._meta.remove_topic(name)
        coord = self._coordinators["group"]
        if coord is not None and coord.running:
            try:
                fut = coord.submit(coord.on_partitions_deleted, [(name, p) for p in range(meta.partitions)])
            except ClosedError:
                return                      # stopping: its successor replays what was written
            fut.add_done_callback(functools.partial(_log_failure, f"removing the offsets of deleted topic {name}"))

    def create_partitions(self, name: str, total: int) -> None:
        """Grow a topic to `total` partitions (Kafka never shrinks)."""
        self._check_writable()
        with self._admin:
            meta = self.topic_metadata(name)
            if total <= meta.partitions:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {meta.partitions} partitions; the new count must be larger")
            cfg = self.config.log_config(meta.config)
            for p in range(meta.partitions, total):
                log = self.logs.create_log(name, p, cfg)
                write_partition_metadata(log.dir, meta.topic_id)
            self._meta.put_topic(TopicMetadata(name, meta.topic_id, total, meta.config))

    def alter_topic_config(self, name: str, set: Mapping[str, Any] | None = None,
                           delete: Iterable[str] = ()) -> None:
        """Set and/or remove config overrides of a topic (IncrementalAlterConfigs), where the
        node records them (in a cluster: ZooKeeper first, from where every broker applies them)."""
        self._check_writable()
        self.topics.alter_topic_config(name, set, delete)

    def replace_topic_config(self, name: str, config: Mapping[str, Any]) -> None:
        """Make `config` the topic's whole set of overrides (AlterConfigs: those it leaves out
        are removed), under the admin lock (re-entrant), so no other config change lands between
        reading the current overrides and dropping those `config` leaves out."""
        with self._admin:
            current = self.topic_metadata(name).config
            self.alter_topic_config(name, config, [k for k in current if k not in config])

    def alter_local_topic_config(self, name: str, set: Mapping[str, Any] | None = None,
                                 delete: Iterable[str] = ()) -> None:
        """Apply config overrides to this data directory's copy of a topic: its metadata and
        its logs here (the node's topics decide where else they are recorded)."""
        self._check_writable()
        with self._admin:
            meta = self.topic_metadata(name)
            overrides = dict(meta.config)
            overrides.update(set or {})
            for key in delete:
                overrides.pop(key, None)
            cfg = self.config.log_config(overrides)
            for (t, _p), plog in self.logs.logs().items():   # (a cluster broker holds only its replicas)
                if t == name:
                    plog.update_config(cfg)
            self._meta.put_topic(TopicMetadata(name, meta.topic_id, meta.partitions,
                                               dict(cfg.overrides)))

    # -- cluster mode: the local mirror of the cluster's topics (engine/cluster/member.py) -----
    @property
    def admin_lock(self) -> threading.RLock:
        """The node's (re-entrant) lock of topic administration, for the node's ``topics`` when
        they read, check and write in one step (engine/cluster/local.py's ZkTopics)."""
        return self._admin

    def mirror_topic(self, name: str, topic_id: str | None, partitions: int, config: Mapping[str, Any]) -> None:
        """Record the cluster's topic here: its id (kept, unlike :meth:`create_topic`), at least
        `partitions` partitions and `config`; no log is made (:meth:`ensure_log` makes those this
        broker replicates).  A local topic of another id is an older incarnation (deleted and
        re-created while this broker was away): its logs are removed first."""
        with self._admin:
            meta = self._meta.topics().get(name)
            if meta is not None and topic_id and meta.topic_id != topic_id:
                log.warning("local topic %s has id %s, the cluster's is %s: removing the old logs",
                            name, meta.topic_id, topic_id)
                self.delete_topic(name)
                meta = None
            if meta is None:
                validate_topic_name(name)
                cfg = self.config.log_config({k: v for k, v in config.items() if v is not None})
                self._meta.put_topic(TopicMetadata(name, topic_id or new_topic_id(), partitions,
                                                   dict(cfg.overrides)))
            elif meta.partitions < partitions:
                self._meta.put_topic(TopicMetadata(name, meta.topic_id, partitions, meta.config))

    def has_log(self, topic: str, partition: int) -> bool:
        try:
            self.logs.get_log(topic, partition)
            return True
        except UnknownTopicOrPartitionError:
            return False

    def ensure_log(self, topic: str, partition: int) -> bool:
        """The log of a partition of a mirrored topic this broker replicates, made when absent
        with the topic's config and id (``partition.metadata``); True when made now."""
        with self._admin:
            if self.has_log(topic, partition):
                return False
            meta = self._meta.topics()[topic]
            plog = self.logs.create_log(topic, partition, self.config.log_config(meta.config))
            write_partition_metadata(plog.dir, meta.topic_id)
            return True

    def adopt_cluster_id(self, cluster_id: str, broker_id: int) -> None:
        """``meta.properties`` takes the cluster's id and this broker's id (so Metadata and
        DescribeCluster answer the same cluster id on every broker)."""
        with self._admin:
            if self._meta.cluster_id == cluster_id:
                return
            if self._meta.cluster_id and self.list_topics():
                log.warning("data directory %s belonged to cluster %s; it now joins cluster %s",
                            self.path, self._meta.cluster_id, cluster_id)
            self._meta.adopt_cluster_id(cluster_id, broker_id)

    # -- notifications between appenders and waiters ------------------------------------------
    def notify_appended(self) -> None:
        """Wake consumers waiting in this process and call the append listeners (the broker's)."""
        with self._arrived:
            self._arrived.notify_all()
        for listener in tuple(self._append_listeners):
            listener()

    def add_append_listener(self, callback) -> None:
        """Call `callback()` (from the appending thread) after every append made through this node."""
        self._append_listeners.append(callback)

    def remove_append_listener(self, callback) -> None:
        try:
            self._append_listeners.remove(callback)
        except ValueError:
            pass

    def wait_for_data(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for an append (a read-only open polls: its writer is elsewhere)."""
        if timeout_s <= 0:
            return
        if self.read_only:
            time.sleep(min(timeout_s, 0.005))
            return
        with self._arrived:
            self._arrived.wait(timeout_s)

    # -- the composition: where topic decisions go, the cluster link --------------------------
    def use_cluster(self, link) -> None:
        """Cluster mode for the coordinators (engine/coordinator/cluster_link.py): each one this
        node starts from now on is constructed with `link`, so it never loads or writes its
        internal topic from the local replicas before the cluster makes this broker leader."""
        self.cluster = link

    def use_topics(self, topics: Topics) -> None:
        """Record topic decisions through `topics` (a cluster broker's ZooKeeper-backed ones),
        given by the composition that joins the cluster; producer ids come from a new block."""
        with self._admin:
            self.topics = topics
            self._next_producer_id = self._producer_id_limit

    # -- the replica layer --------------------------------------------------------------------
    @property
    def replicas(self) -> ReplicaManager:
        """This node's ReplicaManager, through which every partition write goes -- the broker's
        handlers, the coordinators, the in-process producers -- so leadership, leader epochs
        and the ISR are checked in one place; and every read (wire Fetches, and in-process
        readers through engine/replica/local_read.py, bounded by the HW / LSO).  Made on first
        use for the view given to :meth:`use_view` (default: the single-node view)."""
        rm = self._replicas
        if rm is None:
            with self._admin:
                if self._replicas is None:
                    view = self._view or LocalClusterView(self.config["node.id"], self.log, self.topic_metadata)
                    self._replicas = ReplicaManager(self.config, self.logs, view, log_for=self._hosted_log)
                rm = self._replicas
        return rm

    def _hosted_log(self, topic: str, partition: int):
        """The replica manager's ``log_for``: the local log of a partition this node is told to
        host, its topic made or grown here when absent."""
        try:
            return self.log(topic, partition)
        except UnknownTopicOrPartitionError:
            pass
        try:
            meta = self.topic_metadata(topic)
        except UnknownTopicOrPartitionError:
            self.create_topic(topic, partition + 1)
        else:
            if meta.partitions <= partition:
                self.create_partitions(topic, partition + 1)
        return self.log(topic, partition)

    def use_view(self, view) -> None:
        """Serve `view` (a cluster broker's membership, engine/replica/view.py's interface);
        given by the composition that makes the broker, before the replica manager is made."""
        with self._admin:
            if self._replicas is not None and self._replicas.view is not view:
                raise RuntimeError("this node's replica manager already serves another cluster view")
            self._view = view

    # -- coordinators -----------------------------------------------------------------------
    def _new_coordinator(self, kind: str):
        return _KINDS[kind](self, node_id=self.config["node.id"], cluster=self.cluster)

    def hosted(self, kind: str):
        """The `kind` coordinator as it is now (None when none was started); starts nothing."""
        return self._coordinators[kind]

    def coordinator(self, kind: str):
        """The running `kind` coordinator ("group" or "transaction"), started on a thread of
        its own when nobody runs one; writable nodes only."""
        coord = self._coordinators[kind]
        if coord is not None and coord.running:
            return coord
        if coord is not None and coord.on_current_loop:
            return coord            # its own loop, while it is being stopped: callers see it stopped
        self._check_writable()
        if not self._handover.wait(60):
            raise TimeoutError(f"the previous {kind} coordinator did not finish stopping")
        with self._admin:
            self._check_writable()
            coord = self._coordinators[kind]
            if coord is None or not coord.running:
                coord = self._coordinators[kind] = self._new_coordinator(kind).start()
            return coord

    @property
    def group_coordinator(self):
        return self.coordinator("group")

    @property
    def transaction_coordinator(self):
        return self.coordinator("transaction")

    async def host_coordinator(self, kind: str):
        """Start this node's `kind` coordinator on the running loop (a broker's) when it has
        none yet; returns it, or None when one already runs elsewhere."""
        self._check_writable()
        with self._admin:
            coord = self._coordinators[kind]
            if coord is not None and coord.running:
                return None
            coord = self._new_coordinator(kind)
            # claims this loop and starts loading without suspending, so no other thread can
            # see a published-but-not-running coordinator and start a second one
            await coord.start_on_running_loop()
            self._coordinators[kind] = coord
        return coord

    async def release_coordinator(self, kind: str, coord) -> None:
        """The hosting loop is ending: stop its coordinator; the next use starts a threaded one
        that reloads the state from its internal topic (as after a failover).  Until its
        in-flight writes are done, other threads asking for the coordinator wait, so the
        successor's replay sees them."""
        self._handover.clear()
        try:
            await coord.stop_on_loop()
            with self._admin:
                if self._coordinators[kind] is coord:
                    self._coordinators[kind] = None
        finally:
            self._handover.set()

    def stop_coordinators(self) -> None:
        """Stop the coordinators (the node closes: before its logs, a coordinator may be
        finishing a write)."""
        for kind in ("transaction", "group"):
            coord = self._coordinators[kind]
            if coord is not None:
                coord.stop()


def _log_failure(what: str, fut) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("%s failed: %r", what, fut.exception())
