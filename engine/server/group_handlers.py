"""Wire handlers of the group APIs: requests decoded with kio, answered by the GroupCoordinator.

Served (see messages.SUPPORTED): FindCoordinator 0-4 (v4 batched keys),
OffsetCommit 2-9, OffsetFetch 1-9 (v8+ several groups), JoinGroup 0-9,
Heartbeat 0-4, LeaveGroup 0-5 (v3+ several members), SyncGroup 0-5,
DescribeGroups 0-5, ListGroups 0-5, DeleteGroups 0-2, OffsetDelete 0.

The coordinator lives on its own loop (``node.group_coordinator``) or the broker's; a
handler calls it through txn_handlers.call, bounded (common.bounded): by
``offsets.commit.timeout.ms`` twice over (common.coordinator_bound_s), and a JoinGroup or
SyncGroup, which waits for the rebalance, by the rebalance timeout (JoinGroup's own, SyncGroup's
the group's longest) plus that.  Like Kafka, that connection answers nothing else meanwhile
(responses stay in order); other connections are not affected.  No answer in time is
COORDINATOR_NOT_AVAILABLE (the client finds the coordinator again and retries), as is a read-only
node, which has no coordinator.
FindCoordinator with key type 1 (a transactional id) asks the TransactionCoordinator;
OffsetFetch v7+ with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for partitions with
transactional offsets not yet committed (TxnOffsetCommit is txn_handlers.py's).

Authorization (engine/server/access.py; with no authorizer configured every check passes), asked
before the coordinator is, so a caller refused learns nothing about what exists -- Kafka's checks:

- FindCoordinator: per key, DESCRIBE on the GROUP (key type 0) else GROUP_AUTHORIZATION_FAILED,
  DESCRIBE on the TRANSACTIONAL_ID (key type 1) else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
- JoinGroup, SyncGroup, Heartbeat, LeaveGroup: READ on the group, else GROUP_AUTHORIZATION_FAILED.
- OffsetCommit: READ on the group (else every partition GROUP_AUTHORIZATION_FAILED), then READ on
  each topic (else its partitions TOPIC_AUTHORIZATION_FAILED, not committed), before the
  coordinator's unknown-partition check.
- OffsetFetch: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED; per group in v8+), then
  DESCRIBE on each topic: a named partition of a topic refused is TOPIC_AUTHORIZATION_FAILED
  (offset -1); fetching all offsets leaves the refused topics out.
- DescribeGroups: DESCRIBE per group (else GROUP_AUTHORIZATION_FAILED in its entry);
  ``authorized_operations`` is the caller's (Access.operations) when asked.
- ListGroups: every group with DESCRIBE on the CLUSTER, else those the caller may DESCRIBE.
- DeleteGroups: DELETE per group (else GROUP_AUTHORIZATION_FAILED in its result).
- OffsetDelete: DELETE on the group (else top-level GROUP_AUTHORIZATION_FAILED), READ on each
  topic (else its partitions TOPIC_AUTHORIZATION_FAILED, not deleted).
"""

from __future__ import annotations

import logging

from ..coordinator.group import OffsetAndMetadata
from ..errors import ErrorCode
from ..protocol import messages as m
from . import authz
from .access import AclOperation, ResourceType
from .common import client_brokers, coordinator_bound_s
from .txn_handlers import call, coordinator

__all__ = ["GroupHandlers"]

log = logging.getLogger("engine.server")

