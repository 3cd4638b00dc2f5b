"""The embedded producer's transactions: Kafka's client-side TransactionManager, in-process.

The Engine's :class:`~engine.coordinator.TransactionCoordinator` (``engine.transaction_coordinator``)
does what it does for wire clients — InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn — called directly on its loop (``coord.call``) instead of over a
socket. This module keeps the producer's side: its id and epoch, the per-partition sequence
numbers, which partitions the open transaction has, and the state machine of Kafka's
producer::

    UNINITIALIZED --init--> READY --begin--> IN_TRANSACTION --commit/abort--> READY
                                                  |  append or offsets failed
                                                  v
                                             ABORTABLE --abort--> READY
    any state --fenced (another instance took the id)--> FATAL (only close() is left)

Batches are stamped here (producer id, epoch, base sequence, the transactional attribute,
the CRC again): once per batch, never per record.

Layering: the producer owns its TransactionManager and passes itself in; this module does not
import ``engine.client.producer`` (it uses the producer object it is given: its lock, ``send``,
``flush``, ``_discard_all`` and accumulators).  :class:`TransactionAbortedError`, which fails the
futures of records an abort drops, is defined here and re-exported by ``engine.client.producer``.
"""

from __future__ import annotations

import time
from typing import Any

from .. import _native
from ..errors import (
    EngineError,
    ErrorCode,
    InvalidProducerEpochError,
    KafkaApiError,
    OutOfOrderSequenceError,
    TransactionAbortedError,
    api_error,
)

__all__ = ["TransactionManager"]

UNINITIALIZED, READY, IN_TRANSACTION, ABORTABLE, FATAL = (
    "UNINITIALIZED", "READY", "IN_TRANSACTION", "ABORTABLE_ERROR", "FATAL_ERROR")

# Kafka error codes the coordinator answers
_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS})
_FATAL = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED,
                    ErrorCode.INVALID_PRODUCER_ID_MAPPING})
_COMPLETE = frozenset({"CompleteCommit", "CompleteAbort"})


def stamp_transactional(buf: bytearray, producer_id: int, epoch: int, sequence: int) -> int:
    """Stamp every batch in `buf` as the producer's transactional batch, sequences from
    `sequence` on; recompute each CRC.  Returns the records stamped."""
    return _native.stamp_producer(buf, producer_id, epoch, sequence, True)


def _fenced(context: str) -> KafkaApiError:
    return api_error(ErrorCode.PRODUCER_FENCED, f"{context}: another producer with this transactional.id "
                                                "called init_transactions() (this one is fenced; close it)")


