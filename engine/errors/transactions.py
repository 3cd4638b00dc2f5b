"""Errors of idempotent and transactional producers and the transaction coordinator:
sequence numbers, producer epochs and fencing, transaction states and timeouts.

Every class here is re-exported by :mod:`engine.errors`, which is where it is
imported from and the module it reports (``__module__``)."""

from __future__ import annotations

from .base import EngineError, KafkaApiError
from .codes import ErrorCode


class OutOfOrderSequenceError(KafkaApiError):
    """An idempotent producer's batch does not continue its sequence (a gap or a reordering)."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceError(KafkaApiError):
    """An idempotent producer's batch that was already written (its first append's offset stands)."""

    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaApiError):
    """An idempotent batch carries an older epoch than the producer's current one."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaApiError):
    """A transactional call or write out of order for the transaction's state."""

    code = ErrorCode.INVALID_TXN_STATE


class InvalidPidMappingError(KafkaApiError):
    """The producer id does not belong to this transactional id (Kafka: INVALID_PRODUCER_ID_MAPPING)."""

    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTxnTimeoutError(KafkaApiError):
    """A transaction timeout above transaction.max.timeout.ms (Kafka: INVALID_TRANSACTION_TIMEOUT)."""

    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(KafkaApiError):
    """The previous transaction of this producer is still completing."""

    code = ErrorCode.CONCURRENT_TRANSACTIONS


class TransactionCoordinatorFencedError(KafkaApiError):
    """A marker from an older transaction coordinator epoch than the partition has seen."""

    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class ProducerFencedError(KafkaApiError):
    """A transactional producer was fenced: another instance with the same
    ``transactional.id`` called init_transactions(), or the coordinator aborted a
    timed-out transaction with an epoch bump (Kafka's ProducerFencedException).
    Fatal: the producer can only be closed."""

    code = ErrorCode.PRODUCER_FENCED


class TransactionalIdNotFoundError(KafkaApiError):
    """DescribeTransactions of a transactional id the coordinator does not know."""

    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class TransactionAbortableError(KafkaApiError):
    """The transaction can only be aborted (KIP-890): the producer aborts and goes on."""

    code = ErrorCode.TRANSACTION_ABORTABLE


class TransactionAbortedError(EngineError):
    """A record's transaction was aborted before the record was appended (Kafka's
    TransactionAbortedException): the record was dropped."""
