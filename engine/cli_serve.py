"""Command-line glue of ``serve`` (the broker, with its metrics and console
endpoints) and ``console`` (a web console for a running broker): their
argparse sub-parsers and commands.  Kept apart from engine/__main__.py, which
registers them (``add_serve_parser`` / ``add_console_parser``) and passes its
``KEY=VALUE`` parser in.
"""

from __future__ import annotations

import argparse
import errno
import functools
import logging
import os
import sys
import time

from .config import shown_value

__all__ = ["add_console_parser", "add_serve_parser", "cmd_console", "cmd_serve"]


def add_serve_parser(sub, parse_kv) -> None:
    """Register ``serve``; `parse_kv` turns the ``--config KEY=VALUE`` list into a dict."""
    s = sub.add_parser("serve", help="run the Kafka wire-protocol broker")
    s.add_argument("properties", nargs="?", metavar="server.properties",
                   help="a Kafka-style properties file (log.dirs, listeners, num.partitions, ...)")
    s.add_argument("--data-dir", default=None,
                   help="data directory (default: log.dirs of the properties file, else ./data)")
    s.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="broker config (Kafka keys), repeatable; overrides the properties file")
    s.add_argument("--listen", default=None,
                   help="HOST:PORT of the first listener (port 0: any), or a whole NAME://HOST:PORT,... "
                        "listeners list (default: listeners, else 127.0.0.1:9092)")
    s.add_argument("--advertised", default=None, metavar="HOST:PORT",
                   help="address the first listener gives clients in Metadata, or a whole "
                        "advertised.listeners list (default: the connection's local address)")
    s.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                   help="broker log level (default info)")
    s.add_argument("--metrics-listen", default=None, metavar="HOST:PORT",
                   help="serve Prometheus metrics at http://HOST:PORT/metrics (default: metrics.port, off)")
    s.add_argument("--console-listen", default=None, metavar="HOST:PORT",
                   help="serve the web console at http://HOST:PORT/ (default: console.port, off)")
    from .cli_cluster import add_serve_flags
    add_serve_flags(s)
    s.set_defaults(func=functools.partial(cmd_serve, parse_kv=parse_kv))


def add_console_parser(sub) -> None:
    """Register ``console``."""
    co = sub.add_parser("console", help="a web console (topics, groups, messages) for a running broker")
    co.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the broker")
    co.add_argument("--command-config", default=None, metavar="FILE",
                    help="client properties for TLS / SASL to the broker (security.protocol, ssl.*, sasl.*)")
    co.add_argument("--listen", default="127.0.0.1:8080",
                    help="HOST:PORT of the console (default 127.0.0.1:8080; port 0: any)")
    co.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"],
                    help="log level (default info)")
    co.set_defaults(func=cmd_console)


def _with_first(value: str | None, current: str | None, default: str | None) -> str | None:
    """A listeners list from --listen / --advertised: a ``NAME://...`` list as given; a bare
    HOST:PORT replaces the address of the first entry of ``current`` (its name kept; PLAINTEXT
    when there is none), the other entries staying."""
    if not value:
        return current or default
    if "://" in value:
        return value
    entries = [e.strip() for e in (current or "").split(",") if e.strip()]
    name = entries[0].split("://", 1)[0] if entries and "://" in entries[0] else "PLAINTEXT"
    return ",".join([f"{name}://{value}", *entries[1:]])


def _listener_address(value: str) -> tuple[str, int]:
    """HOST:PORT from ``HOST:PORT`` or the first ``NAME://HOST:PORT`` of a listeners list."""
    first = value.split(",")[0].strip()
    if "://" in first:
        first = first.split("://", 1)[1]
    host, sep, port = first.rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"error: expected HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def _log_recovery(log, eng, seconds: float) -> None:
    """After an unclean shutdown: what recovery found and how long the open took."""
    if eng.logs.had_clean_shutdown or eng.logs.was_new:
        log.info("opened %s%s in %.2f s", eng.path,
                 " after a clean shutdown" if eng.logs.had_clean_shutdown else " (new)", seconds)
        return
    report = eng.recovery_report
    scanned = sum(lg.recovery_stats.bytes_scanned for lg in eng.logs.logs().values())
    log.warning("recovered %s after an unclean shutdown in %.2f s: %d segments scanned (%d bytes) and "
                "their indexes rebuilt, %d bytes truncated, %d other changes",
                eng.path, seconds, eng.logs.segments_scanned, scanned,
                sum(ev.bytes_dropped for ev in report), sum(1 for ev in report if not ev.bytes_dropped))
    for ev in report:
        where = f" at byte {ev.position}" if ev.position is not None else ""
        log.warning("recovery: %s%s: %s (%d bytes dropped)", ev.path, where, ev.reason, ev.bytes_dropped)


