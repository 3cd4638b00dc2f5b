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

The Engine is the facade over one :class:`~engine.node.Node` (``eng.node``,
engine/node.py), which builds the storage (the ``LogManager``, the topic
metadata), the replica manager and the coordinators; a broker serves that node
(``eng.serve()``).

Concurrency: admin operations (create/delete/alter) are serialised by the
node's lock; produce and in-process reads go through the node's replica manager
to the partition logs, which are thread-safe.  Appenders wake waiting consumers
through one condition variable.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .config import LogConfig
from .errors import InvalidConfigError, UnknownTopicOrPartitionError
from .metadata import TopicMetadata
from .node import Node

__all__ = ["Engine", "PartitionDescription", "TopicDescription", "open"]


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
    """An open data directory.  Use :func:`engine.open` to make one.

    A thin owner of one :class:`~engine.node.Node` (``engine.node``), which builds the storage
    and the data path; every method here is the embedded API over it."""

    def __init__(self, path: str | os.PathLike[str], config: Mapping[str, Any] | None = None, *,
                 read_only: bool = False, background: bool = True, replicated: bool | None = None):
        self.node = node = Node(path, config, read_only=read_only, background=background,
                                replicated=replicated)
        self.path = node.path
        self.read_only = node.read_only
        self.config = node.config
        self.replicated = node.replicated
        self.logs = node.logs           # the LogManager (engine/storage/manager.py)

    # -- lifecycle -------------------------------------------------------
    def close(self) -> None:
        """Flush, write checkpoints and the clean-shutdown marker, release the lock."""
        self.node.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self.node.closed

    def _check_open(self) -> None:
        self.node._check_open()

    def _check_writable(self) -> None:
        self.node._check_writable()

    def advertise_listener(self, address: str | None) -> None:
        """Record ``HOST:PORT`` of the broker serving this directory (None clears it);
        other processes find it with :func:`engine.broker_address`."""
        self.node.advertise_listener(address)

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
        return BackgroundBroker(self.node, host.strip("[]") or "127.0.0.1", int(port), **broker_kwargs)

    # -- the node: replica layer and coordinators (engine/node.py) --------------------------
    @property
    def replicas(self):
        """This node's :class:`~engine.replica.ReplicaManager` (``engine.node.replicas``):
        every partition write and every in-process read (``replicas.local.read_from_local_log``
        & co.) goes through it."""
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
        return self.node.recovery_report

    # -- metadata --------------------------------------------------------
    def topic_metadata(self, name: str) -> TopicMetadata:
        """Id, partition count and config overrides of a topic (UnknownTopicOrPartitionError if absent)."""
        return self.node.topic_metadata(name)

    @property
    def cluster_id(self) -> str | None:
        """The ``cluster.id`` of ``meta.properties`` (None for a read-only open of a fresh directory)."""
        return self.node.cluster_id

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before in this data directory (InitProducerId)."""
        return self.node.allocate_producer_id()

    def topic_config(self, name: str) -> LogConfig:
        return self.node.topic_config(name)

    def partitions_for(self, topic: str) -> int:
        return self.node.partitions_for(topic)

    # -- admin -----------------------------------------------------------
    def create_topic(self, name: str, partitions: int | None = None,
                     config: Mapping[str, Any] | None = None, replication_factor: int = 1) -> None:
        """Create a topic (Kafka config keys in `config`; unknown keys raise InvalidConfigError)."""
        self.node.create_topic(name, partitions, config, replication_factor)

    def ensure_topic(self, name: str) -> TopicMetadata:
        """The topic's metadata, creating it when `auto.create.topics.enable` allows (through
        the node's topics: in a cluster, ZooKeeper)."""
        return self.node.ensure_topic(name)

    def delete_topic(self, name: str) -> None:
        self.node.delete_topic(name)

    def create_partitions(self, name: str, total: int) -> None:
        """Grow a topic to `total` partitions (Kafka never shrinks)."""
        self.node.create_partitions(name, total)

    def alter_topic_config(self, name: str, set: Mapping[str, Any] | None = None,
                           delete: Iterable[str] = ()) -> None:
        """Set and/or remove config overrides of a topic (IncrementalAlterConfigs), where the
        node records them (in a cluster: ZooKeeper first, from where every broker applies them)."""
        self.node.alter_topic_config(name, set, delete)

    def alter_local_topic_config(self, name: str, set: Mapping[str, Any] | None = None,
                                 delete: Iterable[str] = ()) -> None:
        """Apply config overrides to this data directory's copy of a topic: its metadata and
        its logs here (the node's topics decide where else they are recorded)."""
        self.node.alter_local_topic_config(name, set, delete)

    def list_topics(self) -> list[str]:
        return self.node.list_topics()

    def describe_topic(self, name: str) -> TopicDescription:
        self._check_open()
        meta = self.node.topic_metadata(name)
        cfg = self.config.log_config(meta.config)
        parts = []
        for p in range(meta.partitions):
            try:
                info = self.node.replicas.local.describe_local_log(name, p)
            except UnknownTopicOrPartitionError:   # cluster mode: a partition not replicated here
                continue
            o = info.offsets
            parts.append(PartitionDescription(p, o.log_start_offset, o.high_watermark, o.log_end_offset,
                                              info.size, info.segments))
        return TopicDescription(name, meta.topic_id, parts, dict(cfg), dict(meta.config))

    def log(self, topic: str, partition: int):
        """The PartitionLog of one partition (UnknownTopicOrPartitionError if absent)."""
        return self.node.log(topic, partition)

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
        from .arrow import is_read_committed, slices_to_table
        self._check_open()
        committed = is_read_committed(isolation_level)
        got = self.node.replicas.local.read_local_batches(topic, partition, start, end,
                                                          isolation_level=1 if committed else 0)
        return slices_to_table(got.slices, topic, partition, got.start, got.end,
                               aborted_transactions=got.aborted_transactions, max_rows=max_rows)

    # -- notifications between appenders and waiting consumers -----------
    def notify_appended(self) -> None:
        """Wake consumers waiting in this process and call the append listeners (the broker's)."""
        self.node.notify_appended()

    def add_append_listener(self, callback) -> None:
        """Call `callback()` (from the appending thread) after every append made through this Engine."""
        self.node.add_append_listener(callback)

    def remove_append_listener(self, callback) -> None:
        self.node.remove_append_listener(callback)

    def wait_for_data(self, timeout_s: float) -> None:
        self.node.wait_for_data(timeout_s)


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
