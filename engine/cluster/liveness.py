"""Seeing a peer broker's process die without waiting out its ZooKeeper session.

A SIGKILLed (or crashed) process's sockets are closed by the kernel at once; its ZooKeeper
session, and so its ephemeral ``/brokers/ids/<id>``, lives on until ``zookeeper.session.timeout.ms``
passes.  Every broker keeps one idle TCP connection to each registered peer (the address in the
peer's registration) and watches it.  When one is closed (or a new one is refused), the peer is
*suspected*; it is declared dead only when a fresh TCP connect to its registered address (its
inter-broker listener's endpoint in the registration, the one brokers reach each other on) is
**refused** twice in a row (``PROBE_GAP_S`` apart).  Refused means the kernel answered for a port
nobody listens on: the process is gone.  A paused (SIGSTOP) or partitioned broker does not close
anything and its port does not refuse (the kernel still accepts, or nothing answers at all): it is
never declared dead here, its session timeout stays the bound.

A dead peer's registration is then deleted from ZooKeeper (conditional on it still being the one
probed: the same session, the same creation zxid), and so is ``/controller`` if that session held
it.  That is exactly what its session expiry would do later, so the controller takes its one path
for a broker whose registration disappeared (engine/cluster/controller.py: new leaders from the
live ISR, epochs bumped), and candidates take theirs for a vanished ``/controller``.  When the
session does expire, its ephemeral nodes are already gone: nothing more happens.  A restarted
broker registers again as usual (and sooner: the old node is not in its way).

Should a live broker find its own registration deleted (it cannot happen through a refused probe
unless its listener is closed), it registers again at once (``reregister``): the controller then
sees it return like any restarted broker, and its partition states (leader epochs) fence whatever
it led meanwhile.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable

from kazoo.exceptions import KazooException, NoNodeError

from .registration import BrokerRegistration
from .zk import BROKER_IDS, CONTROLLER, ZkStore

__all__ = ["PeerLiveness", "probe"]

log = logging.getLogger("engine.cluster.liveness")

PROBE_TIMEOUT_S = 0.5      # a connect not answered by then: unreachable (not dead)
PROBE_GAP_S = 0.05         # between the two refused connects that confirm a death
RETRY_S = 1.0              # before connecting again to a peer that did not answer / was not confirmed dead


def probe(host: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """A fresh TCP connect to host:port: ``"accepted"``, ``"refused"`` (nothing listens: the
    process is gone) or ``"unreachable"`` (no answer in time, or another network error)."""
    try:
        s = socket.create_connection((host, port), timeout=timeout_s)
    except ConnectionRefusedError:
        return "refused"
    except OSError:
        return "unreachable"
    s.close()
    return "accepted"


class PeerLiveness:
    """The watcher of one broker (`broker_id`): `peers()` gives the registered brokers
    ``{id: (host, port, rack)}`` at their `listener` (inter-broker) address (the member's view);
    `reregister()` is called when this broker's own registration disappears while its session
    lives on."""

    def __init__(self, store: ZkStore, broker_id: int,
                 peers: Callable[[], dict[int, tuple[str | None, int | None, str | None]]],
                 reregister: Callable[[], None] | None = None, listener: str = "PLAINTEXT"):
        self.store = store
        self.listener = listener
        self.broker_id = broker_id
        self._peers = peers
        self._reregister = reregister
        self._stopping = threading.Event()
        self._own_gone = threading.Event()
        self._thread: threading.Thread | None = None
        self.declared_dead: list[tuple[int, float]] = []      # (broker id, time.time()) for logs/tests
        # peers being probed or declared dead and not yet gone from the registrations: the view
        # leaves them out of its live brokers, so Metadata answers LEADER_NOT_AVAILABLE for what
        # they led (as for any broker not alive) and clients re-ask fast instead of retrying a
        # refused leader (replaced whole: read from other threads without a lock)
        self.suspected: frozenset[int] = frozenset()
        self._socks: dict[int, socket.socket] = {}            # the watched connections (replaced whole)
        self._gone_cache: tuple[float, frozenset[int]] = (0.0, frozenset())

    def start(self) -> PeerLiveness:
        self.store.client.exists(f"{BROKER_IDS}/{self.broker_id}", watch=self._on_own)
        self._thread = threading.Thread(target=self._run, name=f"liveness-{self.broker_id}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def gone(self) -> frozenset[int]:
        """The peers not to be named alive: those suspected, and those whose watched connection
        has its end (or a reset) waiting in the kernel right now, not yet read by the watcher
        thread -- so a Metadata request that a client sends on seeing its own connection to a
        killed leader close is never answered with that leader (the FIN reached this broker
        first).  At most one look at the sockets per millisecond."""
        now = time.monotonic()
        at, cached = self._gone_cache
        if now - at < 0.001:
            return cached
        gone = set(self.suspected)
        for b, s in self._socks.items():
            try:
                if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    gone.add(b)
            except (BlockingIOError, InterruptedError):
                pass                                          # open, nothing to read: alive as far as seen
            except OSError as e:
                if e.errno != errno.EBADF:                    # (closed by the watcher meanwhile)
                    gone.add(b)                               # reset
        result = frozenset(gone)
        self._gone_cache = (now, result)
        return result

    def _on_own(self, event=None) -> None:
        if not self._stopping.is_set():
            self._own_gone.set()

    # -- the watcher thread ------------------------------------------------------------------
    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        conns: dict[int, tuple[socket.socket, tuple[str, int]]] = {}
        retry_at: dict[int, float] = {}

        def drop(b: int) -> None:
            s, _ = conns.pop(b)
            self._socks = {k: v for k, v in self._socks.items() if k != b}
            sel.unregister(s)
            s.close()

        rearm_at = 0.0
        try:
            while not self._stopping.is_set():
                if time.monotonic() >= rearm_at:       # (ZooKeeper drops watches with a session)
                    rearm_at = time.monotonic() + 5.0
                    if self.store.client.connected:
                        self.store.client.exists_async(f"{BROKER_IDS}/{self.broker_id}", watch=self._on_own)
                if self._own_gone.is_set():
                    self._own_gone.clear()
                    self._check_own()
                try:
                    peers = {b: (h, p) for b, (h, p, _r) in self._peers().items()
                             if b != self.broker_id and h and p and p > 0}
                except Exception:
                    peers = {}
                for b in [b for b, (_s, addr) in conns.items() if peers.get(b) != addr]:
                    drop(b)
                if self.suspected - set(peers):
                    self.suspected = self.suspected & frozenset(peers)
                now = time.monotonic()
                for b, addr in peers.items():
                    if b in conns or now < retry_at.get(b, 0.0):
                        continue
                    try:
                        s = socket.create_connection(addr, timeout=PROBE_TIMEOUT_S)
                    except ConnectionRefusedError:
                        retry_at[b] = time.monotonic() + RETRY_S
                        self._suspect(b, "connection refused")
                        continue
                    except OSError:
                        retry_at[b] = time.monotonic() + RETRY_S
                        continue
                    s.setblocking(False)
                    self.suspected = self.suspected - {b}
                    conns[b] = (s, addr)
                    self._socks = {**self._socks, b: s}
                    sel.register(s, selectors.EVENT_READ, b)
                if not conns:
                    self._stopping.wait(0.2)
                    continue
                for key, _ev in sel.select(timeout=0.2):
                    b = key.data
                    try:
                        data = key.fileobj.recv(4096)          # type: ignore[union-attr]
                    except BlockingIOError:
                        continue
                    except OSError:
                        data = b""
                    if data:
                        continue                              # (nothing is expected; ignored)
                    drop(b)
                    retry_at[b] = time.monotonic() + RETRY_S
                    self._suspect(b, "connection closed")
        finally:
            for b in list(conns):
                drop(b)
            sel.close()

    def _suspect(self, b: int, why: str) -> bool:
        """Confirm with two fresh connects that broker `b`'s process is gone; then remove its
        registration (and /controller if it held it).  True when it was declared dead."""
        if self._stopping.is_set():
            return False
        self.suspected = self.suspected | {b}
        if self._confirm_dead(b, why):
            return True
        self.suspected = self.suspected - {b}
        return False

    def _confirm_dead(self, b: int, why: str) -> bool:
        seen = time.time()
        log.info("broker %d: peer %d %s: probing it", self.broker_id, b, why)
        path = f"{BROKER_IDS}/{b}"
        try:
            data, stat = self.store.bounded("get", path, timeout_s=PROBE_TIMEOUT_S * 4)
            ep = BrokerRegistration.from_json(data).endpoint(self.listener)
            if ep is None:
                log.info("broker %d: peer %d %s, but it advertises no %s listener to probe: not declared "
                         "dead (its ZooKeeper session is the bound)", self.broker_id, b, why, self.listener)
                return False
            host, port = ep
            for i in range(2):
                if i:
                    time.sleep(PROBE_GAP_S)
                answer = probe(host, port)
                if answer != "refused":
                    log.info("broker %d: peer %d %s, but a connect to %s:%d was %s: not declared dead "
                             "(its ZooKeeper session is the bound)", self.broker_id, b, why, host, port, answer)
                    return False
            _data, now = self.store.bounded("get", path, timeout_s=PROBE_TIMEOUT_S * 4)
            if (now.ephemeralOwner, now.czxid) != (stat.ephemeralOwner, stat.czxid):
                return False                                  # registered again meanwhile
            self.store.bounded("delete", path, version=now.version, timeout_s=PROBE_TIMEOUT_S * 4)
            self.declared_dead.append((b, time.time()))
            log.warning("broker %d: peer %d %s and %s:%d refused two connects (%.0f ms): its process is "
                        "gone; its registration (session 0x%x) removed, without waiting for the session to "
                        "expire", self.broker_id, b, why, host, port, (time.time() - seen) * 1000,
                        stat.ephemeralOwner)
            try:
                _c, cstat = self.store.bounded("get", CONTROLLER, timeout_s=PROBE_TIMEOUT_S * 4)
                if cstat.ephemeralOwner == stat.ephemeralOwner:
                    self.store.bounded("delete", CONTROLLER, version=cstat.version,
                                       timeout_s=PROBE_TIMEOUT_S * 4)
                    log.warning("broker %d: /controller of dead broker %d removed", self.broker_id, b)
            except NoNodeError:
                pass
            return True
        except NoNodeError:
            return False                                      # gone already (another broker, or its session)
        except Exception as e:         # ZooKeeper unreachable, a garbled registration: wait for the session
            log.info("broker %d: peer %d %s; not confirmed (%s: %s)", self.broker_id, b, why, type(e).__name__, e)
            return False

    def _check_own(self) -> None:
        path = f"{BROKER_IDS}/{self.broker_id}"
        if not self.store.client.connected:
            return                                            # (re-armed once connected)
        try:
            present = self.store.bounded("exists", path, watch=self._on_own, timeout_s=PROBE_TIMEOUT_S * 4)
        except KazooException:
            return
        if present is None and not self._stopping.is_set() and self._reregister is not None:
            log.warning("broker %d: its registration was removed while its session lives on: "
                        "registering again", self.broker_id)
            try:
                self._reregister()
            except Exception as e:                            # the member says why (logged there)
                log.warning("broker %d: registering again failed (%s)", self.broker_id, e)