def cmd_serve(args: argparse.Namespace, parse_kv) -> int:
    """Serve a data directory to Kafka clients until SIGTERM/SIGINT (then shut down cleanly)."""
    import asyncio
    import faulthandler
    import logging
    import signal

    from .config import parse_properties
    from .server import Broker

    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # `kill -3` prints every thread's stack to stderr and the broker goes on (the JVM's thread
    # dump, which Kafka's operators know): the way to see where a stuck broker waits
    faulthandler.register(signal.SIGQUIT, all_threads=True, chain=False)
    settings: dict = {}
    if args.properties:
        with open(args.properties) as f:
            settings.update(parse_properties(f.read(), args.properties))
    settings.update(parse_kv(args.config))
    from .cli_cluster import apply_serve_flags, cluster_link, make_member, start_member, stop_member
    apply_serve_flags(args, settings)
    data_dir = args.data_dir or (settings.pop("log.dirs", None) or settings.get("log.dir")
                                 or "./data").split(",")[0]
    settings.pop("log.dirs", None)
    # listeners: Kafka's keys (engine/server/listener.py); --listen / --advertised override the first
    settings["listeners"] = _with_first(args.listen, settings.get("listeners"), "PLAINTEXT://127.0.0.1:9092")
    advertised = _with_first(args.advertised, settings.get("advertised.listeners"), None)
    if advertised:
        settings["advertised.listeners"] = advertised
    from .server.listener import listeners_from_configs
    # built (and so checked) once, before anything is created: TLS contexts, SASL mechanisms (an
    # OAUTHBEARER JWKS read); SCRAM's credential store comes with the data directory, below
    scram_store: list = []
    listeners, lsettings = listeners_from_configs(
        settings, scram_credentials=lambda user, mech: scram_store[0](user, mech) if scram_store else None)
    # the connection limits' keys too, before anything is created (the Broker reads them again)
    from .server.connection_quotas import ConnectionQuotas
    ConnectionQuotas.from_configs(settings, [li.name for li in listeners])
    inter_security = None
    if settings.get("zookeeper.connect"):
        # brokers connect to each other (replica fetchers, the coordinators' link) over the
        # inter-broker listener's protocol, with this broker's credentials for it (docs/security.md)
        from .client.security import ClientSecurity
        inter_security = ClientSecurity.inter_broker(settings)

    import engine

    async def run() -> None:
        # background=True: retention and flush tasks run while serving
        t0 = time.monotonic()
        try:
            eng = engine.open(data_dir, settings or None)
        except OSError as e:
            if e.errno not in _DISK_ERRNOS:
                raise
            raise SystemExit(f"error: cannot open data directory {os.path.abspath(data_dir)} for writing: "
                             f"{e.strerror or e}" + (f" ({e.filename})" if e.filename else "")) from None
        with eng:
            cfg = eng.config
            log = logging.getLogger("engine.server")
            _log_recovery(log, eng, time.monotonic() - t0)
            if cfg.ignored:
                log.warning("configuration keys accepted without effect here: %s",
                            ", ".join(sorted(cfg.ignored)))
            effective = {k: v for k, v in cfg.explicit.items() if k not in cfg.ignored}
            if effective:
                log.info("effective non-default configuration: %s",
                         ", ".join(f"{k}={shown_value(k, v)}" for k, v in sorted(effective.items())))
            from .cluster.scram_zk import ZkScramCredentials
            from .security.credentials import ScramCredentialStore
            # in cluster mode shared through ZooKeeper once the broker joined (share below)
            scram = ZkScramCredentials(ScramCredentialStore(eng.path))
            scram_store.append(scram)
            from .cluster.quota_zk import ZkClientQuotas
            from .security.quotas import ClientQuotaStore
            quotas = ZkClientQuotas(ClientQuotaStore(eng.path))     # client quotas: the same
            # cluster mode registers every advertised listener (engine/cluster/registration.py);
            # the other brokers reach this one on the inter-broker listener's
            inter = next((li for li in listeners if li.name == lsettings.inter_broker_listener),
                         listeners[0])
            member = make_member(eng.node, inter.advertised_host or inter.host or "0.0.0.0",
                                 lsettings.inter_broker_listener)  # cluster mode: zookeeper.connect
            access = acl_store = None   # a node alone: the ACLs in its data directory (Broker's)
            if member is not None:      # the node serves the cluster's view, its coordinators join it
                eng.node.use_view(member.view)
                eng.node.replicas.client_security = inter_security
                eng.node.use_cluster(cluster_link(member, eng.node, inter_security))
                access, acl_store = _cluster_access(cfg.explicit)
            broker = Broker(eng.node, listeners=listeners, scram_credentials=scram, client_quotas=quotas,
                            max_request_bytes=cfg["socket.request.max.bytes"],
                            idle_timeout=cfg["connections.max.idle.ms"] / 1000.0,
                            view=member.view if member is not None else None, cluster=member,
                            access=access)
            await broker.start(enable_requests=member is None)   # cluster mode: once registered
            http = []
            started = None
            stop = asyncio.Event()
            failed: list = []        # (exc, what) of the I/O error that takes this broker down

            def storage_failed(exc, what) -> None:     # on the loop (ReplicaManager.storage_error)
                failed.append((exc, what))
                stop.set()

            broker.replicas.on_storage_error = storage_failed
            eng.logs.on_io_error = broker.replicas.storage_error     # background checkpoints/flushes
            try:
                if member is not None:      # register, then serve (ClusterError: id taken)
                    await asyncio.get_running_loop().run_in_executor(
                        None, start_member, member, broker, eng.node, inter.advertised_port or inter.port,
                        _advertised_endpoints(listeners))
                    started = member
                    await asyncio.get_running_loop().run_in_executor(None, scram.share, member.store)
                    await asyncio.get_running_loop().run_in_executor(None, quotas.share, member.store)
                    if acl_store is not None:   # the cluster's ACLs from now on (none before)
                        await asyncio.get_running_loop().run_in_executor(
                            None, acl_store.share, member.store, broker.access.authorizer)
                    # registered, its view loaded (the watches' first reads), its credentials
                    # and ACLs the cluster's: now it may answer (Metadata names the brokers)
                    broker.enable_request_processing()
                http = _start_operator_endpoints(broker, eng, args, cfg, listeners, scram)
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                # last, after the signal handlers (a SIGTERM right after it is a clean stop):
                # "serving" means every endpoint asked for is up (tests wait for it)
                for li in listeners[1:]:
                    print(f"listener {li.name} ({li.security_protocol}) on {li.host or '0.0.0.0'}:{li.port}",
                          file=sys.stderr, flush=True)
                first = listeners[0]
                print(f"serving {data_dir} on {first.host or '0.0.0.0'}:{first.port}", file=sys.stderr,
                      flush=True)
                await stop.wait()
                if failed:
                    await _halt(log, member if started is not None else None, eng, *failed[0])
            finally:
                if acl_store is not None:
                    acl_store.close()
                if started is not None:     # controlled shutdown while still serving
                    await asyncio.get_running_loop().run_in_executor(None, stop_member, started, eng.node)
                for server in http:
                    server.stop()
                await broker.stop()
        print("stopped cleanly", file=sys.stderr, flush=True)

    asyncio.run(run())
    return 0


