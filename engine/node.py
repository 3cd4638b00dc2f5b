"""Node: the composition root of one node's data path, under the Engine facade.

Kafka's ``BrokerServer`` builds the ``LogManager``, the ``ReplicaManager`` and the coordinators
and hands them to the request handlers; here a :class:`Node` does the same over an Engine's
storage (its ``LogManager`` and topic metadata)::

    node = engine.node
    node.replicas                  # the ReplicaManager: every partition write and leader read
    node.group_coordinator         # GroupCoordinator (__consumer_offsets), started on first use
    node.transaction_coordinator   # TransactionCoordinator (__transaction_state), likewise
    await node.host_coordinator("group")   # a broker runs it on its own loop instead
    node.topics                    # where topic decisions are recorded: this directory, or ZooKeeper

One of each per writable engine.  The replica manager serves the cluster view given by the
composition before first use (:meth:`use_view`: a cluster broker's membership); by default the
single-node view, in which this node leads every partition of the data directory.  A
coordinator runs either on a broker's loop (:meth:`host_coordinator`, released by
:meth:`release_coordinator` when the broker stops) or, when nobody hosts one, on a thread of its
own started on first use; the handover between the two waits for in-flight writes.

Topic decisions that a cluster records elsewhere -- producer-id blocks, topic config changes,
what Metadata does for an unknown topic -- go through ``node.topics``: :class:`LocalTopics`
(this data directory) by default, or the ZooKeeper-backed one the cluster composition gives
(engine/cluster/local.py ``ZkTopics``, via :meth:`Node.use_topics`).  One interface, so the
Engine's methods are never replaced.

Threads: every method may be called from any thread; state changes hold the engine's admin lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .coordinator import GroupCoordinator, TransactionCoordinator
from .errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from .metadata import validate_topic_name
from .replica import ReplicaManager

__all__ = ["LocalTopics", "Node", "Topics"]

_KINDS = {"group": GroupCoordinator, "transaction": TransactionCoordinator}


class Topics(Protocol):
    """Where a node's topic decisions are recorded (see the module docstring)."""

    def reserve_producer_ids(self, count: int) -> int:
        """Reserve `count` producer ids never handed out before; returns the first."""

    def alter_topic_config(self, name: str, set: Mapping[str, Any] | None, delete: Iterable[str]) -> None:
        """Change a topic's config overrides everywhere they are kept, then here."""

    def missing_topic(self, name: str):
        """Metadata for `name`, which this node does not know: create it (TopicMetadata) or
        raise (UNKNOWN_TOPIC_OR_PARTITION when auto-creation is off, LEADER_NOT_AVAILABLE
        while a cluster makes it)."""

    def create_topic(self, name: str, partitions: int | None, replication_factor: int, config: dict,
                     assignments: dict[int, list[int]] | None, validate_only: bool,
                     timeout_s: float) -> tuple[str | None, int, int]:
        """CreateTopics (blocking): (topic id or None when only validated, partitions,
        replication factor); raises the Kafka error of a refusal."""

    def delete_topic(self, name: str, timeout_s: float) -> None:
        """DeleteTopics (blocking)."""

    def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                          validate_only: bool, timeout_s: float) -> None:
        """CreatePartitions (blocking): `count` partitions in all."""


class LocalTopics:
    """:class:`Topics` of a node alone: decisions live in its data directory."""

    def __init__(self, engine):
        self.engine = engine

    def reserve_producer_ids(self, count: int) -> int:
        return self.engine._meta.reserve_producer_ids(count)

    def alter_topic_config(self, name, set, delete) -> None:
        self.engine.alter_local_topic_config(name, set, delete)

    def missing_topic(self, name: str):
        eng = self.engine
        if eng.read_only or not eng.config["auto.create.topics.enable"]:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        with eng._admin:
            if name not in eng._meta.topics():
                eng.create_topic(name)
            return eng.topic_metadata(name)

    def create_topic(self, name, partitions, replication_factor, config, assignments, validate_only,
                     timeout_s):
        eng = self.engine
        if validate_only:
            validate_topic_name(name)
            if partitions is not None and partitions < 1:
                raise InvalidPartitionsError(f"partitions must be positive, got {partitions}")
            if replication_factor != 1:
                raise InvalidReplicationFactorError(
                    f"replication factor {replication_factor} is larger than the 1 available broker")
            eng.config.log_config(config)
            if name in eng.list_topics():
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            topic_id = None
        else:
            eng.create_topic(name, partitions, config, replication_factor=replication_factor)
            topic_id = eng.topic_metadata(name).topic_id
        return topic_id, eng.config["num.partitions"] if partitions is None else partitions, replication_factor

    def delete_topic(self, name, timeout_s) -> None:
        self.engine.delete_topic(name)

    def create_partitions(self, name, count, assignments, validate_only, timeout_s) -> None:
        eng = self.engine
        current = eng.topic_metadata(name).partitions
        if assignments is not None and len(assignments) != count - current:
            raise InvalidRequestError(f"{len(assignments)} assignments for {count - current} new partitions")
        if count <= current:
            raise InvalidPartitionsError(
                f"topic {name!r} has {current} partitions; the new count must be larger")
        if not validate_only:
            eng.create_partitions(name, count)


