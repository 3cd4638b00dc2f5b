"""Transactions for :func:`engine.connect`'s producer: Kafka's client-side TransactionManager
over the wire, with confluent-kafka's (and the embedded producer's) names::

    p = eng.producer(**{"transactional.id": "enricher-1", "transaction.timeout.ms": 60000})
    p.init_transactions()                   # FindCoordinator(key type 1) + InitProducerId(id)
    p.begin_transaction()
    p.send("out", b"v")                     # AddPartitionsToTxn before a partition's first batch
    p.send_offsets_to_transaction(offsets, consumer.group_metadata())   # AddOffsetsToTxn + TxnOffsetCommit
    p.commit_transaction()                  # flush, then EndTxn(commit)   (or abort_transaction())

:class:`TransactionalProducer` is a :class:`~engine.client.arrow_producer.RemoteProducer` whose
batches are stamped transactional (attribute 0x10, the producer id and epoch of InitProducerId;
sequences are the idempotent producer's) and whose Produce requests carry the
``transactional.id`` (``WireClient.transactional_id``).  It hooks the send path at one point,
``ProducePipeline.add`` (engine/client/produce_pipeline.py: one batch of one partition about to
be queued): the partition joins the transaction there (AddPartitionsToTxn before its first
batch), the batch is stamped, and its outcome moves the state machine.  The states are Kafka's::

    UNINITIALIZED --init--> READY --begin--> IN_TRANSACTION --commit/abort--> READY
                                                  | a send / AddPartitions / offsets call failed
                                                  v
                                             ABORTABLE_ERROR --abort--> READY (epoch bumped)
    any state --fenced--> FATAL_ERROR (only close() is left)

* Coordinator errors Kafka's clients retry are retried within ``max.block.ms`` (or the call's
  ``timeout``): COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, and NOT_COORDINATOR /
  COORDINATOR_NOT_AVAILABLE / a lost connection (the coordinator is looked up again).
* Fencing -- PRODUCER_FENCED, INVALID_PRODUCER_EPOCH (from the coordinator or a Produce),
  INVALID_PRODUCER_ID_MAPPING -- raises :class:`~engine.errors.ProducerFencedError` and makes
  the producer unusable (every later call raises it again).
* Any other failure inside a transaction makes it abortable: the error raised carries
  ``txn_requires_abort = True`` and commit_transaction() refuses (INVALID_TXN_STATE) until
  abort_transaction(); that abort then bumps the epoch (InitProducerId with the current id and
  epoch, KIP-360) so the sequences start again cleanly.
* ``commit_transaction()`` returns once the coordinator answered EndTxn (the markers follow,
  as with Kafka's clients); ``abort_transaction()`` drops records not sent yet (their futures
  raise ``TransactionAbortedError``); ``close()`` aborts an open transaction.
"""

from __future__ import annotations

import struct
import time
from typing import Any

from .. import _native
from ..errors import (
    EngineError,
    ErrorCode,
    KafkaApiError,
    ProducerFencedError,
    TransactionAbortedError,
    api_error,
)
from ..protocol.messages import ApiKey
from .arrow_producer import RemoteProducer
from .transaction import ABORTABLE, FATAL, IN_TRANSACTION, READY, UNINITIALIZED, _group_fields, _offsets
from .wire import KafkaConnectionError, WireClient

__all__ = ["TransactionalProducer", "parse_group_metadata"]

_MOVED = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
_BUSY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED,
                    ErrorCode.INVALID_PRODUCER_ID_MAPPING})
_TXN_KEY, _GROUP_KEY = 1, 0          # FindCoordinator key types


def mark_transactional(batch, producer_id: int, epoch: int) -> None:
    """Set the transactional attribute, producer id and epoch of one built batch (its base
    sequence kept) and recompute its CRC: once per batch, never per record."""
    _native.stamp_producer(batch, producer_id, epoch, _native.read_header(batch).base_sequence, True)


