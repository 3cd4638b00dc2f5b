"""The consumer side of Kafka's classic group protocol: what members put in
JoinGroup and what the leader hands out in SyncGroup.

The coordinator only relays these bytes, so they are Kafka's own "consumer"
protocol-type formats, which lets embedded consumers share a group with
confluent-kafka, kafka-python or aiokafka members::

    ConsumerProtocolSubscription  version i16 (0..3), topics [STRING], user_data NULLABLE_BYTES,
                                  owned_partitions [topic STRING, partitions [i32]] (v1+),
                                  generation_id i32 (v2+), rack_id NULLABLE_STRING (v3+)
    ConsumerProtocolAssignment    version i16 (0..3), assigned_partitions [topic STRING,
                                  partitions [i32]], user_data NULLABLE_BYTES

(non-flexible encodings; a reader accepts newer versions by ignoring trailing
bytes, as Kafka's does).  Assignors are Kafka's ``range`` and ``roundrobin``:
deterministic functions of the members' subscriptions and partition counts.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from ..errors import InvalidRequestError
from ..protocol.primitives import Reader

__all__ = [
    "ASSIGNORS",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "range_assign",
    "roundrobin_assign",
]

SUBSCRIPTION_VERSION = 1   # topics, user data, owned partitions: what eager assignors need


class Subscription(NamedTuple):
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[tuple[str, int]] = []


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b


def _topic_partitions(tps: Iterable[tuple[str, int]]) -> bytes:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for t, p in tps:
        by_topic[t].append(p)
    out = [struct.pack(">i", len(by_topic))]
    for t in sorted(by_topic):
        ps = sorted(by_topic[t])
        out.append(_string(t) + struct.pack(">i", len(ps)) + struct.pack(f">{len(ps)}i", *ps))
    return b"".join(out)


def _read_topic_partitions(r: Reader) -> list[tuple[str, int]]:
    out = []
    for _ in range(r.array_length(False)):
        topic = r.string()
        for _ in range(r.array_length(False)):
            out.append((topic, r.int32()))
    return out


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None,
                        owned_partitions: Iterable[tuple[str, int]] = ()) -> bytes:
    ts = sorted(set(topics))
    return (struct.pack(">hi", SUBSCRIPTION_VERSION, len(ts)) + b"".join(_string(t) for t in ts)
            + _bytes(user_data) + _topic_partitions(owned_partitions))


def decode_subscription(data: bytes) -> Subscription:
    """A member's JoinGroup metadata; InvalidRequestError when it does not parse."""
    try:
        r = Reader(memoryview(data))
        version = r.int16()
        if version < 0:
            raise InvalidRequestError(f"subscription version {version}")
        topics = [r.string() for _ in range(r.array_length(False))]
        ud = r.nullable_bytes() if r.remaining else None
        user_data = None if ud is None else bytes(ud)
        owned = _read_topic_partitions(r) if version >= 1 and r.remaining else []
        return Subscription(topics, user_data, owned)
    except (IndexError, struct.error, ValueError) as e:
        raise InvalidRequestError(f"malformed consumer subscription: {e}") from None


def encode_assignment(partitions: Iterable[tuple[str, int]], user_data: bytes | None = None) -> bytes:
    return struct.pack(">h", 0) + _topic_partitions(partitions) + _bytes(user_data)


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """The partitions a SyncGroup answer assigns (empty bytes = nothing assigned)."""
    if not data:
        return []
    try:
        r = Reader(memoryview(data))
        r.int16()
        return _read_topic_partitions(r)
    except (IndexError, struct.error, ValueError) as e:
        raise InvalidRequestError(f"malformed consumer assignment: {e}") from None


Assignor = Callable[[Mapping[str, list[str]], Mapping[str, int]], dict[str, list[tuple[str, int]]]]


def range_assign(subscriptions: Mapping[str, list[str]],
                 partitions: Mapping[str, int]) -> dict[str, list[tuple[str, int]]]:
    """Kafka's RangeAssignor: per topic, its subscribers in member-id order take
    consecutive ranges; the first ``n % m`` take one extra partition."""
    out: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
    by_topic: dict[str, list[str]] = defaultdict(list)
    for member, topics in subscriptions.items():
        for t in set(topics):
            by_topic[t].append(member)
    for topic in sorted(by_topic):
        n = partitions.get(topic, 0)
        members = sorted(by_topic[topic])
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            count = per + (1 if i < extra else 0)
            out[m].extend((topic, p) for p in range(start, start + count))
            start += count
    return out


def roundrobin_assign(subscriptions: Mapping[str, list[str]],
                      partitions: Mapping[str, int]) -> dict[str, list[tuple[str, int]]]:
    """Kafka's RoundRobinAssignor: every topic-partition in (topic, partition)
    order goes to the next member in member-id order subscribed to its topic."""
    out: dict[str, list[tuple[str, int]]] = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return out
    subs = {m: set(subscriptions[m]) for m in members}
    i = 0
    for topic in sorted({t for ts in subs.values() for t in ts}):
        for p in range(partitions.get(topic, 0)):
            for _ in range(len(members)):
                m = members[i % len(members)]
                i += 1
                if topic in subs[m]:
                    out[m].append((topic, p))
                    break
    return out


ASSIGNORS: dict[str, Assignor] = {"range": range_assign, "roundrobin": roundrobin_assign}
