"""Loading the transactional ids of a partition of ``__transaction_state`` (a part the
TransactionCoordinator owns; the shard hooks the runtime calls, shard.py): the replay of its
batches (latest record per id wins, tombstones delete), the ids restored from it -- a
transaction found in PrepareCommit / PrepareAbort gets its markers written and completes --
and a partition's ids dropped when it moves away."""

from __future__ import annotations

import logging
from collections.abc import Callable

from . import txn_records as tr
from .txn_records import DEAD, PREPARE_ABORT, PREPARE_COMMIT
from .txn_state import TxnMetadata

__all__ = ["TxnLoader"]

log = logging.getLogger("engine.coordinator.transactions")


class TxnLoader:
    """Given the id table (txn_state.py) and ``resume(meta, commit)``, which completes a
    transaction found prepared (txn_markers.py)."""

    def __init__(self, txns: dict[str, TxnMetadata], *, resume: Callable[[TxnMetadata, bool], object]):
        self._txns = txns
        self._resume = resume

    def new_load_state(self) -> dict:
        return {}       # transactional id -> its latest TxnRecord (None: a tombstone)

    def replay_batch(self, header, records, state) -> None:
        if header.is_control:
            return
        for _off, _ts, key, value, _headers in records:
            if key is None:
                continue
            tid = tr.decode_txn_key(key)
            state[tid] = None if value is None else tr.decode_txn_value(value)

    def apply_loaded(self, partition: int, state) -> None:
        resume = []
        for tid, r in state.items():
            if r is None or r.state == DEAD:
                self._txns.pop(tid, None)
                continue
            meta = TxnMetadata(tid, partition, r.producer_id)
            meta.apply(r)
            meta.last_producer_id, meta.last_producer_epoch = r.previous_producer_id, -1
            self._txns[tid] = meta
            if r.state in (PREPARE_COMMIT, PREPARE_ABORT):
                resume.append(meta)
        for meta in resume:
            log.info("transaction %s was %s at load: writing its markers", meta.transactional_id, meta.state)
            self._resume(meta, meta.state == PREPARE_COMMIT)
        if state:
            log.info("loaded %d transactional ids from %s-%d", len(self._txns), tr.TRANSACTION_STATE_TOPIC,
                     partition)

    def forget_partition(self, partition: int) -> None:
        for tid in [t for t, m in self._txns.items() if m.partition == partition]:
            del self._txns[tid]
