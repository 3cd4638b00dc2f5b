"""ZooKeeper over TLS for the broker's ZooKeeper client, with Kafka 3.x's broker keys (KIP-515).

``zookeeper.ssl.client.enable=true`` makes every ZooKeeper session of the broker TLS; Kafka's
documentation says that ``zookeeper.clientCnxnSocket`` must then be set, typically to
``org.apache.zookeeper.ClientCnxnSocketNetty`` (the Java client's only TLS transport): here it
must be exactly that, and anything else with TLS is refused at start.  The other keys, as Kafka
hands them to ZooKeeper's client:

- ``zookeeper.ssl.keystore.location`` / ``.password`` / ``.type``: the broker's client
  certificate (mutual TLS; ZooKeeper's x509 provider then authenticates it, and with
  ``zookeeper.set.acl=true`` its znodes belong to that certificate's DN).  PKCS12 (the password
  opens the store) and PEM (key and chain in one file; the password, where set, decrypts the
  key: ZooKeeper has one password for both) are read; an unset type is taken from the file
  name as ZooKeeper does (``.p12``/``.pfx``, ``.pem``); JKS is refused, as the broker's own TLS
  code refuses it.
- ``zookeeper.ssl.truststore.location`` / ``.password`` / ``.type``: the CAs ZooKeeper's
  certificate must chain to (none set: the system's CAs, as the JVM's).
- ``zookeeper.ssl.protocol`` (default ``TLSv1.2``), ``zookeeper.ssl.enabled.protocols``
  (default: the protocol alone), ``zookeeper.ssl.cipher.suites`` (default: OpenSSL's).
- ``zookeeper.ssl.endpoint.identification.algorithm`` (default ``HTTPS``, any case): ZooKeeper's
  certificate must name the host of ``zookeeper.connect``; empty turns the check off.
- ``zookeeper.ssl.crl.enable`` / ``zookeeper.ssl.ocsp.enable`` (default false): revocation is
  not checked here, so true is refused.

The context comes from engine/security/tls.py (the broker's own TLS code, with its errors
naming the ``zookeeper.ssl.*`` key at fault).  kazoo gets it through its connection handler
(:class:`TlsThreadingHandler`): kazoo's own TLS path would also trust the system's CAs besides
the trust store and ignores protocols and cipher suites, and it reads keys from files only --
here no key is ever written out in clear (tls.py hands it to OpenSSL encrypted under a one-time
password, in a 0600 file removed at once).
"""

from __future__ import annotations

import os
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any

from kazoo.handlers.threading import SequentialThreadingHandler

from ..errors import InvalidConfigError, SslConfigError
from ..security.tls import client_context

__all__ = ["NETTY_SOCKET", "TlsThreadingHandler", "ZkTls"]

NETTY_SOCKET = "org.apache.zookeeper.ClientCnxnSocketNetty"
_NIO_SOCKETS = ("", "ClientCnxnSocketNIO", "org.apache.zookeeper.ClientCnxnSocketNIO")
_STORE_TYPES = {".p12": "PKCS12", ".pfx": "PKCS12", ".pem": "PEM", ".jks": "JKS"}


def _text(cfg: Any, key: str) -> str:
    return str(cfg[key] or "").strip()


def _store_type(cfg: Any, store: str) -> str | None:
    """PKCS12 or PEM for ``zookeeper.ssl.<store>.type`` (unset: from the file name's extension,
    as ZooKeeper's client); None without a location."""
    location = _text(cfg, f"zookeeper.ssl.{store}.location")
    if not location:
        return None
    type_key = f"zookeeper.ssl.{store}.type"
    given = _text(cfg, type_key).upper()
    kind = given or _STORE_TYPES.get(os.path.splitext(location)[1].lower())
    if kind is None:
        raise SslConfigError(type_key, f"is not set and the type of {location} cannot be told from its name "
                                       "(.p12/.pfx: PKCS12, .pem: PEM): set it to PKCS12 or PEM")
    if kind == "JKS":
        raise SslConfigError(type_key, f"JKS stores cannot be read here ({location}); use PKCS12 or PEM: "
                                       "keytool -importkeystore -deststoretype PKCS12 converts one")
    if kind not in ("PKCS12", "PEM"):
        raise SslConfigError(type_key, f"unknown store type {kind}: PKCS12 and PEM are supported")
    return kind


