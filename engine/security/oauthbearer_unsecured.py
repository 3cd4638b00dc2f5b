"""Kafka's default OAUTHBEARER token validation: an unsecured JWS checked as Kafka's
``OAuthBearerUnsecuredValidatorCallbackHandler`` does, sans I/O.

A token is the compact serialization ``<header>.<claims>.`` (RFC 7515 / RFC 7519): three
dot-separated base64 parts, the last (the signature) empty, the header's ``alg`` ``none``.  The
checks, in Kafka's order, each failing with :class:`OAuthBearerTokenError`:

- no ``..``; exactly three parts; header and claims decode to JSON objects;
- ``alg`` is ``none`` and the signature part is empty (an unsecured validator never takes a
  signed token -- that is the secured validator's job);
- the scope claim (option ``unsecuredValidatorScopeClaimName``, default ``scope``) is a string
  (one scope item) or a list of strings, or absent;
- ``exp`` is present and a number (seconds since the epoch, fractions allowed);
- the principal claim (``unsecuredValidatorPrincipalClaimName``, default ``sub``) is a
  non-blank string: it names the principal, ``User:<value>``;
- ``iat``, where present, is a number not after now plus the allowed skew;
- now minus the skew (``unsecuredValidatorAllowableClockSkewMs``, default 0) is before ``exp``;
- ``exp`` is after ``iat``;
- every item of ``unsecuredValidatorRequiredScope`` (space separated) is in the token's scope
  (a missing one fails with ``insufficient_scope`` and the required scope, as in Kafka).

The options come from the broker's OAuthBearerLoginModule JAAS entry
(``listener.name.<l>.oauthbearer.sasl.jaas.config``); a bad option (a negative or non-numeric
skew, an invalid scope item) is an :class:`~engine.errors.InvalidConfigError` at start-up
(Kafka raises it on the first login).  Deliberate differences from Kafka: base64url (RFC 7515)
and standard base64 are both decoded (Kafka's decoder takes only the standard alphabet, so a
token whose base64url holds ``-`` or ``_`` is refused there); a missing ``alg`` fails as an
invalid token (a NullPointerException in Kafka); only JSON strings count as strings (Kafka
turns ``true`` or ``null`` into the text ``"true"`` / ``"null"``).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from engine.errors import EngineError, InvalidConfigError

__all__ = ["OAuthBearerToken", "OAuthBearerTokenError", "UnsecuredValidator", "parse_scope"]

PRINCIPAL_CLAIM_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
CLOCK_SKEW_OPTION = "unsecuredValidatorAllowableClockSkewMs"
_SCOPE_ITEM = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")     # RFC 6749 scope-token


class OAuthBearerTokenError(EngineError):
    """A token the validator refuses: ``reason`` is for the broker's log, ``failure_scope``
    (the required scope, as Kafka prints it) marks an ``insufficient_scope`` failure."""

    def __init__(self, reason: str, failure_scope: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.failure_scope = failure_scope

    @property
    def status(self) -> str:
        """RFC 6750's error code the server answers with."""
        return "insufficient_scope" if self.failure_scope is not None else "invalid_token"


@dataclass(frozen=True)
class OAuthBearerToken:
    """A validated token (Kafka's OAuthBearerToken): the principal's name, its scope, its
    expiry (``lifetime_ms``: ms since the epoch) and start (``iat``, if given)."""

    value: str = field(repr=False)      # the token itself: a bearer credential, never logged
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int
    start_time_ms: int | None = None
    claims: Mapping[str, object] = field(default_factory=dict, repr=False)


def parse_scope(text: str) -> list[str]:
    """A space-separated scope (``unsecuredValidatorRequiredScope``), each item an RFC 6749
    scope-token; InvalidConfigError for one that is not."""
    out = []
    for item in text.split(" "):
        if item:
            if not _SCOPE_ITEM.fullmatch(item):
                raise InvalidConfigError(f"Invalid scope value: {item}")
            out.append(item)
    return out


def _decode_part(part: str) -> dict[str, object]:
    """The JSON object of one base64(url) part of the compact serialization."""
    text = part.replace("-", "+").replace("_", "/").rstrip("=")
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise OAuthBearerTokenError("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise OAuthBearerTokenError("malformed JSON") from None
    if not isinstance(value, dict):
        raise OAuthBearerTokenError("malformed JSON: not an object")
    return value


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _number(claims: Mapping[str, object], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if not _is_number(value):
        raise OAuthBearerTokenError(f"The '{name}' claim was not of type Number: "
                                    f"{type(value).__name__}")
    assert isinstance(value, (int, float))
    return float(value)


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))       # Kafka: Math.round(seconds * 1000)


