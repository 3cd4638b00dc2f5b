"""The embedded consumer: assign / seek / poll over an open Engine.

Positions are per partition, as in Kafka: the offset of the next record to
return.  ``poll`` decodes records (decompressing as needed) into
:class:`ConsumerRecord` tuples; ``poll_batches`` hands out stored batches
untouched, for callers that decode themselves.  Reads never go above the high
watermark.  A consumer is not thread-safe (like Kafka's); use one per thread.

Every read goes through the node's replica layer (``engine.replicas``: Kafka's
readFromLocalLog and ListOffsets for a consumer, engine/replica/local_read.py),
which answers from the local replica's log as ``FileSlice`` s mapped in place.

With a ``group_id``, ``subscribe(topics)`` makes the consumer a member of a
consumer group (Kafka's classic protocol, see ``engine.client.group``): the
group's coordinator — the same code the broker serves to wire clients — splits
the partitions among members, and positions start from the group's committed
offsets.  ``poll`` joins and rejoins as needed; ``commit`` stores positions.
Without a ``group_id`` the consumer uses ``assign`` only, as before.

Transactions: transaction markers (control batches) are never returned.
``isolation_level="read_committed"`` (Kafka's ``isolation.level``; default
read_uncommitted, as Kafka's) reads only up to each partition's last stable
offset and leaves out the records of aborted transactions, with Kafka's
consumer rule (per batch: the aborted list the read returns, from the
``.txnindex``, marks a producer aborted from its first offset until its ABORT
marker); "latest", ``seek_to_end`` and ``end_offsets`` then mean the LSO.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from .. import _native
from ..errors import (
    ClosedError,
    CommitFailedError,
    EngineError,
    InvalidConfigError,
    KafkaApiError,
    OffsetOutOfRangeError,
)
from ._types import ConsumerRecord, OffsetAndTimestamp, RawBatch, TopicPartition
from ._types import as_topic_partition as _tp
from .group import GroupMember, group_transport

__all__ = ["Consumer"]

_SETTINGS = {
    "max_poll_records": 500,
    "fetch_max_bytes": 52428800,
    "max_partition_fetch_bytes": 1048576,
    "auto_offset_reset": "latest",
    "check_crcs": True,
    "isolation_level": "read_uncommitted",
    # consumer groups (Kafka's keys and defaults)
    "group_id": None,
    "group_instance_id": None,
    "enable_auto_commit": True,
    "auto_commit_interval_ms": 5000,
    "session_timeout_ms": 45000,
    "heartbeat_interval_ms": 3000,
    "max_poll_interval_ms": 300000,
    "partition_assignment_strategy": "range,roundrobin",
}


class Consumer:
    """Reads assigned partitions of an Engine.

    Settings (Kafka's consumer keys, with ``.`` written as ``_``):
    ``max_poll_records`` (500), ``fetch_max_bytes`` (50 MiB),
    ``max_partition_fetch_bytes`` (1 MiB), ``auto_offset_reset``
    ("latest", "earliest" or "none"), ``check_crcs`` (True); for groups
    ``group_id`` (None), ``group_instance_id`` (None: dynamic member),
    ``enable_auto_commit`` (True), ``auto_commit_interval_ms`` (5000),
    ``session_timeout_ms`` (45000), ``heartbeat_interval_ms`` (3000),
    ``max_poll_interval_ms`` (300000), ``partition_assignment_strategy``
    ("range,roundrobin"); ``isolation_level`` ("read_uncommitted" or
    "read_committed").
    """

    def __init__(self, engine: Any, **settings: Any):
        settings = {k.replace(".", "_"): v for k, v in settings.items()}   # Kafka's dotted keys too
        unknown = set(settings) - set(_SETTINGS)
        if unknown:
            raise InvalidConfigError(f"unknown consumer setting(s): {', '.join(sorted(unknown))}")
        cfg = {**_SETTINGS, **settings}
        if cfg["isolation_level"] not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError(f"isolation_level must be read_uncommitted or read_committed, "
                                     f"got {cfg['isolation_level']!r}")
        self._committed = cfg["isolation_level"] == "read_committed"
        self._isolation = 1 if self._committed else 0      # Kafka's IsolationLevel ids
        if cfg["auto_offset_reset"] not in ("latest", "earliest", "none"):
            raise InvalidConfigError(
                f"auto_offset_reset must be latest, earliest or none, got {cfg['auto_offset_reset']!r}")
        for key in ("max_poll_records", "fetch_max_bytes", "max_partition_fetch_bytes",
                    "auto_commit_interval_ms", "session_timeout_ms", "heartbeat_interval_ms",
                    "max_poll_interval_ms"):
            if not isinstance(cfg[key], int) or cfg[key] < 1:
                raise InvalidConfigError(f"{key} must be a positive integer, got {cfg[key]!r}")
        self._engine = engine
        self._replicas = engine.replicas        # the replica layer: every read goes through it
        self._cfg = cfg
        self._positions: dict[TopicPartition, int | None] = {}
        self._buffered: dict[TopicPartition, deque] = {}
        self._fill_end: dict[TopicPartition, int] = {}   # next offset after the last batch buffered
        self._rr = 0
        self._closed = False
        self._group: GroupMember | None = None
        self._next_auto_commit = 0.0
        if cfg["group_id"] is not None:
            strategies = tuple(x.strip() for x in str(cfg["partition_assignment_strategy"]).split(",")
                               if x.strip())
            try:
                self._group = GroupMember(
                    group_transport(engine), str(cfg["group_id"]),
                    partitions_for=engine.partitions_for,
                    group_instance_id=cfg["group_instance_id"],
                    session_timeout_ms=cfg["session_timeout_ms"],
                    rebalance_timeout_ms=cfg["max_poll_interval_ms"],
                    heartbeat_interval_ms=cfg["heartbeat_interval_ms"],
                    max_poll_interval_ms=cfg["max_poll_interval_ms"],
                    assignors=strategies)
            except EngineError as e:
                if isinstance(e, InvalidConfigError):
                    raise
                raise InvalidConfigError(str(e)) from None

    # -- groups --------------------------------------------------------------
    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the consumer group (``group_id``) for these topics; partitions come at the next poll."""
        self._check()
        if self._group is None:
            raise InvalidConfigError("subscribe() needs a group_id (or use assign())")
        topics = [topics] if isinstance(topics, str) else list(topics)
        if not topics:
            raise ValueError("subscribe() needs at least one topic")
        self._maybe_auto_commit(force=True)
        self._group.subscribe(topics)

    def _ensure_group(self) -> None:
        g = self._group
        if g is None or not g._topics:
            return
        g.poll_tick()
        if not g.needs_rejoin:
            return
        # eager protocol: commit what we consumed, give everything up, rejoin
        self._maybe_auto_commit(force=True, quiet=True)
        assigned = [TopicPartition(t, p) for t, p in g.join()]
        self._positions = self.committed(assigned)     # None: auto_offset_reset decides
        self._buffered = {tp: deque() for tp in assigned}
        self._next_auto_commit = time.monotonic() + self._cfg["auto_commit_interval_ms"] / 1000.0

    def commit(self, offsets: Mapping[Any, int] | None = None) -> None:
        """Commit offsets (next record to read) for the group; by default every current position.

        Raises CommitFailedError when the group rebalanced and took the partitions.
        """
        self._check()
        if self._group is None:
            raise InvalidConfigError("commit() needs a group_id")
        if offsets is None:
            todo = {(tp.topic, tp.partition): (pos, None) for tp, pos in self._positions.items()
                    if pos is not None}
        else:
            todo = {(tp.topic, tp.partition): (int(off), None)
                    for tp, off in ((_tp(k), v) for k, v in offsets.items())}
        self._group.commit(todo)

    def committed(self, partitions: Iterable[Any]) -> dict[TopicPartition, int | None]:
        """The group's committed offset of each partition (None when there is none)."""
        self._check()
        if self._group is None:
            raise InvalidConfigError("committed() needs a group_id")
        tps = [_tp(p) for p in partitions]
        got = self._group.committed([(tp.topic, tp.partition) for tp in tps])
        return {tp: off if (off := got.get((tp.topic, tp.partition), -1)) >= 0 else None for tp in tps}

    def _maybe_auto_commit(self, force: bool = False, quiet: bool = False) -> None:
        g = self._group
        if g is None or not self._cfg["enable_auto_commit"] or g.generation_id < 0:
            return
        if not force and time.monotonic() < self._next_auto_commit:
            return
        self._next_auto_commit = time.monotonic() + self._cfg["auto_commit_interval_ms"] / 1000.0
        try:
            self.commit()
        except (CommitFailedError, KafkaApiError):
            if not quiet:
                raise

    # -- assignment and positions ------------------------------------------
    def assign(self, partitions: Iterable[Any]) -> None:
        """Replace the assignment.  Unknown topics or partitions raise UnknownTopicOrPartitionError."""
        self._check()
        if self._group is not None and self._group._topics:
            raise InvalidConfigError("assign() on a consumer that subscribed to a group")
        tps = [_tp(p) for p in partitions]
        for tp in tps:
            self._offsets(tp)           # UnknownTopicOrPartitionError
        self._positions = {tp: self._positions.get(tp) for tp in tps}
        self._buffered = {tp: self._buffered.get(tp, deque()) for tp in tps}

    def subscribe_all(self, topic: str) -> None:
        """Assign every partition of `topic` (no group; see subscribe() for group membership)."""
        n = self._engine.partitions_for(topic)
        self.assign([(topic, p) for p in range(n)])

    def assignment(self) -> list[TopicPartition]:
        return list(self._positions)

    def _offsets(self, tp: TopicPartition):
        """The partition's offsets as the replica layer has them (LocalOffsets)."""
        return self._replicas.local.local_offsets(tp.topic, tp.partition)

    def _end(self, tp: TopicPartition) -> int:
        """Where reading ends: the LSO under read_committed, else the high watermark."""
        return self._offsets(tp).end(self._isolation)

    def seek(self, partition: Any, offset: int) -> None:
        tp = _tp(partition)
        if tp not in self._positions:
            raise ValueError(f"{tp} is not assigned")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self._positions[tp] = offset
        self._buffered[tp].clear()
        self._fill_end.pop(tp, None)

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        for tp in (self._positions if partitions is None else map(_tp, partitions)):
            self.seek(tp, self._offsets(tp).log_start_offset)

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        for tp in (self._positions if partitions is None else map(_tp, partitions)):
            self.seek(tp, self._end(tp))

    def position(self, partition: Any) -> int:
        tp = _tp(partition)
        pos = self._positions[tp]
        if pos is None:
            pos = self._reset(tp)
        return pos

    def _reset(self, tp: TopicPartition) -> int:
        policy = self._cfg["auto_offset_reset"]
        if policy == "none":
            raise OffsetOutOfRangeError(f"no position for {tp} and auto_offset_reset is none")
        pos = self._offsets(tp).log_start_offset if policy == "earliest" else self._end(tp)
        self._positions[tp] = pos
        self._buffered[tp].clear()
        self._fill_end.pop(tp, None)
        return pos

    def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return {tp: self._offsets(tp).log_start_offset for tp in map(_tp, partitions)}

    def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """The end a consumer can read to: the high watermark (the LSO under read_committed)."""
        return {tp: self._end(tp) for tp in map(_tp, partitions)}

    def offsets_for_times(self, timestamps: Mapping[Any, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition the earliest offset whose timestamp >= the given one (None past the
        end: the high watermark, the LSO under read_committed, as Kafka's ListOffsets answers)."""
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for item, ts in timestamps.items():
            tp = _tp(item)
            found = self._replicas.local.local_offset_for_timestamp(tp.topic, tp.partition, ts,
                                                                    isolation_level=self._isolation)
            out[tp] = None if found is None else OffsetAndTimestamp(found[0], found[1])
        return out

    # -- fetching --------------------------------------------------------
    def _check(self) -> None:
        if self._closed:
            raise ClosedError("the consumer is closed")

    def _fetch_batches(self, tp: TopicPartition, max_bytes: int, aborted: list | None = None):
        """(headers, data) of complete stored batches from the position, at most max_bytes (>= 1 batch).

        Under read_committed the read stops at the LSO and `aborted` (a list)
        receives the aborted transactions of the range.
        """
        pos = self._positions[tp]
        if pos is None:
            pos = self._reset(tp)
        try:
            info = self._replicas.local.read_from_local_log(tp.topic, tp.partition, pos, max_bytes,
                                                            isolation_level=self._isolation)
        except OffsetOutOfRangeError:
            o = self._offsets(tp)
            if o.log_start_offset <= pos <= o.log_end_offset:
                return []       # above a read-only open's high watermark: nothing yet, as Kafka
            if self._cfg["auto_offset_reset"] == "none":
                raise
            self._reset(tp)
            return []
        if aborted is not None and info.aborted_transactions:
            aborted.extend(info.aborted_transactions)
        out = []
        for sl in info.slices:
            data = sl.view()
            headers, _end = _native.list_batches(data, 0, -1, self._cfg["check_crcs"],
                                                 sl.path, sl.position)
            for h in headers:
                if h.last_offset >= pos:
                    out.append((h, data, h.position - sl.position))
        return out

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Up to `max_records` records from the assigned partitions, waiting up to `timeout_ms` for some."""
        self._check()
        limit = max_records or self._cfg["max_poll_records"]
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            self._ensure_group()
            self._maybe_auto_commit(quiet=True)
            out = self._poll_once(limit)
            remaining = deadline - time.monotonic()
            if out or remaining <= 0:
                return out
            self._engine.wait_for_data(min(remaining, 0.05))

    def _poll_once(self, limit: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        tps = list(self._positions)
        if not tps:
            return out
        budget = self._cfg["fetch_max_bytes"]
        n = len(tps)
        for i in range(n):
            if len(out) >= limit or budget <= 0:
                break
            tp = tps[(self._rr + i) % n]
            buf = self._buffered[tp]
            if not buf:
                self._fill(tp, min(budget, self._cfg["max_partition_fetch_bytes"]))
            take = min(limit - len(out), len(buf))
            for _ in range(take):
                rec = buf.popleft()
                out.append(rec)
            if take:
                self._positions[tp] = out[-1].offset + 1
                if not buf:   # drained: past the batches skipped after the last record (markers, aborted)
                    self._positions[tp] = max(self._positions[tp], self._fill_end.pop(tp, 0))
                budget -= take
        self._rr = (self._rr + 1) % n
        return out

    def _fill(self, tp: TopicPartition, max_bytes: int) -> None:
        buf = self._buffered[tp]
        aborted: list = []
        batches = self._fetch_batches(tp, max_bytes, aborted)  # resolves an unset position first
        pos = self._positions[tp]
        check = self._cfg["check_crcs"]
        aborts = _AbortedFilter(aborted) if self._committed else None
        for h, data, rel in batches:
            skip = h.is_control
            if aborts is not None and h.producer_id >= 0:
                skip = aborts.skip(h, data, rel)
            if not skip:
                for off, ts, key, value, headers in _native.decode_batch(data, rel, check):
                    if off >= pos:
                        buf.append(ConsumerRecord(tp.topic, tp.partition, off, ts, h.timestamp_type,
                                                  key, value, headers))
            # Positions move past whole batches (compacted, control or aborted batches included).
            if not buf:
                self._positions[tp] = h.next_offset
                pos = h.next_offset
            self._fill_end[tp] = h.next_offset

    def poll_batches(self, timeout_ms: int = 0, max_bytes: int | None = None) -> list[RawBatch]:
        """Stored batches from each assigned partition, as on disk (still compressed).

        Batches as stored: control batches and (under read_committed, below
        the LSO) aborted transactions' batches included -- the caller decodes.
        """
        self._check()
        deadline = time.monotonic() + timeout_ms / 1000.0
        per_part = max_bytes or self._cfg["max_partition_fetch_bytes"]
        while True:
            self._ensure_group()
            self._maybe_auto_commit(quiet=True)
            out: list[RawBatch] = []
            for tp in self._positions:
                if self._buffered[tp]:
                    self._buffered[tp].clear()
                self._fill_end.pop(tp, None)
                for h, data, rel in self._fetch_batches(tp, per_part):
                    out.append(RawBatch(tp.topic, tp.partition, h.base_offset, h.last_offset,
                                        data[rel:rel + h.size]))
                    self._positions[tp] = h.next_offset
            remaining = deadline - time.monotonic()
            if out or remaining <= 0:
                return out
            self._engine.wait_for_data(min(remaining, 0.05))

    def close(self) -> None:
        """Close; a group member commits (with auto-commit) and leaves its group first."""
        if self._closed:
            return
        if self._group is not None:
            try:
                self._maybe_auto_commit(force=True, quiet=True)
            finally:
                self._group.close()
        self._closed = True
        self._buffered.clear()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _AbortedFilter:
    """Kafka's consumer rule for one read_committed read, one decision per batch (not per record).

    `aborted`: [(producer_id, first_offset)] of the read; before a batch of a
    producer the entries starting at or below its last offset mark their
    producer aborted; that producer's transactional batches are skipped until
    its ABORT marker.
    """

    __slots__ = ("_pending", "_i", "_active")

    def __init__(self, aborted) -> None:
        self._pending = sorted((f, p) for p, f in aborted)
        self._i = 0
        self._active: set[int] = set()

    def skip(self, h, data, rel: int) -> bool:
        pending = self._pending
        while self._i < len(pending) and pending[self._i][0] <= h.last_offset:
            self._active.add(pending[self._i][1])
            self._i += 1
        if h.is_control:
            if h.producer_id in self._active and _native.read_control_record(data, rel)[0] == 0:
                self._active.discard(h.producer_id)
            return True
        return h.is_transactional and h.producer_id in self._active
