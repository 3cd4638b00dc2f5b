"""Consumer-group administration for operators' tools (the CLI and the console) (``python -m engine groups``), in the
spirit of Kafka's ``kafka-consumer-groups.sh``: list, describe (members, their
partitions, committed offsets and lag), delete.

The coordinator answering is a running broker given by address (``bootstrap``, ours or
Kafka; log end offsets then come from ListOffsets), or the one that owns the data
directory: the broker serving it (found with ``engine.broker_address``, reached over the
Kafka protocol), or — when no process holds the directory — this process's own, opened for
the duration; high watermarks for the lag then come from the local replicas (the replica
layer's ``local_offsets``; a read-only open beside the broker: what that broker published).
"""

from __future__ import annotations

from typing import NamedTuple

from ._engine import open as open_engine
from .client.assignors import decode_assignment
from .client.group import WireTransport
from .errors import KafkaApiError, api_error
from .protocol.messages import ApiKey
from .storage.manager import broker_address

__all__ = ["GroupAdmin", "GroupMember", "GroupState"]


class GroupMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    partitions: list[tuple[str, int]]


class GroupState(NamedTuple):
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]
    offsets: dict[tuple[str, int], int]          # committed offset per partition


class GroupAdmin:
    """See the module docstring.  A context manager."""

    def __init__(self, path: str | None, bootstrap: str | None = None, security=None):
        self._wire = None
        self._eng = None
        if bootstrap is not None:          # a running broker, ours or Kafka (CLI --bootstrap-server)
            self._wire = WireTransport(bootstrap, client_id="kafka-engine-groups", security=security)
            return
        address = broker_address(path)
        if address is not None:
            self._wire = WireTransport(address, client_id="kafka-engine-groups", security=security)
            self._eng = open_engine(path, read_only=True)
        else:
            self._eng = open_engine(path, background=False)
            self._coord = self._eng.group_coordinator
            self._coord.wait_loaded()

    # -- queries -----------------------------------------------------------------
    def list(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group."""
        if self._wire is None:
            err, listings = self._coord.call(self._coord.list_groups, timeout=30)
            if err:
                raise api_error(err, "ListGroups")
            return sorted((g.group_id, g.protocol_type, g.state) for g in listings)
        client = self._wire._main
        r = client._call(None, ApiKey.LIST_GROUPS, {"states_filter": []})
        if int(r["error_code"]):
            raise api_error(int(r["error_code"]), "ListGroups")
        return sorted((g["group_id"], g["protocol_type"], g["group_state"]) for g in r["groups"])

    def describe(self, group_id: str) -> GroupState:
        if self._wire is None:
            c = self._coord
            desc = c.call(c.describe_groups, [group_id], timeout=30)[0]
            if desc.error_code:
                raise api_error(desc.error_code, f"DescribeGroups {group_id}")
            members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.assignment)
                       for m in desc.members]
            state, ptype, proto = desc.state, desc.protocol_type, desc.protocol_name
            err, got = c.call(c.fetch_offsets, group_id, None, timeout=30)
            if err:
                raise api_error(err, f"OffsetFetch {group_id}")
            offsets = {tp: om.offset for tp, om in got.items() if om.offset >= 0}
        else:
            r = self._wire._call(self._wire._main, group_id, ApiKey.DESCRIBE_GROUPS,
                                 {"groups": [group_id], "include_authorized_operations": False})
            g = r["groups"][0]
            if int(g["error_code"]):
                raise api_error(int(g["error_code"]), f"DescribeGroups {group_id}")
            members = [(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                        bytes(m["member_assignment"] or b"")) for m in g["members"]]
            state, ptype, proto = g["group_state"], g["protocol_type"], g["protocol_data"]
            r = self._wire._call(self._wire._main, group_id, ApiKey.OFFSET_FETCH,
                                 {"group_id": group_id, "topics": None, "require_stable": False})
            if int(r["error_code"]):
                raise api_error(int(r["error_code"]), f"OffsetFetch {group_id}")
            offsets = {(t["name"], p["partition_index"]): int(p["committed_offset"])
                       for t in r["topics"] for p in t["partitions"] if int(p["committed_offset"]) >= 0}
        out = []
        for mid, iid, cid, host, assignment in members:
            parts = decode_assignment(assignment) if ptype == "consumer" else []
            out.append(GroupMember(mid, iid, cid, host, parts))
        return GroupState(group_id, state, ptype, proto, out, offsets)

    def log_end_offset(self, topic: str, partition: int) -> int | None:
        """The high watermark (what a consumer can reach) of a partition, None if unknown."""
        if self._eng is None:
            try:
                return self._wire._main.list_offsets({(topic, partition): -1})[(topic, partition)][0]
            except KafkaApiError:
                return None
        try:       # through the replica layer (a read-only open: the writer's published HW)
            return self._eng.replicas.local.local_offsets(topic, partition).high_watermark
        except KeyError:
            return None

    def delete(self, group_id: str) -> None:
        if self._wire is None:
            code = self._coord.call(self._coord.delete_groups, [group_id], timeout=30)[group_id]
        else:
            r = self._wire._call(self._wire._main, group_id, ApiKey.DELETE_GROUPS,
                                 {"groups_names": [group_id]})
            code = int(r["results"][0]["error_code"])
        if code:
            raise api_error(code, f"DeleteGroups {group_id}")

    def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
        if self._eng is not None:
            self._eng.close()

    def __enter__(self) -> GroupAdmin:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
