"""The transactional ids a TransactionCoordinator holds (transactions.py): one
:class:`TxnMetadata` per id, and :class:`TxnTable`, the table of them whose changes are
written first -- a record of ``__transaction_state`` (txn_records.py) appended through the
runtime (runtime.py) -- and applied to memory once written."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ErrorCode
from . import txn_records as tr
from .runtime import CoordinatorRuntime, storage_code
from .txn_records import EMPTY, TxnRecord

__all__ = ["MAX_EPOCH", "TxnMetadata", "TxnTable"]

MAX_EPOCH = 32767 - 1           # Short.MaxValue - 1: an epoch this high is exhausted


@dataclass(eq=False)
class TxnMetadata:
    transactional_id: str
    partition: int                      # of __transaction_state
    producer_id: int
    producer_epoch: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    timeout_ms: int = 60000
    state: str = EMPTY
    partitions: set = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: str | None = None          # a transition whose record is being written
    persisted: bool = False

    def record(self, **changes) -> TxnRecord:
        base = TxnRecord(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                         frozenset(self.partitions), self.last_update_ms, self.start_ms, self.last_producer_id)
        return base._replace(**changes)

    def apply(self, r: TxnRecord) -> None:
        if r.producer_id != self.producer_id or r.producer_epoch != self.producer_epoch:
            self.last_producer_id, self.last_producer_epoch = self.producer_id, self.producer_epoch
        self.producer_id, self.producer_epoch, self.timeout_ms = r.producer_id, r.producer_epoch, r.timeout_ms
        self.state, self.partitions = r.state, set(r.partitions)
        self.last_update_ms, self.start_ms = r.last_update_ms, r.start_ms
        self.persisted = True


class TxnTable:
    """``txns``: transactional id -> its metadata (on the coordinator's loop), shared by the
    coordinator's parts; given the runtime that appends to ``__transaction_state``."""

    def __init__(self, runtime: CoordinatorRuntime):
        self._runtime = runtime
        self.txns: dict[str, TxnMetadata] = {}

    async def transition(self, meta: TxnMetadata, target: TxnRecord) -> int:
        """Write `target` for `meta`; apply it to memory once written.  Returns an error code."""
        meta.pending = target.state
        try:
            await self._runtime.append(meta.partition, [(tr.encode_txn_key(meta.transactional_id),
                                                         tr.encode_txn_value(target))])
        except Exception as e:  # noqa: BLE001 - becomes the request's error code
            return storage_code(e, self._runtime.topic)
        finally:
            meta.pending = None
        if self.txns.get(meta.transactional_id) is meta:
            meta.apply(target)
        return ErrorCode.NONE