def parse_group_metadata(meta: Any) -> tuple[str, int, str, str | None]:
    """(group id, generation id, member id, group instance id) from a group id, an object with
    ``group_id`` / ``generation_id`` / ``member_id`` / ``group_instance_id`` (our consumers'
    ``group_metadata()``, kafka-python's), a consumer with ``group_metadata()``, or
    confluent-kafka's ``consumer_group_metadata()`` (librdkafka's serialized bytes: ``CGMDv2:``,
    the generation, group id and member id NUL-terminated, then 1 for no instance id or 0 and
    the instance id NUL-terminated)."""
    if isinstance(meta, (bytes, bytearray)) and bytes(meta[:7]) == b"CGMDv2:":
        try:
            generation = struct.unpack_from("=i", meta, 7)[0]      # librdkafka writes it in host order
            rest = bytes(meta[11:])
            group, rest = rest.split(b"\x00", 1)
            member, rest = rest.split(b"\x00", 1)
            instance = None
            if rest[:1] == b"\x00":           # an instance id follows (1: none)
                instance = rest[1:].split(b"\x00", 1)[0].decode()
            return group.decode(), generation, member.decode(), instance
        except (ValueError, struct.error, UnicodeDecodeError):
            raise api_error(ErrorCode.INVALID_GROUP_ID,
                            f"unreadable confluent-kafka group metadata {bytes(meta)!r}") from None
    return _group_fields(meta)


def _first_error(resp: dict) -> int:
    """The first error code of an answer: top level, else per topic-partition (skipping
    OPERATION_NOT_ATTEMPTED, which only says another partition failed)."""
    code = int(resp.get("error_code", 0) or 0)
    if code:
        return code
    codes = []
    for t in resp.get("results_by_topic_v3_and_below") or resp.get("topics") or []:
        for p in t.get("results_by_partition") or t.get("partitions") or []:
            c = int(p.get("partition_error_code", p.get("error_code", 0)) or 0)
            if c:
                codes.append(c)
    return next((c for c in codes if c != ErrorCode.OPERATION_NOT_ATTEMPTED), codes[0] if codes else 0)