def _settings(cfg: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``ssl.*`` settings tls.client_context takes, and the ``zookeeper.ssl.*`` key each
    came from (for its errors)."""
    out: dict[str, Any] = {}
    names: dict[str, str] = {}

    def put(key: str, value: Any, source: str) -> None:
        out[key] = value
        names[key] = source

    keystore = _store_type(cfg, "keystore")
    if keystore is not None:
        put("ssl.keystore.type", keystore, "zookeeper.ssl.keystore.type")
        put("ssl.keystore.location", _text(cfg, "zookeeper.ssl.keystore.location"), "zookeeper.ssl.keystore.location")
        password = str(cfg["zookeeper.ssl.keystore.password"] or "") or None
        if password is not None:        # PEM: the key's password (ZooKeeper has one password for both)
            put("ssl.key.password" if keystore == "PEM" else "ssl.keystore.password", password,
                "zookeeper.ssl.keystore.password")
    truststore = _store_type(cfg, "truststore")
    if truststore is not None:
        put("ssl.truststore.type", truststore, "zookeeper.ssl.truststore.type")
        put("ssl.truststore.location", _text(cfg, "zookeeper.ssl.truststore.location"),
            "zookeeper.ssl.truststore.location")
        password = str(cfg["zookeeper.ssl.truststore.password"] or "") or None
        if password is not None and truststore == "PKCS12":     # a PEM trust store has none (ZooKeeper ignores it)
            put("ssl.truststore.password", password, "zookeeper.ssl.truststore.password")
    protocol = _text(cfg, "zookeeper.ssl.protocol") or "TLSv1.2"
    put("ssl.protocol", protocol, "zookeeper.ssl.protocol")
    enabled = _text(cfg, "zookeeper.ssl.enabled.protocols")
    put("ssl.enabled.protocols", enabled or protocol,
        "zookeeper.ssl.enabled.protocols" if enabled else "zookeeper.ssl.protocol")
    put("ssl.cipher.suites", _text(cfg, "zookeeper.ssl.cipher.suites"), "zookeeper.ssl.cipher.suites")
    algorithm = _text(cfg, "zookeeper.ssl.endpoint.identification.algorithm")
    if algorithm.lower() not in ("https", ""):
        raise SslConfigError("zookeeper.ssl.endpoint.identification.algorithm",
                             f"{algorithm!r} is not supported: HTTPS (check ZooKeeper's host name) or empty (do not)")
    put("ssl.endpoint.identification.algorithm", algorithm.lower(), "zookeeper.ssl.endpoint.identification.algorithm")
    return out, names


@dataclass(frozen=True)
class ZkTls:
    """The ZooKeeper client's TLS: the context every session's socket is wrapped with.  ``repr``
    shows neither the context nor a password."""

    context: ssl.SSLContext = field(repr=False)
    client_certificate: str | None = None     # the key store's location (mutual TLS), None: none
    trust_store: str | None = None            # None: the system's CAs
    check_hostname: bool = True

    @classmethod
    def from_config(cls, cfg: Any) -> ZkTls | None:
        """From the broker's ``zookeeper.ssl.*`` keys; None when ``zookeeper.ssl.client.enable``
        is false (the other keys are then unused, as in Kafka).  InvalidConfigError /
        SslConfigError naming the key at fault."""
        socket_class = _text(cfg, "zookeeper.clientCnxnSocket")
        if socket_class not in (NETTY_SOCKET, *_NIO_SOCKETS):
            raise InvalidConfigError(f"zookeeper.clientCnxnSocket: {socket_class!r} is not a ZooKeeper client socket "
                                     f"this broker has: {NETTY_SOCKET} (needed for TLS) or "
                                     "org.apache.zookeeper.ClientCnxnSocketNIO")
        if not cfg["zookeeper.ssl.client.enable"]:
            return None
        if socket_class != NETTY_SOCKET:        # Kafka's documented rule (ZkSslClientEnableDoc)
            raise InvalidConfigError(
                "zookeeper.ssl.client.enable is true, so zookeeper.clientCnxnSocket must be set (typically to "
                f"{NETTY_SOCKET}): ZooKeeper's client has TLS only there"
                + (f"; it is {socket_class!r}" if socket_class else ""))
        for key, what in (("zookeeper.ssl.crl.enable", "certificate revocation lists (CRL)"),
                          ("zookeeper.ssl.ocsp.enable", "OCSP")):
            if cfg[key]:
                raise SslConfigError(key, f"{what} cannot be checked by this broker's ZooKeeper client: set it "
                                          "to false (ZooKeeper's certificate is still verified against the "
                                          "trust store)")
        settings, names = _settings(cfg)
        context = client_context(settings, names=names)
        return cls(context, settings.get("ssl.keystore.location"), settings.get("ssl.truststore.location"),
                   context.check_hostname)

    def describe(self) -> str:
        cert = f"client certificate {self.client_certificate}" if self.client_certificate else "no client certificate"
        trust = self.trust_store or "the system's CAs"
        host = "host name checked" if self.check_hostname else "host name NOT checked"
        return f"TLS ({cert}; ZooKeeper's certificate verified against {trust}, {host})"

    def handler(self) -> TlsThreadingHandler:
        """A new kazoo handler for one client (kazoo handlers are not shared between clients)."""
        return TlsThreadingHandler(self.context)


class TlsThreadingHandler(SequentialThreadingHandler):
    """kazoo's threading handler whose connections (kazoo asks with ``use_ssl=True``) are TLS with
    the broker's context; kazoo's certfile/keyfile/ca arguments are not used.  A failed handshake
    is kept in :attr:`tls_failure` (kazoo itself only retries): the start reports it at once."""

    def __init__(self, context: ssl.SSLContext):
        super().__init__()
        self._context = context
        self.tls_failure: str | None = None

    def create_connection(self, address, hostname=None, timeout=None, use_ssl=False, **_files):
        if not use_ssl:
            return super().create_connection(address, hostname=hostname, timeout=timeout)
        sock = socket.create_connection(address, timeout)
        try:
            tls = self._context.wrap_socket(sock, server_hostname=hostname or address[0])
        except ssl.SSLError as e:
            sock.close()
            reason = getattr(e, "verify_message", None) or e.reason or str(e)
            self.tls_failure = f"{type(e).__name__}: {reason}"
            raise
        except BaseException:
            sock.close()
            raise
        tls.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return tls
