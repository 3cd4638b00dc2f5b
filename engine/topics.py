"""Topics: where a node's topic decisions are recorded; :class:`LocalTopics`, those of a node alone.

Producer-id blocks, topic config changes, what Metadata does for an unknown topic, CreateTopics /
DeleteTopics / CreatePartitions: a node (engine/node.py) takes them to ``node.topics``, which is
:class:`LocalTopics` (its data directory) unless the composition that joins a cluster gives it
ZooKeeper's (engine/cluster/local.py ``ZkTopics``, via ``Node.use_topics``).  One interface, so
the node's methods are never replaced.

Part of the node layer: it works on the :class:`~engine.node.Node` it is given and imports
nothing of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from .metadata import validate_topic_name

__all__ = ["LocalTopics", "Topics"]


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

    def __init__(self, node):
        self.node = node

    def reserve_producer_ids(self, count: int) -> int:
        return self.node._meta.reserve_producer_ids(count)

    def alter_topic_config(self, name, set, delete) -> None:
        self.node.alter_local_topic_config(name, set, delete)

    def missing_topic(self, name: str):
        node = self.node
        if node.read_only or not node.config["auto.create.topics.enable"]:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        with node._admin:
            if name not in node._meta.topics():
                node.create_topic(name)
            return node.topic_metadata(name)

    def create_topic(self, name, partitions, replication_factor, config, assignments, validate_only,
                     timeout_s):
        node = self.node
        if validate_only:
            validate_topic_name(name)
            if partitions is not None and partitions < 1:
                raise InvalidPartitionsError(f"partitions must be positive, got {partitions}")
            if replication_factor != 1:
                raise InvalidReplicationFactorError(
                    f"replication factor {replication_factor} is larger than the 1 available broker")
            node.config.log_config(config)
            if name in node.list_topics():
                raise TopicAlreadyExistsError(f"topic {name!r} already exists")
            topic_id = None
        else:
            node.create_topic(name, partitions, config, replication_factor=replication_factor)
            topic_id = node.topic_metadata(name).topic_id
        return topic_id, node.config["num.partitions"] if partitions is None else partitions, replication_factor

    def delete_topic(self, name, timeout_s) -> None:
        self.node.delete_topic(name)

    def create_partitions(self, name, count, assignments, validate_only, timeout_s) -> None:
        node = self.node
        current = node.topic_metadata(name).partitions
        if assignments is not None and len(assignments) != count - current:
            raise InvalidRequestError(f"{len(assignments)} assignments for {count - current} new partitions")
        if count <= current:
            raise InvalidPartitionsError(
                f"topic {name!r} has {current} partitions; the new count must be larger")
        if not validate_only:
            node.create_partitions(name, count)
