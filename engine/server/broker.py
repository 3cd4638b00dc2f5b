"""Broker: serves one node over the Kafka wire protocol on one or more listeners.

::

    node = engine.open("./data").node       # or Node("./data") (engine/node.py)
    broker = Broker(node, "127.0.0.1", 9092)
    await broker.start()          # broker.port is the bound port (port 0 = any free one)
    ...
    await broker.stop()

Several listeners (engine/server/listener.py: ``listeners_from_configs`` reads Kafka's
``listeners`` / ``listener.security.protocol.map`` / ``advertised.listeners``)::

    broker = Broker(node, listeners=[Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),
                                     Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 9093,
                                              sasl=factory)])

Each listener has its own socket and accept loop; a Connection knows its listener, and
Metadata/FindCoordinator answer that listener's advertised address.  ``broker.host`` /
``broker.port`` are the first listener's.  SASL listeners authenticate every connection first
(engine/server/sasl_handlers.py); SCRAM credentials are in ``broker.scram_credentials``
(``scram-credentials.json`` in the data directory).  Client quotas (``client-quotas.json``)
are enforced by ``broker.quotas`` (engine/server/quotas.py).

Connection limits (engine/server/connection_quotas.py, Kafka's ``max.connections``,
``max.connections.per.ip`` (+ ``.overrides``), ``max.connection.creation.rate`` and their
``listener.name.<l>.`` forms) are applied in the accept loops: a listener at its limit or over
its creation rate stops accepting (clients wait in the backlog), a connection over its address's
``connection_creation_rate`` quota (``broker.ip_quotas``, engine/server/ip_quotas.py, KIP-612)
is held unread for its throttle time and then closed, a connection over its address's limit is
closed at once; ``broker.connection_quotas`` holds the counts.

The broker is built on a :class:`~engine.node.Node` (``broker.node``), as Kafka's socket server
and request handlers are on what ``BrokerServer`` builds: the handlers reach the topics, the
logs and the coordinators through it.  Partitions are served through the node's
:class:`~engine.replica.ReplicaManager` (``broker.replicas``) and the cluster view it was given
(``broker.view``; by default the single-node view: this node, ``node.id`` of its config, leads
every partition).  Connections are handled by :class:`~engine.server.connection.Connection`.
Long-polling fetches park in the broker's DelayedFetch (engine/replica/purgatory.py): a produce
through this broker wakes them at once; appends by other writers of the same node (the embedded
producer) wake them through the node's append listeners; a poll every ``poll_interval`` seconds
remains as a backstop.

Concurrency: all state lives on the event loop that called ``start()``;
``start``/``stop`` must be awaited on that loop.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from ..protocol.frames import DEFAULT_MAX_REQUEST_BYTES
from ..replica.purgatory import DelayedFetch
from ..security.quotas import ClientQuotaStore
from .access import Access
from .buffers import BufferPool
from .connection import Connection
from .connection_quotas import ConnectionQuotas
from .handlers import Handlers
from .ip_quotas import IpConnectionQuotas
from .listener import Listener
from .quotas import QuotaManager
from .sasl_handlers import DEFAULT_FAILED_AUTH_DELAY_MS, DEFAULT_MAX_RECEIVE_SIZE
from .txn_handlers import coordinator_verifier
from .watchdog import RequestWatchdog

__all__ = ["Broker"]

log = logging.getLogger("engine.server")


class Broker:
    def __init__(self, node, host: str = "127.0.0.1", port: int = 9092, *,
                 advertised_host: str | None = None, advertised_port: int | None = None,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES, max_inflight: int = 16,
                 max_queued_bytes: int = 64 * 1024 * 1024,
                 idle_timeout: float = 600.0, poll_interval: float = 0.1,
                 use_sendfile: bool = True, view=None, replica_manager=None, cluster=None,
                 listeners: list[Listener] | None = None, scram_credentials=None, access=None,
                 client_quotas=None):
        self.node = node
        # the replica layer: who leads what (view), appends/reads/replication (replicas); the
        # node's own, which its coordinators and in-process producers write through too
        if replica_manager is None:
            if view is not None:
                node.use_view(view)
            replica_manager = node.replicas
        self.replicas = replica_manager
        # KIP-890: the replica layer verifies transactional produces at the transaction coordinator
        self.replicas.use_transaction_verifier(coordinator_verifier(node))
        # cluster mode: the membership (engine/cluster/member.py ClusterMember) through which
        # topic administration goes to ZooKeeper; None for a node alone
        self.cluster = cluster
        self.view = self.replicas.view
        self.node_id = self.view.node_id
        if not listeners:
            listeners = [Listener("PLAINTEXT", "PLAINTEXT", host, port, advertised_host,
                                  advertised_port)]
        self.listeners = list(listeners)
        first = self.listeners[0]
        self.host = first.host
        self.port = first.port
        self.advertised_host = first.advertised_host
        self.advertised_port = first.advertised_port
        # SASL (Kafka's keys, read from the node's configuration)
        explicit = getattr(node.config, "explicit", {})
        self.failed_auth_delay_ms = int(explicit.get("connection.failed.authentication.delay.ms",
                                                     DEFAULT_FAILED_AUTH_DELAY_MS))
        self.sasl_max_receive_size = int(explicit.get("sasl.server.max.receive.size",
                                                      DEFAULT_MAX_RECEIVE_SIZE))
        self._scram_credentials = scram_credentials
        # authorization (engine/server/access.py): authorizer.class.name, super.users, ...;
        # the ACLs in the data directory unless the caller gives one (cluster mode: ZooKeeper)
        self.access = access if access is not None else Access.from_configs(explicit, node.path)
        # client quotas (engine/server/quotas.py), enforced per request while any is configured;
        # kept in client-quotas.json unless the caller gives a store (cluster mode: ZooKeeper)
        if client_quotas is None:
            client_quotas = ClientQuotaStore(node.path)
        self.quotas = QuotaManager.from_configs(explicit, client_quotas)
        # connection limits (engine/server/connection_quotas.py); InvalidConfigError at startup
        self.connection_quotas = ConnectionQuotas.from_configs(explicit, [li.name for li in self.listeners])
        self.ip_quotas = IpConnectionQuotas.from_configs(explicit, client_quotas)   # KIP-612
        self._throttled_socks: set[socket.socket] = set()     # refused by ip_quotas, closed later
        self.max_request_bytes = max_request_bytes
        self.max_inflight = max_inflight
        self.max_queued_bytes = max_queued_bytes
        self.idle_timeout = idle_timeout
        self.use_sendfile = use_sendfile
        self.handlers = Handlers(self)
        self.buffers = BufferPool()      # receive buffers of large requests, reused
        self.delayed_fetch = DelayedFetch(poll_interval)    # long-polling fetches (replica/purgatory.py)
        self._accept_task: asyncio.Task | None = None      # the accept loops, gathered
        self._conn_tasks: set[asyncio.Task] = set()
        self._conn_by_task: dict[asyncio.Task, Connection] = {}   # accepted connections' tasks
        self._connections: set[Connection] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._own_coordinator = None
        self._own_txn_coordinator = None
        self.watchdog: RequestWatchdog | None = None    # requests past their bound are logged
        # request and engine metrics (engine/server/metrics.py): made by enable_metrics(),
        # for the Prometheus endpoint and the console; None keeps the request path bare
        self.metrics = None

    @property
    def scram_credentials(self):
        """The SCRAM credential store (engine/security/credentials.py) in the data directory."""
        if self._scram_credentials is None:
            from ..security.credentials import ScramCredentialStore
            self._scram_credentials = ScramCredentialStore(self.node.path)
        return self._scram_credentials

    def enable_metrics(self):
        """Count requests and expose the node's state as Prometheus metrics (idempotent)."""
        if self.metrics is None:
            from .metrics import BrokerMetrics
            self.metrics = BrokerMetrics(self)
            self.metrics.collector.start()
        return self.metrics

    # -- lifecycle -----------------------------------------------------------
    def _appended_elsewhere(self) -> None:
        """The node's append listener: may run on any thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.notify_appended)

    async def start(self, enable_requests: bool = True) -> None:
        """Bind every listener (``broker.port`` is then known) and start the broker's parts.
        `enable_requests` False: the listeners' sockets listen (connections wait in the backlog)
        but nothing is accepted or answered until :meth:`enable_request_processing` -- cluster
        mode registers first (Kafka's ``SocketServer.enableRequestProcessing`` after the broker's
        registration): a broker that has not joined yet knows no broker and no partition, and
        its Metadata answer (no brokers at all) would make a client drop every broker it knew."""
        self._loop = asyncio.get_running_loop()
        self.node.add_append_listener(self._appended_elsewhere)
        self.replicas.start(self._loop, self.notify_appended)
        try:
            for listener in self.listeners:
                listener.sock = _bind(listener.host, listener.port)
                listener.port = listener.sock.getsockname()[1]
        except BaseException:
            self._close_listeners()
            raise
        self.port = self.listeners[0].port
        if enable_requests:
            self.enable_request_processing()
        self.watchdog = RequestWatchdog(self._loop, lambda: self._connections)
        self.watchdog.start()
        for listener in self.listeners:
            if listener.sasl is not None:
                listener.sasl.start()     # OAUTHBEARER's JWKS refresh (engine/security/jwks_refresh.py)
        if not self.node.read_only:
            # the group coordinator runs on this loop (no thread hop per group request) unless
            # the node already has one; it starts loading __consumer_offsets now
            self._own_coordinator = await self.node.host_coordinator("group")
            self._own_txn_coordinator = await self.node.host_coordinator("transaction")
            self.node.advertise_listener(self.listeners[0].address())
        for listener in self.listeners:
            log.info("broker listening on %s:%d (%s, %s)%s", listener.host, listener.port,
                     listener.name, listener.security_protocol,
                     "" if enable_requests else ": requests answered once it has joined the cluster")

    def enable_request_processing(self) -> None:
        """Accept and answer connections from now on (after ``start(enable_requests=False)``;
        on the broker's loop)."""
        if self._accept_task is None and self._loop is not None:
            self._accept_task = self._loop.create_task(self._accept_all())

    async def stop(self) -> None:
        self.node.remove_append_listener(self._appended_elsewhere)
        if self.watchdog is not None:
            self.watchdog.stop()
        for listener in self.listeners:
            if listener.sasl is not None:
                listener.sasl.stop()
        await self.replicas.stop()
        if self._own_txn_coordinator is not None:
            await self.node.release_coordinator("transaction", self._own_txn_coordinator)
            self._own_txn_coordinator = None
        if self._own_coordinator is not None:
            await self.node.release_coordinator("group", self._own_coordinator)
            self._own_coordinator = None
        if not self.node.read_only and not self.node.closed:
            self.node.advertise_listener(None)
        if self._accept_task is not None:
            self._accept_task.cancel()
            try:
                await self._accept_task
            except BaseException:
                pass
            self._accept_task = None
        self._close_listeners()
        for sock in list(self._throttled_socks):
            sock.close()
        self._throttled_socks.clear()
        for task in list(self._conn_tasks):
            task.cancel()
        if self._conn_tasks:
            await asyncio.gather(*self._conn_tasks, return_exceptions=True)
        for conn in list(self._connections):
            conn.close()

    async def __aenter__(self) -> Broker:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    async def serve_forever(self) -> None:
        if self._loop is None:
            await self.start()
        self.enable_request_processing()
        assert self._accept_task is not None
        await self._accept_task

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def _close_listeners(self) -> None:
        for listener in self.listeners:
            if listener.sock is not None:
                listener.sock.close()
                listener.sock = None

    async def _accept_all(self) -> None:
        loops = [self._loop.create_task(self._accept_loop(listener)) for listener in self.listeners]
        try:
            await asyncio.gather(*loops)
        finally:
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)

    async def _accept_loop(self, listener: Listener) -> None:
        loop = self._loop
        quotas = self.connection_quotas
        while True:
            try:
                conn_sock, peer = await loop.sock_accept(listener.sock)
            except asyncio.CancelledError:
                raise
            except OSError as e:       # EMFILE, ECONNABORTED: keep serving
                log.warning("accept failed: %s", e)
                await asyncio.sleep(0.1)
                continue
            try:
                # Kafka's Acceptor: wait out the creation-rate throttle and for a free slot
                # (this listener accepts nothing meanwhile), then the per-IP limit
                await quotas.wait_for_slot(listener.name)
            except BaseException:
                conn_sock.close()
                raise
            throttle_ms = self.ip_quotas.throttle_ms(peer[0]) if self.ip_quotas.active else 0.0
            if throttle_ms > 0:
                # Kafka's ConnectionThrottledException: un-recorded, kept unread, closed later
                quotas.unrecord(listener.name)
                self._throttled_socks.add(conn_sock)
                loop.call_later(throttle_ms / 1000.0, self._close_throttled, conn_sock)
                continue
            if not quotas.inc(listener.name, peer[0]):
                conn_sock.close()
                continue
            conn_sock.setblocking(False)
            conn_sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(self, conn_sock, peer, listener)
            task = loop.create_task(self._run_connection(conn))
            self._conn_tasks.add(task)
            task.add_done_callback(self._conn_tasks.discard)
            task.add_done_callback(self._conn_by_task.pop)
            task.add_done_callback(lambda _t, name=listener.name, ip=peer[0]: quotas.dec(name, ip))
            self._conn_by_task[task] = conn
            excess = quotas.excess(listener.name)
            if excess:
                self._close_least_active(listener.name, excess)

    def _close_throttled(self, sock: socket.socket) -> None:
        if sock in self._throttled_socks:
            self._throttled_socks.discard(sock)
            sock.close()

    def _close_least_active(self, protected: str, n: int) -> None:
        """Close the ``n`` least recently active connections of listeners other than
        ``protected`` (Kafka: an inter-broker connection past max.connections closes one of
        another listener, Selector.lowestPriorityChannel)."""
        victims = sorted((conn.last_active, id(task), task) for task, conn in self._conn_by_task.items()
                         if conn.listener is not None and conn.listener.name != protected
                         and not task.done() and not task.cancelling())
        for _, _, task in victims[:n]:
            conn = self._conn_by_task[task]
            log.info("closing connection %s on %s: max.connections reached and an inter-broker "
                     "connection came in on %s", conn.peer, conn.listener.name, protected)
            self.connection_quotas.stats(conn.listener.name).closed_for_inter_broker += 1
            task.cancel()

    async def _run_connection(self, conn: Connection) -> None:
        self._connections.add(conn)
        try:
            await conn.run()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection %s crashed", conn.peer)
        finally:
            self._connections.discard(conn)
            conn.close()

    # -- append notifications (long-poll fetch) ------------------------------------
    def notify_appended(self) -> None:
        """Something was appended or a watermark moved: wake the parked fetches."""
        self.delayed_fetch.notify()


def _bind(host: str, port: int) -> socket.socket:
    """A listening non-blocking socket on host:port (host empty: every interface)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        # name the address (a bare "[Errno 98] Address already in use" names nothing)
        raise OSError(e.errno, e.strerror, f"{host}:{port}") from e
    except BaseException:
        sock.close()
        raise
    return sock
