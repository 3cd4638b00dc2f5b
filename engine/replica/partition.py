"""One local replica of a partition: its log, its role, and (as leader) its followers.

Kafka's ``Partition``: the leader keeps each follower's log end offset (LEO, the offset of its
last Fetch) and the last time it was caught up, computes the high watermark (HW = the smallest
LEO over the ISR, never moving back, and not moving at all while the ISR is smaller than
``min.insync.replicas`` -- KIP-966), and holds the acks=all produce waiters (the purgatory:
futures completed once the HW covers their batch).

A node alone is a cluster of one: its partitions are led here through the same
:meth:`make_leader` (replicas = ISR = [node], the leader epoch the log's latest), and a partition
whose only replica is the leader has the log move its high watermark with every append, under the
log's lock, on whichever thread appended (an in-process producer has no event loop to wait for).

Threads: the leader-side state (followers, ISR, waiters) is changed on the broker's event loop;
role changes (``make_leader`` / ``make_follower``) and the follower's fetcher take ``lock``.
"""

from __future__ import annotations

import threading
import time

from ..errors import FencedLeaderEpochError, NotEnoughReplicasError, NotLeaderOrFollowerError, UnknownLeaderEpochError
from .purgatory import DelayedDeleteRecords, DelayedProduce

__all__ = ["FollowerState", "Partition", "offset_for_timestamp"]


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class FollowerState:
    """What the leader knows of one follower (Kafka's ``Replica``)."""

    __slots__ = ("replica_id", "leo", "log_start", "last_caught_up_ms", "last_fetch_ms",
                 "last_fetch_leader_leo", "broker_epoch")

    def __init__(self, replica_id: int, now: int, in_isr: bool):
        self.replica_id = replica_id
        self.leo = -1                              # unknown until its first Fetch
        self.log_start = -1
        self.last_caught_up_ms = now if in_isr else -1
        self.last_fetch_ms = -1
        self.last_fetch_leader_leo = -1
        self.broker_epoch = -1                     # of its last Fetch (v15's ReplicaState; KIP-903)

    def __repr__(self) -> str:
        return f"FollowerState({self.replica_id}, leo={self.leo}, caught_up={self.last_caught_up_ms})"


