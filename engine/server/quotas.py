"""Client quota enforcement, Kafka's way (ClientQuotaManager, ClientRequestQuotaManager, KIP-219).

The broker holds one :class:`QuotaManager` (``broker.quotas``) over its quota configuration
(engine/security/quotas.py: a ClientQuotaStore, or in cluster mode the ZooKeeper-backed one).
The connection (engine/server/connection.py) asks it about each request only while some quota
is configured (``active``; with none the request path pays one attribute read):

* ``begin()`` before the handler (the thread's CPU clock), ``end(conn, header, frame, parts, mark)`` after it:
  the request is recorded against the quotas that apply to the connection's user
  (``conn.principal`` ``User:alice`` -> ``alice``) and the request's client id -- Produce: the
  request's size against ``producer_byte_rate``; Fetch from a consumer (replica_id < 0): the
  response's size against ``consumer_byte_rate`` (a follower's, replica id >= 0 -- before v15
  the body's first field, from v15 in ReplicaState; the Fetch handler, which decodes the request
  anyway, says so with ``from_follower``) is exempt, as Kafka's; every request but ApiVersions and the SASL
  ones: the event loop's CPU time spent while the handler ran, as a percentage of one thread,
  against ``request_percentage``.
* CreateTopics, CreatePartitions and DeleteTopics answer the throttle time of their caller's
  ``controller_mutation_rate`` (``mutations``: engine/server/mutation_quotas.py); the handler
  hands it over with :meth:`QuotaManager.mutation_throttled` and it is the request's throttle
  time when it is the longest (Kafka's sendResponseMaybeThrottleWithControllerQuota).
* The throttle time goes into the response's ``throttle_time_ms`` (patched into the encoded
  body: the first field of most responses, Produce's last) and the connection reads no further
  request for that long after sending the response (KIP-219: the response first, then the mute).

Measurement is Kafka's: a Rate (connection_quotas.py's) over ``quota.window.num`` (default 11) samples of
``quota.window.size.seconds`` (default 1) each, measured over the elapsed time since the oldest
sample but at least ``quota.window.num - 1`` whole windows; over the limit, the throttle time is
``(rate - limit) / limit * window`` (the time that brings the rate back to the limit).  As in
Kafka the byte-rate throttle is not capped and the request-time throttle is capped at one
window; Produce and Fetch answer the larger of their two throttles.  A ``<default>`` quota is
measured per user / client id; a user quota across all that user's client ids (Kafka's metric
tags).  Measurements unused for an hour are dropped (Kafka's sensor expiry).

Differences from Kafka, both small: a throttled Fetch still carries its records (Kafka answers
it empty and un-records it), and while muted the connection's reader still buffers up to
``max_inflight`` requests (they are not processed until the mute ends).

Concurrency: ``begin``/``end`` run on the broker's event loop; the configuration listener may run
on any thread (it swaps whole objects).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Mapping

from ..protocol import messages as m
from ..protocol.produce import produce_throttle_offset
from ..security.quotas import (
    CONSUMER_BYTE_RATE,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Entity,
    resolve,
)
from .connection_quotas import Rate
from .mutation_quotas import ControllerMutationQuotas

__all__ = ["QuotaManager", "throttle_time_ms"]

DEFAULT_WINDOW_NUM = 11               # quota.window.num
DEFAULT_WINDOW_SIZE_S = 1             # quota.window.size.seconds
_EXPIRY_MS = 3600 * 1000.0            # Kafka's InactiveSensorExpirationTimeSeconds
_MAX_CACHED = 10000                   # callers whose limits are remembered
_I32 = struct.Struct(">i")
# not counted against request_percentage (nor muted for it): version probes and authentication
_EXEMPT = frozenset({m.ApiKey.API_VERSIONS, m.ApiKey.SASL_HANDSHAKE, m.ApiKey.SASL_AUTHENTICATE})
_PRODUCE, _FETCH, _REQUEST = 0, 1, 2
_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)


def throttle_time_ms(observed: float, limit: float, window_ms: float) -> int:
    """Kafka's QuotaUtils.throttleTime: the delay X with observed * W / (W + X) = limit."""
    return round((observed - limit) / limit * window_ms)


def _user(principal: str) -> str:
    return principal[5:] if principal.startswith("User:") else principal.partition(":")[2] or principal


