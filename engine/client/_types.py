"""Value objects shared by the embedded producer and consumer (Kafka's names)."""

from __future__ import annotations

from typing import Any, NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


def as_topic_partition(item: Any) -> TopicPartition:
    """A TopicPartition from one, or from a ``(topic, partition)`` pair."""
    if isinstance(item, TopicPartition):
        return item
    topic, partition = item
    return TopicPartition(str(topic), int(partition))


class RecordMetadata(NamedTuple):
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RawBatch(NamedTuple):
    """One stored record batch, exactly as on disk (still compressed)."""

    topic: str
    partition: int
    base_offset: int
    last_offset: int
    data: memoryview


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class ConsumerGroupMetadata(NamedTuple):
    """A group member's identity for ``send_offsets_to_transaction`` (Kafka's
    ConsumerGroupMetadata): the transaction's offsets are committed only while this member
    still holds its generation (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
