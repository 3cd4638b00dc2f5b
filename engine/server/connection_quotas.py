"""Connection limits with Kafka's keys (Kafka: SocketServer.scala ``ConnectionQuotas``).

::

    max.connections=1000                                 # broker-wide (default Integer.MAX_VALUE)
    listener.name.external.max.connections=800           # per listener (default: max.connections)
    max.connections.per.ip=50                            # default Integer.MAX_VALUE
    max.connections.per.ip.overrides=127.0.0.1:200,bastion.example:10
    max.connection.creation.rate=100                     # per second, broker-wide
    listener.name.external.max.connection.creation.rate=20
    quota.window.num=11  quota.window.size.seconds=1      # the rate's windows (Kafka's defaults)

The broker's accept loop of each listener (engine/server/broker.py) asks this module, for every
socket it accepted, as Kafka's Acceptor asks ``ConnectionQuotas.inc``:

1. :meth:`ConnectionQuotas.wait_for_slot` -- records the connection in the creation-rate sensors
   (the broker's and the listener's) and waits, with asyncio, for the throttle time they give
   and until the listener and the broker have a free slot.  While it waits that listener accepts
   nothing more: new clients wait in the socket's backlog (their TCP connect completes in the
   kernel, their requests go unanswered) until a connection closes.
2. the per-IP creation rate (``connection_creation_rate`` set through AlterClientQuotas, KIP-612:
   engine/server/ip_quotas.py): a connection over it is un-recorded here too
   (:meth:`ConnectionQuotas.unrecord`), held unread for the throttle time, then closed.
3. :meth:`ConnectionQuotas.inc` -- the per-IP limit: a connection from an address that already
   has its maximum is refused (closed at once, logged at INFO: Kafka's TooManyConnectionsException).
4. :meth:`ConnectionQuotas.dec` when the connection ends.

The inter-broker listener (``inter.broker.listener.name``, else the listener named by
``security.inter.broker.protocol``, PLAINTEXT by default) is protected when the broker has more
than one listener, as in Kafka: its connections are held to its own listener limit only and
count in the broker's rate only through its listener sensor; when one of them takes the broker
past ``max.connections``, :meth:`ConnectionQuotas.excess` says how many connections of the other
listeners the broker must close (the least recently active ones).

The creation rate is Kafka's ``Rate`` over ``quota.window.num`` samples of
``quota.window.size.seconds`` each (a window of at least ``num - 1`` samples), so a broker that
was idle lets a burst of about ``(quota.window.num - 1) * quota.window.size.seconds * rate``
connections in before it throttles; the throttle time is Kafka's ``(observed - bound) / bound *
window``, at most one window.

What differs from Kafka: the limits are read at startup (no dynamic
reconfiguration); a hostname in the overrides counts for every address it resolves to at
startup (Kafka: the first one).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidConfigError

__all__ = ["INT_MAX", "ConnectionQuotas", "ListenerQuotaStats", "Rate", "normal_ip"]

log = logging.getLogger("engine.server")

INT_MAX = 2**31 - 1          # Kafka's Integer.MAX_VALUE: no limit
_VALID_HOST = re.compile(r"[0-9a-zA-Z\-%._:]+")     # Kafka's Utils.validHostPattern (non-empty)


class Rate:
    """Kafka's ``Rate`` over a ``WindowedSum`` (org.apache.kafka.common.metrics.stats) with an
    upper quota ``bound`` per second: :meth:`record_and_throttle_ms` records one event and returns
    the throttle time Kafka's QuotaUtils gives when the rate is above the bound (0 if not)."""

    def __init__(self, bound: int, samples: int, window_ms: int):
        self.bound = bound
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[list[float]] = []      # [start_ms, last_event_ms, value]
        self._current = 0

    def _sample(self, now: float) -> list[float]:
        if not self._samples:
            self._samples.append([now, now, 0.0])
        return self._samples[self._current]

    def record(self, value: float, now: float) -> None:
        sample = self._sample(now)
        if now - sample[0] >= self.window_ms:       # complete: advance (one spare placeholder)
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                self._samples.append([now, now, 0.0])
            else:
                self._samples[self._current][:] = [now, now, 0.0]
            sample = self._samples[self._current]
        sample[2] += value
        sample[1] = now

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now - sample[1] >= expire:
                sample[:] = [now, now, 0.0]

    def window_size_ms(self, now: float) -> float:
        """The window the rate is measured over: at least ``samples - 1`` full windows."""
        self._purge(now)
        oldest = min(s[0] for s in self._samples) if self._samples else now
        elapsed = now - oldest
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1.0)

    def measure(self, now: float) -> float:
        """Events per second."""
        self._purge(now)
        total = sum(s[2] for s in self._samples)
        return total / (self.window_size_ms(now) / 1000.0)

    def record_and_throttle_ms(self, now: float, max_throttle_ms: float) -> float:
        self.record(1.0, now)
        value = self.measure(now)
        if value <= self.bound:
            return 0.0
        if self.bound <= 0:
            return max_throttle_ms
        return min(float(round((value - self.bound) / self.bound * self.window_size_ms(now))),
                   max_throttle_ms)


