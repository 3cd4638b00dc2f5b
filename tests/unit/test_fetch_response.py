"""engine/protocol/fetch.py: the Fetch response decoder the clients and the follower share.

A round trip against the broker's own encoder (``messages.encode_fetch_response``) for every
version, then a fuzz in the style of tests/server/test_protocol.py: random bytes, truncations
and byte mutations of valid responses either decode or raise InvalidRequestError -- never
another exception, and never a hang (every count is checked against the bytes left)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import InvalidRequestError
from engine.protocol.fetch import FetchResult, parse_fetch_response
from engine.protocol.messages import FetchPartitionData, encode_fetch_response
from engine.protocol.primitives import Reader

VERSIONS = list(range(4, 17))
T_ID, U_ID = bytes(range(16)), bytes(range(1, 17))     # v13+: topics by id


def _t(version: int, name: str):
    return name if version < 13 else {"t": T_ID, "u": U_ID}[name]


def _body(version: int, error_code: int = 0) -> bytes:
    parts, size = encode_fetch_response(version, [
        (_t(version, "t"), [FetchPartitionData(0, 0, 10, 9, 1, [b"rec", b"ords"], [(5, 6)],
                                  (3, 4) if version >= 12 else None),
               FetchPartitionData(1, 6)]),
        (_t(version, "u"), [FetchPartitionData(2, 0, 0, 0, 0, None, None)]),
    ], error_code, 7)
    body = b"".join(bytes(p) for p in parts)
    assert len(body) == size
    return body


def _parse(data, version: int):
    return parse_fetch_response(Reader(memoryview(data)), version)


def test_round_trip_every_version():
    for v in VERSIONS:
        err, sid, found = _parse(_body(v), v)
        assert err == 0 and sid == (7 if v >= 7 else 0)
        t, u = _t(v, "t"), _t(v, "u")
        assert set(found) == {(t, 0), (t, 1), (u, 2)}
        first = found[(t, 0)]
        assert isinstance(first, FetchResult)
        assert bytes(first.records) == b"records"
        assert (first.error_code, first.high_watermark, first.last_stable_offset) == (0, 10, 9)
        assert first.log_start_offset == (1 if v >= 5 else -1)
        assert first.aborted_transactions == [(5, 6)]
        assert first.diverging_epoch == ((3, 4) if v >= 12 else None)
        assert found[(t, 1)].error_code == 6 and bytes(found[(t, 1)].records) == b""
        assert found[(u, 2)].aborted_transactions is None


def test_top_level_error_gives_no_partitions():
    err, _sid, found = _parse(_body(12, error_code=71), 12)
    assert err == 71 and found == {}


def test_an_error_code_kafka_does_not_define_is_unparseable():
    body = bytearray(_body(7))
    body[4:6] = (9999).to_bytes(2, "big")         # the top-level error_code after throttle_time_ms
    try:
        _parse(body, 7)
    except InvalidRequestError:
        return
    raise AssertionError("an undefined error code was accepted")


def test_every_truncation_raises_invalid_request():
    for v in VERSIONS:
        body = _body(v)
        for n in range(len(body)):
            try:
                _parse(body[:n], v)
            except InvalidRequestError:
                continue
            raise AssertionError(f"v{v}: a response cut at {n} of {len(body)} bytes decoded")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=128), st.sampled_from(VERSIONS))
def test_random_bytes_only_raise_invalid_request(data, version):
    try:
        _parse(data, version)
    except InvalidRequestError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(VERSIONS), st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(0, 255)),
                                           min_size=1, max_size=4), st.integers(0, 1 << 16))
def test_mutated_responses_only_raise_invalid_request(version, edits, cut):
    body = bytearray(_body(version))
    for pos, byte in edits:
        body[pos % len(body)] = byte
    try:
        _parse(body, version)
    except InvalidRequestError:
        pass
    try:
        _parse(body[:cut % (len(body) + 1)], version)
    except InvalidRequestError:
        pass