class TransactionManager:
    """One per transactional :class:`~engine.client.producer.Producer` (see the module doc)."""

    def __init__(self, producer, engine, cfg: dict):
        tid = cfg["transactional_id"]
        if not isinstance(tid, str) or not tid:
            raise api_error(ErrorCode.INVALID_REQUEST,
                            f"transactional_id must be a non-empty string, got {tid!r}")
        for key in ("transaction_timeout_ms", "max_block_ms"):
            if not isinstance(cfg[key], int) or cfg[key] <= 0:
                raise api_error(ErrorCode.INVALID_CONFIG, f"{key} must be a positive integer, got {cfg[key]!r}")
        self.producer = producer
        self.engine = engine
        self.transactional_id = tid
        self.timeout_ms = cfg["transaction_timeout_ms"]
        self.max_block_s = cfg["max_block_ms"] / 1000.0
        self.state, self.error = UNINITIALIZED, None
        producer.send = self.send
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}
        self.partitions: set[tuple[str, int]] = set()     # in the open transaction
        self.groups: set[str] = set()                     # AddOffsetsToTxn done
        self.lock = producer._lock       # one lock: appends (linger thread) add partitions under it

    # -- the coordinator ----------------------------------------------------------------
    def _coord(self):
        return self.engine.transaction_coordinator

    def _call(self, fn_name: str, *args, timeout: float | None = None, **kwargs):
        """Call a coordinator coroutine, retrying the codes Kafka's client retries (a busy or
        loading coordinator, CONCURRENT_TRANSACTIONS) until `timeout` (max_block_ms)."""
        deadline = time.monotonic() + (self.max_block_s if timeout is None else timeout)
        backoff = 0.002
        while True:
            coord = self._coord()
            result = coord.call(getattr(coord, fn_name), *args, timeout=self.max_block_s, **kwargs)
            code = _first_error(result)
            if code not in _RETRY or time.monotonic() + backoff > deadline:
                return result, code
            time.sleep(backoff)
            backoff = min(backoff * 2, 0.1)

    def _set(self, state: str, error: BaseException | None = None) -> None:
        """Move to `state`.  Inside a transaction the producer's ``send`` is the native one
        (no Python frame per record); in every other state it is :meth:`send`, which raises."""
        self.state, self.error = state, error
        if state == IN_TRANSACTION:
            self.producer.__dict__.pop("send", None)
        else:
            self.producer.send = self.send

    def _raise(self, code: int, context: str) -> None:
        """Raise `code`'s error; fencing makes the producer unusable, others abortable."""
        if code in _FATAL:
            self._set(FATAL, _fenced(context))
            raise self.error
        err = api_error(code, context)
        if self.state == IN_TRANSACTION:
            self._set(ABORTABLE, err)
        raise err

    def _require(self, *states: str, action: str) -> None:
        if self.state == FATAL:
            raise self.error
        if self.state not in states:
            hint = {UNINITIALIZED: "call init_transactions() first", READY: "no transaction is open",
                    IN_TRANSACTION: "a transaction is already open",
                    ABORTABLE: f"the transaction failed ({self.error}); abort it"}[self.state]
            raise api_error(ErrorCode.INVALID_TXN_STATE, f"cannot {action} in state {self.state}: {hint}")

    # -- the producer's calls -----------------------------------------------------------
    def init(self, timeout: float | None) -> None:
        with self.lock:
            self._require(UNINITIALIZED, action="init_transactions")
            _r, code = self._call("find_coordinator", self.transactional_id, timeout=timeout)
            if code:
                raise api_error(code, f"init_transactions({self.transactional_id!r})")
            (code, pid, epoch), code = self._call("init_producer_id", self.transactional_id,
                                                  self.timeout_ms, timeout=timeout)
            if code:
                self._raise(code, f"init_transactions({self.transactional_id!r})")
            self.producer_id, self.epoch = pid, epoch
            self.sequences.clear()
            self._set(READY)

    def begin(self) -> None:
        with self.lock:
            self._require(READY, action="begin_transaction")
            self.partitions.clear()
            self.groups.clear()
            self._set(IN_TRANSACTION)

    def check_sending(self) -> None:
        if self.state != IN_TRANSACTION:
            with self.lock:
                self._require(IN_TRANSACTION, action="send")

    def send(self, topic, value, key=None, headers=None, timestamp=None, partition=None):
        """The producer's ``send`` outside a transaction: raises why it cannot send."""
        if self.state != IN_TRANSACTION:
            self.check_sending()
        return _native.ProducerCore.send(self.producer, topic, value, key, headers, timestamp, partition)

    def add_partitions(self, tps) -> None:
        """Add partitions to the open transaction (before their first batch is appended)."""
        new = [tp for tp in tps if tp not in self.partitions]
        if not new:
            return
        with self.lock:
            self._require(IN_TRANSACTION, action="append")
            _r, code = self._call("add_partitions", self.transactional_id, self.producer_id, self.epoch, new)
            if code:
                self._raise(code, f"adding {', '.join(f'{t}-{p}' for t, p in new)} to the transaction")
            self.partitions.update(new)

    def append(self, topic: str, partition: int, data: bytearray):
        """Append one drain window (or built batches) of `topic`-`partition` as transactional
        batches; an error leaves the transaction abortable (fatal when fenced)."""
        tp = (topic, partition)
        if self.state != IN_TRANSACTION:
            self._require(IN_TRANSACTION, action="append")
        self.add_partitions([tp])
        seq = self.sequences.get(tp, 0)
        n = stamp_transactional(data, self.producer_id, self.epoch, seq)
        try:
            info = self.engine.replicas.append_in_process(topic, partition, data)
        except (InvalidProducerEpochError, OutOfOrderSequenceError) as e:
            with self.lock:
                if isinstance(e, InvalidProducerEpochError):
                    self._set(FATAL, _fenced(f"appending to {topic}-{partition}"))
                else:
                    self._set(ABORTABLE, e)
                raise self.error from e
        except EngineError as e:
            with self.lock:
                if self.state == IN_TRANSACTION:
                    self._set(ABORTABLE, e)
            raise
        self.sequences[tp] = (seq + n) % 2147483648
        return info

    def prepare_flush(self) -> None:
        """Add every partition with records waiting to the transaction in one call."""
        if self.state != IN_TRANSACTION:
            return
        waiting = [(acc.topic, p) for acc in list(self.producer._accs.values()) for p in acc.nonempty()]
        try:
            self.add_partitions(waiting)
        except EngineError:
            pass          # the state says it: each window's append fails its futures with the error

    def send_offsets(self, offsets: Any, group_metadata: Any, timeout: float | None) -> None:
        group_id, generation, member, instance = _group_fields(group_metadata)
        todo = _offsets(offsets)
        with self.lock:
            self._require(IN_TRANSACTION, action="send_offsets_to_transaction")
            if group_id not in self.groups:
                _r, code = self._call("add_offsets", self.transactional_id, self.producer_id,
                                      self.epoch, group_id, timeout=timeout)
                if code:
                    self._raise(code, f"adding group {group_id!r} to the transaction")
                self.groups.add(group_id)
            _r, code = self._call("txn_offset_commit", self.transactional_id, group_id, self.producer_id,
                                  self.epoch, todo, generation_id=generation, member_id=member,
                                  group_instance_id=instance, timeout=timeout)
            if code:
                self._raise(code, f"committing offsets of group {group_id!r} in the transaction")

    def commit(self, timeout: float | None) -> None:
        with self.lock:
            self._require(IN_TRANSACTION, ABORTABLE, action="commit_transaction")
            if self.state == IN_TRANSACTION:
                self.producer.flush()              # appends everything: errors make it abortable
            if self.state == ABORTABLE:
                raise api_error(ErrorCode.INVALID_TXN_STATE, "cannot commit: the transaction failed "
                                f"({self.error}); abort it") from self.error
            self._end(True, timeout)

    def abort(self, timeout: float | None) -> None:
        with self.lock:
            self._require(IN_TRANSACTION, ABORTABLE, action="abort_transaction")
            self.producer._discard_all(TransactionAbortedError(
                f"transaction of {self.transactional_id!r} aborted before the record was appended"))
            self._end(False, timeout)

    def _end(self, commit: bool, timeout: float | None) -> None:
        """EndTxn, then wait for the markers (the coordinator writes them after answering)."""
        what = "commit" if commit else "abort"
        if self.partitions or self.groups:
            _r, code = self._call("end_txn", self.transactional_id, self.producer_id, self.epoch,
                                  commit, timeout=timeout)
            if code:
                self._raise(code, f"{what}_transaction")
            self._wait_complete(timeout)
        self.partitions.clear()
        self.groups.clear()
        self._set(READY)

    def _wait_complete(self, timeout: float | None) -> None:
        deadline = time.monotonic() + (self.max_block_s if timeout is None else timeout)
        pause = 0.0002
        coord = self._coord()
        while True:
            (desc,) = coord.call(coord.describe_transactions, [self.transactional_id], timeout=self.max_block_s)
            if desc.error_code == 0 and (desc.state in _COMPLETE or desc.producer_epoch != self.epoch):
                if desc.producer_epoch != self.epoch:         # another instance took over meanwhile
                    self._raise(ErrorCode.PRODUCER_FENCED, "completing the transaction")
                return
            if time.monotonic() > deadline:
                raise api_error(ErrorCode.REQUEST_TIMED_OUT,
                                f"the transaction of {self.transactional_id!r} did not complete in time "
                                f"(state {desc.state or desc.error_code})")
            time.sleep(pause)
            pause = min(pause * 2, 0.005)

    def close(self) -> None:
        """Closing with a transaction open aborts it (Kafka's producer does the same)."""
        with self.lock:
            if self.state in (IN_TRANSACTION, ABORTABLE):
                try:
                    self.abort(None)
                except EngineError:
                    pass
            elif self.state == FATAL:
                self.producer._discard_all(self.error)


