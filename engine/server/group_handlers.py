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
"""

from __future__ import annotations

import logging

from ..coordinator.group import OffsetAndMetadata
from ..errors import ErrorCode
from ..protocol import messages as m
from . import authz
from .common import coordinator_bound_s
from .txn_handlers import call, coordinator

__all__ = ["GroupHandlers"]

log = logging.getLogger("engine.server")


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
                addr = self.handlers.view.brokers().get(node)
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

    def _node_id(self) -> int:
        return self.handlers.view.node_id

    # -- JoinGroup (11) -----------------------------------------------------------------
    async def join_group(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.JOIN_GROUP, header, body)
        session = _ms(req.session_timeout)
        rebalance = _ms(getattr(req, "rebalance_timeout", None)) if v >= 1 else session
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
        offsets = {}
        for t in req.topics:
            for p in t.partitions:
                offsets[(t.name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata or "")
        retention = _ms(getattr(req, "retention_time", None)) if 2 <= v <= 4 else -1
        res = await self._call("commit_offsets", req.group_id, offsets,
                               generation_id=req.generation_id_or_member_epoch, member_id=req.member_id,
                               group_instance_id=getattr(req, "group_instance_id", None),
                               retention_ms=retention)
        topics = []
        for t in req.topics:
            topics.append({"name": t.name, "partitions": [
                {"partition_index": p.partition_index,
                 "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE if res is None
                 else res.get((t.name, p.partition_index), 0)}
                for p in t.partitions]})
        return [m.encode(m.ApiKey.OFFSET_COMMIT, v, {"throttle_time": 0, "topics": topics})]

    # -- OffsetFetch (9) ------------------------------------------------------------------
    async def offset_fetch(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.OFFSET_FETCH, header, body)
        if v >= 8:
            groups = []
            stable = getattr(req, "require_stable", False)
            for g in req.groups:
                code, topics = await self._fetch_group(g.group_id, g.topics, v, stable)
                groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
            return [m.encode(m.ApiKey.OFFSET_FETCH, v, {"throttle_time": 0, "groups": groups})]
        code, topics = await self._fetch_group(req.group_id, req.topics, v, getattr(req, "require_stable", False))
        if v < 2 and code:
            # no top-level error before v2: every partition carries it
            for t in topics:
                for p in t["partitions"]:
                    p["error_code"] = code
        return [m.encode(m.ApiKey.OFFSET_FETCH, v, {"throttle_time": 0, "topics": topics, "error_code": code})]

    async def _fetch_group(self, group_id: str, req_topics, v: int, require_stable: bool = False):
        wanted = None
        if req_topics is not None:
            wanted = [(t.name, p) for t in req_topics for p in t.partition_indexes]
        res = await self._call("fetch_offsets", group_id, wanted)
        code, offsets = (ErrorCode.COORDINATOR_NOT_AVAILABLE, {}) if res is None else res
        unstable: set[tuple[str, int]] = set()
        if require_stable and not code:
            unstable = await self._call("unstable_partitions", group_id, wanted) or set()
        if code and wanted is not None:
            offsets = {tp: OffsetAndMetadata(-1) for tp in wanted}
        by_topic: dict[str, list] = {}
        order = wanted if wanted is not None else sorted(offsets)
        for tp in order:
            om = offsets.get(tp, OffsetAndMetadata(-1))
            if tp in unstable:          # Kafka: no offset, UNSTABLE_OFFSET_COMMIT (retriable)
                om = OffsetAndMetadata(-1)
            by_topic.setdefault(tp[0], []).append({
                "partition_index": tp[1], "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "metadata": om.metadata,
                "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT if tp in unstable else 0})
        return code, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]

    # -- DescribeGroups (15) --------------------------------------------------------------
    async def describe_groups(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.DESCRIBE_GROUPS, header, body)
        res = await self._call("describe_groups", list(req.groups))
        ops = authz.authorized(getattr(req, "include_authorized_operations", False),
                               authz.GROUP_OPERATIONS)
        groups = []
        if res is None:
            groups = [{"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "group_id": g, "group_state": "",
                       "protocol_type": "", "protocol_data": "", "members": []} for g in req.groups]
        else:
            for d in res:
                groups.append({
                    "error_code": d.error_code, "group_id": d.group_id, "group_state": d.state,
                    "protocol_type": d.protocol_type, "protocol_data": d.protocol_name,
                    "members": [{"member_id": x.member_id, "group_instance_id": x.group_instance_id,
                                 "client_id": x.client_id, "client_host": x.client_host,
                                 "member_metadata": x.metadata, "member_assignment": x.assignment}
                                for x in d.members],
                    "authorized_operations": ops if d.error_code == 0 else authz.OMITTED})
        return [m.encode(m.ApiKey.DESCRIBE_GROUPS, v, {"throttle_time": 0, "groups": groups})]

    # -- ListGroups (16) ------------------------------------------------------------------
    async def list_groups(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.LIST_GROUPS, header, body)
        states = list(getattr(req, "states_filter", ()) or ())
        types = {t.lower() for t in (getattr(req, "types_filter", ()) or ())}
        res = await self._call("list_groups", states or None)
        code, listings = (ErrorCode.COORDINATOR_NOT_AVAILABLE, []) if res is None else res
        if types and "classic" not in types:
            listings = []       # every group here is a classic group
        return [m.encode(m.ApiKey.LIST_GROUPS, v, {
            "throttle_time": 0, "error_code": code,
            "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
                        "group_type": "classic"} for g in listings]})]

    # -- DeleteGroups (42) ----------------------------------------------------------------
    async def delete_groups(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.DELETE_GROUPS, header, body)
        names = list(req.groups_names)
        res = await self._call("delete_groups", names)
        return [m.encode(m.ApiKey.DELETE_GROUPS, v, {"throttle_time": 0, "results": [
            {"group_id": g, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE if res is None else res[g]}
            for g in dict.fromkeys(names)]})]

    # -- OffsetDelete (47) ----------------------------------------------------------------
    async def offset_delete(self, header, body, conn):
        v = header.api_version
        req = self._decode(m.ApiKey.OFFSET_DELETE, header, body)
        wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        res = await self._call("delete_offsets", req.group_id, wanted)
        code, per = (ErrorCode.COORDINATOR_NOT_AVAILABLE, {}) if res is None else res
        topics = []
        if not code:
            for t in req.topics:
                topics.append({"name": t.name, "partitions": [
                    {"partition_index": p.partition_index, "error_code": per.get((t.name, p.partition_index), 0)}
                    for p in t.partitions]})
        return [m.encode(m.ApiKey.OFFSET_DELETE, v, {"throttle_time": 0, "error_code": code, "topics": topics})]


def _client_host(conn) -> str:
    peer = conn.peer
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    return f"/{host}"
