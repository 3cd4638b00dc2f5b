"""The sans-I/O protocol layer: primitives, frames, headers, hand-written codecs, kio glue.

Property tests feed random and mutated bytes to every decoder: the only
exception allowed out is InvalidRequestError (the broker then closes)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import InvalidRequestError
from engine.protocol import Reader, Writer, parse_request_header, response_header
from engine.protocol import messages as m
from engine.protocol.frames import check_frame_size, peek_header

# librdkafka 2.16 ApiVersions v3 request, captured (docs: kafka-wire-protocol.md §2)
RDKAFKA_API_VERSIONS = bytes.fromhex("00000040" "00120003" "00000001" "0007") + b"rdkafka" + b"\x00" \
    + b"\x17confluent-kafka-python" + b"\x162.16.1-rdkafka-2.16.0" + b"\x00"


def test_rdkafka_api_versions_request_golden():
    (size,) = struct.unpack_from(">i", RDKAFKA_API_VERSIONS)
    check_frame_size(size, 1 << 20)
    frame = RDKAFKA_API_VERSIONS[4:]
    assert size == len(frame) == 0x40
    header, r = parse_request_header(frame, m.is_flexible(18, 3))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
        (18, 3, 1, "rdkafka")
    assert m.parse_api_versions_request(r, 3) == ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0")


def test_api_versions_response_layout():
    body = m.encode_api_versions_response(3, 0, {0: (0, 9), 18: (0, 3)})
    # error 0, compact array of 2 (+1), entries with empty tags, throttle, tags
    assert bytes(body) == bytes.fromhex("0000" "03" "0000000000090" "0" "0012000000030" "0" "00000000" "00")
    v0 = m.encode_api_versions_response(0, 35, {18: (0, 3)})
    assert bytes(v0) == bytes.fromhex("0023" "00000001" "001200000003")
    assert bytes(response_header(5, False)) == b"\x00\x00\x00\x05"
    assert bytes(response_header(5, True)) == b"\x00\x00\x00\x05\x00"


def test_frames_reassemble_from_single_bytes_and_sizes_are_refused_early(broker):
    """The connection reassembles frames from any TCP pieces (here one byte per send), and a
    size prefix outside [header, socket.request.max.bytes] is refused before any body."""
    from .conftest import connect, recv_frame, request_frame
    stream = request_frame(18, 0, 1, b"") + request_frame(18, 0, 2, b"")
    with connect(broker.port) as sock:
        for i in range(len(stream)):
            sock.sendall(stream[i:i + 1])
        assert [struct.unpack_from(">i", recv_frame(sock))[0] for _ in range(2)] == [1, 2]
    for bad in (-1, -(2 ** 31), 0, 9, 1001):
        with pytest.raises(InvalidRequestError):
            check_frame_size(bad, 1000)                     # no body needed
    check_frame_size(1000, 1000)


def test_reader_bounds_never_trust_lengths():
    for data, call in [
        (struct.pack(">h", 5) + b"abc", lambda r: r.string()),
        (struct.pack(">h", -2), lambda r: r.nullable_string()),
        (struct.pack(">i", 0x7FFFFFFF), lambda r: r.nullable_bytes()),
        (struct.pack(">i", -2), lambda r: r.nullable_bytes()),
        (struct.pack(">i", 1 << 30) + b"\x00" * 8, lambda r: r.array_length(False)),
        (struct.pack(">i", -1), lambda r: r.array_length(False)),      # null where not nullable
        (b"\x80\x80\x80\x80\x04", lambda r: r.compact_string()),       # 1<<30 claimed
        (b"\x00", lambda r: r.compact_string()),                       # null in non-nullable
        (b"\xff\xff\xff\xff\xff\x01", lambda r: r.uvarint()),          # > 5 bytes
        (b"\x02\x01\x00\x01\x00", lambda r: r.tagged_fields()),        # duplicate tag
        (b"\x02\x02\x00\x01\x00", lambda r: r.tagged_fields()),        # descending
        (b"\x01\x00\x05\x00", lambda r: r.tagged_fields()),            # size past the end
        (b"\x02\xff\xfe", lambda r: r.compact_string()),               # not UTF-8
    ]:
        with pytest.raises(InvalidRequestError):
            call(Reader(data))
    assert Reader(struct.pack(">i", -1)).array_length(False, nullable=True) == -1
    tags = Reader(b"\x02\x00\x01a\x03\x00").tagged_fields()
    assert {k: bytes(v) for k, v in tags.items()} == {0: b"a", 3: b""}


def test_writer_reader_round_trip():
    w = Writer()
    w.int8(-3).int16(-300).int32(7).int64(-(2 ** 40)).uvarint(300).string("hé", True).string(None, True)
    w.string("x", False).string(None, False).bytes_(b"ab", True).bytes_(None, False).array_length(2, True)
    w.tagged_fields({5: b"z", 1: b""})
    r = Reader(bytes(w.buf))
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.uvarint()) == (-3, -300, 7, -(2 ** 40), 300)
    assert (r.compact_string(), r.compact_nullable_string(), r.string(), r.nullable_string()) == \
        ("hé", None, "x", None)
    assert bytes(r.compact_nullable_bytes()) == b"ab" and r.nullable_bytes() is None
    assert r.array_length(True) == 2
    assert {k: bytes(v) for k, v in r.tagged_fields().items()} == {1: b"", 5: b"z"}
    r.done()


def _produce_body(version: int, records: bytes) -> bytes:
    flex = version >= 9
    w = Writer()
    if version >= 3:
        w.string(None, flex)
    w.int16(1).int32(1000).array_length(1, flex).string("t", flex).array_length(1, flex).int32(0)
    w.bytes_(records, flex)
    if flex:
        w.tagged_fields().tagged_fields().tagged_fields()
    return bytes(w.buf)


@pytest.mark.parametrize("version", [3, 7, 9])
def test_produce_request_records_are_a_view(version):
    records = b"R" * 100
    body = _produce_body(version, records)
    req = m.parse_produce_request(Reader(body), version)
    (name, parts), = req.topics
    assert (req.acks, req.timeout_ms, name, parts[0].index) == (1, 1000, "t", 0)
    assert isinstance(parts[0].records, memoryview) and bytes(parts[0].records) == records
    assert parts[0].records.obj is Reader(body).buf.obj or parts[0].records.nbytes == 100


class _Slice:
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_fetch_response_parts_put_slices_after_their_length(version):
    flex = version >= 12
    a, b = _Slice(100), _Slice(50)
    parts, total = m.encode_fetch_response(version, [("t", [
        m.FetchPartitionData(0, 0, 10, 9, 2, [a, b]),
        m.FetchPartitionData(1, 1, 5, 5, 0, None)])])
    assert parts[1] is a and parts[2] is b
    assert total == sum(len(p) for p in parts)
    wire = b"".join(bytes(p) if isinstance(p, (bytes, bytearray)) else b"S" * p.size for p in parts)
    r = Reader(wire)
    assert r.int32() == 0
    if version >= 7:
        assert (r.int16(), r.int32()) == (0, 0)
    assert r.array_length(flex) == 1 and r.string_f(flex) == "t" and r.array_length(flex) == 2
    seen = []
    for _ in range(2):
        row = [r.int32(), r.int16(), r.int64(), r.int64()]
        if version >= 5:
            row.append(r.int64())
        assert r.array_length(flex, nullable=True) == -1          # aborted_transactions
        if version >= 11:
            assert r.int32() == -1                                  # preferred_read_replica
        row.append(bytes(r.bytes_(flex)))
        if flex:
            r.tagged_fields()
        seen.append(row)
    if flex:
        r.tagged_fields()
        r.tagged_fields()
    r.done()
    lso = [2] if version >= 5 else []
    assert seen == [[0, 0, 10, 9, *lso, b"S" * 150], [1, 1, 5, 5, *([0] if version >= 5 else []), b""]]


def test_kio_control_plane_round_trip():
    body = m.encode(3, 1, {"throttle_time": 0, "brokers": [{"node_id": 0, "host": "h", "port": 9}],
                           "controller_id": 0, "topics": [{"error_code": 3, "name": "x", "partitions": []}]})
    # v1: brokers [node_id, host, port, rack], controller_id, topics [error, name, is_internal, parts]
    assert body == (struct.pack(">ii", 1, 0) + b"\x00\x01h" + struct.pack(">i", 9) + b"\xff\xff"
                    + struct.pack(">ii", 0, 1) + b"\x00\x03\x00\x01x\x00" + struct.pack(">i", 0))
    req = m.decode(3, 9, b"\x02\x02x\x00\x01\x00\x00\x00")
    assert [t.name for t in req.topics] == ["x"] and req.allow_auto_topic_creation is True
    # a byte after the body (librdkafka 2.16's Metadata v9) is ignored, as Kafka ignores it
    req = m.decode(3, 9, b"\x02\x02x\x00\x01\x00\x00\x00\x00")
    assert [t.name for t in req.topics] == ["x"]
    assert m.parse_api_versions_request(Reader(b"\x00\x00\x00\x07"), 0) == (None, None)


_DECODERS = [
    lambda b: m.parse_produce_request(Reader(b), 3),
    lambda b: m.parse_produce_request(Reader(b), 9),
    lambda b: m.parse_api_versions_request(Reader(b), 3),
    lambda b: m.decode(1, 4, b),
    lambda b: m.decode(1, 12, b),
    lambda b: m.decode(3, 1, b),
    lambda b: m.decode(3, 9, b),
    lambda b: m.decode(2, 7, b),
    lambda b: m.decode(19, 7, b),
    lambda b: m.decode(20, 4, b),
    lambda b: parse_request_header(b, True),
    lambda b: peek_header(b),
]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.integers(0, len(_DECODERS) - 1))
def test_random_bytes_only_raise_invalid_request(data, which):
    try:
        _DECODERS[which](data)
    except InvalidRequestError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 200), st.integers(0, 255), st.sampled_from([3, 7, 9]))
def test_mutated_produce_requests(pos, byte, version):
    body = bytearray(_produce_body(version, b"R" * 61))
    body[pos % len(body)] = byte
    try:
        m.parse_produce_request(Reader(bytes(body)), version)
    except InvalidRequestError:
        pass


def test_hostile_array_length_does_not_allocate():
    """kio's native reader aborted the process on this (126 GB allocation); ours refuses it."""
    body = bytes.fromhex("e8a4fef23a0c9fc5afd7608437816bdd0a7309cb4a1252e4da70e6720fcaa4da1e98406c18")
    with pytest.raises(InvalidRequestError):
        m.decode(19, 7, body)


