"""The local side of cluster metadata: a broker's own logs for the topics ZooKeeper assigns it.

In cluster mode ZooKeeper is the source of truth for which topics exist, their ids, partition
counts and configs; the node's local metadata (``engine-topics.json``) only mirrors the topics
and every topic's id, partition count and config (Metadata walks that list), so the storage layer
keeps working unchanged (``Node.mirror_topic``, called by engine/cluster/member.py, keeps ZooKeeper's
topic id).  A partition's *log* exists only on the brokers in its replica set, as in
Kafka: ``Node.ensure_log`` makes it (with ZooKeeper's topic id in ``partition.metadata``) when
the broker becomes its leader or follower, and the replica manager's ``stop_replica(delete=True)``
removes it (renamed to ``<topic>-<p>.<uuid>-delete``, then removed) when the broker leaves the
replica set.  A request for a partition without a local log gets NOT_LEADER_OR_FOLLOWER from the
replica manager (the cluster view knows the partition).

A local topic whose id differs from ZooKeeper's is an older incarnation (deleted and re-created
while this broker was away): its logs are removed and the topic created afresh.

Producer ids, topic config changes and auto-created topics are recorded in ZooKeeper in cluster
mode (:class:`ZkTopics`, the node's topics).
"""

from __future__ import annotations

import logging

from ..errors import LeaderNotAvailableError, TopicAlreadyExistsError, UnknownTopicOrPartitionError
from . import admin
from .zk import answered_as_timeout

__all__ = ["ZkTopics", "apply_topic_config"]

log = logging.getLogger("engine.cluster")


def _config_strings(overrides: dict) -> dict[str, str]:
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in overrides.items()}


def apply_topic_config(node, topic: str, config: dict[str, str]) -> None:
    """Make the local topic's overrides those of ZooKeeper (a watch saw them change)."""
    local_alter = node.alter_local_topic_config
    with node.admin_lock:
        try:
            meta = node.topic_metadata(topic)
        except UnknownTopicOrPartitionError:
            return
        current = _config_strings(meta.config)
        if current == dict(config):
            return
        wanted = node.config.log_config(config).overrides
        if _config_strings(wanted) == current:
            return
        log.info("topic %s: config overrides now %s", topic, config)
        local_alter(topic, wanted, [k for k in meta.config if k not in wanted])


class ZkTopics:
    """The node's topic decisions in cluster mode (engine/topics.py's ``Topics``), recorded in
    ZooKeeper, given to the node by the composition that joins the cluster
    (``Node.use_topics``):

    * producer-id blocks come from ``/latest_producer_id_block``, so two brokers never hand out
      the same id;
    * a topic config change (IncrementalAlterConfigs, AlterConfigs, the CLI) goes to
      ``/config/topics/<t>``, from where every broker's watch applies it
      (:func:`apply_topic_config`); this broker applies it at once too;
    * ``auto.create.topics.enable``: Metadata for an unknown topic writes it to ZooKeeper
      (num.partitions, default.replication.factor) and answers LEADER_NOT_AVAILABLE, as Kafka
      does; the client asks again once the controller has made leaders.

    Every ZooKeeper call here is bounded (engine/cluster/zk.py): one that gets no answer in time,
    or finds no connection, raises Kafka's retriable REQUEST_TIMED_OUT (``answered_as_timeout``)."""

    def __init__(self, node, member):
        self.node = node
        self.member = member
        self.store = member.store

    def reserve_producer_ids(self, count: int) -> int:
        with answered_as_timeout("a producer id block"):
            return self.store.allocate_producer_ids(self.member.broker_id, count)

    def alter_topic_config(self, name, set, delete) -> None:
        node = self.node
        with node.admin_lock:
            overrides = dict(node.topic_metadata(name).config)
            overrides.update(set or {})
            for key in delete:
                overrides.pop(key, None)
            cfg = node.config.log_config(overrides)            # validates before anything is written
            with answered_as_timeout(f"the config of {name}"):
                self.store.set_topic_config(name, _config_strings(cfg.overrides))
            node.alter_local_topic_config(name, set, delete)

    def missing_topic(self, name: str):
        node, member = self.node, self.member
        if node.read_only or not node.config["auto.create.topics.enable"]:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        if member.view.assignment(name) is None:
            try:
                with answered_as_timeout(f"auto-creating {name}"):
                    admin.create_topic(member, name, None, None, {}, timeout_s=0)
                log.info("auto-created topic %s in ZooKeeper", name)
            except TopicAlreadyExistsError:
                pass
        raise LeaderNotAvailableError(f"topic {name!r} is being created")

    def create_topic(self, name, partitions, replication_factor, config, assignments, validate_only,
                     timeout_s):
        with answered_as_timeout(f"creating {name}"):
            return admin.create_topic(self.member, name, partitions, replication_factor, config, assignments,
                                      validate_only, timeout_s)

    def delete_topic(self, name, timeout_s) -> None:
        with answered_as_timeout(f"deleting {name}"):
            admin.delete_topic(self.member, name, timeout_s)

    def create_partitions(self, name, count, assignments, validate_only, timeout_s) -> None:
        with answered_as_timeout(f"adding partitions to {name}"):
            admin.create_partitions(self.member, name, count, assignments, validate_only, timeout_s)