def _first_error(result) -> int:
    """The error code of a coordinator answer: an int, a tuple starting with one, or a dict."""
    if isinstance(result, int):
        return result
    if isinstance(result, tuple):
        return result[0]
    if isinstance(result, dict):
        return next((c for c in result.values() if c), 0)
    return 0


def _group_fields(meta: Any) -> tuple[str, int, str, str | None]:
    """(group id, generation, member id, instance id) from a group id, a group metadata object
    (kafka-python's ConsumerGroupMetadata shape), or a consumer with ``group_metadata()``."""
    if callable(getattr(meta, "group_metadata", None)):
        meta = meta.group_metadata()
    if isinstance(meta, str):
        return meta, -1, "", None
    group_id = getattr(meta, "group_id", None)
    if not isinstance(group_id, str) or not group_id:
        raise api_error(ErrorCode.INVALID_GROUP_ID,
                        f"group_metadata must be a group id or have a group_id, got {meta!r}")
    generation = getattr(meta, "generation_id", -1)
    member = getattr(meta, "member_id", "") or ""
    instance = getattr(meta, "group_instance_id", None)
    return group_id, generation if isinstance(generation, int) else -1, member, instance


def _offsets(offsets: Any) -> dict[tuple[str, int], int]:
    if isinstance(offsets, dict):
        items = offsets.items()
    else:          # confluent-kafka style: [TopicPartition(topic, partition, offset)]
        items = (((o.topic, o.partition), o.offset) for o in offsets)
    out = {}
    for key, value in items:
        topic, partition = (key.topic, key.partition) if hasattr(key, "topic") else key
        offset = getattr(value, "offset", value)
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset of {topic}-{partition} must be an int >= 0, got {value!r}")
        out[(str(topic), int(partition))] = offset
    return out