@pytest.mark.parametrize("key,version,data", [
    (1, 4, {"replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 1000, "isolation_level": 1,
            "topics": [{"topic": "a", "partitions": [{"partition": 2, "fetch_offset": 7,
                                                       "partition_max_bytes": 99}]}]}),
    (1, 12, {"replica_id": -1, "max_wait": 500, "min_bytes": 1, "max_bytes": 1000, "session_id": 3,
             "session_epoch": 4, "cluster_id": "c1", "rack_id": "r",
             "topics": [{"topic": "a", "partitions": [{"partition": 2, "current_leader_epoch": 5,
                                                        "fetch_offset": 7, "last_fetched_epoch": 1,
                                                        "log_start_offset": 0, "partition_max_bytes": 99}]}],
             "forgotten_topics_data": [{"topic": "b", "partitions": [1, 2]}]}),
    (2, 7, {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": "a", "partitions": [{"partition_index": 0, "current_leader_epoch": 1,
                                                      "timestamp": -2}]}]}),
    (3, 9, {"topics": None, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": False}),
    (19, 7, {"topics": [{"name": "n", "num_partitions": 3, "replication_factor": 1, "assignments": [],
                         "configs": [{"name": "retention.ms", "value": "10"}, {"name": "x", "value": None}]}],
             "timeout": 1000, "validate_only": True}),
    (20, 4, {"topic_names": ["a", "b"], "timeout": 1000}),
])
def test_decoder_agrees_with_kio(key, version, data):
    """Our schema walk and kio's own reader decode kio-written requests identically."""
    import io

    from kio.serial import entity_reader, entity_writer
    cls = m._entity(key, version, False)
    buf = io.BytesIO()
    entity_writer(cls)(buf, m._build(cls, data))
    raw = buf.getvalue()
    theirs, size = entity_reader(cls)(memoryview(raw).toreadonly(), 0)
    assert size == len(raw)
    assert m.decode(key, version, raw) == theirs
