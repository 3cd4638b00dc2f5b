"""Producer-state API handlers: DescribeProducers (61), as Kafka 4.0 answers it.

For each requested partition, the producers its ProducerStateManager knows
(engine/storage/producer_state.py): producer id, epoch, last sequence (-1 when
none of its batches is left), last timestamp (max timestamp of its last
batch), coordinator epoch (of its last transaction marker) and current transaction
start offset (the first offset of its open transaction, -1: none).  A partition that does not
exist gets UNKNOWN_TOPIC_OR_PARTITION (3), as Kafka's ReplicaManager answers
it; a single node leads every partition it has; in a cluster another broker (a follower, or one
hosting no replica) answers NOT_LEADER_OR_FOLLOWER (6), as Kafka's Partition does.

Before anything is looked up, as Kafka's KafkaApis: a topic name Kafka refuses answers
INVALID_TOPIC_EXCEPTION (17), a topic the caller may not READ (broker.access,
engine/server/access.py) TOPIC_AUTHORIZATION_FAILED (29), for each of its partitions.

Concurrency: runs on the broker's event loop; the producer table is read under
the partition log's lock, through the replica layer (``ReplicaManager.active_producers``).
"""

from __future__ import annotations

import logging

from ..errors import ErrorCode, InvalidTopicError, KafkaApiError, UnknownTopicOrPartitionError
from ..metadata import validate_topic_name
from ..protocol import messages as m
from .access import AclOperation

__all__ = ["ProducerHandlers"]

log = logging.getLogger("engine.server")


class ProducerHandlers:
    """``table()`` maps API keys to the handlers (merged into Handlers)."""

    def __init__(self, handlers):
        self.handlers = handlers
        self.node = handlers.node

    def table(self) -> dict:
        return {m.ApiKey.DESCRIBE_PRODUCERS: self.describe_producers}

    # -- DescribeProducers (61) ---------------------------------------------------
    async def describe_producers(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DESCRIBE_PRODUCERS, v, body.buf[body.pos:])
        access = self.handlers.broker.access
        topics = []
        for t in req.topics:
            parts = []
            refused = _refused(access, conn, t.name)
            for index in t.partition_indexes:
                res = {"partition_index": index, "error_code": 0, "error_message": None,
                       "active_producers": []}
                if refused is not None:
                    res["error_code"], res["error_message"] = refused
                    parts.append(res)
                    continue
                try:
                    # the leader answers (Kafka: a follower or a broker hosting no replica
                    # answers NOT_LEADER_OR_FOLLOWER)
                    res["active_producers"] = [
                        {"producer_id": e.producer_id, "producer_epoch": e.epoch,
                         "last_sequence": e.last_sequence, "last_timestamp": e.timestamp,
                         "coordinator_epoch": e.coordinator_epoch,
                         "current_txn_start_offset": e.current_txn_first_offset}
                        for e in self.handlers.replicas.active_producers(t.name, index)]
                except UnknownTopicOrPartitionError:
                    res["error_code"] = UnknownTopicOrPartitionError.code
                except KafkaApiError as e:
                    res["error_code"] = e.code
                    res["error_message"] = str(e)[:300]
                except Exception as e:  # noqa: BLE001 - one partition's failure is its error
                    log.exception("describe producers of %s-%d failed", t.name, index)
                    res["error_code"] = ErrorCode.UNKNOWN_SERVER_ERROR
                    res["error_message"] = str(e)[:300]
                parts.append(res)
            topics.append({"name": t.name, "partitions": parts})
        return [m.encode(m.ApiKey.DESCRIBE_PRODUCERS, v, {"throttle_time": 0, "topics": topics})]


def _refused(access, conn, topic: str) -> tuple[int, str] | None:
    """(error, message) for every partition of a topic asked for, before it is looked up: an
    invalid name, then READ on the topic (Kafka's order); None when it may be described."""
    try:
        validate_topic_name(topic)
    except InvalidTopicError as e:
        return e.code, str(e)[:300]
    if not access.topic(conn, AclOperation.READ, topic):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    return None