# Kafka's Errors messages, the error_message of a FindCoordinator before v4 refused a key
_DENIED_TEXT = {ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed."}


def _ms(td) -> int:
    """A kio duration (timedelta) or int in milliseconds."""
    if td is None:
        return -1
    if isinstance(td, int):
        return td
    return round(td.total_seconds() * 1000)


class GroupHandlers:
    """The group API handlers; ``table()`` maps API keys to them (merged into Handlers)."""

    def __init__(self, handlers):
        self.handlers = handlers
        self.node = handlers.node

    def table(self) -> dict:
        return {
            m.ApiKey.FIND_COORDINATOR: self.find_coordinator,
            m.ApiKey.JOIN_GROUP: self.join_group,
            m.ApiKey.SYNC_GROUP: self.sync_group,
            m.ApiKey.HEARTBEAT: self.heartbeat,
            m.ApiKey.LEAVE_GROUP: self.leave_group,
            m.ApiKey.OFFSET_COMMIT: self.offset_commit,
            m.ApiKey.OFFSET_FETCH: self.offset_fetch,
            m.ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            m.ApiKey.LIST_GROUPS: self.list_groups,
            m.ApiKey.DELETE_GROUPS: self.delete_groups,
            m.ApiKey.OFFSET_DELETE: self.offset_delete,
        }

    @property
    def access(self):
        """The broker's Access (who may do what); allows everything with no authorizer."""
        return self.handlers.broker.access

    async def _call(self, fn_name: str, *args, timeout_s: float | None = None, **kwargs):
        """Run a group coordinator method on its loop, bounded (txn_handlers.call); None when
        there is no coordinator, it failed or it did not answer in time."""
        return await call(self.node, fn_name, *args, kind="group", timeout_s=timeout_s, **kwargs)

    def _rebalance_bound_s(self, rebalance_timeout_ms: int) -> float:
        """A JoinGroup's or SyncGroup's bound: the rebalance it waits for, then the write."""
        return max(rebalance_timeout_ms, 0) / 1000.0 + coordinator_bound_s(self.node)

    @staticmethod
    def _decode(key: int, header, body):
        return m.decode(key, header.api_version, body.buf[body.pos:])

    # -- FindCoordinator (10) -----------------------------------------------------------
    async def find_coordinator(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.FIND_COORDINATOR, header, body)
        key_type = getattr(req, "key_type", 0)
        keys = list(req.coordinator_keys) if v >= 4 else [req.key]
        host, port = conn.advertised_address()
        answers = []
        for key in keys:
            denied = self._find_denied(conn, key_type, key)
            if denied:
                answers.append({"key": key, "node_id": -1, "host": "", "port": -1, "error_code": denied,
                                "error_message": "" if v >= 4 else _DENIED_TEXT[denied]})
                continue
            if key_type == 1:
                res = await call(self.node, "find_coordinator", key)
                code, message = res if res is not None else (
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, "no transaction coordinator")
            else:
                res = await self._call("find_coordinator", key, key_type)
                code, message = res if res is not None else (
                    ErrorCode.COORDINATOR_NOT_AVAILABLE, "no group coordinator")
            ok = code == 0
            node, khost, kport = self._node_id(), host, port
            if ok:
                # the leader of the key's internal-topic partition coordinates it
                coord = coordinator(self.node, "transaction" if key_type == 1 else "group")
                node = coord.coordinator_node(key) if coord is not None else -1
                # at the address of the listener the request came in on (Kafka: none there,
                # COORDINATOR_NOT_AVAILABLE)
                addr = client_brokers(self.handlers.view, conn).get(node)
                if addr is None:
                    code, ok = ErrorCode.COORDINATOR_NOT_AVAILABLE, False
                    message = "the coordinator is not available"
                elif node != self._node_id():
                    khost, kport = addr[0], addr[1]
            # Kafka 4.0's texts: "" in every v4 entry; before v4, "NONE" on success
            message = "" if v >= 4 else ("NONE" if ok else message)
            answers.append({"key": key, "node_id": node if ok else -1,
                            "host": khost if ok else "", "port": kport if ok else -1,
                            "error_code": code, "error_message": message})
        if v >= 4:
            return [m.encode(m.ApiKey.FIND_COORDINATOR, v, {"throttle_time": 0, "coordinators": answers})]
        a = answers[0]
        return [m.encode(m.ApiKey.FIND_COORDINATOR, v, {
            "throttle_time": 0, "error_code": a["error_code"], "error_message": a["error_message"],
            "node_id": a["node_id"], "host": a["host"], "port": a["port"]})]

    def _find_denied(self, conn, key_type: int, key: str) -> int:
        """FindCoordinator's check of one key: DESCRIBE on the group (key type 0) or on the
        transactional id (key type 1); the error code, 0 when allowed."""
        if key_type == 0 and not self.access.group(conn, AclOperation.DESCRIBE, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        if key_type == 1 and not self.access.transactional_id(conn, AclOperation.DESCRIBE, key):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return 0

    def _node_id(self) -> int:
        return self.handlers.view.node_id

    def _may_read_group(self, conn, group_id: str) -> bool:
        """JoinGroup's, SyncGroup's, Heartbeat's, LeaveGroup's and OffsetCommit's check."""
        return self.access.group(conn, AclOperation.READ, group_id)

    # -- JoinGroup (11) -----------------------------------------------------------------
    async def join_group(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.JOIN_GROUP, header, body)
        session = _ms(req.session_timeout)
        rebalance = _ms(getattr(req, "rebalance_timeout", None)) if v >= 1 else session
        if not self._may_read_group(conn, req.group_id):
            # Kafka's JoinGroup error response: no member id, generation or protocol
            return [m.encode(m.ApiKey.JOIN_GROUP, v, {
                "throttle_time": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "generation_id": -1,
                "protocol_type": None, "protocol_name": None if v >= 7 else "", "leader": "",
                "member_id": "", "members": []})]
        res = await self._call(
            "join_group", req.group_id, req.member_id, protocol_type=req.protocol_type,
            protocols=[(p.name, p.metadata) for p in req.protocols], session_timeout_ms=session,
            rebalance_timeout_ms=rebalance, group_instance_id=getattr(req, "group_instance_id", None),
            client_id=header.client_id or "", client_host=_client_host(conn),
            require_known_member_id=v >= 4, reason=getattr(req, "reason", None),
            timeout_s=self._rebalance_bound_s(rebalance if rebalance >= 0 else session))
        if res is None:
            data = {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "member_id": req.member_id, "members": [],
                    "protocol_name": None, "leader": ""}
        else:
            data = {"error_code": res.error_code, "generation_id": res.generation_id,
                    "protocol_type": res.protocol_type, "protocol_name": res.protocol_name,
                    "leader": res.leader_id, "skip_assignment": res.skip_assignment,
                    "member_id": res.member_id,
                    "members": [{"member_id": mid, "group_instance_id": inst, "metadata": meta}
                                for mid, inst, meta in res.members]}
            if v < 7 and data["protocol_name"] is None:
                data["protocol_name"] = ""        # nullable only from v7
        data["throttle_time"] = 0
        return [m.encode(m.ApiKey.JOIN_GROUP, v, data)]

    # -- SyncGroup (14) -----------------------------------------------------------------
    async def sync_group(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.SYNC_GROUP, header, body)
        if not self._may_read_group(conn, req.group_id):
            return [m.encode(m.ApiKey.SYNC_GROUP, v, {
                "throttle_time": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "assignment": b""})]
        coord = coordinator(self.node, "group")
        rebalance = coord.rebalance_timeout_ms(req.group_id) if coord is not None else -1
        res = await self._call(
            "sync_group", req.group_id, req.generation_id, req.member_id,
            {a.member_id: a.assignment for a in req.assignments},
            group_instance_id=getattr(req, "group_instance_id", None),
            protocol_type=getattr(req, "protocol_type", None),
            protocol_name=getattr(req, "protocol_name", None),
            timeout_s=self._rebalance_bound_s(rebalance))
        if res is None:
            data = {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "assignment": b""}
        else:
            data = {"error_code": res.error_code, "protocol_type": res.protocol_type,
                    "protocol_name": res.protocol_name, "assignment": res.assignment}
        data["throttle_time"] = 0
        return [m.encode(m.ApiKey.SYNC_GROUP, v, data)]

    # -- Heartbeat (12) -------------------------------------------------------------------
    async def heartbeat(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.HEARTBEAT, header, body)
        if not self._may_read_group(conn, req.group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            code = await self._call("heartbeat", req.group_id, req.generation_id, req.member_id,
                                    getattr(req, "group_instance_id", None))
        return [m.encode(m.ApiKey.HEARTBEAT, v, {
            "throttle_time": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE if code is None else code})]

    # -- LeaveGroup (13) ------------------------------------------------------------------
    async def leave_group(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.LEAVE_GROUP, header, body)
        if v >= 3:
            members = [(x.member_id, x.group_instance_id) for x in req.members]
        else:
            members = [(req.member_id, None)]
        if not self._may_read_group(conn, req.group_id):
            # Kafka's LeaveGroup error response: the top-level error, no members
            return [m.encode(m.ApiKey.LEAVE_GROUP, v, {
                "throttle_time": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "members": []})]
        res = await self._call("leave_group", req.group_id, members)
        if res is None:
            top = ErrorCode.COORDINATOR_NOT_AVAILABLE
            per = [(mid, inst, top) for mid, inst in members]
        else:
            top, per = res.error_code, res.members
        if v < 3:
            # one member: its outcome is the top-level error, as Kafka's LeaveGroupResponse does
            if top == 0 and per:
                top = per[0][2]
            return [m.encode(m.ApiKey.LEAVE_GROUP, v, {"throttle_time": 0, "error_code": top})]
        return [m.encode(m.ApiKey.LEAVE_GROUP, v, {
            "throttle_time": 0, "error_code": top,
            "members": [{"member_id": mid, "group_instance_id": inst, "error_code": code}
                        for mid, inst, code in per]})]

    # -- OffsetCommit (8) -----------------------------------------------------------------
    async def offset_commit(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.OFFSET_COMMIT, header, body)
        # READ on the group, else every partition is refused; then READ on each topic: a topic
        # refused is not committed, its partitions TOPIC_AUTHORIZATION_FAILED
        group_ok = self._may_read_group(conn, req.group_id)
        names = {t.name for t in req.topics}
        readable = self.access.filter(conn, AclOperation.READ, ResourceType.TOPIC, names) if group_ok else set()
        offsets = {}
        for t in req.topics:
            if t.name not in readable:
                continue
            for p in t.partitions:
                offsets[(t.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata or "")
        retention = _ms(getattr(req, "retention_time", None)) if 2 <= v <= 4 else -1
        res: dict | None = {}
        if group_ok and (offsets or readable == names):
            # (as Kafka, the coordinator is not asked when every topic was refused)
            res = await self._call("commit_offsets", req.group_id, offsets,
                                   generation_id=req.generation_id_or_member_epoch, member_id=req.member_id,
                                   group_instance_id=getattr(req, "group_instance_id", None),
                                   retention_ms=retention)

        def outcome(topic: str, partition: int) -> int:
            if not group_ok:
                return ErrorCode.GROUP_AUTHORIZATION_FAILED
            if topic not in readable:
                return ErrorCode.TOPIC_AUTHORIZATION_FAILED
            if res is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
            return res.get((topic, partition), 0)

        topics = [{"name": t.name, "partitions": [
                      {"partition_index": p.partition_index, "error_code": outcome(t.name, p.partition_index)}
                      for p in t.partitions]}
                  for t in req.topics]
        return [m.encode(m.ApiKey.OFFSET_COMMIT, v, {"throttle_time": 0, "topics": topics})]

    # -- OffsetFetch (9) ------------------------------------------------------------------
    async def offset_fetch(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.OFFSET_FETCH, header, body)
        if v >= 8:
            groups = []
            stable = getattr(req, "require_stable", False)
            for g in req.groups:
                code, topics = await self._fetch_group(conn, g.group_id, g.topics, v, stable)
                groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
            return [m.encode(m.ApiKey.OFFSET_FETCH, v, {"throttle_time": 0, "groups": groups})]
        code, topics = await self._fetch_group(conn, req.group_id, req.topics, v,
                                               getattr(req, "require_stable", False))
        if v < 2 and code:
            # no top-level error before v2: every partition carries it
            for t in topics:
                for p in t["partitions"]:
                    p["error_code"] = code
        return [m.encode(m.ApiKey.OFFSET_FETCH, v, {"throttle_time": 0, "topics": topics, "error_code": code})]

    async def _fetch_group(self, conn, group_id: str, req_topics, v: int, require_stable: bool = False):
        """One group's OffsetFetch: (group error code, the topics entries).  DESCRIBE on the
        group, then on each topic: a named partition of a topic refused answers
        TOPIC_AUTHORIZATION_FAILED, all offsets leave the refused topics out."""
        requested = None
        if req_topics is not None:
            requested = [(t.name, p) for t in req_topics for p in t.partition_indexes]
        refused: set[str] = set()
        if not self.access.group(conn, AclOperation.DESCRIBE, group_id):
            code, offsets, wanted = ErrorCode.GROUP_AUTHORIZATION_FAILED, {}, requested
        else:
            wanted = requested
            if requested is not None:
                names = {tp[0] for tp in requested}
                refused = names - self.access.filter(conn, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
                wanted = [tp for tp in requested if tp[0] not in refused]
            res = await self._call("fetch_offsets", group_id, wanted)
            code, offsets = (ErrorCode.COORDINATOR_NOT_AVAILABLE, {}) if res is None else res
            if requested is None and not code:
                shown = self.access.filter(conn, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                           {tp[0] for tp in offsets})
                offsets = {tp: om for tp, om in offsets.items() if tp[0] in shown}
        unstable: set[tuple[str, int]] = set()
        if require_stable and not code:
            unstable = await self._call("unstable_partitions", group_id, wanted) or set()
        if code and requested is not None:
            # a group-level error: every partition asked for with no offset
            offsets, refused = {tp: OffsetAndMetadata(-1) for tp in requested}, set()
        by_topic: dict[str, list] = {}
        order = requested if requested is not None else sorted(offsets)
        for tp in order:
            om = offsets.get(tp, OffsetAndMetadata(-1))
            error = 0
            if tp[0] in refused:
                om, error = OffsetAndMetadata(-1), ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif tp in unstable:        # Kafka: no offset, UNSTABLE_OFFSET_COMMIT (retriable)
                om, error = OffsetAndMetadata(-1), ErrorCode.UNSTABLE_OFFSET_COMMIT
            by_topic.setdefault(tp[0], []).append({
                "partition_index": tp[1], "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata, "error_code": error})
        return code, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]

    # -- DescribeGroups (15) --------------------------------------------------------------
    async def describe_groups(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.DESCRIBE_GROUPS, header, body)
        asked = list(req.groups)
        allowed = {g for g in asked if self.access.group(conn, AclOperation.DESCRIBE, g)}
        described = [g for g in asked if g in allowed]
        res = await self._call("describe_groups", described) if described else []
        want_ops = bool(getattr(req, "include_authorized_operations", False))
        if res is None:
            entries = iter([{"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "group_id": g, "group_state": "",
                             "protocol_type": "", "protocol_data": "", "members": []} for g in described])
        else:
            entries = iter([{
                "error_code": d.error_code, "group_id": d.group_id, "group_state": d.state,
                "protocol_type": d.protocol_type, "protocol_data": d.protocol_name,
                "members": [{"member_id": x.member_id, "group_instance_id": x.group_instance_id,
                             "client_id": x.client_id, "client_host": x.client_host,
                             "member_metadata": x.metadata, "member_assignment": x.assignment}
                            for x in d.members],
                "authorized_operations": self.access.operations(conn, want_ops, ResourceType.GROUP, d.group_id)
                if d.error_code == 0 else authz.OMITTED} for d in res])
        # in the order asked; a group the caller may not DESCRIBE answers only the error
        groups = [next(entries) if g in allowed else
                  {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": g, "group_state": "",
                   "protocol_type": "", "protocol_data": "", "members": [],
                   "authorized_operations": authz.OMITTED}
                  for g in asked]
        return [m.encode(m.ApiKey.DESCRIBE_GROUPS, v, {"throttle_time": 0, "groups": groups})]

    # -- ListGroups (16) ------------------------------------------------------------------
    async def list_groups(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.LIST_GROUPS, header, body)
        states = list(getattr(req, "states_filter", ()) or ())
        types = {t.lower() for t in (getattr(req, "types_filter", ()) or ())}
        # Kafka asks before the coordinator answers: DESCRIBE on the cluster shows every group
        see_all = self.access.cluster(conn, AclOperation.DESCRIBE)
        res = await self._call("list_groups", states or None)
        code, listings = (ErrorCode.COORDINATOR_NOT_AVAILABLE, []) if res is None else res
        if types and "classic" not in types:
            listings = []       # every group here is a classic group
        if not see_all:         # else only the groups the caller may DESCRIBE
            shown = self.access.filter(conn, AclOperation.DESCRIBE, ResourceType.GROUP,
                                       [g.group_id for g in listings])
            listings = [g for g in listings if g.group_id in shown]
        return [m.encode(m.ApiKey.LIST_GROUPS, v, {
            "throttle_time": 0, "error_code": code,
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
                        "group_type": "classic"} for g in listings]})]

    # -- DeleteGroups (42) ----------------------------------------------------------------
    async def delete_groups(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.DELETE_GROUPS, header, body)
        names = list(req.groups_names)
        allowed = self.access.filter(conn, AclOperation.DELETE, ResourceType.GROUP, names)
        deletable = [g for g in names if g in allowed]
        res = await self._call("delete_groups", deletable) if deletable else {}

        def outcome(g: str) -> int:
            if g not in allowed:
                return ErrorCode.GROUP_AUTHORIZATION_FAILED
            return ErrorCode.COORDINATOR_NOT_AVAILABLE if res is None else res[g]

        return [m.encode(m.ApiKey.DELETE_GROUPS, v, {"throttle_time": 0, "results": [
            {"group_id": g, "error_code": outcome(g)} for g in dict.fromkeys(names)]})]

    # -- OffsetDelete (47) ----------------------------------------------------------------
    async def offset_delete(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.OFFSET_DELETE, header, body)
        if not self.access.group(conn, AclOperation.DELETE, req.group_id):
            return [m.encode(m.ApiKey.OFFSET_DELETE, v, {
                "throttle_time": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "topics": []})]
        # READ on each topic: the partitions of a topic refused are not deleted
        readable = self.access.filter(conn, AclOperation.READ, ResourceType.TOPIC, {t.name for t in req.topics})
        wanted = [(t.name, p.partition_index) for t in req.topics if t.name in readable for p in t.partitions]
        res = await self._call("delete_offsets", req.group_id, wanted)
        code, per = (ErrorCode.COORDINATOR_NOT_AVAILABLE, {}) if res is None else res
        topics = []
        if not code:        # (a group-level error answers no partitions, as Kafka's)
            for t in req.topics:
                denied = t.name not in readable
                topics.append({"name": t.name, "partitions": [
                    {"partition_index": p.partition_index,
                     "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED if denied
                     else per.get((t.name, p.partition_index), 0)}
                    for p in t.partitions]})
        return [m.encode(m.ApiKey.OFFSET_DELETE, v, {"throttle_time": 0, "error_code": code, "topics": topics})]


def _client_host(conn) -> str:
    peer = conn.peer
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    return f"/{host}"
