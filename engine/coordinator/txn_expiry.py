"""Timeouts and expiry of the transaction coordinator (a part it owns; the shard's timers,
shard.py): every ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` an Ongoing
transaction older than its ``transaction.timeout.ms`` is aborted with a bumped epoch (the
producer fenced); every ``transaction.remove.expired.transaction.cleanup.interval.ms`` an id
idle for ``transactional.id.expiration.ms`` is removed (a tombstone)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ..errors import ErrorCode
from . import txn_records as tr
from .runtime import CoordinatorRuntime
from .txn_records import COMPLETE_ABORT, COMPLETE_COMMIT, DEAD, EMPTY, ONGOING
from .txn_state import TxnMetadata

__all__ = ["TxnExpiry"]

log = logging.getLogger("engine.coordinator.transactions")


class TxnExpiry:
    """Given the runtime, the id table (txn_state.py), ``abort`` (txn_markers.py's
    ``fence_and_abort``) and the three intervals of Kafka's config, in ms."""

    def __init__(self, runtime: CoordinatorRuntime, txns: dict[str, TxnMetadata], *,
                 abort: Callable[[TxnMetadata], Awaitable[int]], abort_interval_ms: int,
                 expire_interval_ms: int, id_expiration_ms: int):
        self._runtime = runtime
        self._txns = txns
        self._abort = abort
        self.abort_interval_ms = abort_interval_ms
        self.expire_interval_ms = expire_interval_ms
        self.id_expiration_ms = id_expiration_ms
        self._timers: list[asyncio.TimerHandle | None] = []

    def start(self) -> None:
        """Run both passes periodically from now on (on the runtime's loop)."""
        self._timers = [None, None]
        self._schedule(0, self.abort_interval_ms, self.abort_timed_out)
        self._schedule(1, self.expire_interval_ms, self.expire_transactional_ids)

    def stop(self) -> None:
        for t in self._timers:
            if t is not None:
                t.cancel()

    def _schedule(self, slot: int, interval_ms: int, fn: Callable[[], Coroutine[Any, Any, int]]) -> None:
        def tick() -> None:
            if not self._runtime.stopped:
                self._runtime.spawn(fn())
                self._schedule(slot, interval_ms, fn)
        self._timers[slot] = self._runtime.host_loop().call_later(interval_ms / 1000, tick)

    async def abort_timed_out(self) -> int:
        """Abort (with a bumped epoch, fencing the producer) every Ongoing transaction older
        than its timeout; returns how many."""
        rt = self._runtime
        now = rt.clock()
        n = 0
        for meta in list(self._txns.values()):
            if meta.state == ONGOING and meta.pending is None and meta.start_ms >= 0 \
                    and meta.start_ms + meta.timeout_ms <= now and rt.is_loaded(meta.partition):
                log.info("transaction %s (producer %d) timed out after %d ms: aborting",
                         meta.transactional_id, meta.producer_id, meta.timeout_ms)
                if await self._abort(meta) == ErrorCode.NONE:
                    n += 1
        return n

    async def expire_transactional_ids(self) -> int:
        """Remove ids idle longer than ``transactional.id.expiration.ms`` (tombstones)."""
        rt = self._runtime
        now = rt.clock()
        n = 0
        for meta in list(self._txns.values()):
            if meta.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT) and meta.pending is None and meta.persisted \
                    and meta.last_update_ms + self.id_expiration_ms <= now and rt.is_loaded(meta.partition):
                meta.pending = DEAD
                try:
                    await rt.append(meta.partition, [(tr.encode_txn_key(meta.transactional_id), None)])
                except Exception:  # noqa: BLE001 - tried again at the next pass
                    log.exception("expiring transactional id %s failed", meta.transactional_id)
                    continue
                finally:
                    meta.pending = None
                if self._txns.get(meta.transactional_id) is meta:
                    del self._txns[meta.transactional_id]
                    n += 1
        return n
