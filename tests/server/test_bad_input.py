"""Raw-socket bad input (reliability contract §9, rows B1-B4, B6-B10, B13, B14).

After every case the broker must still serve a fresh client, and a case that
keeps the connection open must keep it usable."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from engine.records import build_batch

from .conftest import api_versions_ok, connect, is_closed, recv_frame, request_frame

MAX_REQUEST = 100 * 1024 * 1024


def _str16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def produce_v3(topic: str, partition: int, records: bytes, acks: int = 1) -> bytes:
    return (struct.pack(">hhi", -1, acks, 5000) + struct.pack(">i", 1) + _str16(topic)
            + struct.pack(">ii", 1, partition) + struct.pack(">i", len(records)) + records)


def parse_produce_v3(resp: bytes) -> tuple[int, int]:
    """(error_code, base_offset) of the single partition of a Produce v3 response."""
    pos = 4                                  # correlation id
    (ntopics,) = struct.unpack_from(">i", resp, pos)
    assert ntopics == 1
    pos += 4
    (nlen,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + nlen
    (nparts, index, error, base) = struct.unpack_from(">iihq", resp, pos)
    assert nparts == 1
    return error, base


def fetch_v9(topic: str, partition: int, offset: int, leader_epoch: int = -1,
             max_wait_ms: int = 0) -> bytes:
    return (struct.pack(">iiiibii", -1, max_wait_ms, 1, 1 << 20, 0, 0, -1) + struct.pack(">i", 1)
            + _str16(topic) + struct.pack(">i", 1)
            + struct.pack(">iiqqi", partition, leader_epoch, offset, -1, 1 << 20)
            + struct.pack(">i", 0))


def parse_fetch_v9(resp: bytes) -> tuple[int, int, int]:
    """(partition error_code, high_watermark, records size) of a single-partition Fetch v9 response."""
    pos = 4 + 4                                # correlation id, throttle
    top_error, _session, ntopics = struct.unpack_from(">hii", resp, pos)
    assert top_error == 0 and ntopics == 1
    pos += 10
    (nlen,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + nlen
    nparts, _index, error, hw, _lso, _logstart, naborted = struct.unpack_from(">iihqqqi", resp, pos)
    pos += 4 + 4 + 2 + 24 + 4
    assert nparts == 1 and naborted == -1
    (size,) = struct.unpack_from(">i", resp, pos)
    return error, hw, size


def _batch(n: int = 3, value_size: int = 10) -> bytearray:
    return bytearray(build_batch([b"v" * value_size for _ in range(n)]))


def _roundtrip(s, frame: bytes) -> bytes:
    s.sendall(frame)
    return recv_frame(s)


# -- B1-B4: framing ------------------------------------------------------------------
@pytest.mark.parametrize("size", [-1, -(2 ** 31), MAX_REQUEST + 1, 0, 5])
def test_bad_size_prefix_closes(broker, size):
    """B1 (negative), B2 (> socket.request.max.bytes: closed before any body byte is sent),
    B3 (0, smaller than a header)."""
    with connect(broker.port) as s:
        s.sendall(struct.pack(">i", size) + (b"\x00" * 5 if size == 5 else b""))
        assert is_closed(s)
    assert api_versions_ok(broker.port)


def test_header_shorter_than_claimed_fields_closes(broker):
    """B3: a 10-byte frame whose client_id length points past the frame."""
    with connect(broker.port) as s:
        s.sendall(struct.pack(">ihhih", 10, 18, 0, 1, 50))
        assert is_closed(s)
    assert api_versions_ok(broker.port)


def test_truncated_frame_then_eof(broker):
    """B4: prefix says 100, 10 bytes arrive, then EOF: nothing processed, connection freed."""
    with connect(broker.port) as s:
        s.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x00" + b"\x00" * 6)
        s.shutdown(socket.SHUT_WR)
        assert is_closed(s)
    deadline = time.monotonic() + 5
    while broker.broker.connection_count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert broker.broker.connection_count == 0
    assert api_versions_ok(broker.port)


# -- B6: unknown keys and versions ----------------------------------------------------
@pytest.mark.parametrize("key,version", [(9999, 0), (-1, 0), (1, 99), (1, 3), (0, 10), (3, 14)])
def test_unknown_key_or_version_closes(broker, key, version):
    with connect(broker.port) as s:
        s.sendall(request_frame(key, version, 1, b"\x00" * 16))
        assert is_closed(s)
    assert api_versions_ok(broker.port)


def test_api_versions_too_new_gets_v0_error(broker):
    with connect(broker.port) as s:
        resp = _roundtrip(s, request_frame(18, 99, 42, b"garbage that must not be parsed"))
        corr, error, n = struct.unpack_from(">ihi", resp, 0)
        assert (corr, error, n) == (42, 35, 1)
        key, lo, hi = struct.unpack_from(">hhh", resp, 10)
        assert (key, lo) == (18, 0) and hi >= 3
        assert len(resp) == 16                    # v0: no throttle time, no tags
        # the connection stays usable: the client retries at the advertised version
        resp = _roundtrip(s, request_frame(18, hi, 43, b"\x04abc\x021\x00", flexible=True))
        assert struct.unpack_from(">ih", resp, 0) == (43, 0)


# -- B7/B8: malformed bodies, pipelining ------------------------------------------------
@pytest.mark.parametrize("body", [
    b"\x00\x00",                                  # Metadata v9: compact array 0 = null topics, then truncated
    b"\x02\x00",                                  # one topic whose compact name is null (0)
    b"\x02\x80\x80\x80\x80\x04",                  # name length varint 1<<30
    b"\x02\x02a\x00\x01\x00\x00\x02\x05\x01x\x05\x01y",   # duplicate tags in the body's tag buffer
    b"\x01\x01\x01\x00\x01\x7f",                  # tag size past the end
])
def test_malformed_metadata_closes(broker, body):
    with connect(broker.port) as s:
        s.sendall(request_frame(3, 9, 1, body, flexible=True))
        assert is_closed(s)
    assert api_versions_ok(broker.port)


def test_pipelined_frames_answered_before_close(broker):
    """B8: two valid requests then a malformed one: both answered in order, then close."""
    with connect(broker.port) as s:
        s.sendall(request_frame(18, 0, 1, b"") + request_frame(18, 1, 2, b"")
                  + request_frame(3, 1, 3, struct.pack(">i", 0x7FFFFFFF)))
        assert struct.unpack_from(">i", recv_frame(s))[0] == 1
        assert struct.unpack_from(">i", recv_frame(s))[0] == 2
        assert is_closed(s)
    assert api_versions_ok(broker.port)


# -- B9, B10, B13: produce errors ------------------------------------------------------
def test_flipped_crc_is_corrupt_message_and_connection_stays(broker):
    broker.call(lambda: broker.engine.create_topic("b9", 1))
    batch = _batch()
    batch[17] ^= 0x01                             # a CRC byte
    with connect(broker.port) as s:
        error, _ = parse_produce_v3(_roundtrip(s, request_frame(0, 3, 1, produce_v3("b9", 0, bytes(batch)))))
        assert error == 2
        assert broker.call(lambda: broker.engine.log("b9", 0).log_end_offset) == 0
        # same connection: a good batch goes in at offset 0
        error, base = parse_produce_v3(_roundtrip(s, request_frame(0, 3, 2, produce_v3("b9", 0, bytes(_batch())))))
        assert (error, base) == (0, 0)
    assert api_versions_ok(broker.port)


def test_batch_larger_than_max_message_bytes(broker):
    broker.call(lambda: broker.engine.create_topic("b10", 1, {"max.message.bytes": 1000}))
    with connect(broker.port) as s:
        error, _ = parse_produce_v3(_roundtrip(s, request_frame(
            0, 3, 1, produce_v3("b10", 0, bytes(_batch(2, 3000))))))
        assert error == 10
        error, _ = parse_produce_v3(_roundtrip(s, request_frame(0, 3, 2, produce_v3("b10", 0, bytes(_batch())))))
        assert error == 0
    assert broker.call(lambda: broker.engine.log("b10", 0).log_end_offset) == 3


def test_invalid_required_acks(broker):
    broker.call(lambda: broker.engine.create_topic("b13", 1))
    with connect(broker.port) as s:
        frame = request_frame(0, 3, 1, produce_v3("b13", 0, bytes(_batch()), acks=5))
        error, _ = parse_produce_v3(_roundtrip(s, frame))
        assert error == 21
    assert broker.call(lambda: broker.engine.log("b13", 0).log_end_offset) == 0


def test_produce_unknown_partition_and_old_version(broker):
    broker.call(lambda: broker.engine.create_topic("p", 1))
    with connect(broker.port) as s:
        error, _ = parse_produce_v3(_roundtrip(s, request_frame(0, 3, 1, produce_v3("p", 7, bytes(_batch())))))
        assert error == 3
        # Produce v2 (message format 0/1 era) is advertised for feature probes but refused
        body = struct.pack(">hi", 1, 5000) + struct.pack(">i", 1) + _str16("p") + struct.pack(">ii", 1, 0) \
            + struct.pack(">i", 3) + b"abc"
        resp = _roundtrip(s, request_frame(0, 2, 2, body))
        assert struct.unpack_from(">h", resp, 4 + 4 + 2 + 1 + 4 + 4)[0] == 35


def test_acks_zero_sends_no_response(broker):
    broker.call(lambda: broker.engine.create_topic("a0", 1))
    with connect(broker.port) as s:
        s.sendall(request_frame(0, 3, 1, produce_v3("a0", 0, bytes(_batch()), acks=0)))
        resp = _roundtrip(s, request_frame(18, 0, 2, b""))
        assert struct.unpack_from(">i", resp)[0] == 2       # the next response is the ApiVersions one
    assert broker.call(lambda: broker.engine.log("a0", 0).log_end_offset) == 3


# -- B14: fetch out of range, leader epochs ---------------------------------------------
def test_fetch_errors(broker):
    broker.call(lambda: broker.engine.create_topic("b14", 1))
    with connect(broker.port) as s:
        for i in range(3):
            parse_produce_v3(_roundtrip(s, request_frame(0, 3, i, produce_v3("b14", 0, bytes(_batch())))))
        error, hw, size = parse_fetch_v9(_roundtrip(s, request_frame(1, 9, 10, fetch_v9("b14", 0, 0))))
        assert (error, hw) == (0, 9) and size > 0
        assert parse_fetch_v9(_roundtrip(s, request_frame(1, 9, 11, fetch_v9("b14", 0, 10))))[0] == 1
        broker.call(lambda: broker.engine.log("b14", 0).delete_records_before(3))
        assert parse_fetch_v9(_roundtrip(s, request_frame(1, 9, 12, fetch_v9("b14", 0, 1))))[0] == 1
        assert parse_fetch_v9(_roundtrip(s, request_frame(1, 9, 13, fetch_v9("b14", 0, 3, 0))))[0] == 0
        epoch = broker.call(lambda: broker.engine.log("b14", 0).leader_epoch_cache.latest_epoch)
        # a newer leader epoch, made the way every epoch is (a node alone is a cluster of one)
        rm = broker.broker.replicas
        broker.call(lambda: rm.become_leader("b14", 0, epoch + 2, [rm.node_id], [rm.node_id], 0))
        parse_produce_v3(_roundtrip(s, request_frame(0, 3, 4, produce_v3("b14", 0, bytes(_batch())))))
        assert parse_fetch_v9(_roundtrip(s, request_frame(1, 9, 14, fetch_v9("b14", 0, 3, epoch + 1))))[0] == 74
        assert parse_fetch_v9(_roundtrip(s, request_frame(1, 9, 15, fetch_v9("b14", 0, 3, epoch + 3))))[0] == 75
        assert parse_fetch_v9(_roundtrip(s, request_frame(1, 9, 16, fetch_v9("nope", 0, 0))))[0] == 3
        # at the log end, with max_wait: an empty answer after about max_wait
        t0 = time.monotonic()
        error, hw, size = parse_fetch_v9(_roundtrip(s, request_frame(1, 9, 17, fetch_v9("b14", 0, 12, -1, 300))))
        assert (error, hw, size) == (0, 12, 0) and 0.25 < time.monotonic() - t0 < 3
    assert api_versions_ok(broker.port)


def test_stalled_frame_closed_at_idle_timeout(make_broker):
    """B5: a size prefix and part of a body, then silence: closed at the idle timeout."""
    b = make_broker(idle_timeout=0.3)
    with connect(b.port) as s:
        s.sendall(struct.pack(">i", 50) + b"\x00\x12")
        t0 = time.monotonic()
        assert is_closed(s, timeout=5)
        assert 0.25 < time.monotonic() - t0 < 3
    assert api_versions_ok(b.port)


def _recrc(batch: bytearray) -> bytearray:
    import crc32c
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return batch


def _b11_cases():
    def last_offset_delta(b):
        struct.pack_into(">i", b, 23, 7)            # 3 records, claims last delta 7
        return _recrc(b)

    def zero_count(b):
        struct.pack_into(">i", b, 57, 0)
        return _recrc(b)

    def control_bit(b):
        attrs = struct.unpack_from(">h", b, 21)[0] | 0x20
        struct.pack_into(">h", b, 21, attrs)
        return _recrc(b)

    def magic_1(b):
        b[16] = 1
        return b

    def batch_length_short(b):
        struct.pack_into(">i", b, 8, struct.unpack_from(">i", b, 8)[0] - 5)
        return b

    def batch_length_long(b):
        struct.pack_into(">i", b, 8, struct.unpack_from(">i", b, 8)[0] + 5)
        return b

    return [last_offset_delta, zero_count, control_bit, magic_1, batch_length_short, batch_length_long]


# value checks are INVALID_RECORD (87); magic and framing are CORRUPT_MESSAGE (2), as in Kafka
B11_EXPECTED = {"last_offset_delta": 87, "zero_count": 87, "control_bit": 87,
                "magic_1": 2, "batch_length_short": 2, "batch_length_long": 2}


@pytest.mark.parametrize("mutate", _b11_cases(), ids=lambda f: f.__name__)
def test_invalid_batches_rejected_nothing_appended(broker, mutate):
    """B11: structurally bad batches from a client: INVALID_RECORD (87) or CORRUPT_MESSAGE (2)."""
    broker.call(lambda: broker.engine.create_topic("b11", 1))
    with connect(broker.port) as s:
        bad = mutate(_batch())
        error, _ = parse_produce_v3(_roundtrip(s, request_frame(0, 3, 1, produce_v3("b11", 0, bytes(bad)))))
        assert error == B11_EXPECTED[mutate.__name__]
        assert broker.call(lambda: broker.engine.log("b11", 0).log_end_offset) == 0
        error, base = parse_produce_v3(_roundtrip(s, request_frame(0, 3, 2, produce_v3("b11", 0, bytes(_batch())))))
        assert (error, base) == (0, 0)
