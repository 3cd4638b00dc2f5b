"""CoordinatorShard: what a coordinator gives the runtime that drives it (runtime.py).

As in Kafka 4.0, where a ``CoordinatorRuntime`` drives a ``CoordinatorShard`` per partition,
the work is split in two: the runtime owns the event loop, the internal topic, the partition
roles, the loading and the appends; the shard owns the state machine -- the in-memory state
that a partition's batches are replayed into, and what becomes of it when the partition is
loaded or moves away -- and its timers.  A coordinator (coordinator.py, transactions.py) owns
a :class:`~engine.coordinator.runtime.CoordinatorRuntime` and starts it with its shard; it
never subclasses the runtime.

:class:`CoordinatorShard` is the contract the runtime uses; :class:`ShardHooks` is one made of
the coordinator's parts (their bound methods), which is how both coordinators give theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["CoordinatorShard", "ShardHooks", "internal_topic_config"]


class CoordinatorShard(Protocol):
    """The hooks the runtime calls; all but ``replay_batch`` run on the coordinator's loop."""

    def new_load_state(self) -> Any:
        """A fresh accumulator for the replay of one partition."""
        ...

    def replay_batch(self, header: Any, records: list, state: Any) -> None:
        """One batch of the partition being loaded (an executor thread: reads only, touches
        nothing but `state`).  ``records`` is ``decode_batch``'s list of (offset, timestamp,
        key, value, headers); a CorruptRecordError skips the batch (runtime.py logs it)."""
        ...

    def apply_loaded(self, partition: int, state: Any) -> None:
        """The replayed `state` of `partition` becomes the coordinator's in-memory state."""
        ...

    def forget_partition(self, partition: int) -> None:
        """Drop the in-memory state of `partition` (its waiters answered NOT_COORDINATOR)."""
        ...

    def start_timers(self) -> None:
        """The runtime has started (on its loop): begin the periodic work."""
        ...

    def cancel_timers(self) -> None:
        """The runtime is stopping: no more periodic work."""
        ...


@dataclass(frozen=True)
class ShardHooks:
    """A :class:`CoordinatorShard` assembled from the coordinator's parts."""

    new_load_state: Callable[[], Any]
    replay_batch: Callable[[Any, list, Any], None]
    apply_loaded: Callable[[int, Any], None]
    forget_partition: Callable[[int], None]
    start_timers: Callable[[], None]
    cancel_timers: Callable[[], None]


def internal_topic_config(compression_type: str) -> dict[str, Any]:
    """The config an internal topic is created with (Kafka's: compacted, 100 MiB segments)."""
    return {"cleanup.policy": "compact", "segment.bytes": 104857600, "compression.type": compression_type}
