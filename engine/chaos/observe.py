"""What a scenario (engine/chaos/scenarios.py, crash_scenarios.py) observes and reports: its
:class:`Result` (``line()`` is what ``python -m engine chaos --scenario NAME`` prints, ``problems``
what failed), a :class:`StateWatch` polling a topic's partition states in ZooKeeper, and the ISR
history such a watch saw."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time

from .cluster import PartitionCluster

__all__ = ["Result", "StateWatch", "isr_history", "sleep_until"]


@dataclasses.dataclass
class Result:
    name: str
    acked: int = 0
    lost: int = 0
    dup: int = 0
    errors: int = 0
    max_unavailable_s: float = 0.0
    heal_s: float = 0.0
    group_missing: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)

    def line(self) -> str:
        return (f"{self.name}: acked={self.acked} lost={self.lost} dup={self.dup} errors={self.errors} "
                f"max_unavailability={self.max_unavailable_s:.2f}s time_to_heal={self.heal_s:.2f}s "
                f"group_missing={self.group_missing}; {'; '.join(self.notes)}"
                + (f"\n  PROBLEMS: {'; '.join(self.problems)}" if self.problems else ""))


class StateWatch(threading.Thread):
    """Polls a topic's partition states (every 50 ms) and keeps each version seen:
    (partition, state, znode mtime)."""

    def __init__(self, c: PartitionCluster, topic: str, partitions: int):
        super().__init__(daemon=True)
        self.c, self.topic, self.partitions = c, topic, partitions
        self.seen: list[tuple[int, dict, float]] = []
        self._last: dict[int, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for p in range(self.partitions):
                with contextlib.suppress(Exception):
                    st, mtime = self.c.state_stat(self.topic, p)
                    key = hash((st["leader"], st["leader_epoch"], tuple(st["isr"]), st["controller_epoch"], mtime))
                    if self._last.get(p) != key:
                        self._last[p] = key
                        self.seen.append((p, st, mtime))
            time.sleep(0.05)

    def isr_sizes(self, p: int = 0) -> list[int]:
        return [len(st["isr"]) for q, st, _ in self.seen if q == p]


def isr_history(watch: StateWatch, t0: float, p: int = 0) -> str:
    """Each ISR `watch` saw for partition `p`, with its znode's mtime relative to `t0`."""
    return " -> ".join(f"{st['isr']}@{m - t0:.2f}s" for q, st, m in watch.seen if q == p)


def sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.time()))
