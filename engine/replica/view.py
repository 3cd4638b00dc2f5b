"""The cluster view: what a broker knows of the cluster (brokers, partition leaders, ISR).

The request handlers and the :class:`~engine.replica.manager.ReplicaManager` ask a view, never
the storage, who leads a partition.  Implementations:

- :class:`LocalClusterView` -- one node (the default: ``python -m engine serve`` without a
  cluster): this node leads every partition of the local metadata, replicas = ISR = [node],
  the leader epoch is the partition log's latest epoch (0 for a new log).
- :class:`StaticClusterView` -- a view held in memory and changed by its owner (tests, or a
  cluster layer that pushes its metadata in): ``set_brokers`` / ``set_partition``.
- The ZooKeeper view of ``engine/cluster`` implements the same interface.

Interface (duck-typed; :class:`ClusterView` documents it):

- ``node_id: int`` -- this broker's id.
- ``self_led(topic, partition) -> (leader_epoch, replicas, isr) | None`` -- a partition this
  node leads without being told, made leader on first use by the replica manager's
  ``become_leader`` (the single-node view: every partition of the data directory; a node alone
  is a cluster of one); None where leadership comes from ``become_leader`` calls (a cluster).
- ``brokers() -> {id: (host, port, rack)}`` -- live brokers at the address brokers reach each
  other on (the inter-broker listener's).  ``host``/``port`` of this node may be None: the
  handlers then answer the address the client connected to (the advertised one).
- ``listener_brokers(listener) -> {id: (host, port, rack)}`` -- the live brokers that advertise
  listener ``listener``, at that listener's address: what a client whose request came in on it
  is told (Kafka answers per listener name).  By default ``brokers()`` (one address per broker).
- ``partition_state(topic, partition) -> (leader, leader_epoch, replicas, isr)`` -- raises
  ``UnknownTopicOrPartitionError`` when the partition does not exist.
- ``partition_count(topic) -> int | None`` -- None when the view does not know the topic.
- ``controller_id() -> int`` (-1 when none).
- ``alter_isr(topic, partition, new_isr, leader_epoch, partition_epoch, broker_epochs=None) ->
  bool`` -- the leader asks to change the ISR; a conditional write: accepted only when
  ``leader_epoch`` and ``partition_epoch`` are still current; on acceptance the partition epoch
  becomes ``partition_epoch + 1`` (as a ZooKeeper znode version does).  ``broker_epochs``: for a
  follower added, the broker epoch its fetches carried (KIP-903; -1: not sent); the ZooKeeper
  view refuses one that is not its current registration's.  May block (it runs in a worker
  thread, never on the broker's event loop).
- ``broker_epoch() -> int`` -- this broker's epoch (the ZooKeeper registration's czxid), which
  its fetchers send in Fetch v15's ReplicaState; -1 where there is none.
- ``topic_id(topic) -> str | None`` -- the topic's cluster-wide id (fetchers name topics by it
  from Fetch v13); None where the view has none (fetchers then fetch by name at v12).
"""

from __future__ import annotations

import threading

from ..errors import UnknownTopicOrPartitionError

__all__ = ["ClusterView", "LocalClusterView", "StaticClusterView"]


class ClusterView:
    """The interface (see the module docstring); subclasses override every method."""

    node_id: int = 0
    local: bool = False     # the single-node view (still read by two server handlers)

    def brokers(self) -> dict[int, tuple[str | None, int | None, str | None]]:
        raise NotImplementedError

    def listener_brokers(self, listener: str) -> dict[int, tuple[str | None, int | None, str | None]]:
        return self.brokers()

    def partition_state(self, topic: str, partition: int) -> tuple[int, int, list[int], list[int]]:
        raise NotImplementedError

    def controller_id(self) -> int:
        raise NotImplementedError

    def partition_count(self, topic: str) -> int | None:
        raise NotImplementedError

    def self_led(self, topic: str, partition: int) -> tuple[int, list[int], list[int]] | None:
        return None

    def isr_eligible(self, broker_id: int) -> bool:
        """May the leader add this follower to the ISR?  As KIP-841: only a broker the view
        lists as alive (the ZooKeeper view leaves out the unregistered and those seen gone,
        engine/cluster/liveness.py); its last fetch may have been caught up all the same."""
        return broker_id in self.brokers()

    def alter_isr(self, topic: str, partition: int, new_isr: list[int], leader_epoch: int,
                  partition_epoch: int, broker_epochs: dict[int, int] | None = None) -> bool:
        raise NotImplementedError

    def broker_epoch(self) -> int:
        return -1

    def topic_id(self, topic: str) -> str | None:
        return None