class Node:
    """See the module docstring.  `engine` is the storage and admin facade it serves."""

    def __init__(self, engine):
        self.engine = engine
        self._lock = engine._admin            # one lock for the engine's admin and its node
        self._replicas: ReplicaManager | None = None
        self._view = None
        self._coordinators: dict[str, object | None] = {"group": None, "transaction": None}
        self._handover = threading.Event()    # set unless a hosted coordinator is stopping
        self._handover.set()
        self.topics: Topics = LocalTopics(engine)
        self.cluster = None                   # cluster mode: the coordinators' ClusterLink

    def use_cluster(self, link) -> None:
        """Cluster mode for the coordinators (engine/coordinator/cluster_link.py): each one this
        node starts from now on is constructed with `link`, so it never loads or writes its
        internal topic from the local replicas before the cluster makes this broker leader."""
        self.cluster = link

    def use_topics(self, topics: Topics) -> None:
        """Record topic decisions through `topics` (a cluster broker's ZooKeeper-backed ones),
        given by the composition that joins the cluster."""
        self.topics = topics

    # -- the replica layer --------------------------------------------------------------------
    @property
    def replicas(self) -> ReplicaManager:
        """This node's ReplicaManager, through which every partition write goes -- the broker's
        handlers, the coordinators, the in-process producers -- so leadership, leader epochs
        and the ISR are checked in one place.  Made on first use for the view given to
        :meth:`use_view` (default: the single-node view)."""
        rm = self._replicas
        if rm is None:
            with self._lock:
                if self._replicas is None:
                    self._replicas = ReplicaManager(self.engine, self._view)
                rm = self._replicas
        return rm

    def use_view(self, view) -> None:
        """Serve `view` (a cluster broker's membership, engine/replica/view.py's interface);
        given by the composition that makes the broker, before the replica manager is made."""
        with self._lock:
            if self._replicas is not None and self._replicas.view is not view:
                raise RuntimeError("this node's replica manager already serves another cluster view")
            self._view = view

    # -- coordinators -----------------------------------------------------------------------
    def _new_coordinator(self, kind: str):
        return _KINDS[kind](self.engine, node_id=self.engine.config["node.id"], cluster=self.cluster)

    def hosted(self, kind: str):
        """The `kind` coordinator as it is now (None when none was started); starts nothing."""
        return self._coordinators[kind]

    def coordinator(self, kind: str):
        """The running `kind` coordinator ("group" or "transaction"), started on a thread of
        its own when nobody runs one; writable engines only."""
        coord = self._coordinators[kind]
        if coord is not None and coord.running:
            return coord
        if coord is not None and coord.on_current_loop:
            return coord            # its own loop, while it is being stopped: callers see it stopped
        self.engine._check_writable()
        if not self._handover.wait(60):
            raise TimeoutError(f"the previous {kind} coordinator did not finish stopping")
        with self._lock:
            self.engine._check_writable()
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
        self.engine._check_writable()
        with self._lock:
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
            with self._lock:
                if self._coordinators[kind] is coord:
                    self._coordinators[kind] = None
        finally:
            self._handover.set()

    def stop_coordinators(self) -> None:
        """Stop the coordinators (the engine closes: before its logs, a coordinator may be
        finishing a write)."""
        for kind in ("transaction", "group"):
            coord = self._coordinators[kind]
            if coord is not None:
                coord.stop()
