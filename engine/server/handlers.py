"""One handler per API key: a decoded request in, a response body out.

Contract: ``Handlers.handle(header, reader)`` returns the response body as a
list of parts (``bytes``/``bytearray`` runs and FileSlices, see
``messages.encode_fetch_response``) or ``None`` when no response is sent
(Produce with acks=0).  Handlers never raise for a request that parsed: every
engine failure becomes a Kafka error code in the response.  A request that
does not parse raises InvalidRequestError, and the connection closes.

Who leads what comes from the broker's cluster view (``broker.view``, engine/replica/view.py);
partitions are appended to and read through its ReplicaManager (``broker.replicas``), which
answers NOT_LEADER_OR_FOLLOWER for a partition this broker does not lead and checks
``current_leader_epoch`` (FENCED_LEADER_EPOCH 74 below the partition's epoch,
UNKNOWN_LEADER_EPOCH 75 above).  With the single-node view (the default) this broker leads every
partition and the leader epoch is its log's latest epoch (0 for a new log).

Concurrency: runs on the broker's event loop.  Node calls are synchronous.
A plain append (validate, ``pwrite``, index update) runs inline; an append to
a log with a flush policy (``flush.messages`` set, e.g. durable mode, where it
may fdatasync) and the fsync-ing admin calls (CreateTopics, DeleteTopics) run
in the loop's default thread pool so one slow disk never stalls every
connection.  PartitionLog and Node are thread-safe.
"""

from __future__ import annotations

import asyncio
import logging

from ..coordinator.records import OFFSETS_TOPIC
from ..coordinator.txn_records import TRANSACTION_STATE_TOPIC
from ..errors import (
    ErrorCode,
    InvalidRequestError,
    InvalidTopicError,
    KafkaApiError,
    LeaderNotAvailableError,
    RequestTimedOutError,
    TopicAuthorizationError,
    UnknownTopicOrPartitionError,
)
from ..metadata import validate_topic_name
from ..protocol import messages as m
from ..protocol.frames import RequestHeader
from ..protocol.primitives import Reader
from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
from . import txn_handlers
from .common import (
    _ZERO_UUID,
    _code,
    _record_error,
    _replica_id,
    _topic_uuid,
    broker_entries,
    leader_hints,
    off_loop,
    partition_entry,
    topic_ids,
    zookeeper_bound_s,
)

__all__ = ["Handlers"]

log = logging.getLogger("engine.server")

_INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


