"""GroupCoordinator: Kafka's classic group protocol and committed offsets for one node.

One coordinator per writable node (engine/node.py; ``node.group_coordinator``, created on
first use, or hosted on a broker's loop), shared by the wire broker and in-process
consumers.  It is constructed with the node, whose config, logs and metadata it uses.  It
runs on its own event loop in a daemon thread (or the broker's loop); all group state lives
on that loop.  The loop, the internal-topic appends and the replay are runtime.py's
:class:`CoordinatorRuntime`, a part it owns (``runtime``) and starts with its shard
(shard.py: the loader's replay hooks and the retention timer), as the transaction
coordinator does; the lifecycle and the thread-safe facade below delegate to it.  The group
work is done by parts this class owns and wires, each given only what it uses
(group_context.py: the group table and a few of the runtime's services):
group_membership.py (join, sync, heartbeats, leave), group_offsets.py (committed offsets),
group_admin_ops.py (describe, list, delete groups), offset_retention.py (offsets retention),
group_loader.py (the replay of a partition), group_txn.py (transactional offset commits).

Public API (stable; every result carries Kafka error codes, 0 = success)::

    coord = eng.group_coordinator               # started; loading of __consumer_offsets begins
    coord.call(coord.join_group, "g", "", protocol_type="consumer",
               protocols=[("range", sub_bytes)], session_timeout_ms=10000,
               timeout=30)                       # sync facade, from any thread
    fut = coord.submit(coord.heartbeat, "g", gen, member_id)   # concurrent.futures.Future
    # in the broker (another loop): await asyncio.wrap_future(coord.submit(...))

    async join_group(group_id, member_id, *, protocol_type, protocols, session_timeout_ms,
                     rebalance_timeout_ms=-1, group_instance_id=None, client_id="",
                     client_host="", require_known_member_id=True, reason=None) -> JoinGroupResult
    async sync_group(group_id, generation_id, member_id, assignments: dict[str, bytes], *,
                     group_instance_id=None, protocol_type=None, protocol_name=None) -> SyncGroupResult
    async heartbeat(group_id, generation_id, member_id, group_instance_id=None) -> int
    async leave_group(group_id, members: list[tuple[member_id, group_instance_id]]) -> LeaveGroupResult
    async commit_offsets(group_id,
                         offsets: {(topic, partition): OffsetAndMetadata | offset | (offset, leader_epoch, metadata)},
                         *, generation_id=-1, member_id="", group_instance_id=None,
                         retention_ms=-1) -> {(topic, partition): error_code}
    async fetch_offsets(group_id, partitions: list[(topic, partition)] | None = None)
                        -> (error_code, {(topic, partition): OffsetAndMetadata})   # offset -1 = none
    async describe_groups(group_ids) -> list[GroupDescription]
    async list_groups(states=None) -> (error_code, list[GroupListing])
    async delete_groups(group_ids) -> {group_id: error_code}
    async delete_offsets(group_id, partitions) -> (error_code, {(topic, partition): error_code})
    async find_coordinator(key, key_type=0) -> (error_code, message)   # creates __consumer_offsets
    async txn_commit_offsets(group_id, producer_id, producer_epoch, offsets, *, generation_id=-1,
                             member_id="", group_instance_id=None) -> {(topic, partition): error_code}
    async complete_txn(producer_id, producer_epoch, partition, commit, coordinator_epoch) -> bool
    async unstable_partitions(group_id, partitions | None) -> set   # pending transactional offsets
    async load_partition(p) / unload_partition(p)     # the seam for moving leadership later
    async expire_offsets() -> int                     # one retention pass now (also periodic)
    async on_partitions_deleted([(topic, partition)]) -> int   # a deleted topic's offsets removed
    partition_for(group_id) -> int;  load_errors: list[CorruptRecordError];  stop()

Semantics follow Kafka's classic GroupCoordinator: MEMBER_ID_REQUIRED on a
first JoinGroup v4+, generations, the leader's JoinGroup answer carries all
members' metadata of the chosen protocol, SyncGroup only relays the leader's
assignment (client-side assignors), REBALANCE_IN_PROGRESS to heartbeats during
a rebalance, static members (``group.instance.id``, FENCED_INSTANCE_ID),
``group.initial.rebalance.delay.ms`` for a group leaving Empty, session
timeouts, rebalance timeouts (members not rejoining are removed), and a
pending-sync timeout (members not sending SyncGroup are removed).

Durability: every change is a record in ``__consumer_offsets`` (records.py),
written as one batch per request to the group's partition and answered only
after the append returned (the topic's flush policy applies); commits and
group changes are applied to memory after a successful append, appends per
partition are serialised so memory follows log order.  ``load_partition``
replays a partition (latest record per key wins, tombstones delete); a corrupt
batch is logged with file and byte position, kept in ``load_errors`` and
skipped, the rest of the partition still loads.

Offsets retention (Kafka 2.1+): offsets of an Empty group expire
``offsets.retention.minutes`` after it became Empty (of a group that never had
members: after their commit), offsets of topics a Stable consumer group no
longer subscribes to expire by commit time; a commit made with a retention time
(OffsetCommit v2-4) expires at that time.  An Empty group with no offsets left
is deleted (tombstone).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import CorruptRecordError, ErrorCode
from . import records as rec
from .group import GroupMetadata, OffsetAndMetadata
from .group_admin_ops import GroupAdmin
from .group_context import GroupContext
from .group_loader import GroupLoader
from .group_membership import Membership
from .group_offsets import OffsetStore
from .group_results import (
    GroupDescription,
    GroupListing,
    JoinGroupResult,
    LeaveGroupResult,
    MemberDescription,
    SyncGroupResult,
)
from .group_txn import TxnOffsets
from .host import CoordinatorHost
from .offset_retention import OffsetRetention
from .runtime import CoordinatorRuntime, wall_ms
from .shard import ShardHooks, internal_topic_config

__all__ = [
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "JoinGroupResult",
    "LeaveGroupResult",
    "MemberDescription",
    "SyncGroupResult",
]


class GroupCoordinator:
    """See the module docstring.  ``clock`` gives wall time in ms (commit and state
    timestamps, offset expiry); timers (session, rebalance, delay) use the loop clock."""

    TOPIC = rec.OFFSETS_TOPIC
    NAME = "group-coordinator"

    def __init__(self, node: CoordinatorHost, *, node_id: int = 0, clock: Callable[[], int] = wall_ms,
                 cluster=None):
        cfg = node.config
        # the loop, __consumer_offsets and its loading (runtime.py), started with the shard below
        rt = self.runtime = CoordinatorRuntime(
            node, topic=self.TOPIC, name=self.NAME, partitions=cfg["offsets.topic.num.partitions"],
            topic_config=internal_topic_config("producer"), node_id=node_id, clock=clock, cluster=cluster)
        self._groups: dict[str, GroupMetadata] = {}
        # the parts, each given what it uses (group_context.py), none the coordinator itself
        ctx = self._ctx = GroupContext(self._groups, rt.clock, rt.route, rt.append, rt.spawn,
                                       rt.host_loop, rt.is_loaded)
        self._members = Membership(ctx, initial_rebalance_delay_ms=cfg["group.initial.rebalance.delay.ms"],
                                   min_session_timeout_ms=cfg["group.min.session.timeout.ms"],
                                   max_session_timeout_ms=cfg["group.max.session.timeout.ms"],
                                   max_group_size=cfg["group.max.size"])
        self._offsets = OffsetStore(ctx, schedule_heartbeat=self._members.schedule_heartbeat,
                                    topic_metadata=node.topic_metadata,
                                    max_metadata_bytes=cfg["offset.metadata.max.bytes"])
        self._txn = TxnOffsets(ctx, self._offsets.stage, rt.append_marker)
        loader = GroupLoader(ctx, schedule_heartbeat=self._members.schedule_heartbeat)
        self._admin = GroupAdmin(ctx, loading=rt.loading, delete_group=self._members.delete_group)
        self._retention = OffsetRetention(ctx, delete_group=self._members.delete_group,
                                          retention_ms=cfg["offsets.retention.minutes"] * 60_000,
                                          check_interval_ms=cfg["offsets.retention.check.interval.ms"])
        # what the runtime drives: the loader replays a partition and drops one that moved,
        # retention runs every offsets.retention.check.interval.ms
        self._shard = ShardHooks(new_load_state=loader.new_load_state, replay_batch=loader.replay_batch,
                                 apply_loaded=loader.apply_loaded, forget_partition=loader.forget_partition,
                                 start_timers=self._retention.start, cancel_timers=self._retention.stop)

    # -- the runtime (runtime.py): lifecycle, the thread-safe facade, routing, loading ------
    def start(self) -> GroupCoordinator:
        """Start on a loop thread of its own; loading of ``__consumer_offsets`` begins."""
        self.runtime.start(self._shard)
        return self

    async def start_on_running_loop(self) -> GroupCoordinator:
        """Run on the calling loop (a broker's); ``await stop_on_loop()`` before it ends."""
        await self.runtime.start_on_running_loop(self._shard)
        return self

    async def stop_on_loop(self) -> None:
        await self.runtime.stop_on_loop()

    def stop(self, timeout: float = 30.0) -> None:
        """Answer waiters with NOT_COORDINATOR, finish in-flight writes, stop the loop."""
        self.runtime.stop(timeout)

    @property
    def running(self) -> bool:
        return self.runtime.running

    @property
    def on_current_loop(self) -> bool:
        """True when the caller runs on the coordinator's loop (await its methods directly)."""
        return self.runtime.on_current_loop

    def submit(self, coro_fn, *args, **kwargs) -> concurrent.futures.Future:
        """Run ``coro_fn(*args, **kwargs)`` on the coordinator's loop; a concurrent future."""
        return self.runtime.submit(coro_fn, *args, **kwargs)

    def call(self, coro_fn, *args, timeout: float | None = None, **kwargs) -> Any:
        """Blocking :meth:`submit`, for threads other than the coordinator's."""
        return self.runtime.call(coro_fn, *args, timeout=timeout, **kwargs)

    def wait_loaded(self, timeout: float = 30.0, partitions: int = 0) -> None:
        """Block until the partitions of ``__consumer_offsets`` taken up here are loaded."""
        self.runtime.wait_loaded(timeout, partitions)

    @property
    def load_errors(self) -> list[CorruptRecordError]:
        """The corrupt batches skipped while loading (file and byte position)."""
        return self.runtime.load_errors

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def coordinator_node(self, group_id: str) -> int:
        """The broker leading the partition of `group_id` (-1: none, or no topic yet)."""
        return self.runtime.coordinator_node(group_id)

    async def load_partition(self, partition: int) -> None:
        await self.runtime.load_partition(partition)

    async def unload_partition(self, partition: int) -> None:
        await self.runtime.unload_partition(partition)

    async def find_coordinator(self, key: str, key_type: int = 0) -> tuple[int, str | None]:
        """Whether this node coordinates group `key` (creates ``__consumer_offsets`` on first
        use).  Key type 1 (transactions) is the TransactionCoordinator's."""
        if key_type != 0:
            return ErrorCode.INVALID_REQUEST, f"key type {key_type} is not a group"
        return await self.runtime.find(key)

    # -- membership (group_membership.py) ------------------------------------------------
    async def join_group(self, group_id: str, member_id: str, *, protocol_type: str,
                         protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int = -1, group_instance_id: str | None = None,
                         client_id: str = "", client_host: str = "",
                         require_known_member_id: bool = True, reason: str | None = None) -> JoinGroupResult:
        return await self._members.join_group(
            group_id, member_id, protocol_type=protocol_type, protocols=protocols,
            session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
            group_instance_id=group_instance_id, client_id=client_id, client_host=client_host,
            require_known_member_id=require_known_member_id, reason=reason)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         assignments: Mapping[str, bytes] | None = None, *,
                         group_instance_id: str | None = None, protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncGroupResult:
        return await self._members.sync_group(group_id, generation_id, member_id, assignments,
                                              group_instance_id=group_instance_id,
                                              protocol_type=protocol_type, protocol_name=protocol_name)

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> int:
        return await self._members.heartbeat(group_id, generation_id, member_id, group_instance_id)

    async def leave_group(self, group_id: str,
                          members: Iterable[tuple[str, str | None]]) -> LeaveGroupResult:
        return await self._members.leave_group(group_id, members)

    def rebalance_timeout_ms(self, group_id: str) -> int:
        """The longest rebalance timeout of `group_id`'s members, which bounds a SyncGroup's wait
        (the pending-sync timer); -1 when not known.  Any thread may ask (a read)."""
        return self._members.rebalance_timeout_ms(group_id)

    # -- committed offsets (group_offsets.py) --------------------------------------------
    async def commit_offsets(self, group_id: str, offsets: Mapping[tuple[str, int], Any], *,
                             generation_id: int = -1, member_id: str = "",
                             group_instance_id: str | None = None,
                             retention_ms: int = -1) -> dict[tuple[str, int], int]:
        return await self._offsets.commit(group_id, offsets, generation_id=generation_id, member_id=member_id,
                                          group_instance_id=group_instance_id, retention_ms=retention_ms)

    async def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]] | None = None,
                            ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata]]:
        return await self._offsets.fetch(group_id, partitions)

    async def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]],
                             ) -> tuple[int, dict[tuple[str, int], int]]:
        return await self._offsets.delete(group_id, partitions)

    async def on_partitions_deleted(self, partitions: Iterable[tuple[str, int]]) -> int:
        """A topic was deleted: every loaded group's offsets of `partitions` removed (see
        OffsetStore.on_partitions_deleted); how many."""
        return await self._offsets.on_partitions_deleted(partitions)

    # -- admin (group_admin_ops.py) and retention (offset_retention.py) -------------------
    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        return await self._admin.describe_groups(group_ids)

    async def list_groups(self, states: Iterable[str] | None = None) -> tuple[int, list[GroupListing]]:
        return await self._admin.list_groups(states)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        return await self._admin.delete_groups(group_ids)

    async def expire_offsets(self) -> int:
        """One retention pass now (also run every offsets.retention.check.interval.ms): expired
        offsets, and Empty groups left without any, deleted; returns how many offsets."""
        return await self._retention.expire_offsets()

    # -- transactional offset commits (group_txn.py) --------------------------------------
    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 offsets: Mapping, *, generation_id: int = -1, member_id: str = "",
                                 group_instance_id: str | None = None) -> dict[tuple[str, int], int]:
        return await self._txn.txn_commit_offsets(group_id, producer_id, producer_epoch, offsets,
                                                  generation_id=generation_id, member_id=member_id,
                                                  group_instance_id=group_instance_id)

    async def complete_txn(self, producer_id: int, producer_epoch: int, partition: int, commit: bool,
                           coordinator_epoch: int) -> bool:
        return await self._txn.complete_txn(producer_id, producer_epoch, partition, commit, coordinator_epoch)

    async def unstable_partitions(self, group_id: str, partitions: Iterable[tuple[str, int]] | None
                                  ) -> set[tuple[str, int]]:
        return await self._txn.unstable_partitions(group_id, partitions)
