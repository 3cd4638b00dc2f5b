"""KIP-890 verification of transactional produce requests, before the leader appends.

Kafka's ``ReplicaManager.appendRecordsWithTransactionVerification`` asks the transaction
coordinator (through its ``AddPartitionsToTxnManager``) whether each partition a transactional
batch goes to is part of the producer's ongoing transaction, and refuses the batch otherwise: a
late or zombie write can then never open a transaction nobody will end, which would hold the last
stable offset back for good.  Here::

    verifier = TransactionVerifier(ask)     # ask(tid, pid, epoch, [(topic, p), ...]) -> {tp: code} | None
    refused = await verifier.refused(transactional_id, [(topic, p, records), ...])

``ask`` is the coordinator's verification wherever the id is coordinated (this node's
coordinator, or AddPartitionsToTxn v4 verify-only to another broker); the composition that builds
the broker gives it to the replica manager (:meth:`ReplicaManager.use_transaction_verifier`), so
this layer never imports the coordinators.  ``None`` from ``ask`` means no answer in time.

Only batches carrying the transactional attribute and a producer id are verified; requests
without a transactional id are not (as in Kafka; a transactional batch in one is refused by the
handler as TRANSACTIONAL_ID_AUTHORIZATION_FAILED).  The coordinator's codes become what Kafka
answers on Produce below v12: INVALID_TXN_STATE for a partition not in the transaction (from v11,
KIP-890's TRANSACTION_ABORTABLE as the coordinator answered it),
INVALID_PRODUCER_EPOCH for a fenced producer, and NOT_ENOUGH_REPLICAS -- retried by every producer
without a metadata refresh -- where the verification could not complete.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from .. import _native
from ..errors import ErrorCode

__all__ = ["TransactionVerifier", "transactional_batches"]

Ask = Callable[[str, int, int, list], Awaitable["dict | None"]]

# verification that could not complete (network, coordinator loading, moved or unknown,
# concurrent transactions): Kafka answers NOT_ENOUGH_REPLICAS, retriable without a metadata refresh
_NOT_COMPLETED = frozenset((ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                            ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                            ErrorCode.CONCURRENT_TRANSACTIONS))


def transactional_batches(entries: Iterable[tuple[str, int, object]]) -> dict[tuple[int, int], list]:
    """{(producer id, producer epoch): [(topic, partition), ...]} of the entries whose records
    start with a transactional batch that has a producer id (a bad batch is left to the append,
    which reports it)."""
    wanted: dict[tuple[int, int], list] = {}
    for topic, partition, records in entries:
        if records is None or not _native.batch_is_transactional(records):
            continue
        try:
            h = _native.read_header(records, 0)
        except Exception:  # noqa: BLE001 - the append reports the bad batch
            continue
        if h.producer_id >= 0:
            wanted.setdefault((h.producer_id, h.producer_epoch), []).append((topic, partition))
    return wanted


def produce_code(code: int, abortable: bool = False) -> int:
    """The coordinator's verification answer as a Produce (below v12) answers it; `abortable`
    (Produce v11+, whose clients know TRANSACTION_ABORTABLE) keeps that code as it is."""
    if code == ErrorCode.TRANSACTION_ABORTABLE and abortable:
        return code
    if code in (ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.INVALID_REQUEST):    # (no such id)
        return ErrorCode.INVALID_TXN_STATE
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code in _NOT_COMPLETED:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return code


class TransactionVerifier:
    """See the module docstring."""

    def __init__(self, ask: Ask):
        self._ask = ask

    async def refused(self, transactional_id: str | None, entries: Iterable[tuple[str, int, object]],
                      abortable: bool = False) -> dict[tuple[str, int], int]:
        """{(topic, partition): error code} of the entries not to append (empty: all verified);
        `abortable`: see :func:`produce_code`."""
        if transactional_id is None:
            return {}
        refused: dict[tuple[str, int], int] = {}
        for (pid, epoch), tps in transactional_batches(entries).items():
            res = await self._ask(transactional_id, pid, epoch, tps)
            for tp in tps:
                code = produce_code(ErrorCode.COORDINATOR_NOT_AVAILABLE if res is None
                                    else res.get(tp, ErrorCode.NONE), abortable)
                if code:
                    refused[tp] = code
        return refused
