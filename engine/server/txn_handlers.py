"""Wire handlers of the transaction APIs, answered by the TransactionCoordinator.

Served (see messages.SUPPORTED, Kafka 4.0's ranges): AddPartitionsToTxn 0-5 (v4+
batched, with ``verify_only``), AddOffsetsToTxn 0-4, EndTxn 0-5, WriteTxnMarkers
0-1 (from a peer; this node's own coordinator writes markers in-process),
TxnOffsetCommit 0-5.  FindCoordinator key type 1 (group_handlers.py),
InitProducerId (handlers.py), List/DescribeTransactions (admin_handlers.py) and
the replica layer's Produce verification (:func:`coordinator_verifier`) use the same
coordinator through :func:`call`.

As Kafka 4.0 (KIP-588), PRODUCER_FENCED is answered as INVALID_PRODUCER_EPOCH to
clients that predate it: AddPartitionsToTxn / AddOffsetsToTxn / EndTxn below v2,
InitProducerId below v4; TxnOffsetCommit, verified through the coordinator as Kafka's
brokers do, answers INVALID_PRODUCER_EPOCH at every version.  Produce verification:
INVALID_TXN_STATE for a partition not in the transaction (Kafka's answer below Produce v12).  A read-only Engine has no
coordinator: COORDINATOR_NOT_AVAILABLE.

Authorization (``broker.access``, engine/server/access.py), checked before anything is looked
up, as Kafka 4.0's KafkaApis does:

* AddPartitionsToTxn v0-3 (from clients): WRITE on the transactional id, else every partition
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic (an internal topic is never
  allowed), else its partitions TOPIC_AUTHORIZATION_FAILED, an allowed partition that does not
  exist UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED (nothing is added).
  v4+ (broker to broker): CLUSTER_ACTION on the cluster, else the top-level
  CLUSTER_AUTHORIZATION_FAILED.
* AddOffsetsToTxn: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then
  READ on the group (GROUP_AUTHORIZATION_FAILED).
* EndTxn: WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer id and
  epoch -1).
* TxnOffsetCommit: WRITE on the transactional id, then READ on the group (every partition
  TRANSACTIONAL_ID_ / GROUP_AUTHORIZATION_FAILED), then READ on each topic (its partitions
  TOPIC_AUTHORIZATION_FAILED; the allowed topics' offsets are committed).
* WriteTxnMarkers: ALTER or CLUSTER_ACTION on the cluster, else every partition
  CLUSTER_AUTHORIZATION_FAILED.  (Brokers send it to each other: in cluster mode with an
  authorizer the inter-broker principal needs one of these, or to be a super user, as in Kafka.)
"""

from __future__ import annotations

import asyncio
import logging

from .. import _native
from ..coordinator.group import OffsetAndMetadata
from ..coordinator.records import OFFSETS_TOPIC
from ..coordinator.txn_records import TRANSACTION_STATE_TOPIC
from ..errors import ErrorCode, KafkaApiError
from ..protocol import messages as m
from .access import AclOperation, ResourceType
from .common import bounded, coordinator_bound_s

__all__ = ["TxnHandlers", "call", "coordinator_verifier", "fenced", "has_transactional_records"]

log = logging.getLogger("engine.server")

# Kafka's Topic.isInternal: never added to a transaction by a client's AddPartitionsToTxn
_INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


def fenced(code: int, version: int, first_version: int) -> int:
    """PRODUCER_FENCED for versions from `first_version`, INVALID_PRODUCER_EPOCH before."""
    if code == ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def coordinator(node, kind: str = "transaction"):
    if node.read_only or node.closed:
        return None
    try:
        coord = node.coordinator(kind)
    except Exception:
        log.exception("the %s coordinator is not available", kind)
        return None
    return coord if coord.running else None


