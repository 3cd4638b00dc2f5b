"""Connection creation rate per IP (KIP-612), Kafka's way (SocketServer's ConnectionQuotas).

``connection_creation_rate`` is set on an ``ip`` entity through AlterClientQuotas
(engine/security/quotas.py): a given address (``(("ip", "10.0.0.1"),)``; a host name stands for
the first address it resolves to, as Kafka's InetAddress.getByName) or the default for every
address (``(("ip", None),)``, ``<default>``).  An address's own quota wins over the default.

The broker's accept loop (engine/server/broker.py) asks :meth:`IpConnectionQuotas.throttle_ms`
for each connection after it waited for the broker's and the listener's creation rate and slots
(connection_quotas.py), as Kafka's ``ConnectionQuotas.inc`` does: the connection is recorded in
its address's rate; over the quota it is un-recorded (there, and in the broker's and listener's
rates: connection_quotas.py's ``unrecord``) and the answer is the throttle time.  The caller then
keeps the socket open without reading it for that long and closes it (Kafka's
``ConnectionThrottledException`` and the acceptor's delayed close): the client sees its
connection accepted, unanswered, then closed.  The connection is not counted anywhere.

The rate is Kafka's ``Rate`` (connection_quotas.py) over ``quota.window.num`` samples of
``quota.window.size.seconds``; the throttle time ``(rate - quota) / quota * window`` is capped
at one window (Kafka's maxThrottleTimeMs).  A quota change applies to the addresses' running
rates at once; rates of addresses unseen for an hour are dropped.

Concurrency: ``throttle_ms`` runs on the broker's event loop; the configuration listener may
run on any thread (it swaps whole objects).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from ..security.quotas import CONNECTION_CREATION_RATE, IP, resolve_ip
from .connection_quotas import Rate, normal_ip

__all__ = ["IpConnectionQuotas"]

log = logging.getLogger("engine.server")

_EXPIRY_MS = 3600 * 1000.0


class IpConnectionQuotas:
    def __init__(self, store, window_num: int = 11, window_size_s: int = 1) -> None:
        self.store = store
        self.window_num = int(window_num)
        self.window_ms = int(window_size_s) * 1000
        self.active = False
        self._default: int | None = None
        self._per_ip: dict[str, int] = {}
        self._rates: dict[str, list] = {}        # address -> [Rate, last use ms]
        self._swept = 0.0
        store.listen(self.reload)
        self.reload()

    @classmethod
    def from_configs(cls, explicit: Mapping[str, object], store) -> IpConnectionQuotas:
        """Kafka's quota.window.num / quota.window.size.seconds (checked by ConnectionQuotas)."""
        return cls(store, int(explicit.get("quota.window.num", 11)),  # type: ignore[call-overload]
                   int(explicit.get("quota.window.size.seconds", 1)))  # type: ignore[call-overload]

    def reload(self) -> None:
        """The quota configuration changed (any thread): take the ip entities' quotas."""
        default: int | None = None
        per_ip: dict[str, int] = {}
        for entity, quotas in self.store.snapshot().items():
            if entity[0][0] != IP or CONNECTION_CREATION_RATE not in quotas:
                continue
            rate = int(quotas[CONNECTION_CREATION_RATE])
            name = entity[0][1]
            if name is None:
                default = rate
                continue
            address = resolve_ip(name)
            if address is None:
                log.warning("connection_creation_rate of ip %r not applied: it does not resolve", name)
                continue
            per_ip[normal_ip(address)] = rate
        self._default, self._per_ip = default, per_ip
        self.active = default is not None or bool(per_ip)

    def quota(self, address: str) -> int | None:
        """The connection creation rate quota of an address (None: unlimited)."""
        return self._per_ip.get(normal_ip(address), self._default)

    def throttle_ms(self, address: str) -> float:
        """Record a connection from ``address``; over its quota, un-record it and answer the
        throttle time (ms) before the socket is closed (0: accepted)."""
        if not self.active:
            return 0.0
        ip = normal_ip(address)
        bound = self._per_ip.get(ip, self._default)
        if bound is None:
            return 0.0
        now = time.monotonic() * 1000.0
        entry = self._rates.get(ip)
        if entry is None:
            entry = self._rates[ip] = [Rate(bound, self.window_num, self.window_ms), now]
        entry[1] = now
        if now - self._swept > 60000.0:
            self._swept = now
            for k in [k for k, (_, last) in self._rates.items() if now - last > _EXPIRY_MS]:
                del self._rates[k]
        rate = entry[0]
        rate.bound = bound              # a quota change applies to the running rate
        throttle = rate.record_and_throttle_ms(now, float(self.window_ms))
        if throttle > 0:
            rate.record(-1.0, now)          # Kafka: the refused connection is not counted
        return throttle
