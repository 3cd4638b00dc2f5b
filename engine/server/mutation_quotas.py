"""The controller mutation quota, Kafka's way (KIP-599: ControllerMutationQuotaManager).

``controller_mutation_rate`` (a user / client id quota, engine/security/quotas.py, looked up with
the same precedence as the other client quotas) bounds how many partitions a caller may create
or delete per second: CreateTopics counts the new topic's partitions, CreatePartitions the
partitions added, DeleteTopics the deleted topic's partitions (engine/server/topic_handlers.py).

The measure is Kafka's ``TokenBucket``: a bucket of ``controller.quota.window.num x
controller.quota.window.size.seconds x rate`` tokens (the burst; defaults 11 and 1), full at
first, refilled at ``rate`` tokens a second; each mutation takes its partitions from it, and the
count may go below zero.  Per request (:meth:`ControllerMutationQuotas.quota_for`):

* **strict** (CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): before each topic the
  bucket is checked -- below zero, that topic is refused with THROTTLING_QUOTA_EXCEEDED (89) and
  the throttle time ``-tokens / rate`` seconds; otherwise it is done and its partitions taken
  (so one topic may take the bucket below zero: the next one waits).
* **permissive** (older versions, which have no error 89 for this): every topic is done and
  taken; a bucket below zero afterwards gives the throttle time.

Either way the response's ``throttle_time_ms`` is that throttle time (less the time since it was
measured, as Kafka's AbstractControllerMutationQuota.throttleTime) and the connection reads no
further request for that long after sending it (KIP-219, engine/server/quotas.py's mute).  A
``<default>`` quota is measured per user / client id; buckets unused for an hour are dropped.

Concurrency: everything runs on the broker's event loop; the configuration listener may run on
any thread (it swaps whole objects).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from ..security.quotas import CONTROLLER_MUTATION_RATE, Entity, resolve

__all__ = ["ControllerMutationQuotas", "MutationQuota", "TokenBucket"]

DEFAULT_WINDOW_NUM = 11               # controller.quota.window.num
DEFAULT_WINDOW_SIZE_S = 1             # controller.quota.window.size.seconds
_EXPIRY_MS = 3600 * 1000.0            # Kafka's InactiveSensorExpirationTimeSeconds
# the API versions from which the quota is strict (Kafka's strictSinceVersion)
STRICT_SINCE = {"CreateTopics": 6, "DeleteTopics": 5, "CreatePartitions": 3}


class TokenBucket:
    """Kafka's ``TokenBucket`` stat with a quota ``rate`` (tokens per second) and a ``burst``:
    empty at creation, refilled (up to the burst) by the time since the last use -- so the first
    use finds it full."""

    __slots__ = ("tokens", "last_ms")

    def __init__(self) -> None:
        self.tokens = 0.0
        self.last_ms = 0.0

    def _refill(self, rate: float, burst: float, now_ms: float) -> None:
        self.tokens = min(burst, self.tokens + rate * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms

    def measure(self, rate: float, burst: float, now_ms: float) -> float:
        self._refill(rate, burst, now_ms)
        return self.tokens

    def record(self, value: float, rate: float, burst: float, now_ms: float) -> None:
        self._refill(rate, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)


class MutationQuota:
    """One request's view of its caller's bucket (Kafka's Strict/PermissiveControllerMutationQuota)."""

    __slots__ = ("_owner", "_key", "_rate", "strict", "_throttle_ms", "_at_ms")

    def __init__(self, owner: ControllerMutationQuotas | None, key, rate: float, strict: bool) -> None:
        self._owner = owner
        self._key = key
        self._rate = rate
        self.strict = strict
        self._throttle_ms = 0.0
        self._at_ms = 0.0

    def exceeded(self) -> bool:
        """Strict: is the bucket below zero now?  (Records the throttle time if so.)  Permissive
        and unbounded quotas are never exceeded."""
        if self._owner is None or not self.strict:
            return False
        now = _now_ms()
        tokens = self._owner._bucket(self._key, now).measure(self._rate, self._owner.burst(self._rate), now)
        if tokens >= 0:
            return False
        self._throttle_ms, self._at_ms = round(-tokens / self._rate * 1000.0), now
        return True

    def record(self, partitions: int) -> None:
        """A mutation of ``partitions`` partitions was done: take them from the bucket."""
        if self._owner is None or partitions <= 0:
            return
        now = _now_ms()
        bucket = self._owner._bucket(self._key, now)
        burst = self._owner.burst(self._rate)
        bucket.record(float(partitions), self._rate, burst, now)
        if not self.strict:             # Kafka: record(permits, checkQuotas = true)
            tokens = bucket.measure(self._rate, burst, now)
            if tokens < 0:
                self._throttle_ms, self._at_ms = round(-tokens / self._rate * 1000.0), now

    def throttle_ms(self) -> int:
        """The throttle time to answer: the last one measured, less the time since."""
        if self._throttle_ms <= 0:
            return 0
        return int(max(0.0, self._throttle_ms - (_now_ms() - self._at_ms)))


_UNBOUNDED = MutationQuota(None, None, 0.0, False)


def _now_ms() -> float:
    return time.monotonic() * 1000.0


def _user(principal: str) -> str:
    return principal[5:] if principal.startswith("User:") else principal.partition(":")[2] or principal


class ControllerMutationQuotas:
    """Every caller's bucket over the quota configuration (``store``: a ClientQuotaStore or the
    ZooKeeper-backed one)."""

    def __init__(self, store, window_num: int = DEFAULT_WINDOW_NUM,
                 window_size_s: int = DEFAULT_WINDOW_SIZE_S) -> None:
        self.window_num = int(window_num)
        self.window_size_s = int(window_size_s)
        self.store = store
        self.active = False
        self._quotas: Mapping[Entity, Mapping[str, float]] = {}
        self._buckets: dict[tuple[str, str], list] = {}     # tags -> [TokenBucket, last use ms]
        self._swept = 0.0
        store.listen(self.reload)
        self.reload()

    @classmethod
    def from_configs(cls, explicit: Mapping[str, object], store) -> ControllerMutationQuotas:
        """From Kafka's keys controller.quota.window.num / controller.quota.window.size.seconds."""
        num = int(explicit.get("controller.quota.window.num", DEFAULT_WINDOW_NUM))  # type: ignore[call-overload]
        size = int(explicit.get("controller.quota.window.size.seconds",  # type: ignore[call-overload]
                                DEFAULT_WINDOW_SIZE_S))
        if num < 1 or size < 1:
            from ..errors import InvalidConfigError
            raise InvalidConfigError(f"controller.quota.window.num ({num}) and controller.quota.window.size.seconds "
                                     f"({size}) must be at least 1")
        return cls(store, num, size)

    def reload(self) -> None:
        quotas = self.store.snapshot()
        self._quotas = quotas
        self.active = any(CONTROLLER_MUTATION_RATE in q for q in quotas.values())

    def burst(self, rate: float) -> float:
        return self.window_num * self.window_size_s * rate

    def quota_for(self, principal: str, client_id: str | None, version: int, api: str) -> MutationQuota:
        """The caller's quota for one request of ``api`` (a key of STRICT_SINCE) at ``version``."""
        if not self.active:
            return _UNBOUNDED
        found = resolve(self._quotas, CONTROLLER_MUTATION_RATE, _user(principal), client_id or "")
        if found is None:
            return _UNBOUNDED
        rate, tags = found
        return MutationQuota(self, tags, rate, version >= STRICT_SINCE[api])

    def _bucket(self, tags, now: float) -> TokenBucket:
        entry = self._buckets.get(tags)
        if entry is None:
            entry = self._buckets[tags] = [TokenBucket(), now]
        entry[1] = now
        if now - self._swept > 60000.0:
            self._swept = now
            for k in [k for k, (_, last) in self._buckets.items() if now - last > _EXPIRY_MS]:
                del self._buckets[k]
        return entry[0]
