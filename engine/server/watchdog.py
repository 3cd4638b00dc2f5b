"""The request watchdog: a request still unanswered after its bound is logged, once, with its
API, version, correlation id, client id and peer, so a silence names itself.

A client gives up on a request after its ``request.timeout.ms`` (30 s by default in Kafka's
clients and librdkafka) and retries or fails, often with a message that names something else
(Kafka's producer reports the pending *result*, e.g. "awaiting AddOffsetsToTxn").  The broker
is the only one that knows which request it never answered.  Every connection keeps the
request it is processing (:class:`InFlight`; Kafka processes one request at a time per
connection, so one is enough); a timer scans them every ``interval`` seconds.

Bounds: 30 s (the clients' default request timeout, also the longest Produce ``timeout_ms``
and Fetch ``max_wait_ms`` they send by default); JoinGroup waits for the rebalance, whose
timeout is the members' ``max.poll.interval.ms`` (5 min by default), so it gets 5.5 min.
The watchdog only reports: the request goes on, and its answer is still sent when it comes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from ..protocol import messages as m

__all__ = ["InFlight", "RequestWatchdog"]

log = logging.getLogger("engine.server")

DEFAULT_BOUND_S = 30.0
_LONGER_S = {m.ApiKey.JOIN_GROUP: 300.0}       # added to the default bound


@dataclass
class InFlight:
    """The request a connection is processing."""
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    started: float          # the loop's clock
    reported: bool = False

    def describe(self) -> str:
        name = m.API_NAMES.get(self.api_key, f"api {self.api_key}")
        return (f"{name} v{self.api_version} (correlation id {self.correlation_id}, "
                f"client id {self.client_id!r})")


class RequestWatchdog:
    """Scans `connections()` (each with ``.inflight`` and ``.peer``) every `interval` seconds
    on `loop`; :meth:`stop` ends it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, connections, interval: float = 5.0,
                 default_bound_s: float = DEFAULT_BOUND_S):
        self.loop = loop
        self.connections = connections
        self.interval = interval
        self.default_bound_s = default_bound_s
        self.reported = 0
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._timer = self.loop.call_later(self.interval, self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        try:
            self.scan()
        finally:
            if self._timer is not None:
                self._timer = self.loop.call_later(self.interval, self._tick)

    def bound_s(self, api_key: int) -> float:
        """How long a request of `api_key` may be in flight before it is reported."""
        return self.default_bound_s + _LONGER_S.get(api_key, 0.0)

    def scan(self) -> int:
        """Report every request past its bound not reported yet; returns how many."""
        now = self.loop.time()
        n = 0
        for conn in list(self.connections()):
            req = conn.inflight
            if req is None or req.reported:
                continue
            age = now - req.started
            if age > self.bound_s(req.api_key):
                req.reported = True
                n += 1
                log.warning("request in flight for %.1f s, past its %.0f s bound: %s from %s",
                            age, self.bound_s(req.api_key), req.describe(), conn.peer)
        self.reported += n
        return n
