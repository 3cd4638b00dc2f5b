"""SASL OAUTHBEARER (RFC 7628, Kafka's KIP-255) as Kafka's OAuthBearerSaslServer serves it, sans I/O.

The client's one message is the GS2-style initial response::

    n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]*^A        (^A is the byte 0x01)

parsed by Kafka's grammar (``OAuthBearerClientInitialResponse``): extension keys are letters,
values printable ASCII, space, tab, CR or LF; the scheme is ``Bearer`` in any case; the token is
``[-_~+/.a-zA-Z0-9]+=*``.  A message that does not parse fails at once with Kafka's generic
answer (SASL_AUTHENTICATION_FAILED, "Authentication failed during authentication due to invalid
credentials with SASL mechanism OAUTHBEARER").

The token goes to a validator (``validate(token) -> OAuthBearerToken``, raising
:class:`~engine.security.oauthbearer_unsecured.OAuthBearerTokenError`): Kafka's default is the
unsecured one of engine/security/oauthbearer_unsecured.py.  A refused token is answered, as RFC
7628 section 3.2.2 and Kafka do, with a JSON error in the auth bytes --
``{"status":"invalid_token"}``, or ``{"status":"insufficient_scope", "scope":"[<required>]"}``
-- and the exchange waits for the client's ``^A``; that ends it with SASL_AUTHENTICATION_FAILED
and the same JSON as the message.  (Another initial response instead starts over, as in Kafka.)
A valid token completes the exchange with an empty answer: the principal is ``User:<principal
claim>``; an authzid other than that principal fails with Kafka's message.  Extensions are
accepted and kept (:attr:`OAuthBearerServer.extensions`), as Kafka's unsecured validator does.

:attr:`OAuthBearerServer.credential_expiry_ms` is the token's ``exp`` (ms since the epoch):
the broker bounds the session by it (KIP-368; engine/server/sasl_handlers.py).
"""

from __future__ import annotations

import json
import re
from typing import Protocol

from engine.errors import IllegalSaslStateError, SaslAuthenticationError
from engine.security.oauthbearer_unsecured import OAuthBearerToken, OAuthBearerTokenError

__all__ = ["OAUTHBEARER", "OAUTHBEARER_LOGIN_MODULE", "OAuthBearerServer", "TokenValidator",
           "parse_initial_response"]

OAUTHBEARER = "OAUTHBEARER"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_SEP = "\x01"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_INITIAL = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_SEP}"
                      rf"(?P<kvpairs>(?:{_KEY}={_VALUE}{_SEP})*){_SEP}")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)", re.ASCII)
_GENERIC = ("Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {OAUTHBEARER}")


class TokenValidator(Protocol):
    """What checks a bearer token (UnsecuredValidator, JwksValidator).  A validator may also have
    ``async validate_async(token)`` (JwksValidator: it may refetch its JWKS first), which
    :meth:`OAuthBearerServer.evaluate_async` then uses."""

    def validate(self, token: str) -> OAuthBearerToken: ...


def parse_initial_response(message: bytes) -> tuple[str, str, dict[str, str]]:
    """``(token, authzid, extensions)`` of a client initial response; ValueError with Kafka's
    message (for the log) when it does not parse."""
    text = bytes(message).decode("utf-8", "replace")
    match = _INITIAL.fullmatch(text)
    if match is None:
        raise ValueError("Invalid OAUTHBEARER client first message")
    props: dict[str, str] = {}
    for pair in match.group("kvpairs").split(_SEP):
        if pair:
            key, _, value = pair.partition("=")
            props[key] = value
    auth = props.pop("auth", None)
    if auth is None:
        raise ValueError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise ValueError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match.group("scheme").lower() != "bearer":
        raise ValueError("Invalid scheme in OAUTHBEARER client first message")
    return auth_match.group("token"), match.group("authzid") or "", props


def _json_error(status: str, scope: str | None) -> str:
    """RFC 7628's error message, spelled as Kafka's server spells it."""
    text = '{"status":' + json.dumps(status)
    if scope is not None:
        text += ', "scope":' + json.dumps(scope)
    return text + "}"


class OAuthBearerServer:
    """The server side of one OAUTHBEARER exchange, tokens checked by ``validator``."""

    def __init__(self, validator: TokenValidator) -> None:
        self.mechanism = OAUTHBEARER
        self._validator = validator
        self._token: OAuthBearerToken | None = None
        self._error: str | None = None      # the JSON error sent, until the client's ^A
        self.extensions: dict[str, str] = {}
        self.failure: str | None = None     # why it failed, for the broker's log only

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        if self._token is None:
            raise IllegalSaslStateError("OAUTHBEARER authentication exchange has not completed")
        return self._token.principal_name

    @property
    def principal(self) -> str:
        """Kafka's principal of the token: ``User:<principal claim>``."""
        return "User:" + self.authorization_id

    @property
    def credential_expiry_ms(self) -> int | None:
        """The token's ``exp`` in ms since the epoch (Kafka's credential lifetime)."""
        return None if self._token is None else self._token.lifetime_ms

    def evaluate(self, token: bytes) -> bytes:
        """One client message: the initial response (answered empty, or with the JSON error)
        or, after an error, the client's ``^A`` (which fails the exchange)."""
        value, authzid, extensions = self._initial(token)
        try:
            checked = self._validator.validate(value)
        except OAuthBearerTokenError as e:
            return self._refused(e)
        return self._accepted(checked, authzid, extensions)

    async def evaluate_async(self, token: bytes) -> bytes:
        """:meth:`evaluate`, through the validator's ``validate_async`` where it has one (the
        secured validator may refetch its JWKS, off the event loop, before it answers)."""
        value, authzid, extensions = self._initial(token)
        validate_async = getattr(self._validator, "validate_async", None)
        try:
            checked = (await validate_async(value) if validate_async is not None
                       else self._validator.validate(value))
        except OAuthBearerTokenError as e:
            return self._refused(e)
        return self._accepted(checked, authzid, extensions)

    def _initial(self, token: bytes) -> tuple[str, str, dict[str, str]]:
        if self._token is not None:
            raise IllegalSaslStateError("Unexpected OAUTHBEARER token after the exchange ended")
        message = bytes(token)
        if message == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        try:
            return parse_initial_response(message)
        except ValueError as e:
            self.failure = str(e)
            raise SaslAuthenticationError(_GENERIC) from None

    def _refused(self, e: OAuthBearerTokenError) -> bytes:
        self.failure = e.reason
        self._error = _json_error(e.status, e.failure_scope)
        return self._error.encode("utf-8")

    def _accepted(self, checked: OAuthBearerToken, authzid: str, extensions: dict[str, str]) -> bytes:
        if authzid and authzid != checked.principal_name:
            self.failure = (f"Authentication failed: Client requested an authorization id ({authzid}) "
                            f"that is different from the token's principal name ({checked.principal_name})")
            raise SaslAuthenticationError(self.failure)
        self.extensions = extensions
        self._token = checked
        return b""
