"""The cluster view of a ZooKeeper cluster member (engine/replica/view.py's interface), read from
the caches that engine/cluster/member.py's :class:`ClusterMember` keeps up to date from ZooKeeper's
watches; also the leader's ISR change (a conditional write of the partition state).

``brokers()`` gives each live broker at its inter-broker listener's address (what fetchers, the
coordinators' link and the liveness watcher connect to); ``listener_brokers(name)`` the live
brokers that advertise listener ``name``, at that listener's address (what a client whose request
came in on that listener is answered, as Kafka's ``MetadataCache`` answers per listener name).
"""

from __future__ import annotations

import logging

from kazoo.exceptions import KazooException

from ..errors import UnknownTopicOrPartitionError
from ..replica.view import ClusterView
from .zk import BROKER_IDS, CONTROLLED_SHUTDOWN, PartitionState, TopicAssignment

__all__ = ["ZkClusterView"]

log = logging.getLogger("engine.cluster")


class ZkClusterView(ClusterView):
    """The cluster view (engine/replica/view.py's interface) fed by ZooKeeper watches.

    Besides the interface: ``topics() -> {name: (topic_id, partition count)}``, ``cluster_id``,
    ``assignment(topic)`` and ``state(topic, p)`` (the cached :class:`PartitionState`)."""

    local = False

    def __init__(self, member):   # engine/cluster/member.py ClusterMember
        self._m = member
        self.node_id = member.broker_id

    @property
    def cluster_id(self) -> str | None:
        return self._m.cluster_id

    def brokers(self) -> dict[int, tuple[str | None, int | None, str | None]]:
        """The live brokers at their inter-broker listener's address ((None, None, rack) for
        one that does not advertise that listener: alive, but not reachable from here)."""
        suspected = self._m.liveness.gone()         # (a peer whose process seems gone: not alive)
        return {b: v for b, v in self._m._registered().items() if b not in suspected}

    def listener_brokers(self, listener: str) -> dict[int, tuple[str | None, int | None, str | None]]:
        """The live brokers that advertise `listener`, at that listener's address (Kafka's
        ``getAliveBrokerNodes(listenerName)``)."""
        suspected = self._m.liveness.gone()
        with self._m._lock:
            regs = dict(self._m._brokers)
        out: dict[int, tuple[str | None, int | None, str | None]] = {}
        for b, reg in regs.items():
            ep = reg.endpoint(listener)
            if ep is not None and b not in suspected:
                out[b] = (ep[0], ep[1], reg.rack)
        return out

    def controller_id(self) -> int:
        return self._m._controller_id

    @property
    def fenced(self) -> bool:
        """Cut off from ZooKeeper (session suspended or lost): this broker's view is stale."""
        return self._m.fenced

    def topics(self) -> dict[str, tuple[str, int]]:
        with self._m._lock:
            return {t: (a.topic_id, len(a.partitions)) for t, a in self._m._assignments.items()}

    def assignment(self, topic: str) -> TopicAssignment | None:
        with self._m._lock:
            return self._m._assignments.get(topic)

    def partition_count(self, topic: str) -> int | None:
        a = self.assignment(topic)
        return len(a.partitions) if a is not None else None

    def state(self, topic: str, partition: int) -> PartitionState | None:
        with self._m._lock:
            return self._m._states.get((topic, partition))

    def partition_state(self, topic: str, partition: int) -> tuple[int, int, list[int], list[int]]:
        m = self._m
        with m._lock:
            a = m._assignments.get(topic)
            if a is None or partition not in a.partitions:
                raise UnknownTopicOrPartitionError(f"unknown partition {topic}-{partition}")
            replicas = list(a.partitions[partition])
            st = m._states.get((topic, partition))
            if st is None:
                return -1, 0, replicas, []
            leader = st.leader
            if leader == self.node_id and m.fenced:
                leader = -1
            return leader, st.leader_epoch, replicas, list(st.isr)

    def partition_epoch(self, topic: str, partition: int) -> int:
        st = self.state(topic, partition)
        return -1 if st is None else st.version

    def broker_epoch(self) -> int:
        """Our registration's czxid (Kafka's broker epoch), -1 before we registered."""
        return self._m.registration_zxid or -1

    def topic_id(self, topic: str) -> str | None:
        a = self.assignment(topic)
        return a.topic_id if a is not None else None

    def alter_isr(self, topic: str, partition: int, new_isr: list[int], leader_epoch: int,
                  partition_epoch: int, broker_epochs: dict[int, int] | None = None) -> bool:
        """The leader's ISR change: a write conditional on the znode version (the partition
        epoch); refused when the leader epoch moved on or this broker is fenced, and when a
        follower added is not registered, is in a controlled shutdown, or fetched with a broker
        epoch (`broker_epochs`, -1: not sent) that is not its current registration's czxid."""
        m = self._m
        if m.fenced or m._stopping:
            return False
        try:
            return self._alter_isr(topic, partition, new_isr, leader_epoch, partition_epoch,
                                   broker_epochs or {})
        except KazooException as e:          # connection lost or closed: the change did not happen
            log.warning("broker %d: ISR change of %s-%d not written (ZooKeeper: %s)", self.node_id,
                        topic, partition, type(e).__name__)
            return False

    def _alter_isr(self, topic, partition, new_isr, leader_epoch, partition_epoch, broker_epochs) -> bool:
        m = self._m
        st = m.store.partition_state(topic, partition)
        if st is None or st.leader != self.node_id or st.leader_epoch != leader_epoch \
                or st.version != partition_epoch:
            return False
        for b in set(new_isr) - set(st.isr):
            # as KIP-841: the ISR grows only with brokers that are registered and not in a
            # controlled shutdown (a stopping follower's last fetch must not bring it back)
            reg = m.store.exists(f"{BROKER_IDS}/{b}")
            if reg is None or m.store.exists(f"{CONTROLLED_SHUTDOWN}/{b}") is not None:
                log.info("broker %d: ISR of %s-%d may not take broker %d (offline or shutting down)",
                         self.node_id, topic, partition, b)
                return False
            # KIP-903: the fetches that caught it up must be this registration's, not those of
            # an earlier incarnation (restarted since, maybe without its unsynced tail):
            # Kafka's INELIGIBLE_REPLICA for a stale broker epoch
            epoch = broker_epochs.get(b, -1)
            if epoch != -1 and epoch != reg.czxid:
                log.info("broker %d: ISR of %s-%d may not take broker %d: its fetches carried broker "
                         "epoch %d, its registration's is %d (stale broker epoch)", self.node_id, topic,
                         partition, b, epoch, reg.czxid)
                return False
        new = PartitionState(st.leader, st.leader_epoch, list(new_isr), st.controller_epoch, st.version)
        version = m.store.update_partition_state(topic, partition, new)
        if version is None:
            return False
        # cached below until the watch brings the znode: its mzxid at least the state's it
        # replaced (0 would read as a leadership older than our registration -- member.py's
        # broker-epoch check -- and make this broker give up the partition it leads)
        new.version, new.mzxid = version, st.mzxid
        log.info("broker %d: ISR of %s-%d is now %s (partition epoch %d)", self.node_id, topic,
                 partition, new.isr, version)
        with m._lock:
            cur = m._states.get((topic, partition))
            if cur is None or cur.version < version:
                m._states[(topic, partition)] = new
        return True
