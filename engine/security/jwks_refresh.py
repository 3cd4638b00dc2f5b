"""A JWKS kept fresh for OAUTHBEARER's secured validator, as Kafka's ``RefreshingHttpsJwks``
(KIP-768) keeps it.

:class:`RefreshingJwks` reads the set once when it is made (at broker start, blocking, as
Kafka's ``init`` does), then, between :meth:`~RefreshingJwks.start` and
:meth:`~RefreshingJwks.stop` (the broker's own start and stop):

- periodically: every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` (default 3600000, must be
  positive) the set is fetched again;
- on demand: :meth:`~RefreshingJwks.refresh_for_kid` -- a token names a ``kid`` not in the set
  -- fetches it at once, unless that ``kid`` was looked for in the last 60 s (Kafka's
  ``MISSING_KEY_ID_CACHE_IN_FLIGHT_MS``; the 16 most recent missing ``kid`` s are remembered) or
  is longer than 1000 characters.  A refresh already under way is joined, never doubled.
- each fetch is retried as Kafka's ``Retry`` does: after a failed attempt it waits
  ``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms`` (default 100), doubling each time, and no
  attempt starts later than ``sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms`` (default
  10000) after the first.  When every attempt fails a warning is logged and the keys in use stay.

The same holds for ``file://`` and ``http(s)://`` URLs (Kafka reads a file once; here it is
re-read on the same schedule).  Fetches run on a daemon thread, never on the event loop; the new
keys are swapped in on the loop, so readers of :attr:`RefreshingJwks.keys` need no lock.

Concurrency: ``start``/``stop``/``refresh``/``refresh_for_kid`` run on one event loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from engine.errors import InvalidConfigError

__all__ = ["DEFAULT_REFRESH_MS", "DEFAULT_RETRY_BACKOFF_MAX_MS", "DEFAULT_RETRY_BACKOFF_MS", "RefreshingJwks"]

log = logging.getLogger("engine.security")

DEFAULT_REFRESH_MS = 3600000           # sasl.oauthbearer.jwks.endpoint.refresh.ms
DEFAULT_RETRY_BACKOFF_MS = 100         # sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
DEFAULT_RETRY_BACKOFF_MAX_MS = 10000   # sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
MISSING_KID_WAIT_MS = 60000            # Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
MISSING_KID_ENTRIES = 16               # Kafka's MISSING_KEY_ID_CACHE_MAX_ENTRIES
MAX_KID_LENGTH = 1000                  # Kafka's MISSING_KEY_ID_MAX_KEY_LENGTH

Keys = list[tuple[str | None, Any]]    # (kid, public key)


class RefreshingJwks:
    """The keys of the JWKS at ``url`` read by ``loader`` (raising on failure), kept fresh (see
    the module doc)."""

    def __init__(self, url: str, loader: Callable[[str], Keys], *, refresh_ms: int = DEFAULT_REFRESH_MS,
                 retry_backoff_ms: int = DEFAULT_RETRY_BACKOFF_MS,
                 retry_backoff_max_ms: int = DEFAULT_RETRY_BACKOFF_MAX_MS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if refresh_ms <= 0:
            raise InvalidConfigError(f"sasl.oauthbearer.jwks.endpoint.refresh.ms must be positive: {refresh_ms}")
        if retry_backoff_ms < 0:
            raise InvalidConfigError("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms must not be negative: "
                                     f"{retry_backoff_ms}")
        if retry_backoff_max_ms < retry_backoff_ms:
            raise InvalidConfigError(f"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms ({retry_backoff_max_ms}) "
                                     f"is less than sasl.oauthbearer.jwks.endpoint.retry.backoff.ms "
                                     f"({retry_backoff_ms})")
        self.url = url
        self.refresh_ms = refresh_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self._loader = loader
        self._clock = clock
        self.keys: Keys = loader(url)         # at start: a failure is the broker's config error
        self._missing: OrderedDict[str, float] = OrderedDict()   # kid -> when it may be looked for again
        self._inflight: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = threading.Event()

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Refresh every ``refresh_ms`` from now on (on the running loop; idempotent)."""
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.get_running_loop().create_task(self._periodic())
            log.info("JWKS %s: refreshed every %d ms", self.url, self.refresh_ms)

    def stop(self) -> None:
        """No more refreshes; a fetch under way ends on its thread and is dropped."""
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            self._task = None
        fut, self._inflight = self._inflight, None
        if fut is not None and not fut.done():
            fut.set_result(None)              # its waiters go on with the keys in use

    async def _periodic(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_ms / 1000.0)
            await self.refresh()

    # -- refreshing -----------------------------------------------------------------------------
    async def refresh(self) -> None:
        """Fetch the set again (off the loop), or wait for the fetch under way; the keys stay
        as they were when it fails."""
        fut = self._inflight
        if fut is None:
            loop = asyncio.get_running_loop()
            fut = self._inflight = loop.create_future()
            threading.Thread(target=self._fetch_thread, args=(loop, fut), name="jwks-refresh",
                             daemon=True).start()
        await asyncio.shield(fut)

    async def refresh_for_kid(self, kid: str) -> bool:
        """A token names ``kid``, which is not in the set: refresh now unless Kafka's limits say
        not (see the module doc); True when a refresh was made (or joined)."""
        if len(kid) > MAX_KID_LENGTH:
            log.warning("JWKS %s: key ID %s... (%d characters) is too long to look for", self.url,
                        kid[:MAX_KID_LENGTH], len(kid))
            return False
        now = self._clock()
        again = self._missing.get(kid)
        if again is not None and again > now:
            return False
        self._missing[kid] = now + MISSING_KID_WAIT_MS / 1000.0
        self._missing.move_to_end(kid)
        while len(self._missing) > MISSING_KID_ENTRIES:
            self._missing.popitem(last=False)
        log.info("JWKS %s: no key %r: refreshing now", self.url, kid)
        await self.refresh()
        return True

    def _fetch_thread(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None]) -> None:
        keys: Keys | None = None
        error: BaseException | None = None
        try:
            keys = self._fetch()
        except Exception as e:        # any failure keeps the old keys (Kafka logs and goes on)
            error = e
        try:
            loop.call_soon_threadsafe(self._finish, fut, keys, error)
        except RuntimeError:          # the loop has closed: the broker is gone
            pass

    def _fetch(self) -> Keys:
        """Kafka's Retry: backoff doubling from retry_backoff_ms, within retry_backoff_max_ms."""
        end = self._clock() + self.retry_backoff_max_ms / 1000.0
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._loader(self.url)
            except Exception as e:
                wait = min(self.retry_backoff_ms * 2 ** (attempt - 1) / 1000.0, end - self._clock())
                if wait <= 0 or self._stopping.is_set():
                    raise
                log.warning("JWKS %s: attempt %d failed (%s); retrying in %d ms", self.url, attempt, e,
                            int(wait * 1000))
                if self._stopping.wait(wait):
                    raise

    def _finish(self, fut: asyncio.Future[None], keys: Keys | None, error: BaseException | None) -> None:
        """On the loop: swap the keys in (or keep them) and wake the waiters."""
        if self._inflight is fut:
            self._inflight = None
        if not self._stopping.is_set():
            if keys is not None:
                self.keys = keys
                for kid, _key in keys:
                    if kid is not None:
                        self._missing.pop(kid, None)
                log.info("JWKS %s refreshed: %d key(s)", self.url, len(keys))
            else:
                log.warning("JWKS %s: refresh failed, keeping the %d key(s) in use: %s", self.url,
                            len(self.keys), error)
        if not fut.done():
            fut.set_result(None)
