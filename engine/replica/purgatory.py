"""The replica layer's purgatories: requests parked until a partition's state moves far enough
(Kafka's DelayedOperationPurgatory with its DelayedProduce, DelayedDeleteRecords and
DelayedFetch, in one module).

* :class:`DelayedProduce` -- acks=all produces of one partition, each answered once the high
  watermark covers its last offset (or failed: leadership lost, ISR below min.insync.replicas,
  storage offline, shutdown).
* :class:`DelayedDeleteRecords` -- DeleteRecords of one partition, answered with the low
  watermark once every live replica's log start reached the requested offset.
* :class:`DelayedFetch` -- long-polling fetches of a broker: a fetch that found fewer than
  ``min_bytes`` waits for the next append anywhere on the node (or ``poll_interval``, a
  backstop, or its own deadline) and then reads again.

Futures are asyncio futures of the loop that parked them; completing and failing happen on
that loop (the replica manager hops there with ``_call_on_loop``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["DelayedDeleteRecords", "DelayedFetch", "DelayedProduce"]


class _WatermarkPurgatory:
    """Futures waiting for a watermark to reach their threshold."""

    def __init__(self) -> None:
        self._waiting: list[tuple[int, asyncio.Future]] = []

    def __len__(self) -> int:
        return len(self._waiting)

    def watch(self, threshold: int, fut: asyncio.Future) -> None:
        self._waiting.append((threshold, fut))

    def _complete(self, watermark: int, result: Callable[[int], object]) -> None:
        if not self._waiting:
            return
        keep = []
        for threshold, fut in self._waiting:
            if fut.done():
                continue
            if threshold <= watermark:
                fut.set_result(result(watermark))
            else:
                keep.append((threshold, fut))
        self._waiting = keep

    def fail(self, exc_type, message: str) -> None:
        waiting, self._waiting = self._waiting, []
        for _threshold, fut in waiting:
            if not fut.done():
                fut.set_exception(exc_type(message))


class DelayedProduce(_WatermarkPurgatory):
    """acks=all produces of one partition: ``watch(last offset + 1, future)``."""

    def complete(self, high_watermark: int) -> None:
        """Answer (None) every produce whose batch the high watermark now covers."""
        self._complete(high_watermark, lambda _w: None)


class DelayedDeleteRecords(_WatermarkPurgatory):
    """DeleteRecords of one partition: ``watch(new log start, future)``."""

    def complete(self, low_watermark: int) -> None:
        """Answer (with the low watermark) every request every live replica has reached."""
        self._complete(low_watermark, lambda w: w)


class DelayedFetch:
    """Long-polling fetches of one broker (see the module docstring); on the broker's loop."""

    def __init__(self, poll_interval: float = 0.1):
        self.poll_interval = poll_interval
        self.append_seq = 0                 # bumped by every append the broker hears of
        self._waiters: set[asyncio.Future] = set()

    def notify(self) -> None:
        """Something was appended (or a watermark moved): wake every parked fetch."""
        self.append_seq += 1
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    async def wait(self, seen_seq: int, deadline: float) -> None:
        """Return after an append newer than `seen_seq`, ``poll_interval``, or `deadline`
        (the loop's clock)."""
        if self.append_seq != seen_seq:
            return
        loop = asyncio.get_running_loop()
        timeout = min(self.poll_interval, deadline - loop.time())
        if timeout <= 0:
            return
        fut = loop.create_future()
        self._waiters.add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            self._waiters.discard(fut)
