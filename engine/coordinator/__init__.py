"""Consumer groups: Kafka's classic group protocol and committed offsets.

``group.py`` holds the pure group/member state machine, ``records.py`` the
``__consumer_offsets`` record formats (Kafka's own), ``coordinator.py`` the
:class:`GroupCoordinator` that runs them on its own event loop (API in its
module docstring), composed of its parts: ``group_membership.py``, ``group_offsets.py``,
``group_admin_ops.py``, ``offset_retention.py``, ``group_loader.py`` and ``group_txn.py``
(the group side of transactional offset commits), each given a ``group_context.py``
:class:`GroupContext`.  A node (engine/node.py) creates one on first use of
``node.group_coordinator``, each given the node; the broker and in-process consumers share it.
``transactions.py`` is the :class:`TransactionCoordinator` (``__transaction_state``,
``txn_records.py``; ``node.transaction_coordinator``), composed of ``txn_state.py``,
``txn_markers.py``, ``txn_expiry.py`` and ``txn_loader.py``, ``runtime.py`` the loop/log machinery
both share: each owns a :class:`CoordinatorRuntime` and starts it with its shard (``shard.py``,
the state machine the runtime loads).
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
from .transactions import TransactionCoordinator, TxnDescription, TxnListing
from .txn_records import TRANSACTION_STATE_TOPIC

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
    "TRANSACTION_STATE_TOPIC",
    "TransactionCoordinator",
    "TxnDescription",
    "TxnListing",
    "partition_for",
]