def _scope(claims: Mapping[str, object], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset([value.strip()]) if value.strip() else frozenset()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return frozenset(v.strip() for v in value if v.strip())
    raise OAuthBearerTokenError(f"The '{name}' claim was not of type List: {type(value).__name__}")


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler (see the module doc).  ``clock``
    returns seconds since the epoch."""

    def __init__(self, *, principal_claim: str = "sub", scope_claim: str = "scope",
                 required_scope: list[str] | None = None, clock_skew_ms: int = 0,
                 clock: Callable[[], float] = time.time) -> None:
        if not principal_claim.strip() or not scope_claim.strip():
            raise InvalidConfigError("OAUTHBEARER: the principal and scope claim names must not be blank")
        if clock_skew_ms < 0:
            raise InvalidConfigError(f"Allowable clock skew millis must not be negative: {clock_skew_ms}")
        self.principal_claim = principal_claim.strip()
        self.scope_claim = scope_claim.strip()
        self.required_scope = list(required_scope or [])
        self.clock_skew_ms = clock_skew_ms
        self._clock = clock

    @classmethod
    def from_options(cls, options: Mapping[str, str], **kw) -> UnsecuredValidator:
        """The validator of a broker's OAuthBearerLoginModule options (blank means default)."""
        def opt(key: str) -> str:
            return (options.get(key) or "").strip()
        skew_text = opt(CLOCK_SKEW_OPTION)
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            raise InvalidConfigError(f"OAUTHBEARER: {CLOCK_SKEW_OPTION} must be an integer, "
                                     f"not {skew_text!r}") from None
        return cls(principal_claim=opt(PRINCIPAL_CLAIM_OPTION) or "sub",
                   scope_claim=opt(SCOPE_CLAIM_OPTION) or "scope",
                   required_scope=parse_scope(opt(REQUIRED_SCOPE_OPTION)), clock_skew_ms=skew, **kw)

    def validate(self, token: str) -> OAuthBearerToken:
        """The token's principal, scope and lifetime; OAuthBearerTokenError if it is refused."""
        if ".." in token:
            raise OAuthBearerTokenError("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise OAuthBearerTokenError("Unsecured JWS compact serializations must have 3 "
                                        "dot-separated Base64URL-encoded values")
        header, claims = _decode_part(parts[0]), _decode_part(parts[1])
        if header.get("alg") != "none":
            raise OAuthBearerTokenError("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise OAuthBearerTokenError("Unsecured JWS must not contain a digital signature")
        scope = _scope(claims, self.scope_claim)
        exp = _number(claims, "exp")
        if exp is None:
            raise OAuthBearerTokenError("No expiration time in JWT")
        principal = claims.get(self.principal_claim)
        if principal is not None and not isinstance(principal, str):
            raise OAuthBearerTokenError(f"The '{self.principal_claim}' claim was not of type String: "
                                        f"{type(principal).__name__}")
        if not principal or not principal.strip():
            raise OAuthBearerTokenError(f"No principal name in JWT claim: {self.principal_claim}")
        iat = _number(claims, "iat")
        now_ms = self._clock() * 1000
        skew = self.clock_skew_ms
        if iat is not None and 1000 * iat > now_ms + skew:
            raise OAuthBearerTokenError(f"The Issued At value ({iat} seconds) was after the indicated "
                                        f"time ({int(now_ms)} ms) plus allowable clock skew ({skew} ms)")
        if now_ms - skew >= 1000 * exp:
            raise OAuthBearerTokenError(f"The indicated time ({int(now_ms)} ms) minus allowable clock skew "
                                        f"({skew} ms) was on or after the Expiration Time value ({exp} seconds)")
        if iat is not None and exp <= iat:
            raise OAuthBearerTokenError(f"The Expiration Time time ({exp} seconds) was not after the "
                                        f"Issued At time ({iat} seconds)")
        for item in self.required_scope:
            if item not in scope:
                raise OAuthBearerTokenError(
                    f"The provided scope ({sorted(scope)}) was missing a required scope ({item}). "
                    f" All required scope elements: {self.required_scope}",
                    failure_scope="[" + ", ".join(self.required_scope) + "]")
        return OAuthBearerToken(token, principal, scope, _ms(exp),
                                None if iat is None else _ms(iat), claims)