class Partition:
    """A local replica (see the module docstring)."""

    def __init__(self, topic: str, partition: int, log, node_id: int):
        self.topic = topic
        self.partition = partition
        self.log = log
        self.node_id = node_id
        self.lock = threading.RLock()
        self.is_leader = False
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = 0
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.followers: dict[int, FollowerState] = {}
        self.leader_epoch_start_offset = 0
        self.delayed_produce = DelayedProduce()         # acks=all produces (purgatory.py)
        self.delayed_delete = DelayedDeleteRecords()    # DeleteRecords waiting for the replicas
        self.isr_change_inflight = False
        # follower side (engine/replica/fetcher.py): "truncate" -> "fetch"; "fenced" waits for a
        # newer epoch from the cluster
        self.fetch_state = "truncate"
        self.fetch_backoff_until = 0.0

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader_id}"
        return (f"Partition({self.topic}-{self.partition}, {role}, epoch={self.leader_epoch}, "
                f"isr={self.isr}, hw={self.log.high_watermark}, leo={self.log.log_end_offset})")

    # -- role --------------------------------------------------------------
    @property
    def min_isr(self) -> int:
        return int(self.log.config["min.insync.replicas"])

    def make_leader(self, leader_epoch: int, replicas: list[int], isr: list[int],
                    partition_epoch: int) -> bool:
        """Lead from now on (Kafka's makeLeader).  False if `leader_epoch` is older than ours."""
        with self.lock:
            if leader_epoch < self.leader_epoch:
                return False
            new_epoch = leader_epoch != self.leader_epoch or not self.is_leader
            # the only replica: the log moves the HW itself at each append (module docstring)
            self.log.auto_high_watermark = list(replicas) == [self.node_id]
            self.is_leader = True
            self.leader_id = self.node_id
            self.leader_epoch = leader_epoch
            self.partition_epoch = partition_epoch
            self.replicas = list(replicas)
            self.isr = list(isr)
            now = now_ms()
            if new_epoch:
                if not self.log.read_only:        # a read-only directory records nothing
                    self.log.assign_leader_epoch(leader_epoch)
                self.leader_epoch_start_offset = self.log.log_end_offset
                self.followers = {r: FollowerState(r, now, r in isr) for r in replicas if r != self.node_id}
            else:
                for r in replicas:
                    if r != self.node_id and r not in self.followers:
                        self.followers[r] = FollowerState(r, now, r in isr)
                for r in list(self.followers):
                    if r not in replicas:
                        del self.followers[r]
            self.isr_change_inflight = False
            return True

    def make_follower(self, leader_id: int, leader_epoch: int, replicas: list[int],
                      partition_epoch: int) -> bool:
        """Follow `leader_id` (Kafka's makeFollower); the fetcher truncates on DivergingEpoch.
        False if `leader_epoch` is older than ours."""
        with self.lock:
            if leader_epoch < self.leader_epoch:
                return False
            changed = leader_epoch != self.leader_epoch or leader_id != self.leader_id or self.is_leader
            self.log.auto_high_watermark = False
            self.is_leader = False
            self.leader_id = leader_id
            self.leader_epoch = leader_epoch
            self.partition_epoch = partition_epoch
            self.replicas = list(replicas)
            self.isr = []
            self.followers = {}
            if changed:
                self.fetch_state = "truncate"
                self.fetch_backoff_until = 0.0
            return changed

    def check_leader(self) -> None:
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.node_id} is not the leader of {self.topic}-{self.partition} "
                f"(leader: {self.leader_id})")

    def check_epoch(self, requested: int) -> None:
        """A request's current_leader_epoch against ours (-1: not checked)."""
        if requested < 0:
            return
        ours = self.leader_epoch
        if requested < ours:
            raise FencedLeaderEpochError(f"leader epoch {requested} is older than {ours}")
        if requested > ours:
            raise UnknownLeaderEpochError(f"leader epoch {requested} is newer than {ours}")

    def check_min_isr(self) -> None:
        """acks=all: refuse before appending when the ISR is smaller than min.insync.replicas."""
        need = self.min_isr
        if len(self.isr) < need:
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.partition} has {len(self.isr)} in-sync replicas {self.isr}, "
                f"min.insync.replicas is {need}")

    # -- leader: followers, ISR, high watermark -----------------------------
    def update_follower(self, replica_id: int, fetch_offset: int, now: int, log_start: int = -1,
                        broker_epoch: int = -1) -> None:
        """A follower fetched from `fetch_offset`: its LEO, and whether it is caught up
        (Kafka's updateFetchState: caught up at this fetch if it asked for the leader's LEO,
        or at its previous fetch if it now asks for what was the LEO then)."""
        st = self.followers.get(replica_id)
        if st is None:
            raise NotLeaderOrFollowerError(
                f"broker {replica_id} is not a replica of {self.topic}-{self.partition} ({self.replicas})")
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            st.last_caught_up_ms = now
        elif st.last_fetch_leader_leo >= 0 and fetch_offset >= st.last_fetch_leader_leo:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.last_fetch_leader_leo = leo
        st.last_fetch_ms = now
        st.leo = fetch_offset
        st.broker_epoch = broker_epoch
        if log_start >= 0:
            st.log_start = log_start

    def isr_to_expand(self, replica_id: int) -> list[int] | None:
        """The ISR with follower `replica_id` added if it caught up (None: no change).  Only the
        follower that just fetched, as Kafka's maybeExpandIsr: another's fetch must not bring
        back one that stopped fetching (paused, or restarted: its last fetch state is its
        previous incarnation's) -- the ISR would grow and shrink every lag time."""
        st = self.followers.get(replica_id)
        if st is None or replica_id in self.isr:
            return None
        if st.leo >= self.log.high_watermark and st.leo >= self.leader_epoch_start_offset:
            return self.isr + [replica_id]
        return None

    def isr_to_shrink(self, now: int, lag_max_ms: int) -> list[int] | None:
        """The ISR without the followers not caught up for `lag_max_ms` (None: no change)."""
        out = [r for r in self.isr if r == self.node_id or (
            r in self.followers and now - self.followers[r].last_caught_up_ms <= lag_max_ms)]
        return out if len(out) != len(self.isr) else None

    def maybe_advance_hw(self) -> bool:
        """HW = min LEO over the ISR (leader's included), forward only, and only while the ISR has
        at least min.insync.replicas members.  True if it moved."""
        if not self.is_leader or self.log.read_only:
            return False
        if len(self.isr) < self.min_isr:
            return False
        log = self.log
        hw = log.log_end_offset
        for r in self.isr:
            if r != self.node_id:
                st = self.followers.get(r)
                hw = min(hw, st.leo if st is not None and st.leo >= 0 else 0)
        if hw > log.high_watermark:
            log.update_high_watermark(hw)
            return True
        return False

    # -- the purgatories (engine/replica/purgatory.py) ------------------------------
    def complete_waiters(self) -> None:
        """Answer the acks=all produces whose batch the HW now covers."""
        self.delayed_produce.complete(self.log.high_watermark)

    def low_watermark(self, live_brokers) -> int:
        """The smallest log start offset over this leader and its live followers (Kafka's
        lowWatermarkIfLeader); a follower that has not reported one counts as 0."""
        low = self.log.log_start_offset
        for r, st in self.followers.items():
            if r in live_brokers:
                low = min(low, max(st.log_start, 0))
        return low

    def offset_for_timestamp(self, timestamp: int, isolation_level: int = 0,
                             from_replica: bool = False) -> tuple[int, int] | None:
        """ListOffsets on this leader (Kafka's Partition.fetchOffsetForTimestamp): see
        :func:`offset_for_timestamp`."""
        return offset_for_timestamp(self.log, timestamp, isolation_level, from_replica)

    def complete_delete_waiters(self, live_brokers) -> None:
        self.delayed_delete.complete(self.low_watermark(live_brokers))

    def fail_waiters(self, exc_type, message: str) -> None:
        """Fail every parked produce and DeleteRecords of this partition with `exc_type`."""
        self.delayed_produce.fail(exc_type, message)
        self.delayed_delete.fail(exc_type, message)


