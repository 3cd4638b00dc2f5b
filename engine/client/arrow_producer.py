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
``delivery.timeout.ms``; then the batch's futures fail.  The batches of one
partition go pipelined: up to ``max.in.flight.requests.per.connection`` (default 5,
at most 5 with idempotence, as Kafka) Produce requests in flight on one connection;
on a retriable error the batches from the failed one on are sent again in order.
"""

from __future__ import annotations

import bisect
import struct
import threading
import time
from typing import Any

from .. import _native
from ..errors import ClosedError, EngineError, KafkaApiError, UnknownTopicOrPartitionError
from ._types import RecordMetadata
from .partitioning import key_partitions, split
from .wire import KafkaConnectionError, WireClient

__all__ = ["RecordFuture", "RemoteProducer"]

DUPLICATE_SEQUENCE_NUMBER = 46
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# RecordBatch v2 header fields (kafka-storage-format.md)
_OFF_CRC, _OFF_ATTRIBUTES, _OFF_PRODUCER = 17, 21, 43


def stamp_batch(batch: bytearray, producer_id: int, epoch: int, sequence: int) -> int:
    """Write producer id/epoch/base sequence into a built batch and fix its CRC; its record count."""
    struct.pack_into(">qhi", batch, _OFF_PRODUCER, producer_id, epoch, sequence)
    struct.pack_into(">I", batch, _OFF_CRC, _native.crc32c(memoryview(batch)[_OFF_ATTRIBUTES:]))
    return struct.unpack_from(">i", batch, 57)[0]


class _BatchFuture:
    """The records of one drain window of one partition: record batches sent one per
    Produce request (Kafka takes exactly one batch per partition from v3), each with
    the index of its first record and the base offset it got."""

    __slots__ = ("event", "starts", "bases", "error", "topic", "partition")

    def __init__(self, topic: str, partition: int):
        self.event = threading.Event()
        self.starts: list[int] = []
        self.bases: list[int] = []
        self.error: BaseException | None = None
        self.topic = topic
        self.partition = partition

    def offset_of(self, index: int) -> int:
        i = bisect.bisect_right(self.starts, index) - 1
        base = self.bases[i] if i >= 0 else -1
        return -1 if base < 0 else base + index - self.starts[i]


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
            out = []
            for p, vals, ks, hs, tss in groups:
                if not 0 <= p < st.nparts:
                    raise UnknownTopicOrPartitionError(f"partition {p} of {topic!r} does not exist")
                self._send_window(st, p)          # records sent earlier go first
                built = [(b, self._stamp(topic, p, b))
                         for b in _native.build_batches(vals, ks, tss, hs, self._codec, self._batch_size)]
                bases = self._deliver_many(topic, p, built)
                out.extend((p, base, count) for base, (_, count) in zip(bases, built))
            return out

    def _stamp(self, topic: str, p: int, batch: bytearray) -> int:
        if self._pid < 0:
            return struct.unpack_from(">i", batch, 57)[0]
        seq = self._seq.get((topic, p), 0)
        count = stamp_batch(batch, self._pid, self._epoch, seq)
        self._seq[(topic, p)] = (seq + count) & 0x7FFFFFFF
        return count

    # -- the sender ------------------------------------------------------------------------
    def _send_window(self, st: _TopicState, p: int) -> None:
        """Close partition p's open batch and deliver it (caller holds the lock)."""
        fut = st.futures.pop(p, None)
        if fut is None:
            return
        st.counts.pop(p, None)
        st.first_at.pop(p, None)
        seq = self._seq.get((st.topic, p), 0) if self._pid >= 0 else -1
        data, count = st.acc.drain(p, seq)
        if self._pid >= 0:
            self._seq[(st.topic, p)] = (seq + count) & 0x7FFFFFFF
        if st.sticky == p and st.nparts > 1:
            st.sticky = (p + 1) % st.nparts
        try:
            headers, _ = _native.list_batches(data)
            start = 0
            for h in headers:
                fut.starts.append(start)
                start += h.records_count
            fut.bases.extend(self._deliver_many(st.topic, p, [
                (memoryview(data)[h.position:h.position + h.size], h.records_count) for h in headers]))
        except BaseException as e:  # the futures carry it, as Kafka's do
            fut.error = e
        fut.event.set()

    def _deliver(self, topic: str, p: int, batches: list, count: int) -> int:
        acks = -1 if str(self._acks) == "all" else int(self._acks)
        deadline = time.monotonic() + self._delivery_s
        attempt = 0
        while True:
            try:
                return self._client.produce(topic, p, batches, acks=acks,
                                            timeout_ms=int(self._cfg["request.timeout.ms"]))
            except KafkaApiError as e:
                if e.code == DUPLICATE_SEQUENCE_NUMBER:
                    return -1                     # an earlier attempt landed: not written twice
                if not e.retriable:
                    raise
                err: BaseException = e
            except KafkaConnectionError as e:
                err = e
            attempt += 1
            if attempt > self._retries or time.monotonic() + self._backoff_s > deadline:
                raise EngineError(f"delivery of {count} record(s) to {topic}-{p} failed after "
                                  f"{attempt} attempt(s) within delivery.timeout.ms: {err}") from err
            time.sleep(self._backoff_s)
            self._client.forget_leader(topic, p)   # NOT_LEADER / moved / lost: ask metadata again

    def _deliver_many(self, topic: str, p: int, batches: list) -> list[int]:
        """Deliver [(batch, record_count)] of one partition in order, up to
        ``max.in.flight.requests.per.connection`` Produce requests in flight on the leader's
        connection (one batch per request); their base offsets (-1: an earlier attempt
        landed).  A retriable error or a lost connection at batch i: the answers of the
        requests after it are read and dropped, and batches i.. are sent again in order after
        ``retry.backoff.ms`` (their bytes and sequence numbers unchanged, so the broker keeps
        the order and drops what it already has, as Kafka's producer does)."""
        in_flight = int(self._cfg["max.in.flight.requests.per.connection"])
        if in_flight <= 1 or len(batches) <= 1 or str(self._acks) == "0":
            return [self._deliver(topic, p, [b], c) for b, c in batches]
        timeout_ms = int(self._cfg["request.timeout.ms"])
        deadline = time.monotonic() + self._delivery_s
        bases: list[int] = []
        attempt = 0
        while len(bases) < len(batches):
            i = len(bases)
            window = batches[i:i + in_flight]
            sent: list = []
            err: BaseException | None = None
            send_err: BaseException | None = None
            try:
                for b, _ in window:
                    sent.append(self._client.produce_send(topic, p, [b], timeout_ms=timeout_ms))
            except (KafkaApiError, KafkaConnectionError) as e:
                send_err = e                     # the ones sent are still read below
            fatal: BaseException | None = None
            for k, handle in enumerate(sent):
                try:
                    base = self._client.produce_receive(handle)
                except KafkaApiError as e:
                    if e.code == DUPLICATE_SEQUENCE_NUMBER:
                        base = -1                # an earlier attempt landed: not written twice
                    elif e.retriable or e.code == OUT_OF_ORDER_SEQUENCE_NUMBER and err is not None:
                        err = err or e           # OUT_OF_ORDER after a failed batch: resent below
                        continue
                    else:
                        fatal = fatal or e
                        continue
                except KafkaConnectionError as e:
                    err = err or e
                    break                        # the connection is gone: the rest are unanswered
                if err is None and fatal is None:
                    bases.append(base)
            if isinstance(send_err, KafkaApiError) and not send_err.retriable:
                fatal = fatal or send_err
            if fatal is not None:
                raise fatal
            err = err or send_err
            if err is None:
                attempt = 0
                continue
            attempt += 1
            if attempt > self._retries or time.monotonic() + self._backoff_s > deadline:
                raise EngineError(f"delivery of {sum(c for _, c in batches[len(bases):])} record(s) to "
                                  f"{topic}-{p} failed after {attempt} attempt(s) within "
                                  f"delivery.timeout.ms: {err}") from err
            time.sleep(self._backoff_s)
            self._client.forget_leader(topic, p)   # NOT_LEADER / moved / lost: ask metadata again
        return bases

    def _sender_loop(self) -> None:
        period = max(min(self._linger_s, 0.05) / 2, 0.001)
        while not self._closed:
            self._wake.wait(period)
            self._wake.clear()
            self._send_due(force=False)

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
        return sent

    def flush(self, timeout: float | None = None) -> int:
        """Send every open batch now and wait for the answers; returns how many were sent."""
        return self._send_due(force=True)

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._wake.set()
        self._sender.join()

    def __enter__(self) -> "RemoteProducer":
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