@dataclass
class ListenerQuotaStats:
    """What the limits did on one listener (engine/server/metrics.py exposes it)."""

    rejected: int = 0                 # per-IP limit: accepted then closed at once
    throttled: int = 0                # connections delayed by the creation rate
    throttle_ms: float = 0.0          # Kafka: connection-accept-throttle-time, summed
    blocked_ms: float = 0.0           # the accept loop waiting (rate and max.connections)
    closed_for_inter_broker: int = 0  # closed to make room for the protected listener


@dataclass
class _ListenerQuota:
    max_connections: int
    rate: Rate | None
    count: int = 0
    stats: ListenerQuotaStats = field(default_factory=ListenerQuotaStats)


def _int_key(configs: Mapping[str, Any], key: str, default: int) -> int:
    raw = configs.get(key)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(f"{key}: expected an integer, got {raw!r}") from None
    if value < 0:
        raise InvalidConfigError(f"{key}: {value} is below the minimum 0")
    if value > INT_MAX:
        raise InvalidConfigError(f"{key}: {value} is above the maximum {INT_MAX}")
    return value


def _resolve(host: str, key: str) -> set[str]:
    try:
        return {_normal_ip(str(info[4][0])) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError) as e:
        raise InvalidConfigError(f"{key}: cannot resolve host {host!r}: {e}") from None


def parse_ip_overrides(value: Any, key: str = "max.connections.per.ip.overrides") -> dict[str, int]:
    """``host:count,host:count`` (Kafka's Csv.parseCsvMap: the last ``:`` splits, so IPv6
    addresses work) -> {host: count}; InvalidConfigError naming ``key`` for what is malformed."""
    out: dict[str, int] = {}
    for entry in re.split(r"\s*,\s*", str(value or "").strip()):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = host.strip()
        if not sep or not host:
            raise InvalidConfigError(f"{key}: {entry!r} is not host:count")
        if not _VALID_HOST.fullmatch(host):
            raise InvalidConfigError(f"{key} contains invalid addresses : {host}")
        try:
            n = int(count.strip())
        except ValueError:
            raise InvalidConfigError(f"{key}: the count of {host} must be an integer, not {count!r}") from None
        if not 0 <= n <= INT_MAX:
            raise InvalidConfigError(f"{key}: the count of {host} must be in [0, {INT_MAX}], not {n}")
        out[host] = n
    return out


