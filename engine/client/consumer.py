"""The embedded consumer: assign / seek / poll over an open Engine.

Positions are per partition, as in Kafka: the offset of the next record to
return.  ``poll`` decodes records (decompressing as needed) into
:class:`ConsumerRecord` tuples; ``poll_batches`` hands out stored batches
untouched, for callers that decode themselves.  Reads never go above the high
watermark.  A consumer is not thread-safe (like Kafka's); use one per thread.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Iterable, Mapping

from .. import _native
from ..errors import ClosedError, InvalidConfigError, OffsetOutOfRangeError
from ._types import ConsumerRecord, OffsetAndTimestamp, RawBatch, TopicPartition

__all__ = ["Consumer"]

_SETTINGS = {
    "max_poll_records": 500,
    "fetch_max_bytes": 52428800,
    "max_partition_fetch_bytes": 1048576,
    "auto_offset_reset": "latest",
    "check_crcs": True,
}


def _tp(item: Any) -> TopicPartition:
    if isinstance(item, TopicPartition):
        return item
    topic, partition = item
    return TopicPartition(str(topic), int(partition))


class Consumer:
    """Reads assigned partitions of an Engine.

    Settings (Kafka's consumer keys, with ``.`` written as ``_``):
    ``max_poll_records`` (500), ``fetch_max_bytes`` (50 MiB),
    ``max_partition_fetch_bytes`` (1 MiB), ``auto_offset_reset``
    ("latest", "earliest" or "none"), ``check_crcs`` (True).
    """

    def __init__(self, engine: Any, **settings: Any):
        unknown = set(settings) - set(_SETTINGS)
        if unknown:
            raise InvalidConfigError(f"unknown consumer setting(s): {', '.join(sorted(unknown))}")
        cfg = {**_SETTINGS, **settings}
        if cfg["auto_offset_reset"] not in ("latest", "earliest", "none"):
            raise InvalidConfigError(
                f"auto_offset_reset must be latest, earliest or none, got {cfg['auto_offset_reset']!r}")
        for key in ("max_poll_records", "fetch_max_bytes", "max_partition_fetch_bytes"):
            if not isinstance(cfg[key], int) or cfg[key] < 1:
                raise InvalidConfigError(f"{key} must be a positive integer, got {cfg[key]!r}")
        self._engine = engine
        self._cfg = cfg
        self._positions: dict[TopicPartition, int | None] = {}
        self._buffered: dict[TopicPartition, deque] = {}
        self._rr = 0
        self._closed = False

    # -- assignment and positions ------------------------------------------
    def assign(self, partitions: Iterable[Any]) -> None:
        """Replace the assignment.  Unknown topics or partitions raise UnknownTopicOrPartitionError."""
        self._check()
        tps = [_tp(p) for p in partitions]
        for tp in tps:
            self._engine.log(tp.topic, tp.partition)
        self._positions = {tp: self._positions.get(tp) for tp in tps}
        self._buffered = {tp: self._buffered.get(tp, deque()) for tp in tps}

    def subscribe_all(self, topic: str) -> None:
        """Assign every partition of `topic` (a convenience; groups come with the coordinator)."""
        n = self._engine.partitions_for(topic)
        self.assign([(topic, p) for p in range(n)])

    def assignment(self) -> list[TopicPartition]:
        return list(self._positions)

    def _log(self, tp: TopicPartition):
        return self._engine.log(tp.topic, tp.partition)

    def seek(self, partition: Any, offset: int) -> None:
        tp = _tp(partition)
        if tp not in self._positions:
            raise ValueError(f"{tp} is not assigned")
        if offset < 0:
            raise ValueError(f"offset must be >= 0, got {offset}")
        self._positions[tp] = offset
        self._buffered[tp].clear()

    def seek_to_beginning(self, partitions: Iterable[Any] | None = None) -> None:
        for tp in (self._positions if partitions is None else map(_tp, partitions)):
            self.seek(tp, self._log(tp).log_start_offset)

    def seek_to_end(self, partitions: Iterable[Any] | None = None) -> None:
        for tp in (self._positions if partitions is None else map(_tp, partitions)):
            self.seek(tp, self._log(tp).high_watermark)

    def position(self, partition: Any) -> int:
        tp = _tp(partition)
        pos = self._positions[tp]
        if pos is None:
            pos = self._reset(tp)
        return pos

    def _reset(self, tp: TopicPartition) -> int:
        policy = self._cfg["auto_offset_reset"]
        log = self._log(tp)
        if policy == "none":
            raise OffsetOutOfRangeError(f"no position for {tp} and auto_offset_reset is none")
        pos = log.log_start_offset if policy == "earliest" else log.high_watermark
        self._positions[tp] = pos
        self._buffered[tp].clear()
        return pos

    def beginning_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        return {tp: self._log(tp).log_start_offset for tp in map(_tp, partitions)}

    def end_offsets(self, partitions: Iterable[Any]) -> dict[TopicPartition, int]:
        """The high watermark of each partition (the end a consumer can read to)."""
        return {tp: self._log(tp).high_watermark for tp in map(_tp, partitions)}

    def offsets_for_times(self, timestamps: Mapping[Any, int]) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition the earliest offset whose timestamp >= the given one (None past the end)."""
        out: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        for item, ts in timestamps.items():
            tp = _tp(item)
            found = self._log(tp).offset_for_timestamp(ts)
            out[tp] = None if found is None else OffsetAndTimestamp(found[0], found[1])
        return out

    # -- fetching --------------------------------------------------------
    def _check(self) -> None:
        if self._closed:
            raise ClosedError("the consumer is closed")

    def _fetch_batches(self, tp: TopicPartition, max_bytes: int):
        """(headers, data) of complete stored batches from the position, at most max_bytes (>= 1 batch)."""
        pos = self._positions[tp]
        if pos is None:
            pos = self._reset(tp)
        log = self._log(tp)
        log.refresh()  # read-only opens: the writer's published high watermark
        if pos >= log.high_watermark and pos <= log.log_end_offset:
            return []
        try:
            info = log.read(pos, max_bytes)
        except OffsetOutOfRangeError:
            if self._cfg["auto_offset_reset"] == "none":
                raise
            self._reset(tp)
            return []
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
                budget -= take
        self._rr = (self._rr + 1) % n
        return out

    def _fill(self, tp: TopicPartition, max_bytes: int) -> None:
        buf = self._buffered[tp]
        batches = self._fetch_batches(tp, max_bytes)  # resolves an unset position first
        pos = self._positions[tp]
        check = self._cfg["check_crcs"]
        for h, data, rel in batches:
            if h.is_control:
                continue
            for off, ts, key, value, headers in _native.decode_batch(data, rel, check):
                if off >= pos:
                    buf.append(ConsumerRecord(tp.topic, tp.partition, off, ts, h.timestamp_type,
                                              key, value, headers))
            # Positions move past whole batches (compacted or control batches included).
            if not buf:
                self._positions[tp] = h.next_offset
                pos = h.next_offset

    def poll_batches(self, timeout_ms: int = 0, max_bytes: int | None = None) -> list[RawBatch]:
        """Stored batches from each assigned partition, as on disk (still compressed)."""
        self._check()
        deadline = time.monotonic() + timeout_ms / 1000.0
        per_part = max_bytes or self._cfg["max_partition_fetch_bytes"]
        while True:
            out: list[RawBatch] = []
            for tp in self._positions:
                if self._buffered[tp]:
                    self._buffered[tp].clear()
                for h, data, rel in self._fetch_batches(tp, per_part):
                    out.append(RawBatch(tp.topic, tp.partition, h.base_offset, h.last_offset,
                                        data[rel:rel + h.size]))
                    self._positions[tp] = h.next_offset
            remaining = deadline - time.monotonic()
            if out or remaining <= 0:
                return out
            self._engine.wait_for_data(min(remaining, 0.05))

    def close(self) -> None:
        self._closed = True
        self._buffered.clear()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
