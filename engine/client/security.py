"""The client side of a broker's TLS and SASL listeners, from Kafka's client keys.

:class:`ClientSecurity` is what a :class:`~engine.client.connection.Connection` does after its
TCP connect: wrap the socket in TLS (SSL, SASL_SSL), then authenticate with SaslHandshake v1 and
SaslAuthenticate (SASL_PLAINTEXT, SASL_SSL)::

    sec = ClientSecurity.from_config({
        "security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "ca.pem", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="alice-secret";'})
    conn = Connection(host, port, b"me", 30.0, security=sec)

Keys (Kafka 4.0's client names and defaults; :data:`CLIENT_SECURITY_KEYS`):

- ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL (any case).
- ``ssl.*``: the trust store the broker's certificate must chain to
  (``ssl.truststore.type=PEM`` with ``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``; PKCS12 too; none: the system's CAs), the client's own key
  store for mutual TLS (``ssl.keystore.*``, ``ssl.key.password``), ``ssl.enabled.protocols``,
  ``ssl.protocol``, ``ssl.cipher.suites`` -- read by :func:`engine.security.tls.client_context`.
  ``ssl.endpoint.identification.algorithm``: ``https`` (the default, as Kafka's clients) checks
  that the certificate names the host connected to; empty turns the check off.
- ``sasl.mechanism``: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI, Kerberos,
  is not served here: a clear :class:`~engine.errors.InvalidConfigError`).
- ``sasl.jaas.config``: ``<PlainLoginModule | ScramLoginModule> required username="..."
  password="...";`` (engine/security/jaas.py parses it).  librdkafka's ``sasl.username`` /
  ``sasl.password`` are taken too (a confluent-kafka dict works unchanged).

The broker side, :meth:`ClientSecurity.inter_broker`: how a broker connects to the others (the
replica fetchers, the coordinators' link) -- the inter-broker listener's protocol
(``inter.broker.listener.name`` / ``security.inter.broker.protocol``), that listener's ``ssl.*``
keys (``listener.name.<l>.ssl.*`` overriding ``ssl.*``), ``sasl.mechanism.inter.broker.protocol``
(Kafka's default GSSAPI, refused here), and the broker's own credentials: ``username`` /
``password`` of ``listener.name.<l>.<mechanism lower>.sasl.jaas.config``.

Failures: a TLS handshake the broker or the client refuses raises
:class:`~engine.errors.SslAuthenticationError`, a mechanism the listener does not enable
:class:`~engine.errors.UnsupportedSaslMechanismError`, a wrong user or password
:class:`~engine.errors.SaslAuthenticationError` naming the mechanism and the user -- none of them
retried (the configuration must change), none of them waits longer than the broker's
``connection.failed.authentication.delay.ms``.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from typing import Any

from ..errors import (
    ErrorCode,
    InvalidConfigError,
    SaslAuthenticationError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
    api_error,
)
from ..protocol.messages import ApiKey, encode
from ..security.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE, single_entry
from ..security.listeners import ListenerSettings, listener_sasl_jaas_config
from ..security.scram import HASHES
from ..security.scram_client import ScramClient
from ..security.tls import client_context
from .connection import Connection, KafkaConnectionError, read_response, tls_refused

__all__ = ["CLIENT_SECURITY_KEYS", "ClientSecurity", "MECHANISMS", "PROTOCOLS"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", *HASHES)
CLIENT_SSL_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.truststore.password", "ssl.enabled.protocols", "ssl.protocol",
    "ssl.cipher.suites", "ssl.endpoint.identification.algorithm",
    # Java-only: accepted, no effect (ssl.engine.factory.class is refused by client_context)
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.engine.factory.class",
})
CLIENT_SECURITY_KEYS = frozenset({"security.protocol", "sasl.mechanism", "sasl.jaas.config",
                                  "sasl.username", "sasl.password", *CLIENT_SSL_KEYS})
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
_LOGIN_MODULES = (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE)


def _protocol(value: Any, key: str) -> str:
    text = str(value or "PLAINTEXT").strip().upper()
    if text not in PROTOCOLS:
        raise InvalidConfigError(f"Invalid value {value} for configuration {key}: "
                                 f"String must be one of: {', '.join(PROTOCOLS)}")
    return text


def _mechanism(value: Any, key: str) -> str:
    text = str(value or "GSSAPI").strip().upper()
    if text not in MECHANISMS:
        raise InvalidConfigError(f"{key}={text} is not served here: one of {', '.join(MECHANISMS)}"
                                 + (" (GSSAPI is Kafka's default; set it)" if text == "GSSAPI" else ""))
    return text


def _credentials(jaas: str | None, key: str, username: Any = None, password: Any = None) -> tuple[str, str]:
    """username and password of a client's JAAS line (or librdkafka's sasl.username/password)."""
    if jaas:
        entry = single_entry(str(jaas))
        if entry.login_module not in _LOGIN_MODULES:
            raise InvalidConfigError(f"{key} names login module {entry.login_module}: this client "
                                     f"takes {PLAIN_LOGIN_MODULE} or {SCRAM_LOGIN_MODULE}")
        username, password = entry.options.get("username"), entry.options.get("password")
    if username is None or password is None:
        raise InvalidConfigError(f"SASL needs the client's username and password: {key} with "
                                 'username="..." password="..."')
    return str(username), str(password)


class ClientSecurity:
    """How a client connection secures itself (see the module docstring).  Immutable, shared by
    every connection of a client; the TLS context is built once."""

    def __init__(self, protocol: str, *, ssl_context: ssl.SSLContext | None = None,
                 mechanism: str | None = None, username: str | None = None, password: str | None = None):
        self.protocol = protocol
        self.ssl_context = ssl_context
        self.mechanism = mechanism
        self.username = username
        self._password = password

    def __repr__(self) -> str:      # never the password
        return (f"ClientSecurity({self.protocol}"
                + (f", {self.mechanism} as {self.username!r}" if self.mechanism else "") + ")")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    # -- from configuration -------------------------------------------------------------------
    @classmethod
    def from_config(cls, configs: Mapping[str, Any]) -> ClientSecurity | None:
        """From a client's keys (module docstring); None for PLAINTEXT.  Keys other than
        :data:`CLIENT_SECURITY_KEYS` are not looked at."""
        protocol = _protocol(configs.get("security.protocol"), "security.protocol")
        if protocol == "PLAINTEXT":
            return None
        ctx = None
        if protocol in ("SSL", "SASL_SSL"):
            tls = {k: v for k, v in configs.items() if k in CLIENT_SSL_KEYS and v is not None}
            tls.setdefault("ssl.endpoint.identification.algorithm", "https")
            ctx = client_context(tls)
        if protocol in ("SSL", "PLAINTEXT"):
            return cls(protocol, ssl_context=ctx)
        mechanism = _mechanism(configs.get("sasl.mechanism"), "sasl.mechanism")
        user, password = _credentials(configs.get("sasl.jaas.config"), "sasl.jaas.config",
                                      configs.get("sasl.username"), configs.get("sasl.password"))
        return cls(protocol, ssl_context=ctx, mechanism=mechanism, username=user, password=password)

    @classmethod
    def inter_broker(cls, configs: Mapping[str, Any]) -> ClientSecurity | None:
        """How this broker connects to the others: the inter-broker listener's protocol and this
        broker's own credentials for it (module docstring); None for PLAINTEXT.  ``configs`` are
        the broker's settings as given (``server.properties`` / ``--config``): an empty value is
        a value (``ssl.endpoint.identification.algorithm=`` turns the host check off)."""
        settings = ListenerSettings.from_configs(configs)
        listener, protocol = settings.inter_broker_listener, settings.inter_broker_protocol
        if protocol == "PLAINTEXT":
            return None
        ctx = None
        if protocol in ("SSL", "SASL_SSL"):
            prefix = f"listener.name.{listener.lower()}."
            tls = {k: v for k, v in configs.items() if v is not None
                   and (k in CLIENT_SSL_KEYS or (k.startswith(prefix) and k[len(prefix):] in CLIENT_SSL_KEYS))}
            if prefix + "ssl.endpoint.identification.algorithm" not in tls:
                tls.setdefault("ssl.endpoint.identification.algorithm", "https")
            ctx = client_context(tls, listener)
        if protocol == "SSL":
            return cls(protocol, ssl_context=ctx)
        mechanism = _mechanism(configs.get("sasl.mechanism.inter.broker.protocol"),
                               "sasl.mechanism.inter.broker.protocol")
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        jaas = listener_sasl_jaas_config(configs, listener, mechanism)
        if not jaas:
            raise InvalidConfigError(f"the inter-broker listener {listener} is {protocol} with "
                                     f"{mechanism}: set {key} with this broker's username and password")
        user, password = _credentials(jaas, key)
        return cls(protocol, ssl_context=ctx, mechanism=mechanism, username=user, password=password)

    # -- on a connection ----------------------------------------------------------------------
    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """The TCP socket after the TLS handshake (the socket itself without TLS)."""
        if self.ssl_context is None:
            return sock
        try:
            return self.ssl_context.wrap_socket(sock, server_hostname=host)
        except ssl.SSLCertVerificationError as e:
            sock.close()
            raise SslAuthenticationError(f"TLS handshake with {host} failed: {e.verify_message or e} "
                                         "(ssl.truststore.*, ssl.endpoint.identification.algorithm)") from None
        except OSError as e:
            sock.close()
            if not tls_refused(e):
                raise KafkaConnectionError(f"{host}: TLS handshake: {e or type(e).__name__}") from None
            raise SslAuthenticationError(f"TLS handshake with {host} failed: {e}") from None

    def authenticate(self, conn: Connection) -> None:
        """SaslHandshake v1 and SaslAuthenticate on a new connection (nothing without SASL)."""
        if not self.uses_sasl:
            return
        mech = self.mechanism
        assert mech is not None and self.username is not None and self._password is not None
        resp = self._call(conn, ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, {"mechanism": mech})
        if resp["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            conn.close()
            raise UnsupportedSaslMechanismError(
                f"{conn.address} does not enable SASL mechanism {mech} on this listener "
                f"(it enables {', '.join(resp['mechanisms']) or 'none'})")
        if resp["error_code"]:
            conn.close()
            raise api_error(resp["error_code"], f"SaslHandshake with {conn.address}")
        if mech == "PLAIN":
            self._token(conn, f"\0{self.username}\0{self._password}".encode())
            return
        scram = ScramClient(mech, self.username, self._password)
        try:
            server_first = self._token(conn, scram.first_message())
            server_final = self._token(conn, scram.final_message(server_first))
            scram.verify(server_final)
        except SaslAuthenticationError:
            conn.close()
            raise

    @staticmethod
    def _call(conn: Connection, key: int, version: int, body: dict) -> dict:
        corr = conn.send(key, version, [encode(key, version, body, response=False)])
        return read_response(conn, key, version, corr)

    def _token(self, conn: Connection, token: bytes) -> bytes:
        resp = self._call(conn, ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": token})
        if resp["error_code"]:
            conn.close()
            detail = resp.get("error_message") or ErrorCode(resp["error_code"]).name
            if resp["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED:
                raise SaslAuthenticationError(f"SASL {self.mechanism} authentication of user "
                                              f"{self.username!r} at {conn.address} failed: {detail}")
            raise api_error(resp["error_code"], f"SaslAuthenticate ({self.mechanism}) with {conn.address}: "
                                                f"{detail}")
        return bytes(resp["auth_bytes"] or b"")
