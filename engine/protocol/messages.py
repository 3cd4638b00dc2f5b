"""Request and response codecs for the APIs the broker serves (no I/O).

Which versions we serve (``SUPPORTED``) follows the "capped variant" of
docs: the Kafka 4.0.0 minima, maxima capped where the clients we test with
stop anyway.  Produce 0–2 are advertised (old librdkafka feature probes look
for Produce v0) but answered with UNSUPPORTED_VERSION, as Kafka 4 does.

Two kinds of codec:

* Hand-written, for the hot paths and the bootstrap:
  ApiVersions (every version, and the v0 error answer to a too-new one),
  Produce request/response (v0–11: the ``records`` field stays a memoryview
  of the frame — no per-record work) and the Fetch response (v4–16: built as
  a list of ``bytes`` parts and :class:`FileSlice` parts, so record data can
  go out with sendfile after the header bytes).
* kio (Kafka's JSON schemas as dataclasses) for the control plane: Metadata,
  Fetch request, ListOffsets, CreateTopics, DeleteTopics.  ``decode`` walks
  kio's dataclass schema with our bounds-checked Reader (kio's own native
  reader trusts claimed lengths, see ``decode``) and builds kio's entity;
  ``encode`` builds the response entity of the right version from plain
  dicts (extra keys ignored, so one handler serves all versions) and writes
  it with kio's writer.

Layouts of the hand-written messages (names from ``*Request.json``)::

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

Flexible versions use compact strings/arrays and end every struct with a
TAG_BUFFER.  Stateless; safe from any thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import types
import typing
import uuid as _uuid
from dataclasses import dataclass

from .. import _native
from ..errors import InvalidRequestError
from .primitives import Reader, Writer

log = logging.getLogger("engine.protocol")

__all__ = [
    "API_NAMES",
    "ApiKey",
    "FLEXIBLE_FROM",
    "FetchPartitionData",
    "ProducePartition",
    "ProduceRequest",
    "SUPPORTED",
    "SUPPORTED_FEATURES",
    "decode",
    "encode",
    "encode_api_versions_response",
    "encode_fetch_response",
    "encode_produce_response",
    "is_flexible",
    "parse_api_versions_request",
    "parse_produce_request",
    "read_struct",
]


class ApiKey:
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    DESCRIBE_CONFIGS = 32
    CREATE_PARTITIONS = 37
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    # admin APIs (engine/server/admin_handlers.py)
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    ELECT_LEADERS = 43
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_TOPIC_PARTITIONS = 75
    # transactions (engine/server/txn_handlers.py)
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    # SASL and SCRAM credentials (engine/server/sasl_handlers.py, scram_handlers.py)
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    # client quotas (engine/server/quota_handlers.py)
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49


API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 18: "ApiVersions",
             19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId",
             23: "OffsetForLeaderEpoch",
             32: "DescribeConfigs", 37: "CreatePartitions", 44: "IncrementalAlterConfigs",
             60: "DescribeCluster", 61: "DescribeProducers",
             8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
             13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups", 42: "DeleteGroups",
             47: "OffsetDelete",
             29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 33: "AlterConfigs",
             35: "DescribeLogDirs", 43: "ElectLeaders", 45: "AlterPartitionReassignments",
             46: "ListPartitionReassignments", 65: "DescribeTransactions", 66: "ListTransactions",
             75: "DescribeTopicPartitions",
             24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
             28: "TxnOffsetCommit", 17: "SaslHandshake", 36: "SaslAuthenticate",
             50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials",
             48: "DescribeClientQuotas", 49: "AlterClientQuotas"}

# api_key -> (min, max) we serve
SUPPORTED: dict[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),     # v12 needs transaction.version 2 (KIP-890 part 2): not served
    ApiKey.FETCH: (4, 16),       # v17 is KIP-853's directory id (KRaft voters): not served
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (0, 13),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),   # engine/server/producer_handlers.py
    # consumer groups (engine/server/group_handlers.py)
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    # admin APIs (engine/server/admin_handlers.py), Kafka 4.0's ranges
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),      # (these two: engine/server/reassign_handlers.py)
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    # transactions (engine/server/txn_handlers.py), Kafka 4.0's ranges
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    # SASL (engine/server/sasl_handlers.py) and SCRAM credentials, Kafka 4.0's ranges
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    # client quotas (engine/server/quota_handlers.py), Kafka 4.0's ranges
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
}

# api_key -> first flexible version (Kafka 4.x, unchanged)
FLEXIBLE_FROM = {0: 9, 1: 12, 2: 6, 3: 9, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 32: 4, 37: 2, 44: 1,
                 60: 0, 61: 0, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3, 42: 2, 47: 1 << 15,
                 29: 2, 30: 2, 31: 2, 33: 2, 35: 2, 43: 2, 45: 0, 46: 0, 65: 0, 66: 0, 75: 0,
                 24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 17: 1 << 15, 36: 2, 50: 0, 51: 0, 48: 1, 49: 1}


def is_flexible(api_key: int, version: int) -> bool:
    return version >= FLEXIBLE_FROM[api_key]


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


def ignore_trailing(r: Reader, api_key: int, version: int) -> None:
    """Bytes after a complete request body are ignored, as Kafka ignores them (a debug line)."""
    extra = r.rest()
    if extra:
        log.debug("%s v%d: ignored %d bytes after the request body",
                  API_NAMES.get(api_key, api_key), version, extra)


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


# -- kio-backed control-plane messages -----------------------------------------------
_REQUEST_ENTITIES: dict[tuple[int, int], type] = {}
_RESPONSE_ENTITIES: dict[tuple[int, int], type] = {}
_WRITERS: dict[type, typing.Callable] = {}


def _entity(key: int, version: int, response: bool) -> type:
    cache = _RESPONSE_ENTITIES if response else _REQUEST_ENTITIES
    cls = cache.get((key, version))
    if cls is None:
        from kio import index
        load = index.load_response_schema if response else index.load_request_schema
        cls = cache[(key, version)] = load(key, version)
    return cls


def decode(api_key: int, version: int, body) -> typing.Any:
    """Decode a request body (bytes after the header) into kio's entity for that version.

    The walk over the schema is ours, on a bounds-checked :class:`Reader`:
    kio's native reader allocates from claimed array lengths (a 5-byte
    CreateTopics body made it abort the process trying to allocate 126 GB).
    Unknown tagged fields are skipped and bytes after the body ignored, as Kafka
    does.  InvalidRequestError on any malformed input.
    """
    cls = _entity(api_key, version, False)
    r = Reader(body)
    try:
        entity = _read_entity(cls, r)
    except InvalidRequestError as e:
        raise InvalidRequestError(f"{API_NAMES.get(api_key, api_key)} v{version}: {e}") from None
    except (ValueError, TypeError, OverflowError) as e:   # a kio phantom type refused a value
        raise InvalidRequestError(f"{API_NAMES.get(api_key, api_key)} v{version}: {e}") from e
    ignore_trailing(r, api_key, version)
    return entity


_PLAN: dict[type, list] = {}


def _plan(cls: type) -> list:
    """Per field: (name, kind, is_array, nullable, tag, nested class) from kio's dataclass."""
    plan = _PLAN.get(cls)
    if plan is None:
        hints = _HINTS.get(cls)
        if hints is None:
            hints = _HINTS[cls] = typing.get_type_hints(cls)
        plan = []
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            nullable = _strip_optional(tp) is not tp
            tp = _strip_optional(tp)
            is_array = typing.get_origin(tp) is tuple
            item = typing.get_args(tp)[0] if is_array else tp
            nested = item if dataclasses.is_dataclass(item) else None
            kind = f.metadata.get("kafka_type")
            if nested is None and kind is None:
                raise TypeError(f"{cls.__name__}.{f.name}: no kafka_type")
            plan.append((f.name, kind, is_array, nullable, f.metadata.get("tag"), nested))
        _PLAN[cls] = plan
    return plan


