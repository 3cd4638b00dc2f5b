"""The embedded producer: records batched per partition and appended straight
to the partition logs of an open Engine — no network, no serialisation beyond
Kafka's record batch format.

Batching follows Kafka's producer: a partition's open batch is closed and
appended when it reaches ``batch_size`` bytes or has waited ``linger_ms``
(a background thread drains lingering batches), and on ``flush()``.
Partitioning follows Kafka's Java client: an explicit partition wins, else
murmur2 of the key, else a sticky partition that changes when a batch fills.

Concurrency: ``send`` may be called from several threads.  Choosing the
partition, encoding the record into the open batch and making its future
happen in one native call that holds the GIL and takes no lock
(csrc/producer.pyx); closing batches and appending them happen under the
producer lock, so a partition's batches reach the log in the order their
records were sent.

Transactions (``transactional_id``; Kafka's ``transactional.id``) use the
Engine's transaction coordinator in-process, with confluent-kafka's method
names::

    p = eng.producer(transactional_id="orders-tx")
    p.init_transactions()               # epoch bump: fences an older instance, aborts its transaction
    p.begin_transaction()
    p.send("out", b"v")
    p.send_offsets_to_transaction({("in", 0): 42}, "my-group")   # or a group metadata object
    p.commit_transaction()              # or abort_transaction()

Every batch carries the producer id, epoch, sequence and the transactional
attribute; a partition joins the transaction (AddPartitionsToTxn's work) before
its first batch is appended.  ``commit_transaction()`` returns once the
COMMIT markers are in every partition's log (and the offsets are the group's),
so read_committed readers of this Engine see the records at once.
``abort_transaction()`` drops records not yet appended (their futures fail
with TransactionAbortedError, as Kafka's) and marks the appended ones aborted.
Errors carry Kafka's codes: PRODUCER_FENCED (90) when another instance with
the same id called init_transactions() (fatal: the producer can only be
closed), INVALID_TXN_STATE (48) for a call out of order.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

from .. import _native
from ..errors import ClosedError, InvalidConfigError, TransactionAbortedError, UnknownTopicOrPartitionError
from .partitioning import key_partitions, split
from .transaction import TransactionManager

__all__ = ["AppendResult", "Producer", "SendFuture", "TransactionAbortedError"]

SendFuture = _native.SendFuture

_CODECS = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_SETTINGS = {"linger_ms": 5, "batch_size": 1048576, "compression_type": "none", "acks": "all",
             "transactional_id": None, "transaction_timeout_ms": 60000, "max_block_ms": 60000}


class AppendResult(NamedTuple):
    """Where one appended batch landed (``send_batch``)."""

    topic: str
    partition: int
    first_offset: int
    last_offset: int


class Producer(_native.ProducerCore):
    """Sends records to an Engine's topics.

    Settings (Kafka's producer keys, with ``_`` or ``.``):
    ``linger_ms`` (5), ``batch_size`` (1 MiB), ``compression_type``
    ("none", "gzip", "snappy", "lz4", "zstd"), ``acks`` (accepted for
    compatibility; an embedded append is acknowledged when the log has it,
    after fdatasync for topics with ``flush.messages=1``),
    ``transactional_id`` (None), ``transaction_timeout_ms`` (60000),
    ``max_block_ms`` (60000: how long a transactional call retries a busy
    coordinator).
    """

    def __init__(self, engine: Any, **settings: Any):
        settings = {k.replace(".", "_"): v for k, v in settings.items()}
        unknown = set(settings) - set(_SETTINGS)
        if unknown:
            raise InvalidConfigError(f"unknown producer setting(s): {', '.join(sorted(unknown))}")
        cfg = {**_SETTINGS, **settings}
        codec = str(cfg["compression_type"]).lower()
        if codec not in _CODECS:
            raise InvalidConfigError(f"compression_type must be one of {', '.join(_CODECS)}, got {codec!r}")
        if not isinstance(cfg["linger_ms"], (int, float)) or cfg["linger_ms"] < 0:
            raise InvalidConfigError(f"linger_ms must be >= 0, got {cfg['linger_ms']!r}")
        if not isinstance(cfg["batch_size"], int) or cfg["batch_size"] < 1:
            raise InvalidConfigError(f"batch_size must be a positive integer, got {cfg['batch_size']!r}")
        if str(cfg["acks"]) not in ("0", "1", "-1", "all"):
            raise InvalidConfigError(f"acks must be 0, 1, -1 or all, got {cfg['acks']!r}")
        self._engine = engine
        self._codec = _CODECS[codec]
        self._linger_s = cfg["linger_ms"] / 1000.0
        self._batch_size = cfg["batch_size"]
        self._eager = self._linger_s == 0
        self._lock = threading.RLock()
        self._txn = None
        if cfg["transactional_id"] is not None:
            self._txn = TransactionManager(self, engine, cfg)   # outside a transaction, send() raises
        self._wake = threading.Event()
        self._lingerer: threading.Thread | None = None
        if self._linger_s > 0:
            self._lingerer = threading.Thread(target=self._linger_loop, name="producer-linger",
                                              daemon=True)
            self._lingerer.start()

    # -- topics ------------------------------------------------------------
    def _accumulator(self, topic: str) -> Any:
        """The topic's accumulator, made on first use (auto-creating the topic if allowed)."""
        meta = self._engine.ensure_topic(topic)
        with self._lock:
            acc = self._accs.get(topic)
            if acc is None or acc.num_partitions != meta.partitions:
                if acc is not None:
                    self._drain_all(acc)
                acc = _native.TopicAccumulator(topic, meta.partitions, self._codec,
                                               self._batch_size, self._flush_partition)
                self._accs[topic] = acc
            return acc

    def partitions_for(self, topic: str) -> list[int]:
        return list(range(self._engine.partitions_for(topic)))

    # send() is inherited from the native ProducerCore: partition choice, encoding
    # and the future in one C call; it calls _drain_ready when a batch is full.

    def send_batch(self, topic: str, values: Any, keys: Any = None, timestamps: Any = None,
                   headers: Sequence[Any] | None = None, partition: int | None = None) -> list[AppendResult]:
        """Append many records at once (lists or pyarrow arrays); returns where each batch landed.

        With `partition` None: records with keys go to murmur2(key)'s
        partition, keyless ones to one partition per call (sticky).
        """
        if self._closed:
            raise ClosedError("the producer is closed")
        if self._txn is not None:
            self._txn.check_sending()
        acc = self._accs.get(topic) or self._accumulator(topic)
        nparts = acc.num_partitions
        n = len(values)
        for name, col in (("keys", keys), ("timestamps", timestamps), ("headers", headers)):
            if col is not None and len(col) != n:
                raise ValueError(f"{name} and values differ in length ({len(col)} != {n})")
        if partition is not None or keys is None or nparts == 1:
            target = acc.sticky if partition is None else partition
            groups = [(target, values, keys, timestamps, headers)]
        else:
            groups = split(key_partitions(keys, nparts, acc.sticky), values, keys, timestamps, headers)
        out: list[AppendResult] = []
        for p, vals, ks, tss, hs in groups:
            if not 0 <= p < nparts:
                raise UnknownTopicOrPartitionError(f"partition {p} of {topic!r} does not exist")
            batches = _native.build_batches(vals, ks, tss, hs, self._codec, self._batch_size)
            with self._lock:
                self._append_window(acc, p)  # records sent earlier go first
                for data in batches:
                    if self._txn is None:
                        info = self._engine.replicas.append_in_process(topic, p, data)
                    else:
                        info = self._txn.append(topic, p, data)
                    out.append(AppendResult(topic, p, info.first_offset, info.last_offset))
        self._engine.notify_appended()
        return out

    # -- closing batches -----------------------------------------------------------
    def _append_window(self, acc: Any, partition: int) -> None:
        """Append the partition's drain window to its log (caller holds the lock)."""
        data, count, outcome = acc.drain(partition)
        if not count:
            return
        try:
            if self._txn is None:
                info = self._engine.replicas.append_in_process(acc.topic, partition, data)
            else:
                info = self._txn.append(acc.topic, partition, data)
            if info.log_append_time is not None and info.log_append_time >= 0:
                outcome.log_append_time = info.log_append_time
            outcome.base_offset = info.first_offset
        except Exception as e:  # the futures carry it, as Kafka's do
            outcome.error = e
        self._engine.notify_appended()

    def _drain_ready(self, acc: Any, partition: int) -> None:
        with self._lock:
            for p in acc.ready():
                self._append_window(acc, p)
            if self._eager:
                self._append_window(acc, partition)

    def _drain_all(self, acc: Any) -> int:
        parts = acc.nonempty()
        for p in parts:
            self._append_window(acc, p)
        return len(parts)

    def _flush_partition(self, topic: str, partition: int) -> None:
        with self._lock:
            acc = self._accs.get(topic)
            if acc is not None:
                self._append_window(acc, partition)

    def flush(self, timeout: float | None = None) -> int:
        """Append every open batch now; returns how many partitions had records."""
        with self._lock:
            if self._txn is not None:
                self._txn.prepare_flush()
            return sum(self._drain_all(acc) for acc in list(self._accs.values()))

    def _linger_loop(self) -> None:
        period = max(self._linger_s / 2, 0.001)
        while not self._closed:
            self._wake.wait(period)
            if self._closed:
                break
            with self._lock:
                for acc in list(self._accs.values()):
                    for p in acc.expired(self._linger_s):
                        self._append_window(acc, p)

    def _discard_all(self, error: BaseException) -> int:
        """Drop every record not yet appended, failing its future with `error`."""
        n = 0
        with self._lock:
            for acc in list(self._accs.values()):
                for p in acc.nonempty():
                    _data, count, outcome = acc.drain(p)
                    if count:
                        outcome.error = error
                        n += count
        return n

    # -- transactions (confluent-kafka's names; see the module docstring) ----------------
    def _transactional(self):
        if self._txn is None:
            from ..errors import ErrorCode, api_error
            raise api_error(ErrorCode.INVALID_TXN_STATE, "this producer has no transactional_id")
        return self._txn

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id: fences older instances and completes (aborts) a
        transaction they left open; sequences start again at 0 with the new epoch."""
        self._transactional().init(timeout)

    def begin_transaction(self) -> None:
        self._transactional().begin()

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any,
                                    timeout: float | None = None) -> None:
        """Commit a consumer group's offsets with the transaction: `offsets` is
        ``{(topic, partition): offset}`` (or TopicPartition keys, or a list of objects with
        ``topic``/``partition``/``offset``, as confluent-kafka's); `group_metadata` a group id, an
        object with ``group_id`` (and ``generation_id``, ``member_id``, ``group_instance_id``,
        checked against the group as KIP-447 does), or a consumer whose ``group_metadata()``
        returns one."""
        self._transactional().send_offsets(offsets, group_metadata, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._transactional().commit(timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._transactional().abort(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Flush and stop (aborting an open transaction, as Kafka's producer does); further
        sends raise ClosedError."""
        if self._closed:
            return
        if self._txn is not None:
            self._txn.close()
        self.flush()
        self._closed = True
        self._wake.set()
        if self._lingerer is not None:
            self._lingerer.join()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
