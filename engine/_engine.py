"""The embedded engine: one data directory opened in-process.

::

    import engine
    with engine.open("./data") as eng:
        eng.create_topic("events", partitions=3, config={"retention.ms": 86_400_000})
        with eng.producer(linger_ms=5) as p:
            p.send("events", b"hello", key=b"user-1")
        c = eng.consumer()
        c.assign([("events", 0)])
        records = c.poll(timeout_ms=100)
        table = eng.read_arrow("events", 0)

One process writes a data directory at a time (a lock file; a second writer
gets :class:`~engine.errors.DataDirLockedError` naming the holder).  Opens with
``read_only=True`` may sit beside the writer, in the same or another process:
they change nothing on disk and never see records above the high watermark the
writer publishes.

Concurrency: admin operations (create/delete/alter) are serialised by one
lock; produce and fetch go straight to the partition logs, which are
thread-safe.  Appenders wake waiting consumers through one condition variable.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .config import EngineConfig, LogConfig
from .errors import (
    ClosedError,
    InvalidConfigError,
    InvalidPartitionsError,
    ReadOnlyError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from .metadata import LocalMetadataStore, TopicMetadata, new_topic_id, validate_topic_name, write_partition_metadata
from .node import Node
from .storage.manager import LogManager

__all__ = ["Engine", "PartitionDescription", "TopicDescription", "open"]

_PRODUCER_ID_BLOCK = 1000


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    size_bytes: int
    segments: int


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: list[PartitionDescription]
    config: dict[str, Any]
    overrides: dict[str, Any] = field(default_factory=dict)


class Engine:
    """An open data directory.  Use :func:`engine.open` to make one."""

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
        self._admin = threading.RLock()
        self.node = Node(self)          # the replica manager and the coordinators (engine/node.py)
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

    # -- lifecycle -------------------------------------------------------
    def close(self) -> None:
        """Flush, write checkpoints and the clean-shutdown marker, release the lock."""
        if not self._closed:
            self.node.stop_coordinators()   # before the logs close: one may be finishing a write
        with self._admin:
            if self._closed:
                return
            self._closed = True
            self.logs.close()
        with self._arrived:
            self._arrived.notify_all()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def serve(self, listen: str = "127.0.0.1:0", **broker_kwargs):
        """Serve this (writable) Engine over the Kafka protocol from a background thread.

        Returns a :class:`engine.server.BackgroundBroker` (``.bootstrap`` is ``HOST:PORT``;
        ``stop()`` or a ``with`` block ends it).  Wire clients, and read-only opens of the
        directory in other processes that join consumer groups, then reach this process.
        """
        from .server import BackgroundBroker
        self._check_writable()
        host, _, port = listen.rpartition(":")
        if not port.isdigit():
            raise InvalidConfigError(f"listen must be HOST:PORT, got {listen!r}")
        return BackgroundBroker(self, host.strip("[]") or "127.0.0.1", int(port), **broker_kwargs)

    # -- the node: replica layer and coordinators (engine/node.py) --------------------------
    @property
    def replicas(self):
        """This node's :class:`~engine.replica.ReplicaManager` (``engine.node.replicas``):
        every partition write goes through it."""
        return self.node.replicas

    def use_view(self, view) -> None:
        """Serve a cluster broker's `view` (``engine.node.use_view``), before first use."""
        self.node.use_view(view)

    @property
    def group_coordinator(self):
        """The :class:`~engine.coordinator.GroupCoordinator` of this data directory (consumer
        groups and committed offsets), started on first use; writable engines only."""
        return self.node.coordinator("group")

    @property
    def transaction_coordinator(self):
        """The :class:`~engine.coordinator.TransactionCoordinator` of this data directory
        (transactional ids in ``__transaction_state``), started on first use (the broker
        starts it on its loop); writable engines only.  In-process producers call its
        coroutines with ``coord.call(coord.init_producer_id, "tx", 60000)`` etc."""
        return self.node.coordinator("transaction")

    @property
    def recovery_report(self) -> list:
        """What the open found and repaired after an unclean shutdown (empty after a clean one)."""
        return list(self.logs.recovery_report)

    # -- metadata --------------------------------------------------------
    def _log_config_for(self, topic: str) -> LogConfig:
        if hasattr(self, "_meta"):
            store = self._meta
        else:
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

    def _topic(self, name: str) -> TopicMetadata:
        if self.read_only:
            self._meta.reload()
        meta = self._meta.topics().get(name)
        if meta is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return meta

    def topic_metadata(self, name: str) -> TopicMetadata:
        """Id, partition count and config overrides of a topic (UnknownTopicOrPartitionError if absent)."""
        return self._topic(name)

    @property
    def cluster_id(self) -> str | None:
        """The ``cluster.id`` of ``meta.properties`` (None for a read-only open of a fresh directory)."""
        return self._meta.cluster_id

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before in this data directory (InitProducerId)."""
        self._check_writable()
        with self._admin:
            if self._next_producer_id >= self._producer_id_limit:
                self._next_producer_id = self.node.topics.reserve_producer_ids(_PRODUCER_ID_BLOCK)
                self._producer_id_limit = self._next_producer_id + _PRODUCER_ID_BLOCK
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid

    def topic_config(self, name: str) -> LogConfig:
        return self.config.log_config(self._topic(name).config)

    def partitions_for(self, topic: str) -> int:
        return self._topic(topic).partitions

    # -- admin -----------------------------------------------------------
    def create_topic(self, name: str, partitions: int | None = None,
                     config: Mapping[str, Any] | None = None, replication_factor: int = 1) -> None:
        """Create a topic (Kafka config keys in `config`; unknown keys raise InvalidConfigError)."""
        self._check_writable()
        validate_topic_name(name)
        n = self.config["num.partitions"] if partitions is None else partitions
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InvalidPartitionsError(f"partitions must be a positive integer, got {partitions!r}")
        if replication_factor != 1:
            from .errors import InvalidReplicationFactorError
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
            return self._topic(name)
        except UnknownTopicOrPartitionError:
            return self.node.topics.missing_topic(name)

    def delete_topic(self, name: str) -> None:
        self._check_writable()
        with self._admin:
            meta = self._topic(name)
            for p in range(meta.partitions):
                try:
                    self.logs.delete_log(name, p)
                except UnknownTopicOrPartitionError:
                    pass
            self._meta.remove_topic(name)

    def create_partitions(self, name: str, total: int) -> None:
        """Grow a topic to `total` partitions (Kafka never shrinks)."""
        self._check_writable()
        with self._admin:
            meta = self._topic(name)
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
        self.node.topics.alter_topic_config(name, set, delete)

    def alter_local_topic_config(self, name: str, set: Mapping[str, Any] | None = None,
                                 delete: Iterable[str] = ()) -> None:
        """Apply config overrides to this data directory's copy of a topic: its metadata and
        its logs here (the node's topics decide where else they are recorded)."""
        self._check_writable()
        with self._admin:
            meta = self._topic(name)
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

    def list_topics(self) -> list[str]:
        self._check_open()
        if self.read_only:
            self._meta.reload()
        return sorted(self._meta.topics())

    def describe_topic(self, name: str) -> TopicDescription:
        self._check_open()
        meta = self._topic(name)
        cfg = self.config.log_config(meta.config)
        parts = []
        held = self.logs.logs()
        for p in range(meta.partitions):
            log = held.get((name, p))
            if log is None:         # cluster mode: a partition this broker does not replicate
                continue
            parts.append(PartitionDescription(
                p, log.log_start_offset, log.high_watermark, log.log_end_offset,
                log.size, len(log.segments)))
        return TopicDescription(name, meta.topic_id, parts, dict(cfg), dict(meta.config))

    def log(self, topic: str, partition: int):
        """The PartitionLog of one partition (UnknownTopicOrPartitionError if absent)."""
        self._check_open()
        return self.logs.get_log(topic, partition)

    # -- data ------------------------------------------------------------
    def producer(self, **settings: Any):
        """A producer writing straight into this engine (see engine.client.producer.Producer)."""
        from .client.producer import Producer
        self._check_writable()
        return Producer(self, **settings)

    def consumer(self, **settings: Any):
        """A consumer reading from this engine (see engine.client.consumer.Consumer)."""
        from .client.consumer import Consumer
        self._check_open()
        return Consumer(self, **settings)

    def read_arrow(self, topic: str, partition: int, start: int | None = None,
                   end: int | None = None, *, max_rows: int | None = None,
                   isolation_level: str = "read_uncommitted"):
        """Records [start, end) of one partition as a pyarrow.Table with Spark's Kafka schema.

        `start` defaults to the log start offset and `end` to the high
        watermark; records above the high watermark are never returned.
        Transaction markers never appear; ``isolation_level="read_committed"``
        (Kafka's consumer setting) stops at the last stable offset and leaves
        out aborted transactions.
        """
        from .arrow import read_log_arrow
        log = self.log(topic, partition)
        return read_log_arrow(log, topic, partition, start, end, max_rows=max_rows,
                              isolation_level=isolation_level)

    # -- notifications between appenders and waiting consumers -----------
    def notify_appended(self) -> None:
        """Wake consumers waiting in this process and call the append listeners (the broker's)."""
        with self._arrived:
            self._arrived.notify_all()
        for listener in tuple(self._append_listeners):
            listener()

    def add_append_listener(self, callback) -> None:
        """Call `callback()` (from the appending thread) after every append made through this Engine."""
        self._append_listeners.append(callback)

    def remove_append_listener(self, callback) -> None:
        try:
            self._append_listeners.remove(callback)
        except ValueError:
            pass

    def wait_for_data(self, timeout_s: float) -> None:
        if timeout_s <= 0:
            return
        if self.read_only:
            time.sleep(min(timeout_s, 0.005))
            return
        with self._arrived:
            self._arrived.wait(timeout_s)


def open(path: str | os.PathLike[str], config: Mapping[str, Any] | None = None, *,
         read_only: bool = False, background: bool = True, replicated: bool | None = None) -> Engine:
    """Open (creating if needed) a data directory in-process.

    `config` takes Kafka's broker keys (``num.partitions``, ``log.segment.bytes``,
    ``log.retention.ms``, ``log.flush.interval.messages``, ...).  Use as a
    context manager so the directory is closed cleanly.

    `replicated` (default: whether ``zookeeper.connect`` is set) opens the directory for a
    broker of a cluster: each partition's high watermark starts at its
    ``replication-offset-checkpoint`` entry (Kafka's rule) instead of its log end offset, and
    only the replica layer (engine/replica) moves it.
    """
    return Engine(path, config, read_only=read_only, background=background, replicated=replicated)