class TransactionalProducer(RemoteProducer):
    """``engine.connect(...).producer(**{"transactional.id": ...})``; see the module doc."""

    def __init__(self, client, cfg: dict[str, Any]):
        tid = cfg.get("transactional.id")
        if not tid:
            raise api_error(ErrorCode.INVALID_CONFIG, "transactional.id must be a non-empty string")
        self.transactional_id = str(tid)
        self._txn_timeout_ms = int(cfg["transaction.timeout.ms"])
        if self._txn_timeout_ms <= 0:
            raise api_error(ErrorCode.INVALID_CONFIG,
                            f"transaction.timeout.ms must be > 0, got {self._txn_timeout_ms}")
        self._txn_state, self._txn_error = UNINITIALIZED, None
        self._txn_partitions: set[tuple[str, int]] = set()
        self._txn_groups: set[str] = set()
        self._coordinators: dict[tuple[int, str], int] = {}
        self._needs_bump = False
        # the base class asks no producer id (init_transactions does) and stamps sequences
        # once _pid is set
        super().__init__(client, {**cfg, "enable.idempotence": False})
        self._cfg = cfg
        client.transactional_id = self.transactional_id
        self._pipe_add = self._pipe.add          # every batch goes through ProducePipeline.add
        self._pipe.add = self._add_entry
        # coordinator requests on connections of their own: the pipeline keeps Produce requests
        # in flight on the leaders' connections, and a synchronous request there would read
        # their answers
        self._coord_client = WireClient(
            ",".join(f"{host}:{port}" for host, port in client.bootstrap + [
                b for b in client._brokers.values() if b not in client.bootstrap]),
            client_id=cfg["client.id"], request_timeout_ms=int(cfg["request.timeout.ms"]),
            security=client.security)

    # -- state ---------------------------------------------------------------------------
    @property
    def transaction_state(self) -> str:
        """UNINITIALIZED, READY, IN_TRANSACTION, ABORTABLE_ERROR or FATAL_ERROR."""
        return self._txn_state

    def _require(self, *states: str, action: str) -> None:
        if self._txn_state == FATAL:
            raise self._txn_error
        if self._txn_state not in states:
            hint = {UNINITIALIZED: "call init_transactions() first", READY: "no transaction is open",
                    IN_TRANSACTION: "a transaction is already open",
                    ABORTABLE: f"the transaction failed ({self._txn_error}); abort it"}[self._txn_state]
            err = api_error(ErrorCode.INVALID_TXN_STATE, f"cannot {action} in state {self._txn_state}: {hint}")
            err.txn_requires_abort = self._txn_state == ABORTABLE
            raise err

    def _fatal(self, context: str, code: int) -> ProducerFencedError:
        err = ProducerFencedError(
            f"{context}: the producer of transactional.id {self.transactional_id!r} was fenced "
            f"(error code {code}: another producer called init_transactions() with this id, or the "
            "coordinator aborted a transaction older than transaction.timeout.ms); close it")
        err.broker_code = code
        self._txn_state, self._txn_error = FATAL, err
        return err

    def _fail(self, code: int, context: str, cause: BaseException | None = None) -> None:
        """Raise `code`'s error: fencing is fatal, anything else in a transaction abortable."""
        if code in _FENCED:
            raise self._fatal(context, code) from cause
        err = cause if isinstance(cause, KafkaApiError) and cause.code == code else api_error(code, context)
        self._abortable(err)
        raise err

    def _abortable(self, err: BaseException) -> None:
        if self._txn_state == IN_TRANSACTION:
            self._txn_state, self._txn_error = ABORTABLE, err
            self._needs_bump = True
        if isinstance(err, EngineError):
            err.txn_requires_abort = self._txn_state == ABORTABLE

    # -- coordinators ----------------------------------------------------------------------
    def _deadline(self, timeout: float | None) -> float:
        t = self._cfg["max.block.ms"] / 1000.0 if timeout is None or timeout < 0 else float(timeout)
        return time.monotonic() + t

    def _coordinator(self, key_type: int, key: str, deadline: float) -> int:
        node = self._coordinators.get((key_type, key))
        if node is not None:
            return node
        c = self._coord_client
        backoff = self._backoff_s
        while True:
            try:
                r = c._call(None, ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type})
                code = int(r["error_code"])
            except KafkaConnectionError:
                if time.monotonic() + backoff > deadline:
                    raise
                code = ErrorCode.UNKNOWN_SERVER_ERROR       # no answer: ask again
            if code == 0:
                node = int(r["node_id"])
                c._brokers[node] = (r["host"], int(r["port"]))
                self._coordinators[(key_type, key)] = node
                return node
            if code > 0 and (code not in _MOVED | _BUSY or time.monotonic() + backoff > deadline):
                raise api_error(code, f"FindCoordinator({key!r}, key type {key_type})"
                                + (f": {r['error_message']}" if r.get("error_message") else ""))
            time.sleep(backoff)

    def _call(self, api: int, body: dict, context: str, deadline: float,
              key_type: int = _TXN_KEY, key: str | None = None,
              retry: frozenset = frozenset()) -> tuple[dict | None, int]:
        """One coordinator request, retried as Kafka's clients do until `deadline`; (answer, its
        first error code).  A lost connection past the deadline raises KafkaConnectionError."""
        key = self.transactional_id if key is None else key
        backoff = 0.02
        while True:
            node = self._coordinator(key_type, key, deadline)
            try:
                r = self._coord_client._call(node, api, body)
                code = _first_error(r)
            except KafkaConnectionError:
                if time.monotonic() + backoff > deadline:
                    raise
                r, code = None, ErrorCode.NOT_COORDINATOR
            if code not in _MOVED | _BUSY | retry or time.monotonic() + backoff > deadline:
                return r, code
            if code in _MOVED:
                self._coordinators.pop((key_type, key), None)
            time.sleep(backoff)
            backoff = min(backoff * 2, self._backoff_s if self._backoff_s > 0.02 else 0.1)

    def _init_producer_id(self, deadline: float, context: str) -> None:
        bump = self._pid >= 0 and self._coord_client._version(ApiKey.INIT_PRODUCER_ID) >= 3
        r, code = self._call(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": self.transactional_id, "transaction_timeout": self._txn_timeout_ms,
            "producer_id": self._pid if bump else -1, "producer_epoch": self._epoch if bump else -1},
            context, deadline)
        if code:
            if code in _FENCED:
                raise self._fatal(context, code)
            raise api_error(code, context)
        self._pid, self._epoch = int(r["producer_id"]), int(r["producer_epoch"])
        self._seq.clear()
        self._pipe.new_producer_id()        # nothing in flight here: first batches go alone again
        self._needs_bump = False

    # -- the transactional API (confluent-kafka's names) ----------------------------------
    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id with its coordinator: fences older instances and
        completes (aborts) a transaction they left open; sequences start at 0 with the new epoch."""
        with self._lock:
            self._require(UNINITIALIZED, action="init_transactions")
            self._init_producer_id(self._deadline(timeout), f"init_transactions({self.transactional_id!r})")
            self._txn_state = READY

    def begin_transaction(self) -> None:
        with self._lock:
            self._require(READY, action="begin_transaction")
            self._txn_partitions.clear()
            self._txn_groups.clear()
            self._txn_state = IN_TRANSACTION

    def send(self, topic: str, value: Any, key: Any = None, headers: Any = None,
             timestamp: int | None = None, partition: int | None = None):
        if self._txn_state is not IN_TRANSACTION:
            self._require(IN_TRANSACTION, action="send")
        return super().send(topic, value, key, headers, timestamp, partition)

    def send_batch(self, topic: str, values: Any = None, keys: Any = None, headers: Any = None,
                   timestamps: Any = None, partitions: Any = None):
        if self._txn_state is not IN_TRANSACTION:
            self._require(IN_TRANSACTION, action="send_batch")
        return super().send_batch(topic, values, keys, headers, timestamps, partitions)

    def _add_partitions(self, tps: list[tuple[str, int]]) -> None:
        """AddPartitionsToTxn for the partitions not in the transaction yet (caller holds the lock)."""
        new = sorted(tp for tp in set(tps) if tp not in self._txn_partitions)
        if not new:
            return
        topics: dict[str, list[int]] = {}
        for t, p in new:
            topics.setdefault(t, []).append(p)
        what = f"adding {', '.join(f'{t}-{p}' for t, p in new)} to the transaction"
        try:
            _r, code = self._call(ApiKey.ADD_PARTITIONS_TO_TXN, {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self._pid, "v3_and_below_producer_epoch": self._epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
                what, time.monotonic() + self._delivery_s, retry=frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}))
        except KafkaConnectionError as e:
            self._abortable(e)
            raise
        if code:
            self._fail(code, what)
        self._txn_partitions.update(new)

    def _batch_failed(self, e) -> None:
        """Not the idempotent producer's epoch bump: a failed send makes the transaction
        abortable, and abort_transaction() bumps the epoch (``_needs_bump``)."""

    def _add_entry(self, entry):
        """The hook in the pipelined send path (ProducePipeline.add, called holding the lock, for
        one batch of one partition): join the partition to the transaction and stamp the batch
        before it is queued; its outcome moves the state machine.  A batch that cannot be sent
        in the transaction is failed here, never queued."""
        try:
            if self._txn_state is not IN_TRANSACTION:
                self._require(IN_TRANSACTION, action="send")
            self._add_partitions([(entry.topic, entry.partition)])
        except EngineError as err:
            entry.error, entry.done, entry.batch = err, True, None
            if entry.on_done is not None:
                entry.on_done(entry)
            return entry
        mark_transactional(entry.batch, self._pid, self._epoch)
        done = entry.on_done

        def on_done(e) -> None:
            if e.error is not None and self._txn_state in (IN_TRANSACTION, ABORTABLE):
                code = getattr(e.error, "code", None)
                if code in _FENCED:
                    e.error = self._fatal(f"produce to {e.topic}-{e.partition}", code)
                else:
                    self._abortable(e.error)
            if done is not None:
                done(e)
        entry.on_done = on_done
        return self._pipe_add(entry)

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any,
                                    timeout: float | None = None) -> None:
        """Commit a consumer group's offsets ({(topic, partition): offset}, or confluent-kafka's
        [TopicPartition]) as part of the transaction: AddOffsetsToTxn to the transaction
        coordinator, then TxnOffsetCommit to the group's coordinator, with the generation and
        member id of `group_metadata` (a consumer's ``group_metadata()``, or a group id)."""
        group_id, generation, member, instance = parse_group_metadata(group_metadata)
        todo = _offsets(offsets)
        with self._lock:
            self._require(IN_TRANSACTION, action="send_offsets_to_transaction")
            deadline = self._deadline(timeout)
            try:
                if group_id not in self._txn_groups:
                    what = f"adding group {group_id!r} to the transaction"
                    _r, code = self._call(ApiKey.ADD_OFFSETS_TO_TXN, {
                        "transactional_id": self.transactional_id, "producer_id": self._pid,
                        "producer_epoch": self._epoch, "group_id": group_id}, what, deadline)
                    if code:
                        self._fail(code, what)
                    self._txn_groups.add(group_id)
                topics: dict[str, list] = {}
                for (t, p), off in sorted(todo.items()):
                    topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                                     "committed_leader_epoch": -1, "committed_metadata": ""})
                what = f"committing offsets of group {group_id!r} in the transaction"
                _r, code = self._call(ApiKey.TXN_OFFSET_COMMIT, {
                    "transactional_id": self.transactional_id, "group_id": group_id,
                    "producer_id": self._pid, "producer_epoch": self._epoch, "generation_id": generation,
                    "member_id": member, "group_instance_id": instance,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
                    what, deadline, key_type=_GROUP_KEY, key=group_id,
                    retry=frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT}))
            except KafkaConnectionError as e:
                self._abortable(e)
                raise
            if code:
                self._fail(code, what)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, then EndTxn(commit).  May be called again after
        a timeout; refused (INVALID_TXN_STATE, ``txn_requires_abort``) once the transaction failed."""
        with self._lock:
            self._require(IN_TRANSACTION, ABORTABLE, action="commit_transaction")
            deadline = self._deadline(timeout)
            if self._txn_state == IN_TRANSACTION:
                RemoteProducer.flush(self)       # every window delivered; failures set the state
            if self._txn_state == ABORTABLE:
                err = api_error(ErrorCode.INVALID_TXN_STATE, "cannot commit: the transaction failed "
                                f"({self._txn_error}); abort it")
                err.txn_requires_abort = True
                raise err from self._txn_error
            if self._txn_state == FATAL:
                raise self._txn_error
            self._end(True, deadline)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not sent yet (their futures raise TransactionAbortedError), then
        EndTxn(abort): read_committed readers never see the records that were sent."""
        with self._lock:
            self._require(IN_TRANSACTION, ABORTABLE, action="abort_transaction")
            self._discard_unsent(TransactionAbortedError(
                f"transaction of {self.transactional_id!r} aborted before the record was sent"))
            while self._pipe.unfinished:          # batches the sender holds go out (or fail) before
                self._pipe.pump(block=True)       # EndTxn, never into the next transaction
            self._end(False, self._deadline(timeout))

    def _end(self, commit: bool, deadline: float) -> None:
        what = "commit_transaction" if commit else "abort_transaction"
        if self._txn_partitions or self._txn_groups:
            _r, code = self._call(ApiKey.END_TXN, {
                "transactional_id": self.transactional_id, "producer_id": self._pid,
                "producer_epoch": self._epoch, "committed": commit}, what, deadline)
            if code:
                self._fail(code, what)
        self._txn_partitions.clear()
        self._txn_groups.clear()
        if self._needs_bump:                    # after a failed send: a fresh epoch, sequences from 0
            self._init_producer_id(deadline, f"{what}: bumping the epoch")
        self._txn_state, self._txn_error = READY, None

    def _discard_unsent(self, err: BaseException) -> None:
        """Fail the records still in the accumulators (caller holds the lock); no sequence is used."""
        for st in list(self._topics.values()):
            for p in list(st.futures):
                fut = st.futures.pop(p)
                st.counts.pop(p, None)
                st.first_at.pop(p, None)
                st.acc.drain(p)
                fut.error = err
                fut.event.set()

    def close(self, timeout: float | None = None) -> None:
        """Abort an open transaction (as Kafka's producer does), then close."""
        if self._closed:
            return
        with self._lock:
            if self._txn_state in (IN_TRANSACTION, ABORTABLE):
                try:
                    self.abort_transaction(timeout)
                except EngineError:
                    pass
            elif self._txn_state == FATAL:
                self._discard_unsent(self._txn_error)
        super().close(timeout)
        self._coord_client.close()
