"""What the parts of the group coordinator share (coordinator.py wires them).

:class:`GroupContext` is the group table and the few services of the coordinator's runtime
(runtime.py) that the parts use -- routing a group id to its partition, appending to
``__consumer_offsets``, the clock, the loop, background tasks -- handed to each part at
construction, so no part holds the coordinator itself."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from ..errors import ErrorCode
from .group import GroupMetadata

__all__ = ["GroupContext"]


@dataclass(frozen=True)
class GroupContext:
    groups: dict[str, GroupMetadata]    # group id -> its state (on the coordinator's loop)
    clock: Callable[[], int]            # wall time in ms (commit and state timestamps, expiry)
    route: Callable[[str], Awaitable[tuple[int, int]]]   # group id -> (error code, partition)
    append: Callable[..., Awaitable[bool]]   # CoordinatorRuntime.append: one batch, in log order
    spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task]   # a task the runtime awaits at stop
    loop: Callable[[], asyncio.AbstractEventLoop]       # the coordinator's loop (once started)
    is_loaded: Callable[[int], bool]    # whether a partition of __consumer_offsets is loaded here

    async def route_group(self, group_id: str) -> tuple[int, int]:
        """:attr:`route`, with INVALID_GROUP_ID for an empty group id."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, -1
        return await self.route(group_id)

    def new_group(self, group_id: str, partition: int) -> GroupMetadata:
        """An Empty group, entered in the table."""
        group = GroupMetadata(group_id, partition, current_state_timestamp=self.clock())
        self.groups[group_id] = group
        return group
