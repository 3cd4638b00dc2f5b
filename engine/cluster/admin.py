"""Topic administration in cluster mode: requests become ZooKeeper writes.

CreateTopics writes ``/config/topics/<t>`` and ``/brokers/topics/<t>`` (the replica assignment,
Kafka's algorithm, engine/cluster/assign.py); the controller then creates the partition states
and the brokers named in them create their local logs when they become leader or follower.
CreatePartitions rewrites the assignment (conditional on its znode version); DeleteTopics
creates ``/admin/delete_topics/<t>``; ElectLeaders (preferred) writes
``/admin/preferred_replica_election``.  Each call then waits, up to the request's timeout, until
this broker's metadata cache shows the result (a leader for every new partition, the topic
gone), so a client that produces right after CreateTopics finds leaders, as with Kafka.

All functions block (ZooKeeper round trips): call them from a worker thread.
"""

from __future__ import annotations

import time

from ..errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from ..metadata import new_topic_id, validate_topic_name
from .assign import assign_replicas
from .zk import TOPICS, BadVersionError, NodeExistsError, TopicAssignment

__all__ = ["create_topic", "create_partitions", "delete_topic", "elect_preferred",
           "offsets_topic_replication"]

_WAIT_CAP_S = 15.0


def _wait(cond, timeout_s: float) -> bool:
    deadline = time.monotonic() + min(max(timeout_s, 0.0), _WAIT_CAP_S)
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _racks(member) -> dict[int, str | None]:
    return {b: info[2] for b, info in member.view.brokers().items()}


def create_topic(member, name: str, partitions: int | None, replication_factor: int | None,
                 config: dict, assignments: dict[int, list[int]] | None = None,
                 validate_only: bool = False, timeout_s: float = 30.0) -> tuple[str, int, int]:
    """Create `name` cluster-wide; returns (topic id, partitions, replication factor)."""
    node = member.node
    validate_topic_name(name)
    node.config.log_config(config)                        # validates keys and values
    brokers = _racks(member)
    if assignments:
        if sorted(assignments) != list(range(len(assignments))):
            raise InvalidRequestError("partition assignments must be numbered 0..n-1")
        for p, replicas in assignments.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise InvalidReplicationFactorError(f"bad replica list {replicas} for partition {p}")
            unknown = [b for b in replicas if b not in brokers]
            if unknown:
                raise InvalidReplicationFactorError(f"unknown or offline brokers {unknown} in the assignment")
        plan = {p: list(r) for p, r in assignments.items()}
        rf = len(plan[0])
    else:
        n = node.config["num.partitions"] if partitions in (None, -1) else partitions
        if n < 1:
            raise InvalidPartitionsError("Number of partitions was set to an invalid non-positive value.")
        rf = node.config["default.replication.factor"] if replication_factor in (None, -1) else replication_factor
        if rf < 1:
            raise InvalidReplicationFactorError(
                "Replication factor must be larger than 0, or -1 to use the default value.")
        plan = assign_replicas(brokers, n, rf)
    existing = member.store.assignment(name)
    if existing is not None:
        marked = member.store.exists(f"/admin/delete_topics/{name}") is not None
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists"
                                      + (" and is marked for deletion." if marked else "."))
    topic_id = new_topic_id()
    if validate_only:
        return topic_id, len(plan), rf
    try:
        member.store.create_topic(name, TopicAssignment(topic_id, plan),
                                  {k: str(v).lower() if isinstance(v, bool) else str(v)
                                   for k, v in config.items()})
    except NodeExistsError:
        raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None
    _wait(lambda: all(member.view.state(name, p) is not None for p in plan), timeout_s)
    return topic_id, len(plan), rf


def create_partitions(member, name: str, count: int, assignments: list[list[int]] | None = None,
                      validate_only: bool = False, timeout_s: float = 30.0) -> None:
    for _attempt in range(5):
        a = member.store.assignment(name)
        if a is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        current = len(a.partitions)
        if count <= current:
            raise InvalidPartitionsError(
                f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        brokers = _racks(member)
        if assignments is not None:
            if len(assignments) != count - current:
                raise InvalidRequestError(f"{len(assignments)} assignments for {count - current} new partitions")
            new = {current + i: list(r) for i, r in enumerate(assignments)}
            for r in new.values():
                if [b for b in r if b not in brokers]:
                    raise InvalidReplicationFactorError(f"unknown or offline brokers in {r}")
        else:
            rf = len(a.partitions[0])
            new = assign_replicas(brokers, count - current, rf, first_partition=current)
        if validate_only:
            return
        a.partitions.update(new)
        try:
            member.store.set_assignment(name, a)
        except BadVersionError:
            continue
        _wait(lambda added=new: all(member.view.state(name, p) is not None for p in added), timeout_s)
        return
    raise InvalidRequestError(f"the assignment of {name} kept changing; try again")


def delete_topic(member, name: str, timeout_s: float = 30.0) -> None:
    if member.store.exists(f"{TOPICS}/{name}") is None:
        raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
    member.store.mark_for_deletion(name)
    _wait(lambda: member.store.exists(f"/admin/delete_topics/{name}") is None, timeout_s)


def elect_preferred(member, partitions: list[tuple[str, int]] | None,
                    timeout_s: float = 30.0) -> dict[tuple[str, int], tuple[int, str | None]]:
    """Preferred-leader election for `partitions` (None: every partition whose preferred replica
    does not lead).  {(topic, p): (error code, message)} as Kafka's ElectLeaders answers."""
    view = member.view
    live = set(view.brokers())
    wanted = partitions
    if wanted is None:
        wanted = [(t, p) for t, (_id, n) in view.topics().items() for p in range(n)]
    out: dict[tuple[str, int], tuple[int, str | None]] = {}
    todo = []
    for t, p in wanted:
        try:
            leader, _epoch, replicas, isr = view.partition_state(t, p)
        except UnknownTopicOrPartitionError:
            out[(t, p)] = (UnknownTopicOrPartitionError.code, f"No such topic partition {t}-{p}")
            continue
        pref = replicas[0] if replicas else -1
        if leader == pref:
            out[(t, p)] = (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
        elif pref not in live or pref not in isr:
            out[(t, p)] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                           f"Failed to elect leader for partition {t}-{p} under strategy "
                           "PreferredReplicaPartitionLeaderElectionStrategy")
        else:
            todo.append((t, p, pref))
    if partitions is None:
        untried = (ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
        out = {k: v for k, v in out.items() if v[0] not in untried}     # Kafka lists only tried ones
    if todo:
        while not member.store.request_preferred_election([(t, p) for t, p, _ in todo]):
            if not _wait(lambda: member.store.exists("/admin/preferred_replica_election") is None, 5.0):
                break
        done = _wait(lambda: all(view.partition_state(t, p)[0] == pref for t, p, pref in todo), timeout_s)
        for t, p, pref in todo:
            if view.partition_state(t, p)[0] == pref:
                out[(t, p)] = (ErrorCode.NONE, None)
            else:
                out[(t, p)] = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if done else ErrorCode.REQUEST_TIMED_OUT,
                               f"preferred leader {pref} of {t}-{p} was not elected")
    return out


def offsets_topic_replication(member) -> int:
    """offsets.topic.replication.factor capped by the brokers alive now (as Kafka creates
    __consumer_offsets with min(configured, live brokers))."""
    return max(1, min(member.node.config["offsets.topic.replication.factor"], len(member.view.brokers())))