class LocalClusterView(ClusterView):
    """One node that leads every partition of its data directory: a cluster of one.  Given by
    the node (engine/node.py): ``log(topic, partition)`` (UnknownTopicOrPartitionError if
    absent) and ``topic_metadata(topic)`` (its ``partitions``; UnknownTopicOrPartitionError)."""

    local = True

    def __init__(self, node_id: int, log, topic_metadata):
        self._log = log
        self._topic_metadata = topic_metadata
        self.node_id = node_id

    def brokers(self):
        return {self.node_id: (None, None, None)}     # the address the client used

    def partition_state(self, topic, partition):
        log = self._log(topic, partition)           # UnknownTopicOrPartitionError if absent
        epoch = max(log.leader_epoch_cache.latest_epoch, 0)
        return self.node_id, epoch, [self.node_id], [self.node_id]

    def controller_id(self):
        return self.node_id

    def partition_count(self, topic):
        try:
            return self._topic_metadata(topic).partitions
        except UnknownTopicOrPartitionError:
            return None

    def self_led(self, topic, partition):
        _leader, epoch, replicas, isr = self.partition_state(topic, partition)
        return epoch, replicas, isr

    def alter_isr(self, topic, partition, new_isr, leader_epoch, partition_epoch, broker_epochs=None):
        return True


class StaticClusterView(ClusterView):
    """A view held in memory: its owner sets brokers and partition states.

    ``alter_isr`` applies the change when the epochs match the stored ones (and bumps the stored
    partition epoch), as the ZooKeeper view's conditional write does; ``isr_changes`` records
    every accepted change (topic, partition, new_isr).  Thread-safe.
    """

    def __init__(self, node_id: int, brokers: dict | None = None, controller: int = -1):
        self.node_id = node_id
        self._brokers = dict(brokers or {})
        self._controller = [controller]
        self._parts: dict[tuple[str, int], list] = {}   # (topic, p) -> [leader, epoch, replicas, isr, pepoch]
        self._lock = threading.Lock()
        self.isr_changes: list[tuple[str, int, list[int]]] = []
        self.refuse_isr_changes = [False]     # tests: [True] refuses every ISR change

    def for_node(self, node_id: int) -> StaticClusterView:
        """The same cluster (shared state) seen by broker `node_id`."""
        other = object.__new__(StaticClusterView)
        other.__dict__.update(self.__dict__)
        other.node_id = node_id
        return other

    def set_brokers(self, brokers: dict) -> None:
        with self._lock:
            self._brokers.clear()
            self._brokers.update(brokers)

    def set_partition(self, topic: str, partition: int, leader: int, leader_epoch: int,
                      replicas: list[int], isr: list[int], partition_epoch: int = 0) -> None:
        with self._lock:
            self._parts[(topic, partition)] = [leader, leader_epoch, list(replicas), list(isr),
                                               partition_epoch]

    def partition_epoch(self, topic: str, partition: int) -> int:
        with self._lock:
            return self._parts[(topic, partition)][4]

    def brokers(self):
        with self._lock:
            return dict(self._brokers)

    def partition_state(self, topic, partition):
        with self._lock:
            st = self._parts.get((topic, partition))
            if st is None:
                raise UnknownTopicOrPartitionError(f"unknown partition {topic}-{partition}")
            return st[0], st[1], list(st[2]), list(st[3])

    def controller_id(self):
        return self._controller[0]

    def partition_count(self, topic):
        with self._lock:
            n = sum(1 for t, _p in self._parts if t == topic)
        return n or None

    def alter_isr(self, topic, partition, new_isr, leader_epoch, partition_epoch, broker_epochs=None):
        with self._lock:
            st = self._parts.get((topic, partition))
            if st is None or self.refuse_isr_changes[0] or st[1] != leader_epoch or st[4] != partition_epoch:
                return False
            st[3] = list(new_isr)
            st[4] = partition_epoch + 1
            self.isr_changes.append((topic, partition, list(new_isr)))
            return True
