"""Partition reassignment API handlers: AlterPartitionReassignments (45) and
ListPartitionReassignments (46).

In a cluster (``zookeeper.connect``) only the active controller serves them, as Kafka's
ZooKeeper-era brokers did: the request runs on the controller thread (``Controller.call``,
engine/cluster/reassign.py does the work in ZooKeeper); any other broker answers the top-level
error NOT_CONTROLLER (41) and the client (Java's AdminClient, kafka-python) finds the controller
again through Metadata's ``controller_id`` and retries there.  AlterPartitionReassignments answers
once the new replica set is written (the move itself continues in the background, as Kafka);
ListPartitionReassignments lists the partitions still moving with their replicas, adding and
removing replicas.

On a single node every partition has one replica, this node: a target of ``[node]`` is the
current assignment and completes at once, other broker ids are INVALID_REPLICA_ASSIGNMENT, a
cancellation finds NO_REASSIGNMENT_IN_PROGRESS, and nothing is ever listed.

Authorization (``broker.access``, engine/server/access.py), before anything else (the controller
check included), as Kafka's controller does: AlterPartitionReassignments needs ALTER on the
cluster, ListPartitionReassignments DESCRIBE on it; otherwise Kafka's error response -- the
top-level CLUSTER_AUTHORIZATION_FAILED (31), and, for AlterPartitionReassignments, the same for
every partition asked for (ListPartitionReassignments echoes the partitions asked for, with no
replicas).
"""

from __future__ import annotations

import asyncio
import logging

from ..cluster.reassign import validate
from ..errors import ErrorCode, KafkaApiError
from ..protocol import messages as m
from .access import AclOperation
from .common import admin_bound_s, off_loop

__all__ = ["ReassignmentHandlers"]

log = logging.getLogger("engine.server")

_CLUSTER_DENIED = "Cluster authorization failed."


class ReassignmentHandlers:
    """``table()`` maps API keys to the handlers (merged into Handlers)."""

    def __init__(self, handlers):
        self.handlers = handlers
        self.node = handlers.node

    def table(self) -> dict:
        return {m.ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.alter_partition_reassignments,
                m.ApiKey.LIST_PARTITION_REASSIGNMENTS: self.list_partition_reassignments}

    def _member(self):
        return self.handlers.broker.cluster

    async def _on_controller(self, member, timeout_s: float, fn, *args):
        """fn on the controller thread (a worker thread waits for it); NotControllerError when
        this broker is not the controller, RequestTimedOutError when the controller has no answer
        within the request's timeout (admin_bound_s: the controller may be in the middle of a
        pass of ZooKeeper round trips); a call not begun by then is dropped (Controller.call)."""
        from ..cluster.zk import answered_as_timeout
        bound = admin_bound_s(self.node, timeout_s)

        def run():
            with answered_as_timeout("a call to the controller"):     # (its ZooKeeper round trips)
                return member.controller.call(fn, *args, timeout_s=bound)
        return await off_loop(asyncio.get_running_loop().time() + bound + 1.0, "a call to the controller", run)

    # -- AlterPartitionReassignments (45) ------------------------------------------
    async def alter_partition_reassignments(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.ALTER_PARTITION_REASSIGNMENTS, v, body.buf[body.pos:])
        if not self.handlers.broker.access.cluster(conn, AclOperation.ALTER):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return [m.encode(m.ApiKey.ALTER_PARTITION_REASSIGNMENTS, v, {
                "throttle_time": 0, "error_code": denied, "error_message": _CLUSTER_DENIED,
                "responses": [{"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "error_code": denied,
                     "error_message": _CLUSTER_DENIED} for p in t.partitions]} for t in req.topics]})]
        wanted = [(t.name, p.partition_index, None if p.replicas is None else [int(b) for b in p.replicas])
                  for t in req.topics for p in t.partitions]
        member = self._member()
        if member is None:
            results = [self._single_node(t, p, replicas) for t, p, replicas in wanted]
        else:
            from ..cluster import reassign
            try:
                results = await self._on_controller(member, req.timeout.total_seconds(), reassign.alter, wanted)
            except KafkaApiError as e:  # NOT_CONTROLLER (this broker, or it lost the seat), REQUEST_TIMED_OUT
                return [m.encode(m.ApiKey.ALTER_PARTITION_REASSIGNMENTS, v, {
                    "throttle_time": 0, "error_code": e.code, "error_message": str(e)[:300],
                    "responses": []})]
        responses: list[dict] = []
        by_topic: dict[str, dict] = {}
        for (t, p, _r), (code, msg) in zip(wanted, results, strict=True):
            entry = by_topic.get(t)
            if entry is None:
                entry = by_topic[t] = {"name": t, "partitions": []}
                responses.append(entry)
            entry["partitions"].append({"partition_index": p, "error_code": code, "error_message": msg})
        return [m.encode(m.ApiKey.ALTER_PARTITION_REASSIGNMENTS, v, {
            "throttle_time": 0, "error_code": 0, "error_message": None, "responses": responses})]

    def _single_node(self, topic: str, partition: int, replicas) -> tuple[int, str | None]:
        try:
            count = self.node.topic_metadata(topic).partitions
        except KafkaApiError:
            count = None
        err = validate(topic, count, partition, replicas, self.handlers.view.brokers())
        if err is not None:
            return err
        if replicas is None:
            return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
        return 0, None          # [node]: the current assignment, complete at once

    # -- ListPartitionReassignments (46) -------------------------------------------
    async def list_partition_reassignments(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.LIST_PARTITION_REASSIGNMENTS, v, body.buf[body.pos:])
        if not self.handlers.broker.access.cluster(conn, AclOperation.DESCRIBE):
            return [m.encode(m.ApiKey.LIST_PARTITION_REASSIGNMENTS, v, {
                "throttle_time": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": _CLUSTER_DENIED, "topics": [
                    {"name": t.name, "partitions": [
                        {"partition_index": int(p), "replicas": [], "adding_replicas": [],
                         "removing_replicas": []} for p in t.partition_indexes]}
                    for t in req.topics or ()]})]
        member = self._member()
        moving = []
        if member is not None:
            from ..cluster import reassign
            wanted = None if req.topics is None else \
                [(t.name, [int(p) for p in t.partition_indexes]) for t in req.topics]
            try:
                moving = await self._on_controller(member, req.timeout.total_seconds(), reassign.listing, wanted)
            except KafkaApiError as e:
                return [m.encode(m.ApiKey.LIST_PARTITION_REASSIGNMENTS, v, {
                    "throttle_time": 0, "error_code": e.code, "error_message": str(e)[:300], "topics": []})]
        topics: list[dict] = []
        by_topic: dict[str, dict] = {}
        for t, p, replicas, adding, removing in moving:
            entry = by_topic.get(t)
            if entry is None:
                entry = by_topic[t] = {"name": t, "partitions": []}
                topics.append(entry)
            entry["partitions"].append({"partition_index": p, "replicas": replicas,
                                        "adding_replicas": adding, "removing_replicas": removing})
        return [m.encode(m.ApiKey.LIST_PARTITION_REASSIGNMENTS, v, {
            "throttle_time": 0, "error_code": 0, "error_message": None, "topics": topics})]
