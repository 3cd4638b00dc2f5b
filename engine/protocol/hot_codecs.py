"""The hand-written codecs (no I/O): the broker's hot paths and the bootstrap.

ApiVersions (every version, and the v0 error answer to a too-new one), the Produce request and
response (v0–11: the ``records`` field stays a memoryview of the frame — no per-record work)
and the Fetch response (v4–16: built as a list of ``bytes`` parts and :class:`FileSlice`
parts, so record data can go out with sendfile after the header bytes).  The Produce request
walk and the Fetch response body are native (csrc/wire.pyx): one call into it per message.
The clients' side of Produce and Fetch is in ``produce`` and ``fetch``; every other API goes
through ``schema_codec``.

Layouts (names from ``*Request.json`` / ``*Response.json``)::

    ApiVersionsRequest v3+   client_software_name COMPACT_STRING,
                             client_software_version COMPACT_STRING, TAG_BUFFER
    ApiVersionsResponse      error_code i16, api_keys [api_key i16, min i16, max i16 (+TAGS v3+)],
                             throttle_time_ms i32 (v1+), TAG_BUFFER (v3+; tags 0 supported_features
                             [name, min i16, max i16], 1 finalized_features_epoch i64,
                             2 finalized_features [name, max_level i16, min_level i16],
                             3 zk_migration_ready bool)
    ProduceRequest           transactional_id NULLABLE_STRING (v3+), acks i16, timeout_ms i32,
                             topic_data [name, partition_data [index i32, records RECORDS]]
    ProduceResponse          responses [name, partition_responses [index i32, error_code i16,
                             base_offset i64, log_append_time_ms i64 (v2+), log_start_offset i64 (v5+),
                             record_errors [batch_index i32, message NULLABLE_STRING] (v8+),
                             error_message NULLABLE_STRING (v8+), tag 0 current_leader (v10+)]],
                             throttle_time_ms i32 (v1+), tag 0 node_endpoints (v10+)
    FetchResponse v4–16      throttle_time_ms i32, error_code i16 (v7+), session_id i32 (v7+),
                             responses [topic (topic_id UUID v13+), partitions [partition_index i32,
                             error_code i16,
                             high_watermark i64, last_stable_offset i64, log_start_offset i64 (v5+),
                             aborted_transactions NULLABLE [producer_id i64, first_offset i64],
                             preferred_read_replica i32 (v11+), records RECORDS, tags 0
                             diverging_epoch, 1 current_leader]], tag 0 node_endpoints (v16+)

Flexible versions use compact strings/arrays and end every struct with a TAG_BUFFER.
Stateless; safe from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import _native
from .api_keys import ApiKey, ignore_trailing
from .primitives import Reader, Writer

__all__ = [
    "FINALIZED_FEATURES",
    "FINALIZED_FEATURES_EPOCH",
    "FetchPartitionData",
    "ProducePartition",
    "ProduceRequest",
    "SUPPORTED_FEATURES",
    "encode_api_versions_response",
    "encode_fetch_response",
    "encode_produce_response",
    "parse_api_versions_request",
    "parse_produce_request",
]


# -- ApiVersions -------------------------------------------------------------
def parse_api_versions_request(r: Reader, version: int) -> tuple[str | None, str | None]:
    """(client_software_name, client_software_version); both None below v3."""
    if version < 3:
        ignore_trailing(r, ApiKey.API_VERSIONS, version)
        return None, None
    name = r.compact_string()
    ver = r.compact_string()
    r.tagged_fields()
    ignore_trailing(r, ApiKey.API_VERSIONS, version)
    return name, ver



# Feature levels (KIP-584) this broker reports in ApiVersions v3+, name -> (min, max) supported.
# Only levels that are true here.  Kafka 4.0 reports group.version 0-1, transaction.version 0-2,
# kraft.version 0-1, metadata.version 7-25 and eligible.leader.replicas.version 0-1, and finalizes
# group.version 1, transaction.version 2, kraft.version 1 and its metadata.version.  This broker:
# * group.version 0 only: the classic group protocol; KIP-848 (level 1) is not served;
# * transaction.version 0 only: transactions as Kafka serves clients at level 0 (KIP-890 part 1
#   verification yes; part 2, an epoch bump per transaction, no);
# * no kraft.version / metadata.version: there is no KRaft quorum and no metadata log whose
#   record format such a level would name; no eligible.leader.replicas.version: no replication.
# Every level in force is 0, and Kafka leaves level-0 features out of the finalized list, so
# nothing is finalized and its epoch is -1 ("unknown", Kafka's value without finalized features).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {"group.version": (0, 0), "transaction.version": (0, 0)}
FINALIZED_FEATURES: dict[str, int] = {}
FINALIZED_FEATURES_EPOCH = -1


def encode_api_versions_response(version: int, error_code: int,
                                 ranges: dict[int, tuple[int, int]],
                                 features: dict[str, tuple[int, int]] | None = None) -> bytearray:
    """The body (no header) of an ApiVersionsResponse at `version`.  `features` (v3+ tagged
    fields) are this broker's supported feature ranges; v3 leaves out those whose minimum is 0,
    as Kafka 4.0 does (KAFKA-17011: v3 readers refuse a 0 minimum; v4 lifted that)."""
    flex = version >= 3
    w = Writer()
    w.int16(error_code)
    w.array_length(len(ranges), flex)
    for key in sorted(ranges):
        lo, hi = ranges[key]
        w.int16(key).int16(lo).int16(hi)
        if flex:
            w.tagged_fields()
    if version >= 1:
        w.int32(0)  # throttle_time_ms
    if flex:
        tags = {}
        supported = [(name, lo, hi) for name, (lo, hi) in sorted((features or {}).items())
                     if version >= 4 or lo > 0]
        if supported:                                   # tag 0: supported_features
            t = Writer()
            t.array_length(len(supported), True)
            for name, lo, hi in supported:
                t.string(name, True).int16(lo).int16(hi).tagged_fields()
            tags[0] = bytes(t.buf)
        if features is not None and FINALIZED_FEATURES_EPOCH != -1:   # tag 1 (default -1)
            tags[1] = bytes(Writer().int64(FINALIZED_FEATURES_EPOCH).buf)
        if features is not None and FINALIZED_FEATURES:  # tag 2: finalized_features
            t = Writer()
            t.array_length(len(FINALIZED_FEATURES), True)
            for name, level in sorted(FINALIZED_FEATURES.items()):
                t.string(name, True).int16(level).int16(level).tagged_fields()
            tags[2] = bytes(t.buf)
        # tag 3, zk_migration_ready: false (the default, so not written)
        w.tagged_fields(tags)
    return w.buf


# -- Produce -------------------------------------------------------------------
@dataclass(slots=True)
class ProducePartition:
    index: int
    records: memoryview | None     # a view into the request frame


@dataclass(slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[tuple[str, list[ProducePartition]]]


def parse_produce_request(r: Reader, version: int) -> ProduceRequest:
    """Parse a Produce body (v3+) from `r`; the walk is native (csrc/wire.pyx).

    Record fields come back as views into the request frame, not copies.
    """
    txn, acks, timeout, topics, end = _native.parse_produce(r.buf, r.pos, r.end, version)
    r.pos = end
    ignore_trailing(r, ApiKey.PRODUCE, version)
    return ProduceRequest(txn, acks, timeout,
                          [(name, [ProducePartition(i, rec) for i, rec in parts]) for name, parts in topics])


def encode_produce_response(version: int, topics: list[tuple[str, list[tuple]]],
                            node_endpoints: list[tuple] | None = None) -> bytearray:
    """`topics`: [(name, [(index, error_code, base_offset, log_append_time, log_start_offset,
    error_message[, current_leader])])]; v10+ (KIP-951): current_leader (leader_id,
    leader_epoch) as the partition's tag 0 when given, `node_endpoints` [(node_id, host, port,
    rack)] as the response's tag 0 when not empty."""
    flex = version >= 9
    w = Writer()
    w.array_length(len(topics), flex)
    for name, parts in topics:
        w.string(name, flex)
        w.array_length(len(parts), flex)
        for index, error, base, lat, lso, msg, *leader in parts:
            w.int32(index).int16(error).int64(base)
            if version >= 2:
                w.int64(lat)
            if version >= 5:
                w.int64(lso)
            if version >= 8:
                w.array_length(0, flex)
                w.string(msg, flex)
            if flex:
                w.tagged_fields({0: bytes(Writer().int32(leader[0][0]).int32(leader[0][1]).tagged_fields().buf)}
                                if version >= 10 and leader and leader[0] is not None else None)
        if flex:
            w.tagged_fields()
    if version >= 1:
        w.int32(0)
    if flex:
        w.tagged_fields({0: _node_endpoints(node_endpoints)} if version >= 10 and node_endpoints else None)
    return w.buf


