"""Admin operations on the groups of the group coordinator (a part GroupCoordinator owns):
DescribeGroups, ListGroups, DeleteGroups."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..errors import ErrorCode
from . import records as rec
from .group import DEAD, EMPTY, STABLE, GroupMetadata
from .group_context import GroupContext
from .group_results import GroupDescription, GroupListing, MemberDescription
from .runtime import storage_code

__all__ = ["GroupAdmin"]


class GroupAdmin:
    """Given the shared group context, the runtime's ``loading`` (whether a partition of
    ``__consumer_offsets`` is still loading) and the membership's ``delete_group`` (a deleted
    group's members and timers go, it becomes Dead and leaves the table)."""

    def __init__(self, ctx: GroupContext, *, loading: Callable[[], bool],
                 delete_group: Callable[[GroupMetadata], None]):
        self._ctx = ctx
        self._loading = loading
        self._delete_group = delete_group

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        out = []
        for gid in group_ids:
            err, _ = await self._ctx.route(gid)
            group = self._ctx.groups.get(gid)
            if err:
                out.append(GroupDescription(gid, err, "", "", "", []))
            elif group is None or group.state == DEAD:
                out.append(GroupDescription(gid, ErrorCode.NONE, DEAD, "", "", []))
            elif group.state == STABLE:
                out.append(GroupDescription(gid, ErrorCode.NONE, group.state, group.protocol_type or "",
                                            group.protocol_name or "", [
                    MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                      m.metadata(group.protocol_name), m.assignment)
                    for m in group.members.values()]))
            else:
                out.append(GroupDescription(gid, ErrorCode.NONE, group.state, group.protocol_type or "", "", [
                    MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                    for m in group.members.values()]))
        return out

    async def list_groups(self, states: Iterable[str] | None = None) -> tuple[int, list[GroupListing]]:
        wanted = {s.lower() for s in states} if states else None
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading() else ErrorCode.NONE
        out = []
        for g in self._ctx.groups.values():
            if not self._ctx.is_loaded(g.partition) or g.state == DEAD:
                continue
            if wanted is not None and g.state.lower() not in wanted:
                continue
            out.append(GroupListing(g.group_id, g.protocol_type or "", g.state))
        return error, out

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for gid in group_ids:
            err, p = await self._ctx.route(gid)
            if err:
                out[gid] = err
                continue
            group = self._ctx.groups.get(gid)
            if group is None or group.state == DEAD:
                out[gid] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if group.state != EMPTY:
                out[gid] = ErrorCode.NON_EMPTY_GROUP
                continue
            def decide(group=group, gid=gid):
                # under the append lock, so an offset committed meanwhile gets its tombstone too
                if group.state != EMPTY:
                    return []
                records = [(rec.encode_offset_commit_key(gid, t, q), None) for t, q in group.offsets]
                records.append((rec.encode_group_metadata_key(gid), None))
                return records

            try:
                if not await self._ctx.append(p, None, decide=decide):
                    out[gid] = ErrorCode.NON_EMPTY_GROUP
                    continue
            except Exception as e:
                out[gid] = storage_code(e, rec.OFFSETS_TOPIC)
                continue
            self._delete_group(group)
            out[gid] = ErrorCode.NONE
        return out