class QuotaManager:
    def __init__(self, store, window_num: int = DEFAULT_WINDOW_NUM,
                 window_size_s: int = DEFAULT_WINDOW_SIZE_S,
                 mutations: ControllerMutationQuotas | None = None) -> None:
        self.store = store
        self.mutations = mutations if mutations is not None else ControllerMutationQuotas(store)
        self._pending: dict[int, int] = {}       # id(connection) -> a mutation throttle (ms)
        self._followers: set[int] = set()         # id(connection) whose current Fetch is a follower's
        self.window_num = int(window_num)
        self.window_ms = int(window_size_s) * 1000.0
        self.active = False
        self._quotas: Mapping[Entity, Mapping[str, float]] = {}
        self._limits: dict[tuple[str, str], tuple] = {}
        self._rates: dict[tuple, list] = {}      # (kind, tags) -> [Rate, last use ms]
        self._swept = 0.0
        store.listen(self.reload)
        self.reload()

    @classmethod
    def from_configs(cls, explicit: Mapping[str, object], store) -> QuotaManager:
        """From Kafka's keys quota.window.num / quota.window.size.seconds (type-checked by
        engine/config.py; at least 1 each, as Kafka's ConfigDef says)."""
        num = int(explicit.get("quota.window.num", DEFAULT_WINDOW_NUM))  # type: ignore[call-overload]
        size = int(explicit.get("quota.window.size.seconds", DEFAULT_WINDOW_SIZE_S))  # type: ignore[call-overload]
        if num < 1 or size < 1:
            from ..errors import InvalidConfigError
            raise InvalidConfigError(f"quota.window.num ({num}) and quota.window.size.seconds ({size}) "
                                     "must be at least 1")
        return cls(store, num, size, ControllerMutationQuotas.from_configs(explicit, store))

    def reload(self) -> None:
        """The configuration changed: take the new set (any thread)."""
        quotas = self.store.snapshot()
        self._quotas = quotas
        self._limits = {}
        # ip entities are the accept loop's (ip_quotas.py): requests pay nothing for them
        self.active = any(e[0][0] != IP for e in quotas)

    def limits(self, principal: str, client_id: str | None) -> tuple:
        """(limit, tags) or None per quota type (produce, fetch, request) for a caller."""
        key = (principal, client_id or "")
        found = self._limits.get(key)
        if found is None:
            user = _user(principal)
            found = tuple(resolve(self._quotas, k, user, client_id or "") for k in _KEYS)
            if len(self._limits) >= _MAX_CACHED:       # many client ids: start again
                self._limits = {}
            self._limits[key] = found
        return found

    # -- the connection's hook --------------------------------------------------------------
    @staticmethod
    def begin() -> float:
        return time.thread_time()

    def mutation_throttled(self, conn, ms: int) -> None:
        """The handler of the connection's current request measured a controller mutation
        throttle time (taken by :meth:`end`)."""
        if ms > 0:
            self._pending[id(conn)] = ms

    def from_follower(self, conn) -> None:
        """The Fetch handler decoded the connection's current request as a follower's (replica
        id >= 0: the body's first field before v15, ReplicaState from v15): taken by :meth:`end`."""
        self._followers.add(id(conn))

    def end(self, conn, header, frame, parts, mark: float) -> int:
        """Record the request; the throttle time (ms) written into the response (0: none)."""
        key = header.api_key
        mutation = self._pending.pop(id(conn), 0) if self._pending else 0
        follower = False
        if self._followers and id(conn) in self._followers:
            self._followers.discard(id(conn))
            follower = True
        if key in _EXEMPT:
            return 0
        cpu = time.thread_time() - mark
        found = self.limits(conn.principal, header.client_id)
        now = time.monotonic() * 1000.0
        bandwidth = request = 0
        if key == m.ApiKey.FETCH:
            # a follower (replica_id >= 0): not a client's quota (Kafka's isFromFollower)
            if follower:
                return 0
            if found[_FETCH] is not None and parts is not None:
                bandwidth = self._record(_FETCH, found[_FETCH], sum(len(p) for p in parts), now, False)
        elif key == m.ApiKey.PRODUCE and found[_PRODUCE] is not None:
            bandwidth = self._record(_PRODUCE, found[_PRODUCE], len(frame), now, False)
        if found[_REQUEST] is not None and not (key == m.ApiKey.PRODUCE and parts is None):
            request = self._record(_REQUEST, found[_REQUEST], cpu * 100.0, now, True)
        throttle = max(bandwidth, request, mutation)
        if throttle > 0 and parts:
            _patch_throttle(key, header.api_version, parts, throttle)
        return throttle

    def _record(self, kind: int, found: tuple, value: float, now: float, bounded: bool) -> int:
        limit, tags = found
        rkey = (kind, tags)
        entry = self._rates.get(rkey)
        if entry is None:            # Kafka's Rate (the one connection_quotas.py measures with)
            entry = self._rates[rkey] = [Rate(0, self.window_num, int(self.window_ms)), now]
        rate = entry[0]
        entry[1] = now
        rate.record(value, now)
        if now - self._swept > 60000.0:
            self._sweep(now)
        observed = rate.measure(now)
        if observed <= limit:
            return 0
        ms = throttle_time_ms(observed, limit, rate.window_size_ms(now))
        return min(ms, int(self.window_ms)) if bounded else ms

    def _sweep(self, now: float) -> None:
        self._swept = now
        for k in [k for k, (_, last) in self._rates.items() if now - last > _EXPIRY_MS]:
            del self._rates[k]


# -- throttle_time_ms in an encoded response ------------------------------------------------
_WHERE: dict[tuple[int, int], int] = {}      # (api key, version) -> 1 first field, 2 Produce's, 0 none
_ABSENT, _FIRST, _LAST = 0, 1, 2


def _where(key: int, version: int) -> int:
    where = _WHERE.get((key, version))
    if where is None:
        if key == m.ApiKey.PRODUCE:
            where = _LAST if version >= 1 else _ABSENT
        elif key == m.ApiKey.FETCH:
            where = _FIRST
        else:
            import dataclasses
            try:
                fields = dataclasses.fields(m._entity(key, version, True))
                where = _FIRST if fields and fields[0].name == "throttle_time" else _ABSENT
            except Exception:
                where = _ABSENT
        _WHERE[(key, version)] = where
    return where


def _patch_throttle(key: int, version: int, parts: list, ms: int) -> None:
    where = _where(key, version)
    if where == _ABSENT:
        return
    i = 0 if where == _FIRST else len(parts) - 1
    part = parts[i]
    if not isinstance(part, bytearray):
        if not isinstance(part, (bytes, memoryview)):
            return
        part = parts[i] = bytearray(part)
    if len(part) < 4:
        return
    value = min(ms, 0x7FFFFFFF)
    if where == _FIRST:
        _I32.pack_into(part, 0, value)
    else:                   # Produce: throttle_time_ms after the responses (v10+: tags follow)
        _I32.pack_into(part, produce_throttle_offset(part, version), value)