async def call(node, fn_name: str, *args, kind: str = "transaction", timeout_s: float | None = None,
               **kwargs):
    """Run a coordinator coroutine on its loop, waiting at most `timeout_s` (default
    :func:`~.common.coordinator_bound_s`); None when there is no coordinator, when it failed, or
    when it gave no answer in time -- every caller answers None as COORDINATOR_NOT_AVAILABLE
    (Produce's verification as NOT_ENOUGH_REPLICAS), Kafka's answer for a coordinator operation
    that timed out.  What was under way goes on (common.bounded)."""
    coord = coordinator(node, kind)
    if coord is None:
        return None
    if timeout_s is None:
        timeout_s = coordinator_bound_s(node)
    try:
        if coord.on_current_loop:           # the broker hosts it: no thread hop
            work = getattr(coord, fn_name)(*args, **kwargs)
        else:
            work = asyncio.wrap_future(coord.submit(getattr(coord, fn_name), *args, **kwargs))
        return await bounded(work, timeout_s, f"{kind} coordinator {fn_name}")
    except asyncio.CancelledError:
        raise
    except KafkaApiError as e:              # (timed out, say)
        log.warning("%s coordinator %s: %s", kind, fn_name, e)
        return None
    except Exception:
        log.exception("%s coordinator %s failed", kind, fn_name)
        return None


def has_transactional_records(req) -> bool:
    """Whether the first batch of any partition's records is transactional (the attribute
    bit, read natively without building a header), as Kafka's
    ProduceRequest.hasTransactionalRecords decides."""
    return any(p.records is not None and _native.batch_is_transactional(p.records)
               for _name, parts in req.topics for p in parts)


def coordinator_verifier(node):
    """The KIP-890 verification the broker gives its replica manager
    (``ReplicaManager.use_transaction_verifier``, engine/replica/verification.py): the transaction
    coordinator's ``verify_anywhere`` -- this node's, or the id's coordinator on another broker --
    through :func:`call` (bounded; None when it gave no answer)."""
    async def ask(transactional_id: str, producer_id: int, producer_epoch: int, partitions: list):
        return await call(node, "verify_anywhere", transactional_id, producer_id, producer_epoch, partitions)
    return ask


