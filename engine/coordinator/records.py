"""Kafka's record formats for ``__consumer_offsets`` (so Kafka's tools read ours and we read theirs).

Every record key and value starts with an int16 version.  Key versions pick
the record type; value versions are the schema version of that type
(``group-coordinator/src/main/resources/common/message/*.json`` in Apache Kafka)::

    key v0/v1 OffsetCommitKey      group STRING, topic STRING, partition i32
    key v2    GroupMetadataKey     group STRING
    (key versions >= 3 are KIP-848 / share / streams group records: skipped on replay)

    OffsetCommitValue   v0: offset i64, metadata STRING, commit_timestamp i64
                        v1: v0 + expire_timestamp i64
                        v2: = v0
                        v3: offset i64, leader_epoch i32, metadata STRING, commit_timestamp i64
                        v4: v3, flexible (compact strings, trailing tagged fields)
    GroupMetadataValue  protocol_type STRING, generation i32, protocol NULLABLE_STRING,
                        leader NULLABLE_STRING, current_state_timestamp i64 (v2+),
                        members [member_id STRING, group_instance_id NULLABLE_STRING (v3+),
                                 client_id STRING, client_host STRING, rebalance_timeout i32 (v1+),
                                 session_timeout i32, subscription BYTES, assignment BYTES]
                        v4 flexible

We write what Kafka 4.0 writes: key v1 / v2, OffsetCommitValue v3 (v1 when the
commit carried a retention time, as Kafka does), GroupMetadataValue v3.  A
null value (tombstone) deletes the key.

``partition_for(group_id, n)`` is Kafka's ``Utils.abs(groupId.hashCode()) % n``
with Java's String.hashCode over UTF-16 code units.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import CorruptRecordError
from ..protocol.primitives import Reader, Writer
from .group import GroupMetadata, OffsetAndMetadata

__all__ = [
    "GroupMetadataRecord",
    "MemberRecord",
    "OFFSETS_TOPIC",
    "decode_key",
    "decode_group_metadata",
    "decode_offset_commit",
    "encode_group_metadata",
    "encode_group_metadata_key",
    "encode_offset_commit",
    "encode_offset_commit_key",
    "java_string_hash",
    "partition_for",
]

OFFSETS_TOPIC = "__consumer_offsets"
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (int32, over UTF-16 code units)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= (1 << 31) else h


def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hash(group_id)
    h = 0 if h == -(1 << 31) else abs(h)      # Kafka's Utils.abs
    return h % partitions


# -- keys ---------------------------------------------------------------------
def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    w = Writer()
    w.int16(OFFSET_COMMIT_KEY_VERSION).string(group, False).string(topic, False).int32(partition)
    return bytes(w.buf)


def encode_group_metadata_key(group: str) -> bytes:
    w = Writer()
    w.int16(GROUP_METADATA_KEY_VERSION).string(group, False)
    return bytes(w.buf)


def decode_key(data) -> tuple:
    """("offset", group, topic, partition) | ("group", group) | ("other", key_version).

    CorruptRecordError when the bytes do not parse."""
    try:
        r = Reader(memoryview(data))
        version = r.int16()
        if version in (0, 1):
            group, topic, partition = r.string(), r.string(), r.int32()
            r.done()
            return ("offset", group, topic, partition)
        if version == 2:
            group = r.string()
            r.done()
            return ("group", group)
        return ("other", version)
    except (ValueError, IndexError, struct.error) as e:
        raise CorruptRecordError(f"unreadable __consumer_offsets key: {e}") from None


# -- offset commit values --------------------------------------------------------
def encode_offset_commit(om: OffsetAndMetadata) -> bytes:
    w = Writer()
    if om.expire_timestamp >= 0:
        w.int16(OFFSET_COMMIT_VALUE_VERSION_EXPIRE).int64(om.offset).string(om.metadata or "", False)
        w.int64(om.commit_timestamp).int64(om.expire_timestamp)
    else:
        w.int16(OFFSET_COMMIT_VALUE_VERSION).int64(om.offset).int32(om.leader_epoch)
        w.string(om.metadata or "", False).int64(om.commit_timestamp)
    return bytes(w.buf)


def decode_offset_commit(data) -> OffsetAndMetadata:
    try:
        r = Reader(memoryview(data))
        v = r.int16()
        if v < 0 or v > 4:
            raise ValueError(f"OffsetCommitValue version {v} is unknown")
        flex = v >= 4
        offset = r.int64()
        epoch = r.int32() if v >= 3 else -1
        metadata = r.string_f(flex)
        commit_ts = r.int64()
        expire_ts = r.int64() if v == 1 else -1
        if flex:
            r.tagged_fields()
        return OffsetAndMetadata(offset, epoch, metadata, commit_ts, expire_ts)
    except (ValueError, IndexError, struct.error) as e:
        raise CorruptRecordError(f"unreadable OffsetCommitValue: {e}") from None


# -- group metadata values ---------------------------------------------------------
class MemberRecord(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


class GroupMetadataRecord(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberRecord]


def encode_group_metadata(group: GroupMetadata, assignments: dict[str, bytes] | None = None) -> bytes:
    """GroupMetadataValue v3 of `group` (members' assignments from `assignments` when given)."""
    w = Writer()
    w.int16(GROUP_METADATA_VALUE_VERSION)
    w.string(group.protocol_type or "", False).int32(group.generation_id)
    w.string(group.protocol_name, False).string(group.leader_id, False)
    w.int64(group.current_state_timestamp)
    members = list(group.members.values())
    w.array_length(len(members), False)
    for m in members:
        w.string(m.member_id, False).string(m.group_instance_id, False)
        w.string(m.client_id, False).string(m.client_host, False)
        w.int32(m.rebalance_timeout_ms).int32(m.session_timeout_ms)
        w.bytes_(m.metadata(group.protocol_name), False)
        a = assignments.get(m.member_id, b"") if assignments is not None else m.assignment
        w.bytes_(a, False)
    return bytes(w.buf)


def decode_group_metadata(data) -> GroupMetadataRecord:
    try:
        r = Reader(memoryview(data))
        v = r.int16()
        if v < 0 or v > 4:
            raise ValueError(f"GroupMetadataValue version {v} is unknown")
        flex = v >= 4
        protocol_type = r.string_f(flex)
        generation = r.int32()
        protocol = r.nullable_string_f(flex)
        leader = r.nullable_string_f(flex)
        ts = r.int64() if v >= 2 else -1
        members = []
        for _ in range(r.array_length(flex)):
            member_id = r.string_f(flex)
            instance = r.nullable_string_f(flex) if v >= 3 else None
            client_id = r.string_f(flex)
            host = r.string_f(flex)
            rebalance = r.int32() if v >= 1 else -1
            session = r.int32()
            sub = bytes(r.bytes_(flex))
            assignment = bytes(r.bytes_(flex))
            if flex:
                r.tagged_fields()
            if rebalance < 0:
                rebalance = session
            members.append(MemberRecord(member_id, instance, client_id, host, rebalance, session,
                                        sub, assignment))
        if flex:
            r.tagged_fields()
        return GroupMetadataRecord(protocol_type, generation, protocol, leader, ts, members)
    except (ValueError, IndexError, struct.error) as e:
        raise CorruptRecordError(f"unreadable GroupMetadataValue: {e}") from None
