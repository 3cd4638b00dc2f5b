"""Consumer groups: Kafka's classic group protocol and committed offsets.

``group.py`` holds the pure group/member state machine, ``records.py`` the
``__consumer_offsets`` record formats (Kafka's own), ``coordinator.py`` the
:class:`GroupCoordinator` that runs them on its own event loop (API in its
module docstring).  An Engine creates one on first use of
``Engine.group_coordinator``; the broker and in-process consumers share it.
"""

from .coordinator import (
    GroupCoordinator,
    GroupDescription,
    GroupListing,
    JoinGroupResult,
    LeaveGroupResult,
    MemberDescription,
    SyncGroupResult,
)
from .group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    GroupMetadata,
    MemberMetadata,
    OffsetAndMetadata,
)
from .records import OFFSETS_TOPIC, partition_for

__all__ = [
    "COMPLETING_REBALANCE",
    "DEAD",
    "EMPTY",
    "GroupCoordinator",
    "GroupDescription",
    "GroupListing",
    "GroupMetadata",
    "JoinGroupResult",
    "LeaveGroupResult",
    "MemberDescription",
    "MemberMetadata",
    "OFFSETS_TOPIC",
    "OffsetAndMetadata",
    "PREPARING_REBALANCE",
    "STABLE",
    "SyncGroupResult",
    "partition_for",
]