def _read_scalar(r: Reader, kind: str, nullable: bool, flex: bool, raw: bool = False):
    if kind == "int32":
        return r.int32()
    if kind in ("int64", "datetime_i64"):
        return r.int64()
    if kind in ("int16", "error_code"):
        return r.int16()
    if kind == "int8":
        return r.int8()
    if kind == "bool":
        return r.boolean()
    if kind == "string":
        return r.nullable_string_f(flex) if nullable else r.string_f(flex)
    if kind == "timedelta_i32":
        ms = r.int32()
        return ms if raw else datetime.timedelta(milliseconds=ms)
    if kind == "timedelta_i64":
        ms = r.int64()
        return ms if raw else datetime.timedelta(milliseconds=ms)
    if kind == "uuid":
        raw = r.uuid()
        return None if (nullable and not any(raw)) else _uuid.UUID(bytes=raw)
    if kind == "float64":
        return r.float64()
    if kind in ("bytes", "records"):
        v = r.compact_nullable_bytes() if flex else r.nullable_bytes()
        if v is None and not nullable:
            raise InvalidRequestError("null in a non-nullable bytes field")
        return None if v is None else bytes(v)
    if kind == "uint16":
        v = r.int16()
        return v & 0xFFFF
    raise InvalidRequestError(f"field type {kind} is not supported by the decoder")


