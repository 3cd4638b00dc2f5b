"""Partition reassignment (KIP-455) in the ZooKeeper cluster: the controller's side.

State is kept where ZooKeeper-era Kafka (2.4+) kept it, in the topic's assignment znode
``/brokers/topics/<t>``: while partition p moves from its original replicas ORS to a target TRS,
``partitions[p]`` is the full set RS = TRS + (ORS - TRS) (target first), ``adding_replicas[p]`` =
TRS - ORS and ``removing_replicas[p]`` = ORS - TRS.  Nothing is held only in the controller's
memory: a new controller finds every reassignment in progress in the znodes and finishes it.
The legacy ``/admin/reassign_partitions`` znode (the ``--zookeeper`` tool of Kafka < 3.0) is not
read: Kafka 4.0's tools use the API.

The steps (Kafka's ``KafkaController.onPartitionReassignment``), all on the controller thread:

1. :func:`alter` (AlterPartitionReassignments) writes RS / AR / RR.  The brokers watching the
   assignment react: the adding replicas create their logs and start following the leader, the
   leader starts tracking them.  A replica of an earlier reassignment of the same partition that
   is in neither the new target nor the original set is dropped at once (out of the ISR, its
   log deleted by its broker).
2. The leader adds each new replica to the ISR once it caught up (its usual ISR expansion).
3. :func:`progress` (every controller pass; the partition state is watched meanwhile) sees every
   target replica in the ISR; if the leader is not in the target (or not alive), the first
   target replica that is alive and in the ISR is elected (leader epoch + 1); then, in one
   transaction with the controller-epoch check, the state's ISR becomes ISR ∩ TRS and the
   assignment TRS with AR / RR cleared.  The removed replicas see that they are no longer in
   the replica set: they stop fetching and delete their logs (StopReplica with delete).

Cancelling (a null target) reassigns to the original replicas, which completes at once: the
adding replicas leave the replica set and the ISR and delete their logs.  Unlike Kafka's
ZooKeeper controller, no leader-epoch bump marks a replica-set change while the leader stays:
brokers learn replica sets from the watched assignment, not from epoch-ordered LeaderAndIsr
requests, and the partition epoch (the state znode's version) still moves with every ISR change.

Nothing here imports kazoo at module level (the single-node broker uses :func:`validate`).

Errors, as Kafka 4.0 answers them: UNKNOWN_TOPIC_OR_PARTITION (3) for an unknown topic or
partition (or one being deleted), NO_REASSIGNMENT_IN_PROGRESS (85) for cancelling nothing,
INVALID_REPLICA_ASSIGNMENT (39) for an empty target, a repeated broker or an unregistered one.
"""

from __future__ import annotations

import logging

from ..errors import ErrorCode

__all__ = ["alter", "listing", "progress", "validate", "target_of", "origin_of"]

log = logging.getLogger("engine.cluster.controller")


def target_of(a, p: int) -> list[int]:
    removing = a.removing.get(p, ())
    return [b for b in a.partitions[p] if b not in removing]


def origin_of(a, p: int) -> list[int]:
    adding = a.adding.get(p, ())
    return [b for b in a.partitions[p] if b not in adding]


def validate(topic: str, count: int | None, partition: int, replicas, live) -> tuple[int, str | None] | None:
    """Kafka 4.0's checks of one AlterPartitionReassignments entry, in its order: None when it
    may go ahead (``replicas`` None: a cancellation, checked by the caller)."""
    if count is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}."
    if not 0 <= partition < count:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{partition}."
    if replicas is None:
        return None
    if not replicas:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    prev = None
    for broker in sorted(replicas):
        if broker not in live:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes broker "
                                                f"{broker}, but no such broker is registered.")
        if broker == prev:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (f"The manual partition assignment includes the broker "
                                                f"{broker} more than once.")
        prev = broker
    return None


def _elect(candidates, isr, live, shutting) -> int:
    for b in candidates:
        if b in isr and b in live and b not in shutting:
            return b
    return -1


def _live(ctl) -> tuple[set[int], set[int]]:
    from .zk import CONTROLLED_SHUTDOWN
    zk = ctl.zk
    return (set(int(b) for b in zk.get_children("/brokers/ids")),
            set(int(b) for b in zk.get_children(CONTROLLED_SHUTDOWN)))


def alter(ctl, requests: list[tuple[str, int, list[int] | None]]) -> list[tuple[int, str | None]]:
    """AlterPartitionReassignments on the controller thread (``Controller.call``): one
    (error code, message) per (topic, partition, target replicas or None to cancel)."""
    store = ctl.store
    live, shutting = _live(ctl)
    deleting = set(store.topics_to_delete())
    out = []
    for topic, p, target in requests:
        out.append(_alter_one(ctl, topic, p, target, live, shutting, deleting))
    ctl._wake("reconcile")
    return out