class Handlers:
    """The API handlers of one broker (shared by all its connections)."""

    def __init__(self, broker):
        self.broker = broker
        self.node = broker.node
        self.replicas = broker.replicas       # engine/replica: leaders, appends, reads
        self.view = broker.view
        self.access = broker.access           # who may do what (access.py)
        self._topic_ids: dict = {}            # Fetch v13+: {topic id: name}, rebuilt on a miss
        self._table = {
            m.ApiKey.PRODUCE: self.produce,
            m.ApiKey.FETCH: self.fetch,
            m.ApiKey.LIST_OFFSETS: self.list_offsets,
            m.ApiKey.METADATA: self.metadata,
            m.ApiKey.API_VERSIONS: self.api_versions,
            m.ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            m.ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            m.ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
        }
        from .group_handlers import GroupHandlers
        self._table.update(GroupHandlers(self).table())
        from .admin_handlers import AdminHandlers
        self._table.update(AdminHandlers(self).table())
        from .producer_handlers import ProducerHandlers
        self._table.update(ProducerHandlers(self).table())
        from .reassign_handlers import ReassignmentHandlers
        self._table.update(ReassignmentHandlers(self).table())
        self._table.update(txn_handlers.TxnHandlers(self).table())
        from .sasl_handlers import SaslHandlers
        self._table.update(SaslHandlers(self).table())
        from .scram_handlers import ScramHandlers
        self._table.update(ScramHandlers(self).table())
        from .acl_handlers import AclHandlers
        self._table.update(AclHandlers(self).table())
        from .quota_handlers import QuotaHandlers
        self._table.update(QuotaHandlers(self).table())
        from .topic_handlers import TopicHandlers
        self._table.update(TopicHandlers(self).table())
        from .config_handlers import ConfigHandlers
        self._table.update(ConfigHandlers(self).table())

    async def handle(self, header: RequestHeader, body: Reader, conn) -> list | None:
        return await self._table[header.api_key](header, body, conn)

    # -- ApiVersions (18) -----------------------------------------------------
    async def api_versions(self, header, body, conn):
        m.parse_api_versions_request(body, header.api_version)
        return [m.encode_api_versions_response(header.api_version, 0, m.SUPPORTED, m.SUPPORTED_FEATURES)]

    # -- Metadata (3) ---------------------------------------------------------------
    async def metadata(self, header, body, conn):
        """Kafka's checks: DESCRIBE on each topic (all topics: the others are left out; named:
        TOPIC_AUTHORIZATION_FAILED, by id: UNKNOWN_TOPIC_ID, so nothing leaks); auto-creation
        needs CREATE on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED)."""
        v = header.api_version
        req = m.decode(m.ApiKey.METADATA, v, body.buf[body.pos:])
        node = self.node
        access = self.access
        auto = node.config["auto.create.topics.enable"] and (v < 4 or req.allow_auto_topic_creation)
        topics = []
        want_ops = getattr(req, "include_topic_authorized_operations", False)
        all_topics = req.topics is None or (v == 0 and not req.topics)
        denied: set[str] = set()
        if all_topics:
            names = node.list_topics()
            if access.enabled:
                allowed = access.filter(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
                names = [n for n in names if n in allowed]
        else:   # v10+ may name a topic by id: a non-zero id wins over the name, as in Kafka
            names, by_id = [], None     # (Java's by-id describe sends the id with name "")
            for t in req.topics:
                if v < 12 or getattr(t, "topic_id", None) in (None, _ZERO_UUID):   # (kio: zero -> None)
                    if t.name is None:      # ids are v12+: Kafka refuses this request
                        raise InvalidRequestError(f"Metadata v{v} names a topic by id only")
                    names.append(t.name)
                    continue
                if by_id is None:
                    by_id = {_topic_uuid(node.topic_metadata(n).topic_id): n for n in node.list_topics()}
                name = by_id.get(t.topic_id)
                if name is not None and access.topic(conn, AclOperation.DESCRIBE, name):
                    names.append(name)
                else:       # as Kafka: an existing id the caller may not describe is refused
                    code = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    topics.append({"error_code": code, "name": None, "topic_id": t.topic_id,
                                   "is_internal": False, "partitions": []})
            if access.enabled:
                allowed = access.filter(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
                denied = {n for n in names if n not in allowed}
        may_create = None               # CREATE on the cluster, asked once if a topic is missing
        deadline = None                 # of the auto-creations, if any
        for name in names:
            try:
                if name in denied:
                    raise TopicAuthorizationError(f"not authorized to describe topic {name!r}")
                internal = name in _INTERNAL_TOPICS     # made by the coordinators, never auto-created
                try:
                    meta = node.topic_metadata(name)
                except UnknownTopicOrPartitionError:
                    if not auto or internal:
                        raise
                    if may_create is None:
                        may_create = access.cluster(conn, AclOperation.CREATE)
                    if not may_create and not access.topic(conn, AclOperation.CREATE, name):
                        raise TopicAuthorizationError(f"not authorized to create topic {name!r}") from None
                    if deadline is None:
                        deadline = asyncio.get_running_loop().time() + zookeeper_bound_s(node)
                    meta = await self._auto_create(name, deadline)
                # (a leader without this request's listener: LISTENER_NOT_FOUND from v6, as Kafka)
                parts = [partition_entry(self.view, name, p, conn=conn, listener_not_found=v >= 6)
                         for p in range(meta.partitions)]
                topics.append({"error_code": 0, "name": name, "topic_id": _topic_uuid(meta.topic_id),
                               "is_internal": internal, "partitions": parts,
                               "topic_authorized_operations": access.operations(
                                   conn, want_ops, ResourceType.TOPIC, name)})
            except Exception as e:  # unknown topic, invalid name, storage error
                if not isinstance(e, KafkaApiError):
                    log.exception("metadata for %r failed", name)
                elif _code(e) == 3:          # as Kafka: a bad name is INVALID_TOPIC even unasked to create
                    try:
                        validate_topic_name(name)
                    except InvalidTopicError as bad:
                        e = bad
                topics.append({"error_code": _code(e), "name": name, "topic_id": _ZERO_UUID,
                               "is_internal": False, "partitions": []})
        cluster_id = node.cluster_id
        return [m.encode(m.ApiKey.METADATA, v, {
            "throttle_time": 0,
            "brokers": broker_entries(self.view, conn),
            "cluster_id": cluster_id, "controller_id": self.view.controller_id(), "topics": topics,
            "error_code": 0,
            "cluster_authorized_operations": access.operations(
                conn, getattr(req, "include_cluster_authorized_operations", False), ResourceType.CLUSTER,
                CLUSTER_NAME),
        })]

    async def _auto_create(self, name: str, deadline: float):
        """Metadata's auto-creation of `name` (in a cluster through ZooKeeper, alone with fsyncs):
        in a worker thread, never on the loop, until `deadline` (one ZooKeeper round trip's bound
        for the whole request); LEADER_NOT_AVAILABLE past it, as while a topic is being made (the
        client asks again)."""
        try:
            return await off_loop(deadline, f"auto-creating topic {name!r}", self.node.ensure_topic, name)
        except RequestTimedOutError as e:
            raise LeaderNotAvailableError(f"topic {name!r} is being created ({e})") from None

    # -- Produce (0) -----------------------------------------------------------------
    async def produce(self, header, body, conn):
        v = header.api_version
        req = m.parse_produce_request(body, v)
        error = ErrorCode.NONE
        if v < 3:
            error = ErrorCode.UNSUPPORTED_VERSION   # message formats 0/1 are gone (KAFKA-18659)
        elif req.acks not in (-1, 0, 1):
            error = ErrorCode.INVALID_REQUIRED_ACKS
        elif req.transactional_id is None and txn_handlers.has_transactional_records(req):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED     # Kafka's answer to such a request
        elif req.transactional_id is not None and not self.access.transactional_id(
                conn, AclOperation.WRITE, req.transactional_id):
            error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # WRITE on each topic (checked before anything about the topic is looked up)
        writable = (self.access.filter(conn, AclOperation.WRITE, ResourceType.TOPIC,
                                       [name for name, _ in req.topics])
                    if self.access.enabled and not error else None)
        out = []
        appended = False
        waiting = []        # acks=all: (results, index in results, waiter)
        # KIP-890: transactional batches the replica layer must not append
        refused = (await self.replicas.verify_transactional(
            req.transactional_id, [(name, p.index, p.records) for name, parts in req.topics for p in parts
                                   if writable is None or name in writable], abortable=v >= 11)
            if not error and req.transactional_id is not None else None)
        for name, parts in req.topics:
            results = []
            denied = writable is not None and name not in writable
            for p in parts:
                if error or denied:
                    results.append((p.index, error or ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, None))
                    continue
                if refused and (name, p.index) in refused:
                    code = refused[(name, p.index)]
                    results.append((p.index, code, -1, -1, -1,
                                    "Partition was not added to the transaction"
                                    if code == ErrorCode.INVALID_TXN_STATE else None))
                    continue
                try:
                    if name in _INTERNAL_TOPICS:
                        raise InvalidTopicError(f"cannot append to internal topic {name}")
                    if p.records is None:
                        raise InvalidRequestError("null records")
                    # the frame is ours: a writable view is stamped in place, no copy
                    buf = p.records if not p.records.readonly else bytearray(p.records)
                    info, log_start, waiter = await self.replicas.append(name, p.index, buf, req.acks)
                    appended = True
                    if waiter is not None:
                        waiting.append((results, len(results), waiter))
                    results.append((p.index, 0, info.first_offset, info.log_append_time, log_start, None))
                except Exception as e:
                    if not isinstance(e, KafkaApiError):
                        log.exception("produce to %s-%d failed", name, p.index)
                    code = _code(e)
                    if isinstance(e, InvalidRequestError):
                        code = ErrorCode.INVALID_RECORD
                    results.append((p.index, code, -1, -1, -1, str(e)[:200]))
            out.append((name, results))
        if appended:
            self.broker.notify_appended()
        if waiting:
            outcomes = await self.replicas.wait_for_acks([w for _, _, w in waiting], req.timeout_ms)
            for (results, i, _), failure in zip(waiting, outcomes, strict=True):
                if failure is not None:
                    results[i] = (results[i][0], _code(failure), -1, -1, -1, str(failure)[:200])
        if req.acks == 0 and not error:
            return None
        nodes = None
        if v >= 10:         # KIP-951: where the leader is, in the error itself
            stale = [(name, r[0]) for name, results in out for r in results
                     if r[1] == ErrorCode.NOT_LEADER_OR_FOLLOWER]
            if stale:
                hints, nodes = leader_hints(self.view, conn, stale)
                out = [(name, [r + (hints[(name, r[0])],) if r[1] == ErrorCode.NOT_LEADER_OR_FOLLOWER else r
                               for r in results]) for name, results in out]
        return [m.encode_produce_response(v, out, nodes)]

    # -- Fetch (1) -------------------------------------------------------------------
    async def fetch(self, header, body, conn):
        """Fetch v4-16.  v13+ names topics by id (an id no topic has: UNKNOWN_TOPIC_ID for each of
        its partitions, the id echoed); v15+ carries the follower in ReplicaState (KIP-903, read
        from anyone); v16+ answers NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH with the current
        leader and its endpoint (KIP-951).  There are no fetch sessions here: every answer has
        session id 0, so each fetch is a full one and nothing is kept per topic id."""
        v = header.api_version
        req = m.decode(m.ApiKey.FETCH, v, body.buf[body.pos:])
        if _replica_id(req) >= 0 and self.broker.quotas.active:
            self.broker.quotas.from_follower(conn)      # not a client's quota (Kafka's isFromFollower)
        max_wait = req.max_wait.total_seconds()
        min_bytes = req.min_bytes
        max_bytes = req.max_bytes if v >= 3 else 0x7FFFFFFF
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, max_wait)
        names = [t.topic for t in req.topics] if v < 13 else [self._topic_name(t.topic_id) for t in req.topics]
        # a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic
        readable = None
        if self.access.enabled:
            known = {n for n in names if n is not None}
            if _replica_id(req) >= 0:
                readable = known if self.access.cluster(conn, AclOperation.CLUSTER_ACTION) else set()
            else:
                readable = self.access.filter(conn, AclOperation.READ, ResourceType.TOPIC, known)
        while True:
            seq = self.broker.delayed_fetch.append_seq
            topics, size, errors = self._read_partitions(req, names, max_bytes, v, readable)
            if (size >= min_bytes or errors or loop.time() >= deadline or readable == set()
                    or not any(names)):     # (as Kafka: nothing to wait for, answered at once)
                break
            await self.broker.delayed_fetch.wait(seq, deadline)
        nodes = None
        if v >= 16:         # KIP-951: where the leader is, in the error itself
            stale = [(name, pd) for name, (_, parts) in zip(names, topics, strict=True) for pd in parts
                     if pd.error_code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)]
            if stale:
                hints, nodes = leader_hints(self.view, conn, [(name, pd.partition_index) for name, pd in stale])
                for name, pd in stale:
                    pd.current_leader = hints[(name, pd.partition_index)]
        parts, _ = m.encode_fetch_response(v, topics, node_endpoints=nodes)
        return parts

    def _topic_name(self, topic_id) -> str | None:
        """The name of the topic whose id is `topic_id` (None: no such topic; kio reads the zero
        id as None).  The map is rebuilt when an id is not in it or names another topic now."""
        if topic_id is None:
            return None
        name = self._topic_ids.get(topic_id)
        if name is not None:
            try:
                if _topic_uuid(self.node.topic_metadata(name).topic_id) == topic_id:
                    return name
            except KafkaApiError:
                pass
        self._topic_ids = topic_ids(self.node)
        return self._topic_ids.get(topic_id)

    def _read_partitions(self, req, names: list, max_bytes: int, v: int, readable: set[str] | None):
        """[(topic name, or from v13 the id's 16 bytes, [FetchPartitionData])], bytes read, and
        whether an error asks for an answer at once."""
        remaining = max_bytes
        replica_id = _replica_id(req)                  # >= 0: a follower's fetch
        replica_epoch = req.replica_state.replica_epoch if v >= 15 else -1   # its broker epoch (KIP-903)
        total = 0
        errors = False
        topics = []
        isolation = 1 if getattr(req, "isolation_level", 0) == 1 else 0   # v4+: read_committed
        for t, name in zip(req.topics, names, strict=True):
            parts = []
            if name is None:                           # v13+: an unknown topic id
                topics.append((t.topic_id.bytes if t.topic_id is not None else bytes(16),
                               [m.FetchPartitionData(p.partition, ErrorCode.UNKNOWN_TOPIC_ID)
                                for p in t.partitions]))
                continue
            denied = readable is not None and name not in readable
            for p in t.partitions:
                pd = m.FetchPartitionData(p.partition, 0)
                if denied:          # answered with the others (no early answer, as Kafka)
                    pd.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    parts.append(pd)
                    continue
                try:
                    limit = min(p.partition_max_bytes, remaining)
                    info = self.replicas.read(name, p.partition, p.fetch_offset, max(limit, 0),
                                              replica_id=replica_id, replica_epoch=replica_epoch,
                                              current_leader_epoch=getattr(p, "current_leader_epoch", -1),  # v9+
                                              log_start_offset=getattr(p, "log_start_offset", -1),
                                              isolation_level=isolation, min_one_batch=(total == 0),
                                              last_fetched_epoch=p.last_fetched_epoch if v >= 12 else -1)
                    if info.diverging_epoch is not None:
                        pd.diverging_epoch = info.diverging_epoch
                        errors = True                # answered at once, as Kafka
                    pd.high_watermark = info.high_watermark
                    pd.last_stable_offset = info.last_stable_offset
                    pd.log_start_offset = info.log_start_offset
                    pd.aborted_transactions = info.aborted_transactions
                    pd.slices = info.slices
                    n = info.size
                    total += n
                    remaining -= n
                except Exception as e:
                    if not isinstance(e, KafkaApiError):
                        log.exception("fetch from %s-%d failed", name, p.partition)
                    pd.error_code = _code(e)     # offsets stay -1, as Kafka's error answer
                    errors = True
                parts.append(pd)
            topics.append((name if v < 13 else t.topic_id.bytes, parts))
        return topics, total, errors

    # -- ListOffsets (2) ---------------------------------------------------------------
    async def list_offsets(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.LIST_OFFSETS, v, body.buf[body.pos:])
        # As Kafka: a partition asked more than once is answered once, with INVALID_REQUEST, and
        # a topic listed twice is answered as one.
        asked = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        dups = {k for k in asked if asked.count(k) > 1} if len(set(asked)) < len(asked) else set()
        by_topic: dict[str, list] = {}
        committed = v >= 2 and getattr(req, "isolation_level", 0) == 1
        described = (self.access.filter(conn, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        [t.name for t in req.topics]) if self.access.enabled else None)
        for t in req.topics:
            parts = by_topic.setdefault(t.name, [])
            for p in t.partitions:
                res = {"partition_index": p.partition_index, "error_code": 0,
                       "timestamp": -1, "offset": -1, "leader_epoch": -1,
                       "old_style_offsets": []}
                if (t.name, p.partition_index) in dups:
                    if any(r["partition_index"] == p.partition_index for r in parts):
                        continue
                    res["error_code"] = InvalidRequestError.code
                    parts.append(res)
                    continue
                try:
                    if described is not None and t.name not in described:
                        raise TopicAuthorizationError(f"not authorized to describe topic {t.name!r}")
                    hit = self.replicas.fetch_offset_for_timestamp(
                        t.name, p.partition_index, p.timestamp,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1) if v >= 4 else -1,
                        isolation_level=1 if committed else 0, replica_id=req.replica_id)
                    if hit is not None:
                        res["offset"], res["timestamp"], res["leader_epoch"] = hit
                except Exception as e:
                    _record_error(res, e, "list offsets for %s-%d failed", t.name, p.partition_index, message=False)
                parts.append(res)
        topics = [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
        return [m.encode(m.ApiKey.LIST_OFFSETS, v, {"throttle_time": 0, "topics": topics})]

    # -- InitProducerId (22) -------------------------------------------------------------
    async def init_producer_id(self, header, body, conn):
        """Idempotent producers get a fresh id (epoch 0); v3+ callers that send their
        current id and epoch get the epoch bumped (KIP-360).  A transactional id goes to the
        TransactionCoordinator (epoch bump, fencing the previous instance; PRODUCER_FENCED is
        INVALID_PRODUCER_EPOCH below v4, as Kafka)."""
        v = header.api_version
        req = m.decode(m.ApiKey.INIT_PRODUCER_ID, v, body.buf[body.pos:])
        res = {"throttle_time": 0, "error_code": 0, "producer_id": -1, "producer_epoch": -1}
        access = self.access
        if req.transactional_id is not None:
            if not access.transactional_id(conn, AclOperation.WRITE, req.transactional_id):
                res["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                return [m.encode(m.ApiKey.INIT_PRODUCER_ID, v, res)]
            timeout = req.transaction_timeout
            timeout = timeout if isinstance(timeout, int) else round(timeout.total_seconds() * 1000)
            out = await txn_handlers.call(self.node, "init_producer_id", req.transactional_id, timeout,
                                          getattr(req, "producer_id", -1), getattr(req, "producer_epoch", -1))
            if out is None:
                res["error_code"] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            else:
                res["error_code"] = txn_handlers.fenced(out[0], v, 4)
                if not out[0]:
                    res["producer_id"], res["producer_epoch"] = out[1], out[2]
        elif not (access.cluster(conn, AclOperation.IDEMPOTENT_WRITE)
                  or access.any_of_type(conn, AclOperation.WRITE, ResourceType.TOPIC)):
            res["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED   # KIP-679: or WRITE on some topic
        else:
            pid = getattr(req, "producer_id", -1)
            epoch = getattr(req, "producer_epoch", -1)
            if pid >= 0 and 0 <= epoch < 32766:
                res["producer_id"], res["producer_epoch"] = pid, epoch + 1
            else:
                try:        # in a cluster a new block of ids comes from ZooKeeper: bounded
                    res["producer_id"] = await off_loop(
                        asyncio.get_running_loop().time() + zookeeper_bound_s(self.node), "a new producer id",
                        self.node.allocate_producer_id)
                    res["producer_epoch"] = 0
                except KafkaApiError as e:
                    # none to be had now: Kafka's producer id manager answers COORDINATOR_LOAD_IN_PROGRESS
                    res["error_code"] = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if e.retriable else e.code
        return [m.encode(m.ApiKey.INIT_PRODUCER_ID, v, res)]

    # -- OffsetForLeaderEpoch (23) -------------------------------------------------------
    async def offset_for_leader_epoch(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.OFFSET_FOR_LEADER_EPOCH, v, body.buf[body.pos:])
        # followers: CLUSTER_ACTION; consumers (KIP-320) may ask with DESCRIBE on the topic
        described = None
        if self.access.enabled and not self.access.cluster(conn, AclOperation.CLUSTER_ACTION):
            described = self.access.filter(conn, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                           [t.topic for t in req.topics])
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                res = {"error_code": 0, "partition": p.partition, "leader_epoch": -1, "end_offset": -1}
                if described is not None and t.topic not in described:
                    res["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    parts.append(res)
                    continue
                try:
                    res["leader_epoch"], res["end_offset"] = self.replicas.last_offset_for_leader_epoch(
                        t.topic, p.partition, p.leader_epoch, p.current_leader_epoch)
                except Exception as e:
                    _record_error(res, e, "offset for leader epoch of %s-%d failed", t.topic, p.partition,
                                  message=False)
                parts.append(res)
            topics.append({"topic": t.topic, "partitions": parts})
        return [m.encode(m.ApiKey.OFFSET_FOR_LEADER_EPOCH, v, {"throttle_time": 0, "topics": topics})]

    # -- DescribeCluster (60) -------------------------------------------------------
    async def describe_cluster(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DESCRIBE_CLUSTER, v, body.buf[body.pos:])
        endpoint_type = getattr(req, "endpoint_type", 1)
        error = ErrorCode.NONE if endpoint_type in (1, 2) else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        return [m.encode(m.ApiKey.DESCRIBE_CLUSTER, v, {
            "throttle_time": 0, "error_code": error, "error_message": None,
            "endpoint_type": endpoint_type, "cluster_id": self.node.cluster_id or "",
            "controller_id": self.view.controller_id(),
            "brokers": broker_entries(self.view, conn, "broker_id") if not error else [],
            "cluster_authorized_operations": self.access.operations(
                conn, getattr(req, "include_cluster_authorized_operations", False), ResourceType.CLUSTER,
                CLUSTER_NAME),
        })]
