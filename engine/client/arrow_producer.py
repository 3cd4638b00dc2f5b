"""The remote producer of :func:`engine.connect`: records to a Kafka broker (ours
or Apache Kafka) over the wire, batches built natively.

Two ways in, both the embedded producer's shape:

* ``send(topic, value, key=, headers=, timestamp=, partition=)`` appends one
  record to the topic's native ``RecordAccumulator``; a sender thread closes a
  partition's batch when it is full (``batch.size``) or ``linger.ms`` old and
  sends it.  Returns a :class:`RecordFuture` (``result()`` ->
  ``engine.RecordMetadata``).
* ``send_batch(topic, values=, keys=, headers=, timestamps=, partitions=)``
  takes lists, pyarrow arrays or a ``pyarrow.Table`` (columns ``value``,
  ``key``, ``headers``, ``timestamp``, ``partition``; pandas and Polars go
  through ``pyarrow.Table.from_pandas`` / ``.to_arrow()``) and turns them into
  record batches with ``engine._native.build_batches`` -- no Python object per
  record (keyed records are partitioned by Kafka's murmur2 over the key column in
  the native core: ``engine._native.partition_keys``).
  Synchronous: returns the base offset of every batch once acknowledged.

Idempotence (``enable.idempotence``, default true as in Kafka 3+): the producer
asks InitProducerId once and writes producer id, epoch and a per-partition
sequence into every batch; a retried batch keeps its bytes, so the broker drops
a duplicate (DUPLICATE_SEQUENCE_NUMBER counts as success).  Retriable errors
and lost connections are retried with ``retry.backoff.ms`` until
``delivery.timeout.ms``; then the batch's futures fail.  A batch that failed for good
leaves a gap in its partition's sequences, so before the next batch the producer bumps
its epoch on the client, as Kafka's idempotent producer does (KIP-360; a new producer id
after epoch 32767), and every partition's sequence starts again at 0.

Sending is Kafka's Sender (engine/client/produce_pipeline.py): per broker, one
Produce request carries the next batch of every partition it leads, up to
``max.in.flight.requests.per.connection`` (default 5, at most 5 with idempotence, as
Kafka) requests in flight per connection; after a retriable error or a lost answer a
partition's batches from the failed one on are sent again in order (same bytes, same
sequence numbers), so nothing is duplicated or reordered.  ``send_batch`` builds its
batches one at a time while earlier ones are on the wire (``build_batches`` with
``start``/``max_batches``, sequences stamped natively), so the client builds while
the broker writes.
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import Any

from .. import _native
from ..errors import ClosedError, KafkaApiError, UnknownTopicOrPartitionError
from ._types import RecordMetadata
from .partitioning import key_partitions, split
from .produce_pipeline import Entry, ProducePipeline
from .wire import KafkaConnectionError, WireClient

__all__ = ["RecordFuture", "RemoteProducer"]

_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_MAX_EPOCH = 32767                 # Short.MAX_VALUE: then a new producer id


def stamp_batch(batch: bytearray, producer_id: int, epoch: int, sequence: int) -> int:
    """Write producer id/epoch/base sequence into a built batch and fix its CRC; its record count."""
    return _native.stamp_producer(batch, producer_id, epoch, sequence)


class _BatchFuture:
    """The records of one drain window of one partition: record batches (Kafka takes
    exactly one batch per partition per Produce request from v3), each with the index of
    its first record and the base offset it got; done when every batch is answered."""

    __slots__ = ("event", "starts", "bases", "error", "topic", "partition", "pending")

    def __init__(self, topic: str, partition: int):
        self.event = threading.Event()
        self.starts: list[int] = []
        self.bases: list = []
        self.pending = 0
        self.error: BaseException | None = None
        self.topic = topic
        self.partition = partition

    def offset_of(self, index: int) -> int:
        i = bisect.bisect_right(self.starts, index) - 1
        base = self.bases[i] if i >= 0 else -1
        return -1 if base is None or base < 0 else base + index - self.starts[i]


class RecordFuture:
    """Where one sent record landed (Kafka's Future<RecordMetadata>)."""

    __slots__ = ("_batch", "_index", "timestamp")

    def __init__(self, batch: _BatchFuture, index: int, timestamp: int):
        self._batch, self._index, self.timestamp = batch, index, timestamp

    def done(self) -> bool:
        return self._batch.event.is_set()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        if not self._batch.event.wait(timeout):
            raise TimeoutError("the record was not acknowledged in time")
        if self._batch.error is not None:
            raise self._batch.error
        b = self._batch
        return RecordMetadata(b.topic, b.partition, b.offset_of(self._index), self.timestamp)

    get = result

    def exception(self) -> BaseException | None:
        return self._batch.error if self._batch.event.is_set() else None


class _TopicState:
    def __init__(self, topic: str, nparts: int, codec: int, batch_size: int, pid: int, epoch: int):
        self.topic = topic
        self.nparts = nparts
        self.acc = _native.RecordAccumulator(nparts, codec, batch_size, pid, epoch)
        self.futures: dict[int, _BatchFuture] = {}
        self.counts: dict[int, int] = {}
        self.first_at: dict[int, float] = {}
        self.sticky = 0
        self.refreshed = time.monotonic()


class RemoteProducer:
    """See the module docstring.  Made by ``engine.connect(...).producer()``."""

    def __init__(self, client: WireClient, cfg: dict[str, Any]):
        self._client = client
        self._cfg = cfg
        self._codec = _CODECS[cfg["compression.type"]]
        self._batch_size = int(cfg["batch.size"])
        self._linger_s = float(cfg["linger.ms"]) / 1000.0
        self._acks = cfg["acks"]
        self._delivery_s = float(cfg["delivery.timeout.ms"]) / 1000.0
        self._backoff_s = float(cfg["retry.backoff.ms"]) / 1000.0
        self._retries = int(cfg["retries"])
        self._max_age_s = float(cfg["metadata.max.age.ms"]) / 1000.0
        self._pid, self._epoch = -1, -1
        if cfg["enable.idempotence"]:
            self._pid, self._epoch = client.init_producer_id()
        self._seq: dict[tuple[str, int], int] = {}
        self._bump = False                      # a batch failed: new epoch before the next sequence
        self._in_flight = int(cfg["max.in.flight.requests.per.connection"])
        self._pipe = ProducePipeline(
            client, acks=-1 if str(self._acks) == "all" else int(self._acks),
            request_timeout_ms=int(cfg["request.timeout.ms"]), max_in_flight=self._in_flight,
            retries=self._retries, retry_backoff_ms=int(cfg["retry.backoff.ms"]),
            delivery_timeout_ms=int(cfg["delivery.timeout.ms"]))
        self._topics: dict[str, _TopicState] = {}
        self._lock = threading.RLock()          # accumulators and the wire client
        self._closed = False
        self._wake = threading.Event()
        self._sender = threading.Thread(target=self._sender_loop, name="remote-producer-sender", daemon=True)
        self._sender.start()

    @property
    def producer_id(self) -> tuple[int, int]:
        return self._pid, self._epoch

    def _state(self, topic: str) -> _TopicState:
        st = self._topics.get(topic)
        if st is not None and time.monotonic() - st.refreshed > self._max_age_s:
            st.refreshed = time.monotonic()          # metadata.max.age.ms: partitions may have grown
            if self._partition_count(topic) != st.nparts:
                for p in list(st.futures):
                    self._send_window(st, p)
                st = None
        if st is None:
            n = self._partition_count(topic)
            st = self._topics[topic] = _TopicState(topic, n, self._codec, self._batch_size, self._pid, self._epoch)
        return st

    def _partition_count(self, topic: str) -> int:
        """Partitions of `topic`, waiting up to max.block.ms for a topic the cluster does not
        know yet (just created, metadata still spreading), as Kafka's producer does."""
        deadline = time.monotonic() + self._cfg["max.block.ms"] / 1000.0
        while True:
            try:
                return self._client.partition_count(topic, auto_create=bool(self._cfg["allow.auto.create.topics"]))
            except UnknownTopicOrPartitionError:
                if time.monotonic() + self._backoff_s > deadline:
                    raise UnknownTopicOrPartitionError(
                        f"topic {topic!r} not present in metadata after max.block.ms "
                        f"({self._cfg['max.block.ms']} ms)") from None
                time.sleep(self._backoff_s)

    def partitions_for(self, topic: str) -> list[int]:
        with self._lock:
            return list(range(self._state(topic).nparts))

    # -- one record -------------------------------------------------------------------
    def send(self, topic: str, value: Any, key: Any = None, headers: Any = None,
             timestamp: int | None = None, partition: int | None = None) -> RecordFuture:
        if self._closed:
            raise ClosedError("the producer is closed")
        with self._lock:
            st = self._state(topic)
            if partition is None:
                partition = st.sticky if key is None else _native.default_partition(
                    key.encode() if isinstance(key, str) else key, st.nparts)
            elif not 0 <= partition < st.nparts:
                raise UnknownTopicOrPartitionError(f"partition {partition} of {topic!r} does not exist")
            if timestamp is None:
                timestamp = int(time.time() * 1000)
            fut = st.futures.get(partition)
            if fut is None:
                fut = st.futures[partition] = _BatchFuture(topic, partition)
                st.counts[partition] = 0
                st.first_at[partition] = time.monotonic()
            st.acc.append(partition, value, key, headers, timestamp)
            index = st.counts[partition]
            st.counts[partition] = index + 1
            if st.acc.size_in_bytes(partition) >= self._batch_size or self._linger_s == 0:
                self._wake.set()
            return RecordFuture(fut, index, timestamp)

    # -- many records -------------------------------------------------------------------
    def send_batch(self, topic: str, values: Any = None, keys: Any = None, headers: Any = None,
                   timestamps: Any = None, partitions: Any = None) -> list[tuple[int, int, int]]:
        """Send columns of records; returns [(partition, base_offset, record_count)] per batch."""
        if self._closed:
            raise ClosedError("the producer is closed")
        values, keys, headers, timestamps, partitions = _columns(values, keys, headers, timestamps, partitions)
        n = len(values)
        for name, col in (("keys", keys), ("timestamps", timestamps), ("headers", headers)):
            if col is not None and len(col) != n:
                raise ValueError(f"{name} and values differ in length ({len(col)} != {n})")
        with self._lock:
            st = self._state(topic)
            groups = _group(st, values, keys, headers, timestamps, partitions)
            for p, *_ in groups:
                if not 0 <= p < st.nparts:
                    raise UnknownTopicOrPartitionError(f"partition {p} of {topic!r} does not exist")
            for p, *_ in groups:
                self._send_window(st, p)          # records sent earlier go first
            return self._send_groups(topic, groups)

    def _send_groups(self, topic: str, groups: list) -> list[tuple[int, int, int]]:
        """Build the groups' batches one at a time, each queued on the pipeline as soon as
        it is built (a few ahead per partition), pumping the pipeline in between: the
        broker works on batch k while batch k+1 is built.  Waits for every answer."""
        mine: list[list[Entry]] = [[] for _ in groups]
        failed: list[Entry] = []

        def on_done(e: Entry) -> None:
            if e.error is not None:
                failed.append(e)
                self._batch_failed(e)
        todo = [[gi, 0] for gi, g in enumerate(groups) if len(g[1])]
        ahead = max(2, self._in_flight)
        while True:
            built = False
            for item in list(todo) if not failed else ():
                gi, start = item
                p, vals, ks, hs, tss = groups[gi]
                n = len(vals)
                while start < n and self._pipe.queued(topic, p) < ahead:
                    self._maybe_bump_epoch()
                    seq = self._seq.get((topic, p), 0) if self._pid >= 0 else -1
                    for b in _native.build_batches(vals, ks, tss, hs, self._codec, self._batch_size, -1,
                                                   self._pid, self._epoch, seq, start, 1):
                        count = _native.read_header(b).records_count
                        if self._pid >= 0:
                            self._seq[(topic, p)] = (seq + count) & 0x7FFFFFFF
                        mine[gi].append(self._pipe.add(Entry(topic, p, b, count, on_done)))
                        start += count
                        built = True
                item[1] = start
                if start >= n:
                    todo.remove(item)
            if (not todo or failed) and all(e.done for es in mine for e in es):
                break
            self._pipe.pump(block=not built)
        if failed:
            raise min(failed, key=lambda e: e.order).error
        return [(groups[gi][0], e.base, e.count) for gi, es in enumerate(mine) for e in es]

    # -- the sender ------------------------------------------------------------------------
    def _send_window(self, st: _TopicState, p: int) -> None:
        """Close partition p's open batch and queue its batches on the pipeline (caller holds
        the lock); the window's future is done when every batch is answered."""
        fut = st.futures.pop(p, None)
        if fut is None:
            return
        st.counts.pop(p, None)
        st.first_at.pop(p, None)
        self._maybe_bump_epoch()
        seq = self._seq.get((st.topic, p), 0) if self._pid >= 0 else -1
        data, count = st.acc.drain(p, seq, self._pid, self._epoch) if self._pid >= 0 else st.acc.drain(p, seq)
        if self._pid >= 0:
            self._seq[(st.topic, p)] = (seq + count) & 0x7FFFFFFF
        if st.sticky == p and st.nparts > 1:
            st.sticky = (p + 1) % st.nparts
        headers, _ = _native.list_batches(data)
        start = 0
        for h in headers:
            fut.starts.append(start)
            start += h.records_count
        fut.bases = [None] * len(headers)
        fut.pending = len(headers)
        if not headers:
            fut.event.set()
            return

        def on_done(e: Entry) -> None:
            fut.bases[e.index] = e.base
            if e.error is not None:
                self._batch_failed(e)
                if fut.error is None:
                    fut.error = e.error
            fut.pending -= 1
            if fut.pending == 0:
                fut.event.set()
        view = memoryview(data)
        for i, h in enumerate(headers):
            e = Entry(st.topic, p, view[h.position:h.position + h.size], h.records_count, on_done)
            e.index = i
            self._pipe.add(e)

    # -- sequences after a failed batch (Kafka's TransactionManager, KIP-360) ----------------
    def _batch_failed(self, e: Entry) -> None:
        """A batch failed for good: its sequence numbers may never have landed, so every later
        batch of its partition would be OUT_OF_ORDER_SEQUENCE_NUMBER.  As Kafka's idempotent
        producer, bump the epoch before the next sequence is given out."""
        if self._pid >= 0:
            self._bump = True

    def _maybe_bump_epoch(self) -> None:
        """Bump the epoch (caller holds the lock) as Kafka's idempotent producer does, on the
        client (TransactionManager.bumpIdempotentProducerEpoch: a broker takes a newer epoch of a
        producer id when its sequence starts at 0); at the last epoch, a new producer id.  Every
        partition's sequence starts again at 0.  Batches already queued keep the old epoch and
        go first (a partition's batches go in order, and its first one under the new epoch
        alone: ProducePipeline.new_producer_id), so a broker sees the old epoch end, then the new."""
        if not self._bump:
            return
        if self._epoch < _MAX_EPOCH:
            self._epoch += 1
        else:
            try:
                self._pid, self._epoch = self._client.init_producer_id()
            except (KafkaApiError, KafkaConnectionError):
                return      # asked again before the next batch; this one may be refused meanwhile
        self._bump = False
        self._seq.clear()
        self._pipe.new_producer_id()

    def _sender_loop(self) -> None:
        period = max(min(self._linger_s, 0.05) / 2, 0.001)
        while not self._closed:
            if not self._pipe.wait_readable(period):   # answers in flight: woken by them
                self._wake.wait(period)
            self._wake.clear()
            with self._lock:
                self._send_due(force=False)
                self._pipe.receive_ready()

    def _send_due(self, force: bool) -> int:
        sent = 0
        with self._lock:
            now = time.monotonic()
            for st in list(self._topics.values()):
                for p in list(st.futures):
                    if force or now - st.first_at[p] >= self._linger_s \
                            or st.acc.size_in_bytes(p) >= self._batch_size:
                        self._send_window(st, p)
                        sent += 1
            if sent:
                self._pipe.pump(block=False)      # every due partition's batch in one request per broker
        return sent

    def flush(self, timeout: float | None = None) -> int:
        """Send every open batch now and wait for all answers; returns how many windows were sent."""
        with self._lock:
            sent = self._send_due(force=True)
            while self._pipe.unfinished:
                self._pipe.pump(block=True)
        return sent

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._wake.set()
        self._sender.join()

    def __enter__(self) -> RemoteProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _columns(values, keys, headers, timestamps, partitions):
    """Accept a pyarrow.Table (or RecordBatch) with Kafka's column names in place of `values`."""
    if hasattr(values, "column_names") and hasattr(values, "column"):
        t = values
        cols = set(t.column_names)

        def col(name, given):
            if given is not None or name not in cols:
                return given
            c = t.column(name)
            return c.combine_chunks() if hasattr(c, "combine_chunks") else c
        values, keys, headers = col("value", None), col("key", keys), col("headers", headers)
        timestamps, partitions = col("timestamp", timestamps), col("partition", partitions)
        if values is None:
            raise ValueError("a table given to send_batch needs a 'value' column")
    if hasattr(values, "combine_chunks"):
        values = values.combine_chunks()
    if timestamps is not None and hasattr(timestamps, "type"):
        import pyarrow as pa
        import pyarrow.compute as pc
        if pa.types.is_timestamp(timestamps.type):   # Arrow timestamps -> epoch milliseconds
            timestamps = pc.cast(pc.cast(timestamps, pa.timestamp("ms", tz=timestamps.type.tz)), pa.int64())
        if hasattr(timestamps, "combine_chunks"):
            timestamps = timestamps.combine_chunks()
    return values, keys, headers, timestamps, partitions


def _group(st: _TopicState, values, keys, headers, timestamps, partitions) -> list[tuple]:
    """[(partition, values, keys, headers, timestamps)]: one group per target partition."""
    import numpy as np

    if isinstance(partitions, int):
        return [(partitions, values, keys, headers, timestamps)]
    if partitions is None:
        if keys is None or st.nparts == 1:
            return [(st.sticky, values, keys, headers, timestamps)]
        parts = key_partitions(keys, st.nparts, st.sticky)   # murmur2 per key, natively
    else:
        parts = (partitions.to_numpy(zero_copy_only=False) if hasattr(partitions, "to_numpy")
                 else np.asarray(partitions)).astype(np.int64)
    return split(parts, values, keys, headers, timestamps)
