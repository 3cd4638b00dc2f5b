"""SASL on the broker: SaslHandshake (17) and SaslAuthenticate (36), and the per-connection state
that keeps every other request out until authentication completes.

On a SASL_PLAINTEXT / SASL_SSL listener each Connection has a :class:`SaslSession` (Kafka's
SaslServerAuthenticator states)::

    HANDSHAKE_OR_VERSIONS --ApiVersions--> HANDSHAKE --SaslHandshake--> AUTHENTICATE
        --SaslAuthenticate...--> COMPLETE          (any failure: FAILED, the connection closes)

- Before the handshake only ApiVersions (once; a version we do not serve is answered and may be
  retried) and SaslHandshake are taken; any other request closes the connection at once, before
  its body is parsed (Kafka: "Unexpected Kafka request of type ... during SASL handshake").
- SaslHandshake names the mechanism: an enabled one is answered NONE with the enabled list, an
  unserved one UNSUPPORTED_SASL_MECHANISM with the list, then the connection closes.
- After a v1 handshake the tokens come in SaslAuthenticate requests; any other request closes
  the connection.  After a v0 handshake the tokens are raw size-prefixed frames without a Kafka
  header, answered the same way (``raw_tokens``), until the exchange completes.
- A failed exchange (wrong password, bad proof, malformed token) is answered
  SASL_AUTHENTICATION_FAILED with the mechanism's message (v0: no answer), after
  ``connection.failed.authentication.delay.ms`` (Kafka's default 100), and the connection
  closes.  The unsupported-mechanism answer waits the same delay, as in Kafka.
- When the exchange completes the connection's ``principal`` becomes ``User:<name>``
  (``User:ANONYMOUS`` on PLAINTEXT listeners and until then).
- Until authentication completes a frame may not be larger than ``sasl.server.max.receive.size``
  (default 524288): the reader closes the connection on its size prefix, before allocating it.

After authentication (and on listeners without SASL) SaslHandshake and SaslAuthenticate are
answered ILLEGAL_SASL_STATE, as Kafka's KafkaApis does -- except for re-authentication.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 (or its
``listener.name.<l>.`` and ``listener.name.<l>.<mechanism>.`` forms) a completed
SaslAuthenticate answers that session lifetime; a request other than SaslHandshake after it has
passed closes the connection.  A mechanism whose credential expires (OAUTHBEARER: the token's
``exp``) bounds the session by it whatever that key says, as Kafka does: the lifetime is the
time left on the credential, or the smaller of the two where both are set.  A SaslHandshake v1
on an authenticated connection whose session has a lifetime (at most one a second, as in Kafka)
starts a new exchange: the same mechanism (another is answered NONE, then fails at its
SaslAuthenticate with Kafka's message), and it must end with the same principal ("Cannot change
principals during re-authentication"); meanwhile only SaslAuthenticate is taken.

Concurrency: runs on the broker's event loop; a session belongs to one connection.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaApiError,
    SaslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from ..protocol import messages as m

__all__ = ["DEFAULT_FAILED_AUTH_DELAY_MS", "DEFAULT_MAX_RECEIVE_SIZE", "SaslHandlers", "SaslSession"]

log = logging.getLogger("engine.server")

DEFAULT_FAILED_AUTH_DELAY_MS = 100      # connection.failed.authentication.delay.ms
DEFAULT_MAX_RECEIVE_SIZE = 524288       # sasl.server.max.receive.size
ANONYMOUS = "User:ANONYMOUS"

_HANDSHAKE_OR_VERSIONS, _HANDSHAKE, _AUTHENTICATE, _COMPLETE, _FAILED = range(5)


class SaslSession:
    """The SASL state of one connection on a SASL listener (see the module doc)."""

    __slots__ = ("factory", "max_receive_size", "failed_delay", "state", "authenticator",
                 "raw_tokens", "reauth", "expires_at", "mechanism", "reauth_started",
                 "reauth_error", "lifetime_ms")

    def __init__(self, factory, *, max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
                 failed_delay_ms: int = DEFAULT_FAILED_AUTH_DELAY_MS,
                 reauth_ms_by_mechanism: dict[str, int] | None = None) -> None:
        self.factory = factory                    # engine.security.sasl.SaslServerFactory
        self.max_receive_size = max_receive_size
        self.failed_delay = max(0, failed_delay_ms) / 1000.0
        self.state = _HANDSHAKE_OR_VERSIONS
        self.authenticator = None
        self.raw_tokens = False                   # after a v0 handshake: tokens without header
        self.reauth = reauth_ms_by_mechanism or {}   # connections.max.reauth.ms; 0: never
        self.expires_at: float | None = None      # loop time the session ends (KIP-368)
        self.lifetime_ms = 0                      # the session lifetime last answered
        self.mechanism: str | None = None         # of the completed authentication
        self.reauth_started = 0.0                 # loop time of the last re-authentication
        self.reauth_error: str | None = None      # a re-authentication with another mechanism

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now > self.expires_at

    def can_reauthenticate(self, now: float) -> bool:
        """KIP-368: a completed session with a lifetime, at most one re-authentication a second."""
        return self.complete and self.expires_at is not None and now - self.reauth_started >= 1.0

    @property
    def complete(self) -> bool:
        return self.state == _COMPLETE

    @property
    def failed(self) -> bool:
        return self.state == _FAILED

    def admit(self, api_key: int, served_version: bool) -> None:
        """Let a request in before authentication completes, or raise InvalidRequestError (the
        connection closes without an answer).  ``served_version``: ApiVersions in our range."""
        if self.state == _HANDSHAKE_OR_VERSIONS and api_key == m.ApiKey.API_VERSIONS:
            if served_version:
                self.state = _HANDSHAKE
            return
        if self.state in (_HANDSHAKE_OR_VERSIONS, _HANDSHAKE) and api_key == m.ApiKey.SASL_HANDSHAKE:
            return
        if self.state == _AUTHENTICATE and api_key == m.ApiKey.SASL_AUTHENTICATE:
            return
        self.state = _FAILED
        name = m.API_NAMES.get(api_key, api_key)
        raise InvalidRequestError(f"unexpected {name} request before SASL authentication completed")

    async def fail(self) -> None:
        """End the exchange: the answer waits connection.failed.authentication.delay.ms."""
        self.state = _FAILED
        self.authenticator = None
        if self.failed_delay:
            await asyncio.sleep(self.failed_delay)

    async def evaluate(self, token: bytes, conn) -> bytes:
        """One client token through the mechanism (its ``evaluate_async`` where it has one:
        OAUTHBEARER's secured validator may refetch its JWKS off the loop); the principal is set
        when it completes.  KafkaApiError (SASL_AUTHENTICATION_FAILED, ILLEGAL_SASL_STATE) ends
        the exchange."""
        auth = self.authenticator
        assert auth is not None                   # state AUTHENTICATE
        if self.reauth_error is not None:
            raise SaslAuthenticationError(self.reauth_error)
        try:
            evaluate_async = getattr(auth, "evaluate_async", None)
            reply = (await evaluate_async(bytes(token)) if evaluate_async is not None
                     else auth.evaluate(bytes(token)))
        except KafkaApiError:
            log.info("connection %s: SASL %s authentication failed: %s", conn.peer,
                     auth.mechanism, auth.failure or "invalid token")
            raise
        if auth.complete:
            if self.mechanism is not None and auth.principal != conn.principal:
                old, new = conn.principal.replace(":", "."), auth.principal.replace(":", ".")
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from {old}: {new}")
            self.state = _COMPLETE
            self.raw_tokens = False
            self.authenticator = None
            self.mechanism = auth.mechanism
            lifetime_ms = self.reauth.get(auth.mechanism, 0)
            expiry_ms = getattr(auth, "credential_expiry_ms", None)   # OAUTHBEARER's token exp
            if expiry_ms is not None:       # Kafka: the credential bounds the session
                left = max(0, expiry_ms - int(time.time() * 1000))
                lifetime_ms = min(left, lifetime_ms) if lifetime_ms else left
            if lifetime_ms or expiry_ms is not None:
                self.expires_at = asyncio.get_running_loop().time() + lifetime_ms / 1000.0
            self.lifetime_ms = lifetime_ms
            conn.principal = auth.principal
            log.debug("connection %s: authenticated as %s (%s)", conn.peer, auth.principal,
                      auth.mechanism)
        return reply

    async def raw_token(self, frame, conn) -> bool:
        """A token after a v0 handshake: answer it as a raw size-prefixed frame; False when the
        exchange failed (no answer, the connection closes after the delay)."""
        try:
            reply = await self.evaluate(frame, conn)
        except KafkaApiError:
            await self.fail()
            return False
        await conn.send_frame(reply)
        return True


class SaslHandlers:
    """SaslHandshake and SaslAuthenticate for the broker's dispatch table."""

    def __init__(self, handlers) -> None:
        self.handlers = handlers

    def table(self) -> dict:
        return {m.ApiKey.SASL_HANDSHAKE: self.sasl_handshake,
                m.ApiKey.SASL_AUTHENTICATE: self.sasl_authenticate}

    async def sasl_handshake(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.SASL_HANDSHAKE, v, body.buf[body.pos:])
        session = conn.sasl
        now = asyncio.get_running_loop().time()
        if session is not None and v >= 1 and session.can_reauthenticate(now):
            session.reauth_started = now          # KIP-368: a new exchange on this connection
            session.reauth_error = None
            if req.mechanism != session.mechanism:
                session.reauth_error = (f"SASL mechanism '{req.mechanism}' requested by client is not "
                                        f"supported for re-authentication of mechanism "
                                        f"'{session.mechanism}'")
            session.state = _HANDSHAKE
        if session is None or session.state not in (_HANDSHAKE_OR_VERSIONS, _HANDSHAKE):
            # KafkaApis: a handshake on an authenticated (or non-SASL) connection
            return _handshake_response(v, ErrorCode.ILLEGAL_SASL_STATE, [])
        enabled = list(session.factory.enabled_mechanisms)
        try:
            session.authenticator = session.factory.create(req.mechanism)
        except UnsupportedSaslMechanismError:
            log.info("connection %s: SASL mechanism %r is not enabled", conn.peer, req.mechanism)
            await session.fail()
            return _handshake_response(v, ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled)
        session.state = _AUTHENTICATE
        session.raw_tokens = v == 0
        return _handshake_response(v, ErrorCode.NONE, enabled)

    async def sasl_authenticate(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.SASL_AUTHENTICATE, v, body.buf[body.pos:])
        session = conn.sasl
        if session is None or session.state != _AUTHENTICATE:
            return _authenticate_response(v, ErrorCode.ILLEGAL_SASL_STATE,
                                          "SaslAuthenticate request received after successful "
                                          "authentication")
        try:
            reply = await session.evaluate(req.auth_bytes, conn)
        except KafkaApiError as e:
            await session.fail()
            return _authenticate_response(v, e.code, str(e))
        lifetime = 0
        if session.complete and session.expires_at is not None:
            lifetime = session.lifetime_ms
        return _authenticate_response(v, ErrorCode.NONE, None, reply, lifetime)


def _handshake_response(version: int, code: int, mechanisms: list[str]) -> list:
    return [m.encode(m.ApiKey.SASL_HANDSHAKE, version,
                     {"error_code": code, "mechanisms": mechanisms})]


def _authenticate_response(version: int, code: int, message: str | None,
                           auth_bytes: bytes = b"", lifetime_ms: int = 0) -> list:
    return [m.encode(m.ApiKey.SASL_AUTHENTICATE, version,
                     {"error_code": code, "error_message": message, "auth_bytes": auth_bytes,
                      "session_lifetime": lifetime_ms})]
