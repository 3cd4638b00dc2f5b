"""Consumer-protocol codecs and Kafka's range / roundrobin assignors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.client.assignors import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    range_assign,
    roundrobin_assign,
)
from engine.errors import InvalidRequestError


def test_subscription_round_trip_and_kafka_bytes():
    data = encode_subscription(["b", "a"], b"ud", [("a", 1)])
    # version 1, 2 topics sorted, user data, owned partitions
    assert data[:2] == b"\x00\x01"
    assert data[2:6] == b"\x00\x00\x00\x02" and data[6:9] == b"\x00\x01a"
    sub = decode_subscription(data)
    assert sub.topics == ["a", "b"] and sub.user_data == b"ud" and sub.owned_partitions == [("a", 1)]


def test_subscription_v0_from_an_old_client():
    v0 = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    assert decode_subscription(v0).topics == ["t"]
    assert decode_subscription(v0).user_data is None


def test_assignment_round_trip_and_empty():
    data = encode_assignment([("t", 2), ("t", 0), ("u", 1)])
    assert decode_assignment(data) == [("t", 0), ("t", 2), ("u", 1)]
    assert decode_assignment(b"") == []


@pytest.mark.parametrize("bad", [b"\x00", b"\x00\x00\x00\x00\x00\x05", b"\x00\x00\x7f\xff\xff\xff"])
def test_malformed_protocol_bytes_raise(bad):
    with pytest.raises(InvalidRequestError):
        decode_subscription(bad)
    with pytest.raises(InvalidRequestError):
        decode_assignment(bad + b"\x00")


def test_range_matches_kafka_example():
    # Kafka's RangeAssignor doc: 2 consumers, 2 topics of 3 partitions
    out = range_assign({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert out == {"C0": [("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)], "C1": [("t0", 2), ("t1", 2)]}


def test_roundrobin_matches_kafka_example():
    out = roundrobin_assign({"C0": ["t0", "t1"], "C1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    assert out == {"C0": [("t0", 0), ("t0", 2), ("t1", 1)], "C1": [("t0", 1), ("t1", 0), ("t1", 2)]}


@given(st.dictionaries(st.text("abc", min_size=1, max_size=3), st.lists(st.sampled_from(["x", "y", "z"]),
                                                                      min_size=1, max_size=3),
                       min_size=1, max_size=6),
       st.fixed_dictionaries({"x": st.integers(0, 20), "y": st.integers(0, 20), "z": st.integers(0, 20)}))
def test_assignors_cover_every_partition_once(subs, counts):
    wanted = {(t, p) for ts in subs.values() for t in set(ts) for p in range(counts[t])}
    for assign in (range_assign, roundrobin_assign):
        out = assign(subs, counts)
        flat = [tp for tps in out.values() for tp in tps]
        assert sorted(flat) == sorted(wanted)
        for m, tps in out.items():
            assert all(t in subs[m] for t, _ in tps)
        sizes = [len([tp for tp in out[m] if tp[0] == "x"]) for m in subs if "x" in subs[m]]
        if assign is range_assign and sizes:
            assert max(sizes) - min(sizes) <= 1