def _read_field(r: Reader, kind, is_array, nullable, nested, flex, as_dict=False):
    if is_array:
        n = r.array_length(flex, nullable=nullable)
        if n < 0:
            return None
        if nested is not None:
            return [_read_entity(nested, r, as_dict) for _ in range(n)] if as_dict else \
                tuple(_read_entity(nested, r) for _ in range(n))
        return tuple(_read_scalar(r, kind, False, flex, as_dict) for _ in range(n))
    if nested is not None:
        if nullable:
            present = r.int8()
            if present < 0:
                return None
        return _read_entity(nested, r, as_dict)
    return _read_scalar(r, kind, nullable, flex, as_dict)


def _read_entity(cls: type, r: Reader, as_dict: bool = False):
    """One struct of kio's schema `cls` from `r`: a kio entity, or with ``as_dict`` a plain
    dict of plain values (durations as ms ints) — how the client reads responses."""
    flex = cls.__flexible__
    kwargs = {}
    tagged = {}
    for name, kind, is_array, nullable, tag, nested in _plan(cls):
        if tag is not None:
            tagged[tag] = (name, kind, is_array, nullable, nested)
            continue
        kwargs[name] = _read_field(r, kind, is_array, nullable, nested, flex, as_dict)
    if flex:
        for tag, raw in r.tagged_fields().items():
            spec = tagged.get(tag)
            if spec is None:
                continue                      # unknown tag: skipped (KIP-482)
            name, kind, is_array, nullable, nested = spec
            sub = Reader(raw)
            kwargs[name] = _read_field(sub, kind, is_array, nullable, nested, True, as_dict)
            sub.done()
    return kwargs if as_dict else cls(**kwargs)


def read_struct(cls: type, r: Reader) -> dict:
    """A struct of kio's schema `cls` (e.g. a response entity) read from `r` as a plain dict."""
    return _read_entity(cls, r, as_dict=True)


def encode(api_key: int, version: int, data: dict, response: bool = True) -> bytes:
    """Encode a response body (no header) of `version` from plain Python values (keys the
    version lacks are ignored); ``response=False`` encodes a request body (the client's)."""
    import io

    from kio.serial import entity_writer
    cls = _entity(api_key, version, response)
    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = entity_writer(cls)
    out = io.BytesIO()
    writer(out, _build(cls, data))
    return out.getvalue()


_HINTS: dict[type, dict] = {}


def _build(cls: type, data: dict):
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{cls.__name__}.{f.name} is required")
            continue
        kwargs[f.name] = _convert(hints[f.name], f.metadata.get("kafka_type"), data[f.name])
    return cls(**kwargs)


def _strip_optional(tp):
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _convert(tp, kafka_type, value):
    if value is None:
        return None
    tp = _strip_optional(tp)
    if typing.get_origin(tp) is tuple:
        item = typing.get_args(tp)[0]
        return tuple(_convert(item, kafka_type, v) for v in value)
    if dataclasses.is_dataclass(tp):
        return value if isinstance(value, tp) else _build(tp, value)
    if kafka_type == "error_code":
        from kio.schema.errors import ErrorCode
        try:
            return ErrorCode(value)
        except ValueError:
            return ErrorCode.unknown_server_error
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value)
    if kafka_type == "uuid":
        if isinstance(value, _uuid.UUID):
            return value
        return _uuid.UUID(bytes=bytes(value))
    return value
