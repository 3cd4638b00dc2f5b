"""A small synchronous Kafka protocol client: what the Spark source and sink need
from a broker (ours or Apache Kafka), and nothing more.

Contract: :class:`WireClient` connects to one of ``bootstrap`` (``host:port``
list), asks ApiVersions and uses, per API, the highest version both sides
serve.  It offers Metadata (topics, partition counts, leaders; optional
auto-creation), ListOffsets (earliest -2, latest -1, or the first offset at or
after a timestamp), Fetch of one partition from an offset (the records come
back as a ``memoryview`` into the response frame: the frame is read from the
socket once, straight into its buffer, and never copied again -- decode it
with ``engine._native.ColumnScanner`` or ``decode_batches``) and Produce of
prebuilt record batches (``engine.records.build_batches`` /
``BatchBuilder``) with ``acks`` 0, 1 or -1.  Requests go to the partition
leader's connection (one socket per broker, opened on first use).

Errors: a partition or topic error code raises ``engine.errors.api_error``: the class ``for_code``
gives, with ``code`` and ``retriable`` set to Kafka's values (also for codes
the engine has no class for, e.g. NOT_LEADER_OR_FOLLOWER); retriable errors
(leader moving, topic being created) are retried with backoff inside
``request_timeout_ms`` after refreshing metadata.  A closed connection, a
timeout or an unparseable response raises :class:`KafkaConnectionError`
(the connection is dropped and reopened on the next request).

Codecs: Produce requests are written by ``engine.protocol.produce`` and Fetch
responses read by ``engine.protocol.fetch`` (records stay raw bytes); Metadata, ListOffsets, ApiVersions and the Fetch
request are kio's schemas (Kafka's JSON message definitions), encoded with
kio's writer and decoded by walking kio's dataclasses with our
bounds-checked :class:`~engine.protocol.primitives.Reader` (as
``engine/protocol/messages.py`` decodes requests).  Not thread-safe: one
client per thread/task.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from ..errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaApiError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    api_error,
)
from ..protocol.fetch import FetchResult, parse_fetch_response
from ..protocol.messages import ApiKey, _entity, encode, read_struct
from ..protocol.produce import encode_produce
from .connection import Connection, KafkaConnectionError, read_response

__all__ = ["EARLIEST", "LATEST", "FetchResult", "KafkaConnectionError", "PartitionMetadata",
           "WireClient"]

EARLIEST = -2
LATEST = -1

# api_key -> (min, max) this client speaks.
CLIENT_VERSIONS = {
    ApiKey.PRODUCE: (3, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (1, 9),
    ApiKey.API_VERSIONS: (0, 0),
    # group membership (engine.client.group.WireTransport): one version each, the
    # first with static membership (KIP-345), served by Kafka >= 2.4 and by us
    ApiKey.FIND_COORDINATOR: (3, 3),
    ApiKey.JOIN_GROUP: (7, 7),
    ApiKey.SYNC_GROUP: (5, 5),
    ApiKey.HEARTBEAT: (4, 4),
    ApiKey.LEAVE_GROUP: (4, 4),
    ApiKey.OFFSET_COMMIT: (8, 8),
    ApiKey.OFFSET_FETCH: (7, 7),
    # group administration (engine.client.group_admin, `python -m engine groups`)
    ApiKey.LIST_GROUPS: (4, 4),
    ApiKey.DESCRIBE_GROUPS: (5, 5),
    ApiKey.DELETE_GROUPS: (2, 2),
    # topic and config administration (engine.client.admin, the CLI's --bootstrap-server)
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    # idempotent produce (engine.client.arrow_producer)
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    # transactions (engine.client.remote_txn): the versions clients send at Kafka's
    # transaction.version 1 (AddPartitionsToTxn v4+ is broker-to-broker; EndTxn v5,
    # TxnOffsetCommit v5 and AddOffsetsToTxn v5 would ask for KIP-890 part 2)
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
}


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int
    error_code: int
    leader_epoch: int = -1
    replicas: tuple = ()
    isr: tuple = ()


def _encode_request(api_key: int, version: int, data: dict) -> bytes:
    return encode(api_key, version, data, response=False)


class WireClient:
    """See the module docstring."""

    def __init__(self, bootstrap: str, *, client_id: str = "kafka-engine", request_timeout_ms: int = 30_000,
                 security=None):
        self.client_id = client_id.encode()
        self.security = security            # engine.client.security.ClientSecurity (TLS, SASL) or None
        self.timeout_s = request_timeout_ms / 1000.0
        self.bootstrap = [self._split(a) for a in str(bootstrap).split(",") if a.strip()]
        if not self.bootstrap:
            raise KafkaConnectionError(f"no broker address in {bootstrap!r}")
        self._conns: dict[int, Connection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._leaders: dict[tuple[str, int], int] = {}
        self._epochs: dict[tuple[str, int], int] = {}    # leader epochs from Metadata v7+ (-1: unknown)
        self._counts: dict[str, int] = {}
        self._fetch_sessions: dict[int, object] = {}     # node -> FetchSession
        self.transactional_id: str | None = None         # sent in Produce requests (remote_txn)
        self.versions: dict[int, int] = {}
        self._boot = self._connect_bootstrap()

    @staticmethod
    def _split(addr: str) -> tuple[str, int]:
        host, _, port = addr.strip().rpartition(":")
        try:
            return host.strip("[]") or "127.0.0.1", int(port)
        except ValueError:
            raise KafkaConnectionError(f"bad broker address {addr!r} (want host:port)") from None

    # -- connections and versions ---------------------------------------------------
    def _connect_bootstrap(self) -> Connection:
        """A connection for Metadata and other any-broker requests: a bootstrap address, else
        any broker Metadata named (so a client given one address survives that broker's loss,
        as Kafka's clients do)."""
        errors = []
        known = [a for a in self._brokers.values() if a not in self.bootstrap]
        for host, port in random.sample(self.bootstrap, len(self.bootstrap)) + random.sample(known, len(known)):
            try:
                conn = Connection(host, port, self.client_id, self.timeout_s, self.security)
                self._negotiate(conn)
                return conn
            except KafkaConnectionError as e:
                errors.append(str(e))
        raise KafkaConnectionError("no bootstrap broker answered: " + "; ".join(errors))

    def _negotiate(self, conn: Connection) -> None:
        if self.versions:
            return
        r = conn.request(ApiKey.API_VERSIONS, 0, [])
        resp = read_struct(_entity(ApiKey.API_VERSIONS, 0, True), r)
        if resp["error_code"]:
            raise api_error(resp["error_code"], f"ApiVersions from {conn.address}")
        theirs = {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}
        for key, (lo, hi) in CLIENT_VERSIONS.items():
            if key not in theirs:
                continue
            tlo, thi = theirs[key]
            if max(lo, tlo) <= min(hi, thi):
                self.versions[key] = min(hi, thi)

    def _version(self, key: int) -> int:
        v = self.versions.get(key)
        if v is None:
            raise UnsupportedVersionError(f"the broker serves no version of API {key} this client speaks "
                                          f"({CLIENT_VERSIONS[key][0]}-{CLIENT_VERSIONS[key][1]})")
        return v

    def _conn_for(self, node: int | None) -> Connection:
        if node is None or node not in self._brokers:
            if self._boot is None or self._boot.sock.fileno() < 0:
                self._boot = self._connect_bootstrap()
            return self._boot
        conn = self._conns.get(node)
        if conn is None or conn.sock.fileno() < 0:
            conn = self._conns[node] = Connection(*self._brokers[node], self.client_id, self.timeout_s,
                                                  self.security)
        return conn

    def close(self) -> None:
        for c in list(self._conns.values()) + ([self._boot] if self._boot else []):
            c.close()
        self._conns.clear()
        self._boot = None

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, node: int | None, key: int, body: dict | list, version: int | None = None) -> dict:
        v = self._version(key) if version is None else version
        parts = [_encode_request(key, v, body)] if isinstance(body, dict) else body
        r = self._conn_for(node).request(key, v, parts)
        try:
            return read_struct(_entity(key, v, True), r)
        except InvalidRequestError as e:
            raise KafkaConnectionError(f"unparseable response to API {key} v{v}: {e}") from None

    def _retrying(self, what: str, fn):
        """Run fn(); retry retriable Kafka errors and lost connections until the request timeout."""
        deadline = time.monotonic() + self.timeout_s
        delay = 0.05
        while True:
            try:
                return fn()
            except (KafkaApiError, KafkaConnectionError) as e:
                retriable = isinstance(e, KafkaConnectionError) or getattr(e, "retriable", False)
                if not retriable or isinstance(e, UnknownTopicOrPartitionError) \
                        or time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)
                self._leaders.clear()
                self._epochs.clear()

    # -- Metadata ---------------------------------------------------------------------
    def metadata(self, topics: list[str] | None = None, auto_create: bool = False) -> dict:
        """{topic: [PartitionMetadata, ...]} (all topics when `topics` is None); topic errors raise."""
        resp = self._metadata_call(topics, auto_create)
        for b in resp["brokers"]:
            self._brokers[b["node_id"]] = (b["host"], b["port"])
        out = {}
        for t in resp["topics"]:
            if t["error_code"]:
                raise api_error(t["error_code"], f"metadata of topic {t['name']!r}")
            parts = sorted((PartitionMetadata(p["partition_index"], p["leader_id"], p["error_code"],
                                              p.get("leader_epoch", -1), tuple(p["replica_nodes"]),
                                              tuple(p["isr_nodes"]))
                            for p in t["partitions"]), key=lambda p: p.partition)
            out[t["name"]] = parts
            self._counts[t["name"]] = len(parts)
            for p in parts:
                if p.leader >= 0:
                    self._leaders[(t["name"], p.partition)] = p.leader
                    self._epochs[(t["name"], p.partition)] = p.leader_epoch
                else:                # no leader now (being elected): asked again on next use
                    self._leaders.pop((t["name"], p.partition), None)
                    self._epochs.pop((t["name"], p.partition), None)
        return out

    def _metadata_call(self, topics: list[str] | None, auto_create: bool) -> dict:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": auto_create,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}
        return self._call(None, ApiKey.METADATA, body, self._version(ApiKey.METADATA))

    def alive_brokers(self) -> set[int]:
        """The broker ids the bootstrap broker's Metadata names alive (its view of the cluster)."""
        return {b["node_id"] for b in self._metadata_call([], False)["brokers"]}

    def list_topics(self) -> dict[str, int]:
        """{topic: partition count} of every (non-internal) topic."""
        return {t: len(ps) for t, ps in self._retrying("metadata", lambda: self.metadata(None)).items()
                if not t.startswith("__")}

    def partition_count(self, topic: str, auto_create: bool = False) -> int:
        """Partitions of `topic` (UnknownTopicOrPartitionError when absent and not auto-created)."""
        def once():
            parts = self.metadata([topic], auto_create).get(topic)
            if not parts:
                raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
            if any(p.leader < 0 or p.error_code for p in parts):
                bad = next(p for p in parts if p.leader < 0 or p.error_code)
                raise api_error(bad.error_code or 5, f"leader of {topic}-{bad.partition}")
            return len(parts)
        return self._retrying("metadata", once)

    def _leader(self, topic: str, partition: int) -> int:
        """The leader's node id from the cache, else from a Metadata request; a partition
        without a leader (-1: an election under way) raises its error, LEADER_NOT_AVAILABLE
        (5) when none is given -- retriable, never a request sent to some other broker."""
        node = self._leaders.get((topic, partition))
        if node is None:
            parts = self.metadata([topic]).get(topic) or []
            if partition >= len(parts):
                raise UnknownTopicOrPartitionError(
                    f"partition {partition} of topic {topic!r} does not exist ({len(parts)} partitions)")
            node = self._leaders.get((topic, partition))
            if node is None:
                raise api_error(parts[partition].error_code or 5, f"leader of {topic}-{partition}")
        return node

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The leader epoch Metadata gave with the cached leader (-1: unknown), sent as
        ``current_leader_epoch`` in Fetch and ListOffsets so a deposed or lagging broker answers
        FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH (retriable: refresh metadata, ask again)
        instead of serving as the leader it no longer is."""
        return self._epochs.get((topic, partition), -1)

    def forget_leader(self, topic: str, partition: int) -> None:
        """Drop the cached leader of topic-partition: the next request asks Metadata again."""
        self._leaders.pop((topic, partition), None)
        self._epochs.pop((topic, partition), None)

    # -- ListOffsets -------------------------------------------------------------------
    def list_offsets(self, requests: dict[tuple[str, int], int],
                     isolation_level: int = 0) -> dict[tuple[str, int], tuple[int, int]]:
        """{(topic, partition): timestamp (-2 earliest, -1 latest, or ms)} -> {(t, p): (offset, timestamp)};
        offset -1 when no record has a timestamp at or after the one asked.  With
        ``isolation_level=1`` (read_committed) latest is the last stable offset."""
        out: dict = {}
        by_node: dict[int, dict] = {}
        for (t, p), ts in requests.items():
            by_node.setdefault(self._retrying("metadata", lambda t=t, p=p: self._leader(t, p)), {})[(t, p)] = ts
        for node, reqs in by_node.items():
            out.update(self._retrying("list_offsets", lambda node=node, reqs=reqs:
                                      self._list_offsets(node, reqs, isolation_level)))
        return out

    def _list_offsets(self, node: int, reqs: dict, isolation_level: int = 0) -> dict:
        topics: dict[str, list] = {}
        for (t, p), ts in sorted(reqs.items()):
            topics.setdefault(t, []).append({"partition_index": p, "current_leader_epoch": self.leader_epoch(t, p),
                                             "timestamp": ts})
        body = {"replica_id": -1, "isolation_level": isolation_level,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        resp = self._call(node, ApiKey.LIST_OFFSETS, body)
        out = {}
        for t in resp["topics"]:
            for p in t["partitions"]:
                if p["error_code"]:
                    raise api_error(p["error_code"], f"list offsets of {t['name']}-{p['partition_index']}")
                out[(t["name"], p["partition_index"])] = (p["offset"], p["timestamp"])
        return out

    # -- Fetch --------------------------------------------------------------------------
    def fetch(self, topic: str, partition: int, offset: int, *, max_bytes: int = 1048576,
              max_wait_ms: int = 500, min_bytes: int = 1, isolation_level: int = 0) -> FetchResult:
        """Record batches of one partition from `offset` (a view into the response frame).
        The partition's error code is in the result (the caller decides what an
        out-of-range offset means); other failures raise.  ``isolation_level=1``:
        read_committed (up to the LSO, with the aborted transactions of the range)."""
        def once():
            node = self._leader(topic, partition)
            res = self._fetch(node, topic, partition, offset, max_bytes, max_wait_ms, min_bytes,
                              isolation_level)
            if res.error_code and res.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:     # that one is returned
                raise api_error(res.error_code, f"fetch of {topic}-{partition} at offset {offset}")
            return res
        return self._retrying("fetch", once)

    def _fetch(self, node, topic, partition, offset, max_bytes, max_wait_ms, min_bytes,
               isolation_level: int = 0) -> FetchResult:
        out = self.fetch_many(node, {(topic, partition): offset}, max_wait_ms=max_wait_ms,
                              min_bytes=min_bytes, max_bytes=max_bytes, partition_max_bytes=max_bytes,
                              isolation_level=isolation_level)
        return out[(topic, partition)]

    def fetch_many(self, node: int, offsets: dict[tuple[str, int], int], *, max_wait_ms: int = 500,
                   min_bytes: int = 1, max_bytes: int = 52428800, partition_max_bytes: int = 1048576,
                   session: bool = False, isolation_level: int = 0,
                   epochs: dict[tuple[str, int], int] | None = None,
                   reuse_buffer: bool = False) -> dict[tuple[str, int], FetchResult]:
        """One Fetch to broker `node` for several partitions ({(topic, partition): offset});
        {(topic, partition): FetchResult} (records are views into the one response frame).
        Partition error codes are in the results; a top-level error, a lost connection
        or an unparseable answer raise (no retry here: the caller owns the policy).

        With `session`, the Fetch runs in this client's fetch session with `node`
        (engine/client/fetch_session.py, KIP-227): once the broker has opened one, only
        changed partitions are sent and partitions without news are absent from the result.

        With `reuse_buffer` the response is read into the connection's receive buffer (no new
        memory per Fetch): the records views are valid only until the next such call.

        Each partition carries its ``current_leader_epoch``: from `epochs` when given (a caller
        that looked the leaders up with another client), else from this client's Metadata."""
        v = self._version(ApiKey.FETCH)
        fs = self.fetch_session(node) if session and v >= 7 else None
        # the leader epoch is part of what the session holds: a new one is sent again
        wanted = {tp: (off, partition_max_bytes, epochs.get(tp, -1) if epochs is not None else self.leader_epoch(*tp))
                  for tp, off in offsets.items()}
        if fs is not None:
            sid, epoch, to_send, forgotten = fs.build(wanted)
        else:
            sid, epoch, to_send, forgotten = 0, -1, wanted, []
        topics: dict[str, list] = {}
        for (t, p), (off, pmax, leader_epoch) in to_send.items():
            topics.setdefault(t, []).append({
                "partition": p, "current_leader_epoch": leader_epoch, "fetch_offset": off,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": pmax})
        gone: dict[str, list] = {}
        for t, p in forgotten:
            gone.setdefault(t, []).append(p)
        body = {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
                "isolation_level": isolation_level, "session_id": sid, "session_epoch": epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in gone.items()],
                "rack_id": ""}
        conn = self._conn_for(node)
        try:
            r = conn.request(ApiKey.FETCH, v, [_encode_request(ApiKey.FETCH, v, body)], reuse=reuse_buffer)
        except BaseException:
            if fs is not None:
                fs.reset()
            raise
        try:
            err, got_sid, found = parse_fetch_response(r, v)
        except InvalidRequestError as e:
            conn.close()
            if fs is not None:
                fs.reset()
            raise KafkaConnectionError(f"{conn.address}: unparseable Fetch v{v} response: {e}") from None
        if fs is not None:
            fs.handle_response(err, got_sid)
        if err:
            raise api_error(err, f"fetch from {conn.address}")
        if fs is None or sid == 0:
            missing = [tp for tp in offsets if tp not in found]
            if missing:
                t, p = missing[0]
                raise UnknownTopicOrPartitionError(f"the fetch response from {conn.address} has no data for {t}-{p}")
        return found

    def fetch_session(self, node: int):
        """The fetch session (engine/client/fetch_session.FetchSession) with broker `node`."""
        fs = self._fetch_sessions.get(node)
        if fs is None:
            from .fetch_session import FetchSession
            fs = self._fetch_sessions[node] = FetchSession()
        return fs

    def node_address(self, node: int | None) -> str:
        """host:port of broker `node` (the bootstrap connection's for None or an unknown node)."""
        if node is not None and node in self._brokers:
            host, port = self._brokers[node]
            return f"{host}:{port}"
        if self._boot is not None:
            return self._boot.address
        return ",".join(f"{host}:{port}" for host, port in self.bootstrap)

    def leader(self, topic: str, partition: int, refresh: bool = False, retry: bool = True) -> int:
        """The leader's node id of topic-partition (from cached metadata unless `refresh`);
        retriable errors (no leader yet, a lost connection) are retried within the request
        timeout unless `retry` is false (then they raise at once)."""
        if refresh:
            self.forget_leader(topic, partition)
        if not retry:
            return self._leader(topic, partition)
        return self._retrying("metadata", lambda: self._leader(topic, partition))

    # -- InitProducerId -------------------------------------------------------------------
    def init_producer_id(self, transaction_timeout_ms: int = 60000) -> tuple[int, int]:
        """A new idempotent producer id and epoch (InitProducerId without a transactional id)."""
        def once():
            v = self._version(ApiKey.INIT_PRODUCER_ID)
            resp = self._call(None, ApiKey.INIT_PRODUCER_ID, {
                "transactional_id": None, "transaction_timeout": transaction_timeout_ms,
                "producer_id": -1, "producer_epoch": -1}, v)
            if resp["error_code"]:
                raise api_error(resp["error_code"], "InitProducerId")
            return resp["producer_id"], resp["producer_epoch"]
        return self._retrying("init_producer_id", once)

    # -- Produce ------------------------------------------------------------------------
    def produce(self, topic: str, partition: int, batches, *, acks: int = -1, timeout_ms: int = 30_000) -> int:
        """Append prebuilt record batches (bytes-likes) to one partition; returns the base
        offset of the first (-1 with acks=0).  Error codes raise (retriable ones are retried)."""
        if acks not in (-1, 0, 1):
            from ..errors import InvalidRequiredAcksError
            raise InvalidRequiredAcksError(f"acks must be -1, 0 or 1, got {acks!r}")
        batches = [b for b in batches if len(b)]
        if not batches:
            return -1

        def once():
            sent = self.produce_send(topic, partition, batches, acks=acks, timeout_ms=timeout_ms)
            return -1 if acks == 0 else self.produce_receive(sent)
        return self._retrying("produce", once)

    def produce_send(self, topic: str, partition: int, batches, *, acks: int = -1,
                     timeout_ms: int = 30_000) -> tuple:
        """Send one Produce request of record batches for one partition to its leader without
        waiting for the answer; a handle for :meth:`produce_receive` (several may be in
        flight on one connection: Kafka answers them in order)."""
        node = self._leader(topic, partition)
        v = self._version(ApiKey.PRODUCE)
        conn = self._conn_for(node)
        corr = conn.send(ApiKey.PRODUCE, v, encode_produce(v, acks, timeout_ms, [(topic, partition, batches)],
                                                           self.transactional_id))
        return conn, v, corr, topic, partition

    def produce_receive(self, sent: tuple) -> int:
        """The base offset the broker gave the request `sent` (from produce_send); a partition
        error raises ``api_error``, a lost connection ``KafkaConnectionError``."""
        conn, v, corr, topic, partition = sent
        resp = read_response(conn, ApiKey.PRODUCE, v, corr)
        for t in resp["responses"]:
            for p in t["partition_responses"]:
                if p["error_code"]:
                    msg = p.get("error_message") or ""
                    raise api_error(p["error_code"], f"produce to {topic}-{partition}"
                                    + (f" ({msg})" if msg else ""))
                return p["base_offset"]
        raise KafkaConnectionError(f"the produce response has no result for {topic}-{partition}")