def _node_endpoints(nodes: list[tuple]) -> bytes:
    """KIP-951's NodeEndpoints: [(node_id, host, port, rack)] as a compact array."""
    w = Writer()
    w.array_length(len(nodes), True)
    for node_id, host, port, rack in nodes:
        w.int32(node_id).string(host, True).int32(port).string(rack, True).tagged_fields()
    return bytes(w.buf)


# -- Fetch response ------------------------------------------------------------
@dataclass(slots=True)
class FetchPartitionData:
    partition_index: int
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    slices: list | None = None      # FileSlice-like objects (.size) or bytes; None/[] = empty
    aborted_transactions: list | None = None  # read_committed: [(producer_id, first_offset)]; None = null
    diverging_epoch: tuple | None = None      # v12+ (KIP-320): (epoch, end_offset); None = absent
    current_leader: tuple | None = None       # v12+ (KIP-951): (leader_id, leader_epoch); None = absent


def encode_fetch_response(version: int, topics: list[tuple[str | bytes, list[FetchPartitionData]]],
                          error_code: int = 0, session_id: int = 0,
                          node_endpoints: list[tuple] | None = None) -> tuple[list, int]:
    """The body of a FetchResponse as parts: ``bytearray`` runs and the FileSlices of
    each partition's records, in wire order.  Returns (parts, total size).  Topics by name up
    to v12, by the id's 16 bytes from v13; `node_endpoints` (v16+) as for Produce.
    Written natively (csrc/wire.pyx)."""
    return _native.fetch_response(version, topics, error_code, session_id, node_endpoints)
