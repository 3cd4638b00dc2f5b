"""Kafka's record formats for ``__transaction_state`` (TransactionLogKey / TransactionLogValue).

From ``transaction-coordinator/src/main/resources/common/message/`` in Apache
Kafka; every key and value starts with an int16 version::

    TransactionLogKey   v0: transactional_id STRING
    TransactionLogValue v0: producer_id i64, producer_epoch i16, transaction_timeout_ms i32,
                            transaction_status i8, transaction_partitions NULLABLE
                            [topic STRING, partition_ids [i32]], last_update_ms i64, start_ms i64
                        v1: the same, flexible (compact strings/arrays, tagged fields:
                            0 previous_producer_id, 1 next_producer_id, 2 client_transaction_version)

We write value v0 (transaction.version 0, what Kafka 4.0 writes for clients that do not bump
the epoch per transaction) and read both.  A null value (tombstone) removes an expired id.
Status numbers are Kafka's TransactionState ids.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import CorruptRecordError, InvalidRequestError
from ..protocol.primitives import Reader, Writer

__all__ = ["STATE_IDS", "STATE_NAMES", "TRANSACTION_STATE_TOPIC", "TxnRecord", "decode_txn_key",
           "decode_txn_value", "encode_txn_key", "encode_txn_value"]

TRANSACTION_STATE_TOPIC = "__transaction_state"

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT = "Empty", "Ongoing", "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = (
    "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence")
STATE_NAMES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD,
               PREPARE_EPOCH_FENCE)
STATE_IDS = {name: i for i, name in enumerate(STATE_NAMES)}


class TxnRecord(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str
    partitions: frozenset          # {(topic, partition)}
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1


def encode_txn_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(0).string(transactional_id, False)
    return bytes(w.buf)


def decode_txn_key(data) -> str:
    try:
        r = Reader(memoryview(data))
        version = r.int16()
        if version != 0:
            raise ValueError(f"TransactionLogKey version {version} is unknown")
        tid = r.string()
        r.done()
        return tid
    except (ValueError, IndexError, struct.error, InvalidRequestError) as e:
        raise CorruptRecordError(f"unreadable __transaction_state key: {e}") from None


def encode_txn_value(t: TxnRecord) -> bytes:
    w = Writer()
    w.int16(0).int64(t.producer_id).int16(t.producer_epoch).int32(t.timeout_ms)
    w.int8(STATE_IDS[t.state])
    if t.state == EMPTY:
        w.array_length(None, False)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(p)
        w.array_length(len(by_topic), False)
        for topic, parts in by_topic.items():
            w.string(topic, False).array_length(len(parts), False)
            for p in parts:
                w.int32(p)
    w.int64(t.last_update_ms).int64(t.start_ms)
    return bytes(w.buf)


def decode_txn_value(data) -> TxnRecord:
    try:
        r = Reader(memoryview(data))
        v = r.int16()
        if v not in (0, 1):
            raise ValueError(f"TransactionLogValue version {v} is unknown")
        flex = v >= 1
        pid, epoch, timeout, status = r.int64(), r.int16(), r.int32(), r.int8()
        if not 0 <= status < len(STATE_NAMES):
            raise ValueError(f"transaction status {status} is unknown")
        parts = set()
        n = r.array_length(flex, nullable=True)
        for _ in range(max(n, 0)):
            topic = r.string_f(flex)
            for _ in range(r.array_length(flex, min_item=4)):
                parts.add((topic, r.int32()))
            if flex:
                r.tagged_fields()
        last_update, start = r.int64(), r.int64()
        prev = -1
        if flex:
            tags = r.tagged_fields()
            if 0 in tags and len(tags[0]) == 8:
                prev = struct.unpack(">q", tags[0])[0]
        return TxnRecord(pid, epoch, timeout, STATE_NAMES[status], frozenset(parts), last_update, start, prev)
    except (ValueError, IndexError, struct.error, TypeError, InvalidRequestError) as e:
        raise CorruptRecordError(f"unreadable TransactionLogValue: {e}") from None