def _advertised_endpoints(listeners) -> list[tuple[str, str, str, int]]:
    """What cluster mode registers: ``[(name, protocol, host, port)]`` of every broker listener at
    the address its clients are told (engine/server/listener.py): its ``advertised.listeners``
    entry, the bound address where that key does not name it (Kafka would leave such a listener
    out; here it is served, so it is advertised), a wildcard host as the host's name."""
    return [(li.name, li.security_protocol, li.advertised_host or li.host or "0.0.0.0",
             li.advertised_port or li.port) for li in listeners]


def _cluster_access(explicit):
    """Cluster mode with the ACL authorizer (``authorizer.class.name``): its ACLs in ZooKeeper
    (engine/cluster/acl_zk_store.py), shared once the broker joined; (None, None) without one."""
    from .security.authorizer import Authorizer, acl_authorizer_configured
    if not acl_authorizer_configured(explicit):
        return None, None
    from .cluster.acl_zk_store import ZkAclStore
    from .server.access import Access
    store = ZkAclStore()
    return Access(Authorizer.from_configs(explicit, store=store)), store


# a data directory a broker cannot write: full, read-only, failing, or not ours to write
_DISK_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EIO, errno.EDQUOT, errno.EACCES, errno.EPERM}


async def _halt(log, member, eng, exc, what) -> None:
    """The data directory failed (Kafka: "Shutdown broker because all log dirs in ... have
    failed", then Exit.halt): the replica manager is offline already (in-flight produces got
    KAFKA_STORAGE_ERROR, nothing more is acknowledged); close the ZooKeeper session so the
    controller elects new leaders at once, then exit 1 without a clean shutdown (the next start
    recovers the directory) and without touching the disk again."""
    import asyncio

    if member is not None:
        try:
            await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, member.abort), 10)
        except Exception as e:           # the process ends anyway; ZooKeeper then expires it
            log.warning("closing the ZooKeeper session failed: %s", e)
    await asyncio.sleep(0.2)             # the KAFKA_STORAGE_ERROR answers go out
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    log.critical("shutting down: data directory %s failed: %s (errno %s, in %s)%s", eng.path, reason,
                 exc.errno, what, "; left the cluster" if member is not None else "")
    logging.shutdown()
    sys.stderr.flush()
    os._exit(1)


