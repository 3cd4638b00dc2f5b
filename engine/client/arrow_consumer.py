"""The remote consumer of :func:`engine.connect`: Kafka Fetch responses decoded
straight into ``pyarrow.RecordBatch``es (``engine.KAFKA_SCHEMA``) by the native
``ColumnScanner`` -- no Python object per record.

Partitions come from ``assign`` or from ``subscribe`` in a consumer group
(``engine.client.group.GroupMember`` over a ``WireTransport``: the classic
protocol, so a group may mix these consumers with confluent-kafka / Java ones).

Read-ahead (engine/client/arrow_fetcher.py): one background fetcher thread per
broker, each with its own ``WireClient`` (connection and fetch session), sends a
Fetch for the assigned partitions that broker leads and scans the answer into
record batches while the caller works on the last ones (``fetch.min.bytes``, ``fetch.max.wait.ms``, ``fetch.max.bytes``,
``max.partition.fetch.bytes``).  Results carry the position they were fetched
from and a generation number; ``poll_arrow`` only hands out rows that start
exactly at the consumer's position in the current generation (a ``seek`` or a
rebalance starts a new one), so a late answer can never produce a wrong row.

Errors: NOT_LEADER_OR_FOLLOWER and other retriable partition errors refresh the
leader and fetch again; a lost connection, a stall past ``request.timeout.ms``
or an unparseable answer is retried with backoff, and raised from
``poll_arrow`` as ``KafkaConnectionError`` (naming the broker and partitions)
once the broker has failed for longer than ``request.timeout.ms``; a corrupt
batch (CRC with ``check.crcs``, structure always) raises ``CorruptRecordError``
naming broker, topic-partition and fetch offset; OFFSET_OUT_OF_RANGE applies
``auto.offset.reset`` (``none``: ``OffsetOutOfRangeError``).

Transactions: ``isolation.level=read_committed`` sends isolation_level 1
(Fetch stops at the last stable offset; latest / ``end_offsets`` /
``seek_to_end`` are the LSO) and hands each Fetch answer's aborted list to the
scanner, which drops aborted records natively; control batches never become
rows under either level.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import (
    ClosedError,
    InvalidConfigError,
    KafkaApiError,
    OffsetOutOfRangeError,
)
from ._types import OffsetAndTimestamp, TopicPartition
from ._types import as_topic_partition as _tp
from .arrow_fetcher import Fetchers
from .wire import EARLIEST, LATEST, WireClient

__all__ = ["RemoteConsumer"]


class RemoteConsumer:
    """See the module docstring.  Made by ``engine.connect(...).consumer()``."""

    def __init__(self, make_client, bootstrap: str, cfg: dict[str, Any]):
        if str(cfg["isolation.level"]) not in ("read_uncommitted", "read_committed"):
            raise InvalidConfigError(
                f"isolation.level must be read_uncommitted or read_committed, got {cfg['isolation.level']!r}")
        self._isolation = 1 if str(cfg["isolation.level"]) == "read_committed" else 0
        if cfg["auto.offset.reset"] not in ("earliest", "latest", "none"):
            raise InvalidConfigError(f"auto.offset.reset must be earliest, latest or none, "
                                     f"got {cfg['auto.offset.reset']!r}")
        self._cfg = cfg
        self._client: WireClient = make_client()
        self._positions: dict[TopicPartition, int | None] = {}
        self._pending: dict[TopicPartition, list] = {}     # rows fetched beyond max_records
        self._closed = False
        self._group = None
        if cfg.get("group.id"):
            from .group import GroupMember, WireTransport
            self._group = GroupMember(
                WireTransport(bootstrap, client_id=cfg["client.id"],
                              request_timeout_ms=cfg["request.timeout.ms"], security=self._client.security),
                str(cfg["group.id"]), partitions_for=self._client.partition_count,
                group_instance_id=cfg.get("group.instance.id"),
                session_timeout_ms=cfg["session.timeout.ms"], rebalance_timeout_ms=cfg["max.poll.interval.ms"],
                heartbeat_interval_ms=cfg["heartbeat.interval.ms"], max_poll_interval_ms=cfg["max.poll.interval.ms"],
                assignors=tuple(s.strip() for s in str(cfg["partition.assignment.strategy"]).split(",")))
        self._next_commit = time.monotonic() + cfg["auto.commit.interval.ms"] / 1000.0
        self._fetcher = Fetchers(make_client, cfg)
        self._gen = 0
        self._fetch_pos: dict[TopicPartition, int] = {}
        self._dirty = True

    # -- assignment ----------------------------------------------------------------------
    def assign(self, partitions: Iterable[Any]) -> None:
        self._check()
        self._positions = {_tp(x): None for x in partitions}
        self._pending.clear()
        self._dirty = True

    def subscribe(self, topics: Iterable[str] | str) -> None:
        self._check()
        if self._group is None:
            raise InvalidConfigError("subscribe() needs group.id (or use assign())")
        topics = [topics] if isinstance(topics, str) else list(topics)
        self._group.subscribe(topics)

    def assignment(self) -> list[TopicPartition]:
        return sorted(self._positions)

    def seek(self, partition: Any, offset: int) -> None:
        tp = _tp(partition)
        if tp not in self._positions:
            raise InvalidConfigError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        self._positions[tp] = int(offset)
        self._pending.pop(tp, None)
        self._dirty = True

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        self._seek_to(partitions, EARLIEST)

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        self._seek_to(partitions, LATEST)

    def _seek_to(self, partitions, which: int) -> None:
        tps = [_tp(x) for x in partitions] if partitions is not None else list(self._positions)
        for tp, (off, _) in self._list({tp: which for tp in tps}).items():
            self.seek(tp, off)

    def position(self, partition: Any) -> int:
        tp = _tp(partition)
        if self._positions.get(tp) is None:
            self._resolve()
        return self._positions[tp]

    def _list(self, req: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
        out = self._client.list_offsets({(tp.topic, tp.partition): ts for tp, ts in req.items()},
                                        isolation_level=self._isolation)
        return {TopicPartition(*k): v for k, v in out.items()}

    def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self._list({_tp(x): EARLIEST for x in partitions}).items()}

    def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in self._list({_tp(x): LATEST for x in partitions}).items()}

    def offsets_for_times(self, timestamps: Mapping[Any, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        got = self._list({_tp(k): int(v) for k, v in timestamps.items()})
        return {tp: (None if o < 0 else OffsetAndTimestamp(o, ts)) for tp, (o, ts) in got.items()}

    # -- committing ----------------------------------------------------------------------
    def commit(self, offsets: Mapping[Any, int] | None = None) -> None:
        if self._group is None:
            raise InvalidConfigError("commit() needs group.id")
        if offsets is None:
            offsets = {tp: o for tp, o in self._positions.items() if o is not None}
        self._group.commit({(tp.topic, tp.partition): (int(o), None)
                            for tp, o in ((_tp(k), v) for k, v in offsets.items())})

    def group_metadata(self):
        """This member's ConsumerGroupMetadata (group id, generation, member id, instance id) for
        a transactional producer's ``send_offsets_to_transaction`` (consume-transform-produce):
        the offsets commit only while this member still holds its generation."""
        from ._types import ConsumerGroupMetadata
        if self._group is None:
            raise InvalidConfigError("group_metadata() needs group.id")
        g = self._group
        with g._lock:
            return ConsumerGroupMetadata(g.group_id, g.generation_id, g.member_id, g.group_instance_id)

    def committed(self, partitions: Iterable[Any]) -> dict[TopicPartition, int | None]:
        if self._group is None:
            raise InvalidConfigError("committed() needs group.id")
        got = self._group.committed([tuple(_tp(x)) for x in partitions])
        return {TopicPartition(*k): (v if v is not None and v >= 0 else None) for k, v in got.items()}

    def _maybe_auto_commit(self, force: bool = False) -> None:
        if self._group is None or not self._cfg["enable.auto.commit"] or not self._group.assignment:
            return
        if force or time.monotonic() >= self._next_commit:
            try:
                self.commit()
            except KafkaApiError:
                if not force:
                    raise
            self._next_commit = time.monotonic() + self._cfg["auto.commit.interval.ms"] / 1000.0

    def _ensure_group(self) -> None:
        g = self._group
        if g is None or not g._topics:
            return
        g.poll_tick()
        if not g.needs_rejoin:
            return
        self._maybe_auto_commit(force=True)
        assigned = [TopicPartition(t, p) for t, p in g.join()]
        committed = self.committed(assigned) if assigned else {}
        self._positions = {tp: committed.get(tp) for tp in assigned}
        self._pending.clear()
        self._dirty = True

    # -- polling ------------------------------------------------------------------------
    def _resolve(self) -> None:
        """Positions still unknown take auto.offset.reset."""
        todo = [tp for tp, o in self._positions.items() if o is None]
        if not todo:
            return
        reset = self._cfg["auto.offset.reset"]
        if reset == "none":
            raise OffsetOutOfRangeError(f"no committed offset for {todo[0].topic}-{todo[0].partition} "
                                        "and auto.offset.reset=none")
        for tp, (off, _) in self._list({tp: EARLIEST if reset == "earliest" else LATEST for tp in todo}).items():
            self._positions[tp] = off
        self._dirty = True

    def poll_arrow(self, max_records: int | None = None, timeout_ms: int = 0) -> list:
        """Record batches (``pyarrow.RecordBatch``, ``engine.KAFKA_SCHEMA``) of up to `max_records`
        rows (default ``max.poll.records``) from the assigned partitions, waiting up to `timeout_ms`
        for the first."""
        self._check()
        limit = int(max_records if max_records is not None else self._cfg["max.poll.records"])
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
        self._ensure_group()
        self._maybe_auto_commit()
        self._resolve()
        if self._dirty:
            self._restart()
        out: list = []
        rows = self._drain_pending(out, 0, limit)
        while rows < limit:
            left = deadline - time.monotonic()
            try:
                item = self._fetcher.out.get(timeout=max(left, 0)) if (left > 0 and not out) \
                    else self._fetcher.out.get_nowait()
            except queue.Empty:
                break
            gen, tp, start, batch, nxt = item
            if gen != self._gen:
                continue
            if isinstance(batch, BaseException):
                if isinstance(batch, OffsetOutOfRangeError) and tp is not None \
                        and self._cfg["auto.offset.reset"] != "none" and self._fetch_pos.get(tp) == start:
                    self._positions[tp] = None
                    self._pending.pop(tp, None)
                    self._resolve()
                    self._restart()
                    continue
                raise batch
            if tp not in self._positions or self._fetch_pos.get(tp) != start:
                continue          # fetched for a position the caller has left
            self._fetch_pos[tp] = nxt
            self._pending.setdefault(tp, []).append(batch)
            rows = self._drain_pending(out, rows, limit)
        return out

    def _restart(self) -> None:
        self._fetch_pos = {tp: o for tp, o in self._positions.items() if o is not None}
        self._pending.clear()
        self._gen = self._fetcher.restart(self._fetch_pos, self._client)
        self._dirty = False

    def _drain_pending(self, out: list, rows: int, limit: int) -> int:
        """Move pending rows (oldest first per partition) to `out` up to `limit` rows; the
        position of a partition is its first row still pending, else where its fetch goes on."""
        for tp in list(self._pending):
            q = self._pending[tp]
            while q and rows < limit:
                b = q[0]
                room = limit - rows
                if b.num_rows > room:
                    out.append(b.slice(0, room))
                    q[0] = b.slice(room)
                    rows += room
                else:
                    out.append(b)
                    rows += b.num_rows
                    q.pop(0)
            if q:
                self._positions[tp] = q[0].column(4)[0].as_py()
            else:
                del self._pending[tp]
                self._positions[tp] = self._fetch_pos[tp]
        return rows

    def _check(self) -> None:
        if self._closed:
            raise ClosedError("the consumer is closed")

    def close(self) -> None:
        if self._closed:
            return
        try:
            self._maybe_auto_commit(force=True)
        finally:
            self._closed = True
            self._fetcher.stop(timeout=self._cfg["fetch.max.wait.ms"] / 1000.0 + 1)
            if self._group is not None:
                self._group.close()
            self._client.close()

    def __enter__(self) -> RemoteConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
