"""The replica layer: local replicas (leader or follower), replication, and the cluster view.

- :mod:`.view` -- the cluster view interface (brokers, partition leaders/ISR, controller,
  ``alter_isr``) and its single-node (:class:`LocalClusterView`) and in-memory
  (:class:`StaticClusterView`) implementations.
- :mod:`.partition` -- :class:`Partition`: one local replica, its role, followers, HW, purgatory.
- :mod:`.manager` -- :class:`ReplicaManager`: what the request handlers call.
- :mod:`.local_read` -- the manager's in-process reads (the embedded consumer, read_arrow, the
  console): a consumer's bounds, the local replica's own FileSlices.
- :mod:`.fetcher` -- :class:`ReplicaFetcher`: a follower's replication thread per leader broker.
"""

from .manager import ReplicaManager
from .partition import Partition
from .view import ClusterView, LocalClusterView, StaticClusterView

__all__ = ["ClusterView", "LocalClusterView", "Partition", "ReplicaManager", "StaticClusterView"]