def _normal_ip(address: str) -> str:
    """One spelling per address: IPv4-mapped IPv6 as IPv4, IPv6 compressed, scope dropped."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


normal_ip = _normal_ip


class ConnectionQuotas:
    """The connection limits of one broker (see the module doc).  Runs on the broker's loop."""

    def __init__(self, listener_names: Iterable[str], *, max_connections: int = INT_MAX,
                 listener_max_connections: Mapping[str, int] | None = None,
                 max_connections_per_ip: int = INT_MAX,
                 per_ip_overrides: Mapping[str, int] | None = None,
                 max_connection_creation_rate: int = INT_MAX,
                 listener_creation_rates: Mapping[str, int] | None = None,
                 inter_broker_listener: str | None = None,
                 window_num: int = 11, window_size_s: int = 1):
        names = [n.upper() for n in listener_names]
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides: dict[str, int] = dict(per_ip_overrides or {})   # address -> count
        self.inter_broker_listener = (inter_broker_listener or "").upper() or None
        self.window_num = window_num
        self.window_ms = window_size_s * 1000
        self.max_throttle_ms = float(self.window_ms)
        self._broker_rate = self._rate(max_connection_creation_rate)
        lmax = {k.upper(): v for k, v in (listener_max_connections or {}).items()}
        lrate = {k.upper(): v for k, v in (listener_creation_rates or {}).items()}
        # Kafka configures each listener's quota from the keys with its prefix overriding, so a
        # broker-wide value is every listener's default too
        self.listeners = {n: _ListenerQuota(lmax.get(n, max_connections),
                                            self._rate(lrate.get(n, max_connection_creation_rate)))
                          for n in names}
        self._unlimited = (max_connections >= INT_MAX and self._broker_rate is None and all(
            q.max_connections >= INT_MAX and q.rate is None for q in self.listeners.values()))
        self.total = 0
        self.per_ip: dict[str, int] = {}
        self._waiters: set[asyncio.Future] = set()

    def _rate(self, bound: int) -> Rate | None:
        return None if bound >= INT_MAX else Rate(bound, self.window_num, self.window_ms)

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any], listener_names: Iterable[str]) -> ConnectionQuotas:
        """The limits from Kafka's keys (raw strings or typed values); InvalidConfigError naming
        the key for a negative or malformed value."""
        names = [n.upper() for n in listener_names]
        max_conn = _int_key(configs, "max.connections", INT_MAX)
        per_ip = _int_key(configs, "max.connections.per.ip", INT_MAX)
        key = "max.connections.per.ip.overrides"
        overrides_by_host = parse_ip_overrides(configs.get(key), key)
        if per_ip == 0 and not overrides_by_host:
            raise InvalidConfigError("max.connections.per.ip can be set to zero only if "
                                     "max.connections.per.ip.overrides property is set.")
        overrides: dict[str, int] = {}
        for host, count in overrides_by_host.items():
            for address in _resolve(host, key):
                overrides[address] = count
        rate = _int_key(configs, "max.connection.creation.rate", INT_MAX)
        lmax: dict[str, int] = {}
        lrate: dict[str, int] = {}
        for name in names:
            prefix = f"listener.name.{name.lower()}."
            if prefix + "max.connections" in configs:
                lmax[name] = _int_key(configs, prefix + "max.connections", max_conn)
            if prefix + "max.connection.creation.rate" in configs:
                lrate[name] = _int_key(configs, prefix + "max.connection.creation.rate", rate)
        window_num = _int_key(configs, "quota.window.num", 11)
        window_s = _int_key(configs, "quota.window.size.seconds", 1)
        if window_num < 1:
            raise InvalidConfigError(f"quota.window.num: {window_num} is below the minimum 1")
        if window_s < 1:
            raise InvalidConfigError(f"quota.window.size.seconds: {window_s} is below the minimum 1")
        inter = str(configs.get("inter.broker.listener.name") or "").strip() or \
            str(configs.get("security.inter.broker.protocol") or "").strip() or "PLAINTEXT"
        return cls(names, max_connections=max_conn, listener_max_connections=lmax,
                   max_connections_per_ip=per_ip, per_ip_overrides=overrides,
                   max_connection_creation_rate=rate, listener_creation_rates=lrate,
                   inter_broker_listener=inter, window_num=window_num, window_size_s=window_s)

    # -- state ---------------------------------------------------------------------------------
    @property
    def unlimited(self) -> bool:
        """No connection count or creation rate limit: the accept loop need not wait."""
        return self._unlimited

    def stats(self, listener: str) -> ListenerQuotaStats:
        return self._listener(listener).stats

    def count(self, listener: str | None = None) -> int:
        return self.total if listener is None else self._listener(listener).count

    def max_for_ip(self, address: str) -> int:
        return self.per_ip_overrides.get(_normal_ip(address), self.max_connections_per_ip)

    def protected(self, listener: str) -> bool:
        """Kafka's protectedListener: the inter-broker listener of a broker with several."""
        return listener.upper() == self.inter_broker_listener and len(self.listeners) > 1

    def _listener(self, listener: str) -> _ListenerQuota:
        name = listener.upper()
        quota = self.listeners.get(name)
        if quota is None:       # a listener the broker did not announce: unlimited of its own
            quota = self.listeners[name] = _ListenerQuota(INT_MAX, None)
        return quota

    def slot_available(self, listener: str) -> bool:
        quota = self._listener(listener)
        if quota.count >= quota.max_connections:
            return False
        if self.protected(listener):
            return True
        return self.total < self.max_connections

    def excess(self, listener: str) -> int:
        """How many connections of the other listeners to close after one of ``listener`` came
        in (Kafka's maxConnectionsExceeded, checked by each Processor): > 0 only when a protected
        listener's connection took the broker past max.connections."""
        if not self.protected(listener):
            return 0
        return max(0, self.total - self.max_connections)

    # -- the accept path -----------------------------------------------------------------------
    def _throttle_ms(self, listener: str, now_ms: float) -> float:
        """Record one connection in the rate sensors; the longer of their throttle times."""
        quota = self._listener(listener)
        throttle = 0.0
        if not self.protected(listener) and self._broker_rate is not None:
            throttle = self._broker_rate.record_and_throttle_ms(now_ms, self.max_throttle_ms)
        if quota.rate is not None:
            throttle = max(throttle, quota.rate.record_and_throttle_ms(now_ms, self.max_throttle_ms))
        if throttle > 0:
            quota.stats.throttled += 1
            quota.stats.throttle_ms += throttle
        return throttle

    def unrecord(self, listener: str) -> None:
        """Take back the connection :meth:`wait_for_slot` recorded in the creation-rate sensors
        (Kafka's updateListenerMetrics: the IP quota refused it)."""
        if self.unlimited:
            return
        now = time.monotonic() * 1000.0
        quota = self._listener(listener)
        if not self.protected(listener) and self._broker_rate is not None:
            self._broker_rate.record(-1.0, now)
        if quota.rate is not None:
            quota.rate.record(-1.0, now)

    async def wait_for_slot(self, listener: str) -> float:
        """Kafka's waitForConnectionSlot: record the connection in the rate sensors, then wait
        (asyncio, the loop keeps serving) for the throttle time and for a free slot on the
        listener and the broker.  Returns the seconds waited."""
        if self.unlimited:
            return 0.0
        loop = asyncio.get_running_loop()
        start = loop.time()
        throttle_s = self._throttle_ms(listener, time.monotonic() * 1000.0) / 1000.0
        if throttle_s <= 0 and self.slot_available(listener):
            return 0.0
        end = start + throttle_s
        while True:
            remaining = end - loop.time()
            if remaining <= 0 and self.slot_available(listener):
                break
            fut = loop.create_future()
            self._waiters.add(fut)
            try:
                if remaining > 0:
                    await asyncio.wait({fut}, timeout=remaining)
                else:
                    await fut
            finally:
                self._waiters.discard(fut)
        waited = loop.time() - start
        self._listener(listener).stats.blocked_ms += waited * 1000.0
        return waited

    def inc(self, listener: str, address: str) -> bool:
        """Count a connection accepted on ``listener`` from ``address``; False (and nothing
        counted) when that address already has its maximum: the caller closes the socket."""
        ip = _normal_ip(address)
        quota = self._listener(listener)
        count = self.per_ip.get(ip, 0)
        limit = self.per_ip_overrides.get(ip, self.max_connections_per_ip)
        if count >= limit:
            quota.stats.rejected += 1
            log.info("Rejected connection from %s, address already has the configured maximum "
                     "of %d connections.", ip, limit)
            return False
        self.per_ip[ip] = count + 1
        self.total += 1
        quota.count += 1
        return True

    def dec(self, listener: str, address: str) -> None:
        """A connection counted by :meth:`inc` ended: wake the accept loops waiting for a slot."""
        ip = _normal_ip(address)
        count = self.per_ip.get(ip, 0)
        if count <= 1:
            self.per_ip.pop(ip, None)
        else:
            self.per_ip[ip] = count - 1
        self.total = max(0, self.total - 1)
        quota = self._listener(listener)
        quota.count = max(0, quota.count - 1)
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