class TxnHandlers:
    """``table()`` maps API keys to the handlers (merged into Handlers)."""

    def __init__(self, handlers):
        self.handlers = handlers
        self.node = handlers.node

    @property
    def access(self):
        return self.handlers.broker.access

    def table(self) -> dict:
        return {
            m.ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions_to_txn,
            m.ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets_to_txn,
            m.ApiKey.END_TXN: self.end_txn,
            m.ApiKey.WRITE_TXN_MARKERS: self.write_txn_markers,
            m.ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit,
        }

    @staticmethod
    def _decode(key: int, header, body):
        return m.decode(key, header.api_version, body.buf[body.pos:])

    # -- AddPartitionsToTxn (24) ------------------------------------------------------------
    async def add_partitions_to_txn(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.ADD_PARTITIONS_TO_TXN, header, body)
        if v < 4:
            tps = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
            res = self._denied(conn, req.v3_and_below_transactional_id, tps)
            if res is None:
                res = await self._add(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                      req.v3_and_below_producer_epoch, tps, False, v)
            return [m.encode(m.ApiKey.ADD_PARTITIONS_TO_TXN, v, {
                "throttle_time": 0, "results_by_topic_v3_and_below": _by_topic(tps, res)})]
        if not self.access.cluster(conn, AclOperation.CLUSTER_ACTION):
            # v4+ comes from brokers only (Kafka: the request's error response, top level)
            return [m.encode(m.ApiKey.ADD_PARTITIONS_TO_TXN, v, {
                "throttle_time": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "results_by_transaction": []})]
        results = []
        for t in req.transactions:
            tps = [(x.name, p) for x in t.topics for p in x.partitions]
            res = await self._add(t.transactional_id, t.producer_id, t.producer_epoch, tps, t.verify_only, v)
            results.append({"transactional_id": t.transactional_id, "topic_results": _by_topic(tps, res)})
        return [m.encode(m.ApiKey.ADD_PARTITIONS_TO_TXN, v, {
            "throttle_time": 0, "error_code": 0, "results_by_transaction": results})]

    def _denied(self, conn, tid: str, tps: list) -> dict | None:
        """A client's AddPartitionsToTxn refused by the authorizer, {tp: error}, or None: WRITE
        on the transactional id, then WRITE on each (non-internal) topic; when a topic is
        refused, allowed partitions are UNKNOWN_TOPIC_OR_PARTITION if they do not exist, else
        OPERATION_NOT_ATTEMPTED, as Kafka answers."""
        access = self.access
        if not access.enabled:
            return None
        if not access.transactional_id(conn, AclOperation.WRITE, tid):
            return {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in tps}
        allowed = access.filter(conn, AclOperation.WRITE, ResourceType.TOPIC,
                                {t for t, _p in tps if t not in _INTERNAL_TOPICS})
        if all(t in allowed for t, _p in tps):
            return None
        return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] not in allowed
                else ErrorCode.OPERATION_NOT_ATTEMPTED if self._exists(*tp)
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in tps}

    def _exists(self, topic: str, partition: int) -> bool:
        try:
            return 0 <= partition < self.node.topic_metadata(topic).partitions
        except KafkaApiError:
            return False

    async def _add(self, tid, pid, epoch, tps, verify_only: bool, v: int) -> dict:
        fn = "verify_partitions" if verify_only else "add_partitions"
        res = await call(self.node, fn, tid, pid, epoch, tps)
        if res is None:
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in tps}
        # (v4+ verify-only answers TRANSACTION_ABORTABLE as it is: Kafka's brokers map it)
        return {tp: fenced(code, v, 2) for tp, code in res.items()}

    # -- AddOffsetsToTxn (25) ---------------------------------------------------------------
    async def add_offsets_to_txn(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.ADD_OFFSETS_TO_TXN, header, body)
        if not self.access.transactional_id(conn, AclOperation.WRITE, req.transactional_id):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not self.access.group(conn, AclOperation.READ, req.group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            code = await call(self.node, "add_offsets", req.transactional_id, req.producer_id,
                              req.producer_epoch, req.group_id)
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE if code is None else fenced(code, v, 2)
        return [m.encode(m.ApiKey.ADD_OFFSETS_TO_TXN, v, {"throttle_time": 0, "error_code": code})]

    # -- EndTxn (26) ----------------------------------------------------------------------------
    async def end_txn(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.END_TXN, header, body)
        if not self.access.transactional_id(conn, AclOperation.WRITE, req.transactional_id):
            return [m.encode(m.ApiKey.END_TXN, v, {
                "throttle_time": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1})]
        code = await call(self.node, "end_txn", req.transactional_id, req.producer_id,
                          req.producer_epoch, bool(req.committed))
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE if code is None else fenced(code, v, 2)
        # v5 (transaction.version 2) answers the producer's id and epoch; at level 0 they stay
        return [m.encode(m.ApiKey.END_TXN, v, {"throttle_time": 0, "error_code": code,
                                                "producer_id": req.producer_id,
                                                "producer_epoch": req.producer_epoch})]

    # -- TxnOffsetCommit (28) -------------------------------------------------------------------
    async def txn_offset_commit(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.TXN_OFFSET_COMMIT, header, body)
        access = self.access
        denied: int | None = None
        if not access.transactional_id(conn, AclOperation.WRITE, req.transactional_id):
            denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not access.group(conn, AclOperation.READ, req.group_id):
            denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
        allowed = set() if denied is not None else \
            access.filter(conn, AclOperation.READ, ResourceType.TOPIC, {t.name for t in req.topics})
        offsets = {}
        for t in req.topics:
            if t.name not in allowed:
                continue
            for p in t.partitions:
                offsets[(t.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata or "")
        res: dict | None = {}
        if offsets:
            res = await call(self.node, "txn_offset_commit", req.transactional_id, req.group_id,
                             req.producer_id, req.producer_epoch, offsets,
                             generation_id=getattr(req, "generation_id", -1),
                             member_id=getattr(req, "member_id", "") or "",
                             group_instance_id=getattr(req, "group_instance_id", None))

        def code_of(topic: str, partition: int) -> int:
            if denied is not None:
                return denied
            if topic not in allowed:
                return ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if res is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            return _txn_offset_code(res.get((topic, partition), 0))
        topics = []
        for t in req.topics:
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index, "error_code": code_of(t.name, p.partition_index)}
                for p in t.partitions]})
        return [m.encode(m.ApiKey.TXN_OFFSET_COMMIT, v, {"throttle_time": 0, "topics": topics})]

    # -- WriteTxnMarkers (27) --------------------------------------------------------------------
    async def write_txn_markers(self, header, body, conn):
        """Markers from a transaction coordinator (a peer's, once there are peers): each
        partition gets its COMMIT/ABORT marker, ``__consumer_offsets`` through the group
        coordinator (pending transactional offsets are committed or dropped).  The caller needs
        ALTER or CLUSTER_ACTION on the cluster (else every partition CLUSTER_AUTHORIZATION_FAILED)."""
        v = header.api_version
        req = self._decode(m.ApiKey.WRITE_TXN_MARKERS, header, body)
        access = self.access
        if not (access.cluster(conn, AclOperation.ALTER) or access.cluster(conn, AclOperation.CLUSTER_ACTION)):
            return [m.encode(m.ApiKey.WRITE_TXN_MARKERS, v, {"markers": [
                {"producer_id": mk.producer_id, "topics": [
                    {"name": t.name, "partitions": [
                        {"partition_index": p, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                        for p in t.partition_indexes]} for t in mk.topics]}
                for mk in req.markers]})]
        rm = self.handlers.broker.replicas
        out = []
        for mk in req.markers:
            topics = []
            for t in mk.topics:
                parts = []
                for p in t.partition_indexes:
                    code = 0
                    try:
                        if t.name == OFFSETS_TOPIC:
                            res = await call(self.node, "complete_txn", mk.producer_id, mk.producer_epoch, p,
                                             bool(mk.transaction_result), mk.coordinator_epoch, kind="group")
                            if res is None:
                                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
                        else:                   # as the leader, acks=all (one node: at once)
                            _off, waiter = await rm.append_control(t.name, p, mk.producer_id, mk.producer_epoch,
                                                                   bool(mk.transaction_result), mk.coordinator_epoch)
                            err = (await rm.wait_for_acks([waiter], 30000))[0] if waiter is not None else None
                            if err is not None:
                                raise err
                    except KafkaApiError as e:
                        code = e.code
                    except Exception:  # noqa: BLE001 - one partition's failure is its error
                        log.exception("transaction marker for %s-%d failed", t.name, p)
                        code = ErrorCode.UNKNOWN_SERVER_ERROR
                    parts.append({"partition_index": p, "error_code": code})
                topics.append({"name": t.name, "partitions": parts})
            out.append({"producer_id": mk.producer_id, "topics": topics})
        self.handlers.broker.notify_appended()
        return [m.encode(m.ApiKey.WRITE_TXN_MARKERS, v, {"markers": out})]


def _txn_offset_code(code: int) -> int:
    """Kafka 4.0 verifies a TxnOffsetCommit through the transaction coordinator, whose
    PRODUCER_FENCED reaches the client as INVALID_PRODUCER_EPOCH at every version."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code


def _by_topic(tps, res) -> list:
    by: dict[str, list] = {}
    for tp in tps:
        by.setdefault(tp[0], []).append({"partition_index": tp[1], "partition_error_code": res.get(tp, 0)})
    return [{"name": name, "results_by_partition": parts} for name, parts in by.items()]