def offset_for_timestamp(plog, timestamp: int, isolation_level: int = 0,
                         from_replica: bool = False) -> tuple[int, int] | None:
    """ListOffsets on a replica's log `plog` (Kafka's Partition.fetchOffsetForTimestamp): (offset,
    timestamp) or None.  ``timestamp`` -2 earliest, -1 latest -- the high watermark; the last
    stable offset under read_committed (``isolation_level`` 1); the log end offset asked by
    a replica (``from_replica``) --, -3 the first record with the largest timestamp (KIP-734),
    else the first record at or after it; read_committed never answers at or past the LSO."""
    if timestamp == -1 and isolation_level == 1:
        return plog.last_stable_offset, -1
    if timestamp == -1 and from_replica:
        return plog.log_end_offset, -1
    if timestamp == -3:
        # the first segment with the largest maxTimestampSoFar, then the first record in it
        # with that timestamp: the first record of the log with a timestamp >= the largest
        largest = max((seg.max_timestamp for seg in plog.segments), default=-1)
        hit = plog.offset_for_timestamp(largest) if largest >= 0 else None
    else:
        hit = plog.offset_for_timestamp(timestamp)
    if isolation_level == 1 and timestamp not in (-1, -2) and hit is not None \
            and hit[0] >= plog.last_stable_offset:
        return None                                   # Kafka: only offsets below the LSO
    return hit
