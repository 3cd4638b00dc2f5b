"""Topic administration over the wire: CreateTopics (19), DeleteTopics (20), DeleteRecords (21),
CreatePartitions (37), as Kafka 4.0 answers them.

Topics are made, deleted and grown through the node's topic administration (``node.topics``:
this data directory, or ZooKeeper in a cluster), in the loop's worker threads and bounded by
:func:`~engine.server.common.admin_bound_s` (REQUEST_TIMED_OUT past it); DeleteRecords goes
through the replica layer (``replicas.delete_records``) and, for a replicated partition, waits
until every in-sync replica moved its log start.

CreateTopics, DeleteTopics and CreatePartitions count the partitions they create or delete
against the caller's ``controller_mutation_rate`` (engine/server/mutation_quotas.py, KIP-599) as
Kafka 4.0's controller does: after a topic passed its own checks (so a topic that fails them
answers its own error), a caller whose bucket is below zero gets THROTTLING_QUOTA_EXCEEDED (89,
no message) for it with the request's versions that know the error (CreateTopics v6+,
DeleteTopics v5+, CreatePartitions v3+); older versions are served and only throttled.  A
validate_only request counts too (Kafka 4.0 applies the quota before it drops the records).
The throttle time is the response's ``throttle_time_ms`` and the connection's mute.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from ..errors import ErrorCode, InvalidRequestError, ThrottlingQuotaExceededError, TopicAuthorizationError
from ..protocol import messages as m
from ..security.acl import AclOperation, ResourceType
from .common import _ZERO_UUID, _code, _record_error, _topic_uuid, admin_bound_s, off_loop

__all__ = ["TopicHandlers"]

log = logging.getLogger("engine.server")


class TopicHandlers:
    """The topic administration handlers; ``table()`` maps API keys to them (merged into Handlers)."""

    def __init__(self, handlers):
        self.handlers = handlers
        self.broker = handlers.broker
        self.node = handlers.node
        self.replicas = handlers.replicas
        self.access = handlers.broker.access

    def _denied(self, conn, operation: AclOperation, names) -> set[str]:
        """The topics among ``names`` the caller may not do ``operation`` on."""
        if not self.access.enabled:
            return set()
        names = set(names)
        return names - self.access.filter(conn, operation, ResourceType.TOPIC, names)

    def _mutation_quota(self, header, conn, api: str):
        return self.broker.quotas.mutations.quota_for(conn.principal, header.client_id, header.api_version, api)

    def _throttle_time(self, quota, conn) -> int:
        """The response's throttle_time_ms for the mutation quota; the connection's mute too."""
        ms = quota.throttle_ms()
        if ms > 0:
            self.broker.quotas.mutation_throttled(conn, ms)
        return ms

    def table(self) -> dict:
        return {
            m.ApiKey.CREATE_TOPICS: self.create_topics,
            m.ApiKey.DELETE_TOPICS: self.delete_topics,
            m.ApiKey.DELETE_RECORDS: self.delete_records,
            m.ApiKey.CREATE_PARTITIONS: self.create_partitions,
        }

    # -- CreateTopics (19) ---------------------------------------------------------------
    async def create_topics(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.CREATE_TOPICS, v, body.buf[body.pos:])
        node = self.node
        results = []
        seen: set[str] = set()
        # one bound for the whole request (admin_bound_s); each topic waits for its leaders only
        # what is left of the request's own timeout
        loop = asyncio.get_running_loop()
        timeout_s = req.timeout.total_seconds()
        until = loop.time() + timeout_s
        deadline = loop.time() + admin_bound_s(node, timeout_s)
        # CREATE on the cluster, or else on each topic
        denied = (set() if self.access.cluster(conn, AclOperation.CREATE)
                  else self._denied(conn, AclOperation.CREATE, [t.name for t in req.topics]))
        quota = self._mutation_quota(header, conn, "CreateTopics")
        for t in req.topics:
            res = {"name": t.name, "topic_id": _ZERO_UUID, "error_code": 0, "error_message": None,
                   "num_partitions": -1, "replication_factor": -1, "configs": []}
            try:
                if t.name in denied:
                    raise TopicAuthorizationError("Authorization failed.")
                if t.name in seen:
                    raise InvalidRequestError(f"topic {t.name!r} appears twice in the request")
                seen.add(t.name)
                if t.assignments and t.num_partitions != -1:
                    raise InvalidRequestError("both num_partitions and assignments given")
                n = len(t.assignments) if t.assignments else (
                    None if t.num_partitions == -1 else t.num_partitions)
                rf = node.config["default.replication.factor"] if t.replication_factor == -1 else t.replication_factor
                config = {c.name: c.value for c in t.configs if c.value is not None}
                plan = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
                if quota.exceeded():        # the topic's own checks first, then the quota
                    await off_loop(deadline, f"validating topic {t.name!r}", node.topics.create_topic, t.name,
                                   n, rf, config, plan, True, 0.0)
                    results.append(_throttled(res))
                    continue
                # where the node records topics: this data directory, or ZooKeeper (cluster)
                tid, n, rf = await off_loop(
                    deadline, f"creating topic {t.name!r}", node.topics.create_topic, t.name, n, rf, config,
                    plan, req.validate_only, max(until - loop.time(), 0.0))
                quota.record(n)
                res["topic_id"] = _topic_uuid(tid) if tid else uuid.uuid4()  # validate_only: a fresh id, as Kafka
                res["configs"] = []
                if self.access.enabled and not self.access.topic(conn, AclOperation.DESCRIBE_CONFIGS, t.name):
                    res["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED   # as Kafka: hidden
                else:
                    res["num_partitions"] = n
                    res["replication_factor"] = rf
            except Exception as e:
                _record_error(res, e, "create topic %r failed", t.name)
            results.append(res)
        return [m.encode(m.ApiKey.CREATE_TOPICS, v, {"throttle_time": self._throttle_time(quota, conn),
                                                      "topics": results})]

    # -- DeleteTopics (20) -------------------------------------------------------------
    async def delete_topics(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DELETE_TOPICS, v, body.buf[body.pos:])
        results = []
        loop = asyncio.get_running_loop()
        timeout_s = req.timeout.total_seconds()
        until = loop.time() + timeout_s
        deadline = loop.time() + admin_bound_s(self.node, timeout_s)
        denied = self._denied(conn, AclOperation.DELETE, req.topic_names)
        quota = self._mutation_quota(header, conn, "DeleteTopics")
        for name in req.topic_names:
            res = {"name": name, "error_code": 0, "error_message": None}
            try:
                if name in denied:
                    raise TopicAuthorizationError("Topic authorization failed.")
                n = self.handlers.view.partition_count(name)
                if n is not None and quota.exceeded():      # an unknown topic: its own error
                    results.append(_throttled(res))
                    continue
                await off_loop(deadline, f"deleting topic {name!r}", self.node.topics.delete_topic, name,
                               max(until - loop.time(), 0.0))
                quota.record(n or 0)
            except Exception as e:
                _record_error(res, e, "delete topic %r failed", name)
            results.append(res)
        return [m.encode(m.ApiKey.DELETE_TOPICS, v, {"throttle_time": self._throttle_time(quota, conn),
                                                      "responses": results})]

    # -- DeleteRecords (21) ------------------------------------------------------------
    async def delete_records(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DELETE_RECORDS, v, body.buf[body.pos:])
        topics = []
        waiting = []        # replicated partitions: (result, waiter) until every replica moved
        denied = self._denied(conn, AclOperation.DELETE, [t.name for t in req.topics])
        for t in req.topics:
            parts = []
            for p in t.partitions:
                res = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": 0}
                try:
                    if t.name in denied:
                        raise TopicAuthorizationError(f"not authorized to delete records of {t.name!r}")
                    res["low_watermark"], waiter = self.replicas.delete_records(t.name, p.partition_index, p.offset)
                    if waiter is not None:
                        waiting.append((res, waiter))
                except Exception as e:
                    _record_error(res, e, "delete records of %s-%d failed", t.name, p.partition_index, message=False)
                parts.append(res)
            topics.append({"name": t.name, "partitions": parts})
        if waiting:
            timeout_ms = int(req.timeout.total_seconds() * 1000)
            outcomes = await self.replicas.wait_for_acks([w for _, w in waiting], timeout_ms)
            for (res, waiter), failure in zip(waiting, outcomes, strict=True):
                if failure is not None:
                    res["low_watermark"], res["error_code"] = -1, _code(failure)
                else:
                    res["low_watermark"] = waiter.result()
        return [m.encode(m.ApiKey.DELETE_RECORDS, v, {"throttle_time": 0, "topics": topics})]

    # -- CreatePartitions (37) ----------------------------------------------------------
    async def create_partitions(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.CREATE_PARTITIONS, v, body.buf[body.pos:])
        node = self.node
        results = []
        loop = asyncio.get_running_loop()
        timeout_s = req.timeout.total_seconds()
        until = loop.time() + timeout_s
        deadline = loop.time() + admin_bound_s(node, timeout_s)
        denied = self._denied(conn, AclOperation.ALTER, [t.name for t in req.topics])
        quota = self._mutation_quota(header, conn, "CreatePartitions")
        for t in req.topics:
            res = {"name": t.name, "error_code": 0, "error_message": None}
            try:
                if t.name in denied:              # (Kafka: no message)
                    res["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    results.append(res)
                    continue
                plan = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
                if quota.exceeded():        # the topic's own checks first, then the quota
                    await off_loop(deadline, f"validating partitions of {t.name!r}", node.topics.create_partitions,
                                   t.name, t.count, plan, True, 0.0)
                    results.append(_throttled(res))
                    continue
                before = self.handlers.view.partition_count(t.name) or 0
                await off_loop(deadline, f"adding partitions to {t.name!r}", node.topics.create_partitions,
                               t.name, t.count, plan, req.validate_only, max(until - loop.time(), 0.0))
                quota.record(t.count - before)
            except Exception as e:
                _record_error(res, e, "create partitions of %r failed", t.name)
            results.append(res)
        return [m.encode(m.ApiKey.CREATE_PARTITIONS, v, {"throttle_time": self._throttle_time(quota, conn),
                                                          "results": results})]


def _throttled(res: dict) -> dict:
    """A topic refused by the controller mutation quota (Kafka: no message, the error's own)."""
    res["error_code"] = ThrottlingQuotaExceededError.code
    res["error_message"] = None
    return res