def _endpoint(listen: str | None, cfg, prefix: str) -> tuple[str, int] | None:
    """HOST:PORT from the command line, else `<prefix>.host`/`<prefix>.port`; None when off."""
    if listen:
        h, p = _listener_address(listen)
        return h or "127.0.0.1", p
    if cfg[f"{prefix}.port"] < 0:
        return None
    return cfg[f"{prefix}.host"], cfg[f"{prefix}.port"]


def _start_operator_endpoints(broker, eng, args, cfg, listeners, credentials) -> list:
    """The Prometheus endpoint and the web console, when asked for (both off by default),
    with HTTPS and basic auth when ``http.tls.listener`` / ``http.authentication`` say so."""
    started: list = []
    metrics_at = _endpoint(args.metrics_listen, cfg, "metrics")
    console_at = _endpoint(args.console_listen, cfg, "console")
    if not metrics_at and not console_at:
        return started
    from .server.http_security import http_security_from_config
    security = http_security_from_config(cfg, listeners, credentials, broker.access,
                                         broker.failed_auth_delay_ms)
    scheme = "https" if security is not None and security.ssl_context is not None else "http"
    if metrics_at:
        from .server.metrics import MetricsServer
        srv = MetricsServer(broker.enable_metrics(), *metrics_at, security=security).start()
        started.append(srv)
        print(f"metrics on {scheme}://{srv.host}:{srv.port}/metrics", file=sys.stderr, flush=True)
    if console_at:
        from .console import ConsoleServer, EngineSource
        broker.enable_metrics()
        srv = ConsoleServer(EngineSource(eng, broker.metrics, broker.view), *console_at,
                            security=security).start()
        started.append(srv)
        print(f"console on {scheme}://{srv.host}:{srv.port}/", file=sys.stderr, flush=True)
    return started


def cmd_console(args: argparse.Namespace) -> int:
    """A web console for a running broker, reached over the Kafka protocol."""
    import logging
    import signal
    import threading

    from .cli_remote import command_security
    from .console import ConsoleServer, WireSource

    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    host, port = _listener_address(args.listen)
    source = WireSource(args.bootstrap_server, command_security(args))
    srv = ConsoleServer(source, host or "127.0.0.1", port).start()
    print(f"console for {args.bootstrap_server} on http://{srv.host}:{srv.port}/",
          file=sys.stderr, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    srv.stop()
    source.close()
    return 0
