"""CoordinatorHost: what a coordinator asks of the node that hosts it.

The coordinator layer sits below the node (engine/node.py, the composition root) and imports
nothing of it: it states here, as a Protocol, the few members it uses, and the node (or anything
else given as the coordinators' ``node``) provides them.  ``ClusterLink.alone`` uses
``create_topic`` and ``replicas``; the runtime ``topic_metadata`` and ``notify_appended``; the
transaction coordinator ``allocate_producer_id`` and ``group_coordinator``; both read ``config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["CoordinatorHost"]


class CoordinatorHost(Protocol):
    config: Any                     # the broker's EngineConfig: Kafka's keys

    @property
    def replicas(self) -> Any: ...  # the ReplicaManager (engine/replica)

    @property
    def group_coordinator(self) -> Any: ...     # the running GroupCoordinator

    def topic_metadata(self, name: str) -> Any: ...    # TopicMetadata; UnknownTopicOrPartitionError

    def create_topic(self, name: str, partitions: int | None = None,
                     config: Mapping[str, Any] | None = None, replication_factor: int = 1) -> None: ...

    def notify_appended(self) -> None: ...

    def allocate_producer_id(self) -> int: ...
