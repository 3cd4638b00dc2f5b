"""TLS and HTTP basic authentication for the broker's HTTP endpoints (the web console and
``GET /metrics``), as Redpanda guards its admin API.

Two keys of this project (Kafka has no HTTP endpoints, so no names to follow):

* ``http.tls.listener`` -- the name of one of the broker's SSL or SASL_SSL listeners: the
  endpoints serve HTTPS with that listener's TLS settings (certificate, protocols, ciphers,
  ``ssl.client.auth``).  Empty (the default): plain HTTP.
* ``http.authentication`` -- ``none`` (the default) or ``basic``: every request must carry HTTP
  basic credentials of a SCRAM user (the credentials AlterUserScramCredentials keeps): the
  password is checked against the stored SCRAM-SHA-256 or SCRAM-SHA-512 credential (salted with
  its salt and iterations, compared by StoredKey in constant time), so no password is stored for
  the HTTP side.  A request without valid credentials gets 401 with a ``WWW-Authenticate``
  challenge, after ``connection.failed.authentication.delay.ms`` as a failed SASL login does.

The principal is ``User:<name>`` (``User:ANONYMOUS`` without authentication); with the ACL
authorizer, the console's produce form needs WRITE on the topic for it (engine/server/access.py).

The TLS handshake runs in the request's own thread (``finish_request``), bounded by a socket
timeout, so a client that never completes it holds one thread, not the accept loop.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ..errors import InvalidConfigError
from ..security.acl import AclOperation
from ..security.scram import ScramCredential, salted_password
from .access import Access
from .sasl_handlers import ANONYMOUS

__all__ = ["HttpSecurity", "TlsHttpServer", "http_security_from_config"]

log = logging.getLogger("engine.server")

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
HANDSHAKE_TIMEOUT_S = 10.0

LookupCredential = Callable[[str, str], "ScramCredential | None"]


class _Caller:
    """What engine/server/access.py asks of a caller: its principal and peer address."""

    __slots__ = ("principal", "peer")

    def __init__(self, principal: str, peer):
        self.principal = principal
        self.peer = peer


@dataclass
class HttpSecurity:
    """The endpoints' TLS context (None: plain HTTP) and credential lookup (None: no login)."""

    ssl_context: ssl.SSLContext | None = None
    credentials: LookupCredential | None = None
    access: Access | None = None                 # for the produce form's WRITE check
    failed_delay_s: float = 0.1

    def check_password(self, user: str, password: str) -> bool:
        """Does ``password`` match a stored SCRAM credential of ``user``?"""
        assert self.credentials is not None
        for mechanism in MECHANISMS:
            stored = self.credentials(user, mechanism)
            if stored is None:
                continue
            salted = salted_password(mechanism, password, stored.salt, stored.iterations)
            mine = ScramCredential.from_salted_password(mechanism, stored.salt, salted, stored.iterations)
            if hmac.compare_digest(mine.stored_key, stored.stored_key):
                return True
        return False

    def principal(self, handler: BaseHTTPRequestHandler) -> str | None:
        """The caller's principal, or None after answering 401 (bad or missing credentials)."""
        if self.credentials is None:
            return ANONYMOUS
        header = handler.headers.get("Authorization", "")
        scheme, _, encoded = header.partition(" ")
        user = None
        if scheme.lower() == "basic":
            try:
                user, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                sep = ""
            if sep and user and self.check_password(user, password):
                return f"User:{user}"
        if header:          # tried and failed: the SASL failure delay, then the challenge
            log.info("HTTP %s: authentication failed for %r", handler.client_address[0], user)
            time.sleep(self.failed_delay_s)
        _discard_body(handler)          # unread bytes would reset the connection before the answer
        body = b"authentication required\n"
        handler.send_response(401)
        handler.send_header("WWW-Authenticate", 'Basic realm="kafka-engine", charset="UTF-8"')
        handler.send_header("Content-Type", "text/plain; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(body)
        handler.close_connection = True
        return None

    def may_write(self, principal: str, peer, topic: str) -> bool:
        """WRITE on ``topic`` for the principal (always, with no authorizer)."""
        if self.access is None:
            return True
        return self.access.topic(_Caller(principal, peer), AclOperation.WRITE, topic)


def _discard_body(handler: BaseHTTPRequestHandler, limit: int = 1 << 20) -> None:
    """Read a request body of up to ``limit`` bytes (Content-Length) and drop it."""
    try:
        n = int(handler.headers.get("Content-Length") or 0)
    except ValueError:
        return
    if 0 < n <= limit:
        handler.rfile.read(n)


class TlsHttpServer(ThreadingHTTPServer):
    """A threading HTTP server whose connections are TLS when ``ssl_context`` is set."""

    ssl_context: ssl.SSLContext | None = None
    daemon_threads = True

    def finish_request(self, request, client_address):
        ctx = self.ssl_context
        if ctx is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            tls = ctx.wrap_socket(request, server_side=True)     # takes over the socket
        except (ssl.SSLError, OSError) as e:
            log.info("HTTP %s: TLS handshake failed: %s", client_address[0], e)
            return
        try:
            tls.settimeout(None)
            super().finish_request(tls, client_address)
        finally:
            tls.close()

    def shutdown_request(self, request):
        try:
            request.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.close_request(request)


def http_security_from_config(cfg, listeners, credentials: LookupCredential | None,
                              access=None, failed_delay_ms: int = 100) -> HttpSecurity | None:
    """The endpoints' security from ``http.tls.listener`` / ``http.authentication`` (None when
    both are off); a listener name that is not a TLS listener is an InvalidConfigError."""
    name = cfg["http.tls.listener"]
    auth = cfg["http.authentication"]
    ctx = None
    if name:
        listener = next((li for li in listeners if li.name == name.upper()), None)
        if listener is None or listener.ssl_context is None:
            tls = [li.name for li in listeners if li.ssl_context is not None]
            raise InvalidConfigError(f"http.tls.listener={name!r} is not an SSL or SASL_SSL listener of "
                                     f"this broker (its TLS listeners: {', '.join(tls) or 'none'})")
        ctx = listener.ssl_context
    if ctx is None and auth == "none":
        return None
    return HttpSecurity(ctx, credentials if auth == "basic" else None, access, failed_delay_ms / 1000.0)