def _alter_one(ctl, topic, p, target, live, shutting, deleting) -> tuple[int, str | None]:
    from .zk import PartitionState
    store = ctl.store
    for _attempt in range(20):
        a = None if topic in deleting else store.assignment(topic)
        err = validate(topic, None if a is None else max(a.partitions, default=-1) + 1, p, target, live)
        if err is not None:
            return err
        if p not in a.partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{p}."
        if target is None:
            if not a.reassigning(p):
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
            wanted = origin_of(a, p)
        else:
            wanted = [int(b) for b in target]
        origin = origin_of(a, p)
        full = list(dict.fromkeys(wanted + origin))
        current = a.partitions[p]
        dropped = [b for b in current if b not in full]
        st = store.partition_state(topic, p)
        new_state = None
        if st is not None and (st.leader in dropped or set(dropped) & set(st.isr)):
            isr = [b for b in st.isr if b not in dropped] or list(st.isr)
            leader, epoch = st.leader, st.leader_epoch
            if leader in dropped:
                leader, epoch = _elect(full, isr, live, shutting), epoch + 1
            new_state = PartitionState(leader, epoch, isr, ctl.epoch, st.version)
        a.partitions[p] = full
        a.adding[p] = [b for b in full if b not in origin]
        a.removing[p] = [b for b in full if b not in wanted]
        for m in (a.adding, a.removing):
            if not m[p]:
                del m[p]
        if full == current and new_state is None and not a.reassigning(p):
            return 0, None      # the target is the replica set: complete at once, as Kafka
        if store.write_assignment_and_state(topic, a, p, new_state, ctl._epoch_version):
            log.info("controller %d: %s-%d %s: replicas %s (adding %s, removing %s)%s", ctl.broker_id,
                     topic, p, "reassignment cancelled" if target is None else "reassigning",
                     full, a.adding.get(p, []), a.removing.get(p, []),
                     f", state {new_state.leader}/{new_state.isr}" if new_state is not None else "")
            return 0, None
        if not ctl._still_controller():
            from ..errors import NotControllerError
            raise NotControllerError(f"broker {ctl.broker_id} is no longer the controller")
    return ErrorCode.REQUEST_TIMED_OUT, f"the assignment of {topic} kept changing"


def progress(ctl, topic: str, p: int, live: set[int], shutting: set[int]):
    """Finish the reassignment of `topic`-`p` when every target replica is in the ISR.
    Returns (replicas, state) after a write, None when still waiting (or nothing to do)."""
    from .zk import PartitionState
    store = ctl.store
    for _attempt in range(5):
        a = store.assignment(topic)
        if a is None or p not in a.partitions or not a.reassigning(p):
            return None
        st = store.partition_state(topic, p)
        if st is None:
            return None
        target = target_of(a, p)
        if not set(target) <= set(st.isr):
            return None                     # wait for the new replicas to catch up
        isr = [b for b in st.isr if b in target]
        leader, epoch = st.leader, st.leader_epoch
        if leader not in target or leader not in live or leader in shutting:
            leader = _elect(target, isr, live, shutting)
            if leader < 0:
                return None                 # no target replica can lead yet
            epoch += 1
        new = PartitionState(leader, epoch, isr, ctl.epoch, st.version)
        removed = a.removing.pop(p, [])
        a.adding.pop(p, None)
        a.partitions[p] = target
        if store.write_assignment_and_state(topic, a, p, new, ctl._epoch_version):
            new.version = st.version + 1
            log.info("controller %d: %s-%d reassignment complete: replicas %s, leader %d (epoch %d), "
                     "isr %s; %s removed", ctl.broker_id, topic, p, target, leader, epoch, isr, removed)
            ctl.elections += epoch != st.leader_epoch
            return target, new
        if not ctl._still_controller():
            return None
    return None


def listing(ctl, wanted: list[tuple[str, list[int]]] | None) -> list[tuple[str, int, list[int], list[int], list[int]]]:
    """ListPartitionReassignments on the controller thread: (topic, partition, replicas,
    adding, removing) of each partition in progress (of `wanted`: [(topic, partitions)], or all)."""
    store = ctl.store
    out = []
    topics = store.topics() if wanted is None else [t for t, _ in wanted]
    parts = None if wanted is None else {t: ps for t, ps in wanted}
    for t in topics:
        a = store.assignment(t)
        if a is None:
            continue
        for p in sorted(a.partitions) if parts is None else parts[t]:
            if p in a.partitions and a.reassigning(p):
                out.append((t, p, list(a.partitions[p]), list(a.adding.get(p, [])), list(a.removing.get(p, []))))
    return out
