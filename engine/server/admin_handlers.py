"""Admin APIs a single node answers truthfully, as Apache Kafka 4.0 answers them.

Served (see messages.SUPPORTED, Kafka 4.0's version ranges):

* DescribeLogDirs 1-4: the one data directory, each partition's size on disk, offset_lag 0
  (no replica follows anything), is_future false (no directory moves), and from v4 the
  file system's total and usable bytes (statvfs).  Topics or partitions that do not exist are
  left out, as Kafka leaves them out.
* AlterConfigs 0-2 (the legacy, non-incremental one): a topic's override set is *replaced* by
  the request's (keys not named go back to their defaults).  Every broker config of this broker
  is static (read at start), so a broker resource with any key gets Kafka's answer for static
  configs: INVALID_REQUEST "Cannot update these configs dynamically".
* DescribeTopicPartitions 0: Metadata's partition data, paginated as Kafka (names sorted, a cursor,
  ``response_partition_limit`` capped at 2000 and at least 1).
* ElectLeaders 0-2: this node is every partition's only replica and leader, so every existing
  partition is ELECTION_NOT_NEEDED; an all-partitions request lists each topic with no results
  (Kafka drops the not-needed ones from that answer).
* ListTransactions 0-1 / DescribeTransactions 0: the TransactionCoordinator's ids (state
  filters, producer id filters, v1's duration filter); an id it does not know is
  TRANSACTIONAL_ID_NOT_FOUND, as Kafka 4.0 answers.

Authorization (``broker.access``, engine/server/access.py), checked before anything is looked
up, as Kafka 4.0 does:

* DescribeLogDirs: DESCRIBE on the cluster, else no results and (v3+) the top-level
  CLUSTER_AUTHORIZATION_FAILED.
* AlterConfigs: ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker
  resource, on the cluster (CLUSTER_AUTHORIZATION_FAILED), per resource; the others go ahead.
* DescribeTopicPartitions: DESCRIBE on each topic; a topic named in the request that the caller
  may not describe answers TOPIC_AUTHORIZATION_FAILED (zero id, no partitions) whether or not it
  exists, one not named (all topics) is left out; ``topic_authorized_operations`` is the caller's.
* ElectLeaders: ALTER on the cluster, else the top-level CLUSTER_AUTHORIZATION_FAILED and the
  same for every partition asked for.
* ListTransactions lists only the transactional ids the caller may DESCRIBE; DescribeTransactions
  answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED for an id it may not DESCRIBE and leaves out of
  each answer the topics it may not DESCRIBE.

DescribeClientQuotas / AlterClientQuotas are served by quota_handlers.py (and enforced by
quotas.py); the SCRAM credential APIs by scram_handlers.py (SASL listeners authenticate with them).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os

from ..errors import ErrorCode, InvalidTopicError, KafkaApiError, RequestTimedOutError
from ..metadata import validate_topic_name
from ..protocol import messages as m
from .access import AclOperation, ResourceType
from .common import (
    _RESOURCE_BROKER,
    _RESOURCE_TOPIC,
    _ZERO_UUID,
    _code,
    _topic_uuid,
    admin_bound_s,
    broker_config_change,
    off_loop,
    partition_entry,
    zookeeper_bound_s,
)

__all__ = ["AdminHandlers"]

log = logging.getLogger("engine.server")

_MAX_PARTITIONS_PER_PAGE = 2000        # Kafka's max.request.partition.size.limit default
_OMITTED = -2147483648                 # an authorized-operations field not computed
_CLUSTER_DENIED = "Cluster authorization failed."


class AdminHandlers:
    """The admin API handlers above; ``table()`` maps API keys to them (merged into Handlers)."""

    def __init__(self, handlers):
        self.handlers = handlers
        self.node = handlers.node
        self.replicas = handlers.replicas     # engine/replica: the local replicas' logs

    @property
    def access(self):
        return self.handlers.broker.access

    def table(self) -> dict:
        return {
            m.ApiKey.DESCRIBE_LOG_DIRS: self.describe_log_dirs,
            m.ApiKey.ALTER_CONFIGS: self.alter_configs,
            m.ApiKey.DESCRIBE_TOPIC_PARTITIONS: self.describe_topic_partitions,
            m.ApiKey.ELECT_LEADERS: self.elect_leaders,
            m.ApiKey.LIST_TRANSACTIONS: self.list_transactions,
            m.ApiKey.DESCRIBE_TRANSACTIONS: self.describe_transactions,
        }

    def _partitions(self, name: str) -> int | None:
        """The partition count of an existing topic, None when it does not exist."""
        try:
            return self.node.topic_metadata(name).partitions
        except KafkaApiError:
            return None

    # -- DescribeLogDirs (35) ---------------------------------------------------------
    async def describe_log_dirs(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DESCRIBE_LOG_DIRS, v, body.buf[body.pos:])
        if not self.access.cluster(conn, AclOperation.DESCRIBE):
            # Kafka: no log dirs; the error code is a field from v3 on (older: just empty)
            return [m.encode(m.ApiKey.DESCRIBE_LOG_DIRS, v, {
                "throttle_time": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []})]
        node = self.node
        if req.topics is None:
            wanted = [(name, None) for name in node.list_topics()]
        else:
            wanted = [(t.topic, t.partitions) for t in req.topics]
        topics = []
        for name, indexes in wanted:
            count = self._partitions(name)
            if count is None:
                continue                            # Kafka leaves unknown topics out
            parts = []
            for p in (range(count) if indexes is None else indexes):
                if not 0 <= p < count:
                    continue
                try:
                    size = self.replicas.local.describe_local_log(name, p).size
                except KafkaApiError:
                    continue
                parts.append({"partition_index": p, "partition_size": size, "offset_lag": 0,
                              "is_future_key": False})
            if parts:
                topics.append({"name": name, "partitions": parts})
        result = {"error_code": 0, "log_dir": os.path.abspath(node.path), "topics": topics,
                  "total_bytes": -1, "usable_bytes": -1}
        try:
            st = os.statvfs(node.path)
            result["total_bytes"] = st.f_blocks * st.f_frsize
            result["usable_bytes"] = st.f_bavail * st.f_frsize
        except OSError as e:
            log.warning("statvfs of %s failed: %s", node.path, e)
        return [m.encode(m.ApiKey.DESCRIBE_LOG_DIRS, v, {"throttle_time": 0, "error_code": 0,
                                                         "results": [result]})]

    # -- AlterConfigs (33) -----------------------------------------------------------
    async def alter_configs(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.ALTER_CONFIGS, v, body.buf[body.pos:])
        responses = []
        # a topic's change goes to ZooKeeper in a cluster: one round trip's bound for the request
        deadline = asyncio.get_running_loop().time() + zookeeper_bound_s(self.node)
        for r in req.resources:
            res = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                   "resource_name": r.resource_name}
            try:
                denied = self._alter_denied(conn, r)
                code, msg = denied if denied is not None else \
                    await self._alter_one(r, req.validate_only, deadline)
            except Exception as e:
                if not isinstance(e, KafkaApiError):
                    log.exception("alter configs of %r failed", r.resource_name)
                code, msg = _code(e), str(e)[:300]
            res["error_code"], res["error_message"] = code, msg
            responses.append(res)
        return [m.encode(m.ApiKey.ALTER_CONFIGS, v, {"throttle_time": 0, "responses": responses})]

    def _alter_denied(self, conn, r) -> tuple[int, str] | None:
        """ALTER_CONFIGS on the cluster for a broker resource, on the topic for a topic."""
        if r.resource_type == _RESOURCE_BROKER and not self.access.cluster(conn, AclOperation.ALTER_CONFIGS):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_DENIED
        if r.resource_type == _RESOURCE_TOPIC and \
                not self.access.topic(conn, AclOperation.ALTER_CONFIGS, r.resource_name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
        return None

    async def _alter_one(self, r, validate_only: bool, deadline: float) -> tuple[int, str | None]:
        node = self.node
        if r.resource_type == _RESOURCE_BROKER:
            return broker_config_change(r.resource_name, [c.name for c in r.configs],
                                        self.handlers.view.node_id)
        if r.resource_type != _RESOURCE_TOPIC:
            return ErrorCode.INVALID_REQUEST, f"Unknown resource type {r.resource_type}"
        try:
            validate_topic_name(r.resource_name)
        except InvalidTopicError as e:
            return ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)
        if self._partitions(r.resource_name) is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{r.resource_name}' does not exist."
        new = {}
        for c in r.configs:
            if c.value is None:
                return ErrorCode.INVALID_REQUEST, f"Null value not supported for : {c.name}"
            new[c.name] = c.value
        node.config.log_config(new)                  # InvalidConfigError (40) names the key
        if validate_only:
            return 0, None

        await off_loop(deadline, f"altering the config of {r.resource_name!r}",
                       node.replace_topic_config, r.resource_name, new)
        return 0, None

    # -- DescribeTopicPartitions (75) ------------------------------------------------
    async def describe_topic_partitions(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DESCRIBE_TOPIC_PARTITIONS, v, body.buf[body.pos:])
        node = self.node
        names = sorted({t.name for t in req.topics}) if req.topics else node.list_topics()
        cursor = req.cursor
        if cursor is not None and (cursor.partition_index < 0 or
                                   (req.topics and cursor.topic_name not in names)):
            # Kafka: an invalid cursor fails every requested topic, in request order
            return [m.encode(m.ApiKey.DESCRIBE_TOPIC_PARTITIONS, v, {
                "throttle_time": 0, "next_cursor": None, "topics": [
                    {"error_code": ErrorCode.INVALID_REQUEST, "name": t.name, "topic_id": _ZERO_UUID,
                     "is_internal": False, "partitions": [],
                     "topic_authorized_operations": _OMITTED} for t in req.topics]})]
        if cursor is not None:
            names = [n for n in names if n >= cursor.topic_name]
        # unauthorised names are answered (named ones) or left out (all topics) before anything
        # is looked up, and do not count against the page
        allowed = self.access.filter(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        refused = [] if not req.topics else [
            {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": n, "topic_id": _ZERO_UUID,
             "is_internal": False, "partitions": [], "topic_authorized_operations": _OMITTED}
            for n in names if n not in allowed]
        names = [n for n in names if n in allowed]
        remaining = max(1, min(req.response_partition_limit, _MAX_PARTITIONS_PER_PAGE))
        topics = []
        next_cursor = None
        for name in names:
            if remaining <= 0:
                next_cursor = {"topic_name": name, "partition_index": 0}
                break
            start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            entry = {"error_code": 0, "name": name, "topic_id": _ZERO_UUID, "is_internal": False,
                     "partitions": [],
                     "topic_authorized_operations": self.access.operations(conn, True, ResourceType.TOPIC, name)}
            topics.append(entry)
            try:
                validate_topic_name(name)
                meta = node.topic_metadata(name)
            except Exception as e:
                if not isinstance(e, KafkaApiError):
                    log.exception("describe topic partitions of %r failed", name)
                entry["error_code"] = _code(e)
                continue
            from ..coordinator import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
            entry["topic_id"] = _topic_uuid(meta.topic_id)
            entry["is_internal"] = name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)
            end = min(meta.partitions, start + remaining)
            for p in range(start, end):
                entry["partitions"].append(self._partition(name, p, conn))
            remaining -= max(0, end - start)
            if end < meta.partitions:
                next_cursor = {"topic_name": name, "partition_index": end}
                break
        return [m.encode(m.ApiKey.DESCRIBE_TOPIC_PARTITIONS, v, {
            "throttle_time": 0, "topics": topics + refused, "next_cursor": next_cursor})]

    def _partition(self, name: str, p: int, conn) -> dict:
        return partition_entry(self.handlers.view, name, p, describe=True, conn=conn)

    # -- ElectLeaders (43) --------------------------------------------------------------
    async def elect_leaders(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.ELECT_LEADERS, v, body.buf[body.pos:])
        election_type = getattr(req, "election_type", 0)     # v0: preferred
        if not self.access.cluster(conn, AclOperation.ALTER):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return [m.encode(m.ApiKey.ELECT_LEADERS, v, {
                "throttle_time": 0, "error_code": denied, "replica_election_results": [
                    {"topic": t.topic, "partition_result": [
                        {"partition_id": p, "error_code": denied, "error_message": _CLUSTER_DENIED}
                        for p in t.partitions]}
                    for t in req.topic_partitions or ()]})]
        member = self.handlers.broker.cluster
        if member is not None and election_type == 0:       # cluster mode: the controller elects
            return await self._cluster_preferred_election(member, req, v)
        top = 0
        results = []
        if req.topic_partitions is None:
            # all partitions: Kafka answers only the elections it made (none here) per topic
            if election_type in (0, 1):
                results = [{"topic": name, "partition_result": []} for name in self.node.list_topics()]
            else:
                top = ErrorCode.INVALID_REQUEST
        else:
            if election_type not in (0, 1):
                top = ErrorCode.INVALID_REQUEST
            for t in req.topic_partitions:
                count = self._partitions(t.topic)
                parts = []
                for p in t.partitions:
                    if top:
                        code, msg = ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}"
                    elif count is None:
                        code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {t.topic}"
                    elif not 0 <= p < count:
                        code, msg = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {t.topic}-{p}"
                    else:
                        code, msg = self._election(t.topic, p)
                    parts.append({"partition_id": p, "error_code": code, "error_message": msg})
                results.append({"topic": t.topic, "partition_result": parts})
        return [m.encode(m.ApiKey.ELECT_LEADERS, v, {
            "throttle_time": 0, "error_code": top, "replica_election_results": results})]

    async def _cluster_preferred_election(self, member, req, v):
        """ElectLeaders (preferred) through ZooKeeper: engine/cluster/admin.elect_preferred, bounded
        by the request's timeout (admin_bound_s); past it every partition asked for is
        REQUEST_TIMED_OUT, as Kafka answers an election not done in time (all partitions: the
        top-level error)."""
        from ..cluster import admin as cluster_admin
        from ..cluster.zk import answered_as_timeout
        wanted = None if req.topic_partitions is None else \
            [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
        timeout_s = req.timeout.total_seconds()

        def elect():
            with answered_as_timeout("a preferred leader election"):
                return cluster_admin.elect_preferred(member, wanted, timeout_s)
        try:
            out = await off_loop(asyncio.get_running_loop().time() + admin_bound_s(self.node, timeout_s),
                                 "a preferred leader election", elect)
        except RequestTimedOutError as e:
            if wanted is None:
                return [m.encode(m.ApiKey.ELECT_LEADERS, v, {
                    "throttle_time": 0, "error_code": e.code, "replica_election_results": []})]
            out = {tp: (e.code, str(e)[:300]) for tp in wanted}
        by_topic: dict[str, list] = {}
        for (t, p), (code, msg) in out.items():
            by_topic.setdefault(t, []).append({"partition_id": p, "error_code": code, "error_message": msg})
        return [m.encode(m.ApiKey.ELECT_LEADERS, v, {
            "throttle_time": 0, "error_code": 0,
            "replica_election_results": [{"topic": t, "partition_result": r} for t, r in by_topic.items()]})]

    def _election(self, topic: str, p: int) -> tuple[int, str | None]:
        """ELECTION_NOT_NEEDED when the preferred replica (the first) leads -- always on a single
        node; elections themselves are the cluster controller's (engine/cluster), not made here."""
        try:
            leader, _epoch, replicas, _isr = self.handlers.view.partition_state(topic, p)
        except KafkaApiError as e:
            return _code(e), str(e)[:300]
        if replicas and leader == replicas[0]:
            return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, (
            f"broker {self.handlers.view.node_id} does not run leader elections (the controller does)")

    # -- Transactions (65, 66) ------------------------------------------------------
    async def list_transactions(self, header, body, conn):
        from .txn_handlers import call
        v = header.api_version
        req = m.decode(m.ApiKey.LIST_TRANSACTIONS, v, body.buf[body.pos:])
        unknown = [s for s in req.state_filters if s not in _TRANSACTION_STATES]
        duration = getattr(req, "duration_filter", -1)
        res = await call(self.node, "list_transactions", list(req.state_filters),
                         list(req.producer_id_filters), duration if duration is not None else -1)
        code, listings = (ErrorCode.COORDINATOR_NOT_AVAILABLE, []) if res is None else res
        if self.access.enabled:             # only the ids the caller may DESCRIBE
            visible = self.access.filter(conn, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                         {x.transactional_id for x in listings})
            listings = [x for x in listings if x.transactional_id in visible]
        return [m.encode(m.ApiKey.LIST_TRANSACTIONS, v, {
            "throttle_time": 0, "error_code": code, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": x.transactional_id, "producer_id": x.producer_id,
                                    "transaction_state": x.state} for x in listings]})]

    async def describe_transactions(self, header, body, conn):
        from .txn_handlers import call
        v = header.api_version
        req = m.decode(m.ApiKey.DESCRIBE_TRANSACTIONS, v, body.buf[body.pos:])
        tids = list(req.transactional_ids)
        access = self.access
        allowed = access.filter(conn, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tids)
        asked = [tid for tid in tids if tid in allowed]
        res = await call(self.node, "describe_transactions", asked) if asked else []
        found = dict(zip(asked, res, strict=True)) if res is not None else {}
        states = []
        for tid in tids:
            d = found.get(tid)
            if tid not in allowed:
                code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            else:
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE if d is None else d.error_code
            entry = {"error_code": code, "transactional_id": tid, "transaction_state": "",
                     "transaction_timeout": 0, "transaction_start_time": _EPOCH, "producer_id": 0,
                     "producer_epoch": 0, "topics": []}
            if d is not None and code == 0:
                by_topic: dict[str, list[int]] = {}
                for topic, p in d.partitions:
                    by_topic.setdefault(topic, []).append(p)
                # only the topics the caller may DESCRIBE, as Kafka
                visible = access.filter(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, by_topic)
                by_topic = {t: ps for t, ps in by_topic.items() if t in visible}
                entry.update(transaction_state=d.state, transaction_timeout=d.timeout_ms,
                             transaction_start_time=_ms_time(d.start_ms), producer_id=d.producer_id,
                             producer_epoch=d.producer_epoch,
                             topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
            states.append(entry)
        return [m.encode(m.ApiKey.DESCRIBE_TRANSACTIONS, v, {"throttle_time": 0,
                                                              "transaction_states": states})]


def _ms_time(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)


_EPOCH = datetime.datetime.fromtimestamp(0, datetime.UTC)
# Kafka's TransactionState names (ListTransactions state filters)
_TRANSACTION_STATES = frozenset({"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                 "CompleteAbort", "Dead", "PrepareEpochFence"})
