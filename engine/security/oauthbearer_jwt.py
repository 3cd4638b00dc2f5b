"""Kafka's secured OAUTHBEARER validation (KIP-768, ``OAuthBearerValidatorCallbackHandler``):
a signed JWT checked against the keys of a JWKS, with the ``sasl.oauthbearer.*`` keys.

- ``sasl.oauthbearer.jwks.endpoint.url`` (required): ``file://`` or ``http(s)://``, read at
  start and kept fresh by engine/security/jwks_refresh.py (every
  ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, and on a ``kid`` not in the set, with
  ``.retry.backoff.ms`` / ``.retry.backoff.max.ms``) between :meth:`JwksValidator.start` and
  :meth:`JwksValidator.stop`: :meth:`JwksValidator.validate_async` refetches for an unknown ``kid``
  and then checks the token against the new set (``validate`` never waits: it refuses it).
  RSA and EC (P-256/384/521) keys are used; a key whose ``use`` is not ``sig`` is skipped.
- The signature: ``alg`` one of RS256/384/512, PS256/384/512, ES256/384/512 (``none`` and the
  HMAC algorithms are refused, as jose4j's DISALLOW_NONE with public keys does), verified with the
  ``cryptography`` package by the key the header's ``kid`` names (without a ``kid``: any key of
  the algorithm's type); a signature no key verifies is refused.
- ``exp`` and ``iat`` required (numbers); refused when now minus ``sasl.oauthbearer.clock.skew.seconds``
  (default 30) is on or after ``exp``, or, with an ``nbf``, now plus the skew is before it;
  ``exp`` / ``iat`` must not be negative.
- ``sasl.oauthbearer.expected.audience`` (a list; default none): the ``aud`` claim (a string or
  a list) must hold one of them; ``sasl.oauthbearer.expected.issuer`` (default none): ``iss``
  must equal it.
- ``sasl.oauthbearer.sub.claim.name`` (default ``sub``): a non-blank string, trimmed, the
  principal; ``sasl.oauthbearer.scope.claim.name`` (default ``scope``): a string or a list of
  non-blank strings without duplicates.

Every refusal raises :class:`~engine.security.oauthbearer_unsecured.OAuthBearerTokenError`
(answered ``{"status":"invalid_token"}``, as Kafka does); configuration errors are
:class:`~engine.errors.InvalidConfigError` at start.  Each key may carry the listener prefix
``listener.name.<l>.``.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from engine.errors import InvalidConfigError
from engine.security.jwks_refresh import (
    DEFAULT_REFRESH_MS,
    DEFAULT_RETRY_BACKOFF_MAX_MS,
    DEFAULT_RETRY_BACKOFF_MS,
    RefreshingJwks,
)
from engine.security.listeners import listener_config
from engine.security.oauthbearer_unsecured import OAuthBearerToken, OAuthBearerTokenError

__all__ = ["JwksValidator", "load_jwks"]

DEFAULT_CLOCK_SKEW_SECONDS = 30
_HASHES: dict[str, Callable[[], hashes.HashAlgorithm]] = {
    "256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES: dict[str, Callable[[], ec.EllipticCurve]] = {
    "P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}
_ES_CURVE = {"ES256": "secp256r1", "ES384": "secp384r1", "ES512": "secp521r1"}
_FETCH_TIMEOUT = 10.0
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey


def _b64(text: str) -> bytes:
    """base64url without padding (RFC 7515); ValueError when it is not."""
    if any(c in text for c in "+/="):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _int(text: str) -> int:
    return int.from_bytes(_b64(text), "big")


def _public_key(jwk: Mapping[str, Any]) -> PublicKey | None:
    """The verification key of one JWK, None for a key type or use not served."""
    if jwk.get("use", "sig") != "sig":
        return None
    try:
        if jwk.get("kty") == "RSA":
            return rsa.RSAPublicNumbers(_int(jwk["e"]), _int(jwk["n"])).public_key()
        if jwk.get("kty") == "EC" and jwk.get("crv") in _CURVES:
            curve = _CURVES[jwk["crv"]]()
            return ec.EllipticCurvePublicNumbers(_int(jwk["x"]), _int(jwk["y"]), curve).public_key()
    except (KeyError, TypeError, ValueError, binascii.Error) as e:
        raise InvalidConfigError(f"JWKS key {jwk.get('kid')!r} is malformed: {e}") from None
    return None


def load_jwks(url: str) -> list[tuple[str | None, PublicKey]]:
    """The ``(kid, key)`` pairs of the JWKS at ``url`` (file:// or http(s)://)."""
    parsed = urllib.parse.urlparse(url)
    try:
        if parsed.scheme == "file":
            with open(urllib.request.url2pathname(parsed.path), "rb") as f:
                raw = f.read()
        elif parsed.scheme in ("http", "https"):
            with urllib.request.urlopen(url, timeout=_FETCH_TIMEOUT) as resp:   # noqa: S310 (scheme checked)
                raw = resp.read()
        else:
            raise InvalidConfigError(f"sasl.oauthbearer.jwks.endpoint.url must be a file, http or https "
                                     f"URL, not {url!r}")
        doc = json.loads(raw)
    except OSError as e:
        raise InvalidConfigError(f"sasl.oauthbearer.jwks.endpoint.url {url}: cannot read the JWKS: {e}") from None
    except ValueError:
        raise InvalidConfigError(f"sasl.oauthbearer.jwks.endpoint.url {url}: not a JSON JWKS") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise InvalidConfigError(f"sasl.oauthbearer.jwks.endpoint.url {url}: no \"keys\" list")
    out = []
    for jwk in doc["keys"]:
        key = _public_key(jwk) if isinstance(jwk, dict) else None
        if key is not None:
            out.append((jwk.get("kid"), key))
    if not out:
        raise InvalidConfigError(f"sasl.oauthbearer.jwks.endpoint.url {url}: no RSA or EC signing key")
    return out


def _verify(alg: str, key: PublicKey, data: bytes, sig: bytes) -> bool:
    family, bits = alg[:2], alg[2:]
    digest = _HASHES[bits]()
    try:
        if family in ("RS", "PS") and isinstance(key, rsa.RSAPublicKey):
            pad = (padding.PKCS1v15() if family == "RS" else
                   padding.PSS(mgf=padding.MGF1(_HASHES[bits]()), salt_length=digest.digest_size))
            key.verify(sig, data, pad, digest)
            return True
        if family == "ES" and isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == _ES_CURVE[alg]:
            half = (key.curve.key_size + 7) // 8
            if len(sig) != 2 * half:
                return False
            der = encode_dss_signature(int.from_bytes(sig[:half], "big"), int.from_bytes(sig[half:], "big"))
            key.verify(der, data, ec.ECDSA(digest))
            return True
    except InvalidSignature:
        return False
    return False


def _json_part(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64(text))
    except (ValueError, binascii.Error):
        raise OAuthBearerTokenError(f"Could not validate the access token: malformed {what}") from None
    if not isinstance(value, dict):
        raise OAuthBearerTokenError(f"Could not validate the access token: the {what} is not a JSON object")
    return value


def _seconds(claims: Mapping[str, Any], name: str) -> float:
    value = claims.get(name)
    if value is None:
        raise OAuthBearerTokenError(f"Could not validate the access token: no '{name}' claim")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OAuthBearerTokenError(f"Could not extract the '{name}' claim from the access token")
    if value < 0:
        raise OAuthBearerTokenError(f"{name} value must be non-negative; value given was \"{value}\"")
    return float(value)


def _nonblank(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise OAuthBearerTokenError(f"{name} value must be non-null")
    if not value.strip():
        raise OAuthBearerTokenError(f"{name} value must be non-empty")
    return value.strip()


class _UnknownKeyIdError(OAuthBearerTokenError):
    """The token's ``kid`` names no key of the set (a refresh may find it)."""

    def __init__(self, kid: str) -> None:
        super().__init__(f"Could not validate the access token: no key {kid!r} in the JWKS")
        self.kid = kid

    def __reduce__(self):
        return type(self), (self.kid,)


class JwksValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler over the given keys (see the module doc)."""

    ALGORITHMS = frozenset(f"{f}{b}" for f in ("RS", "PS", "ES") for b in _HASHES)

    def __init__(self, jwks: RefreshingJwks, *,
                 expected_audience: list[str] | None = None, expected_issuer: str | None = None,
                 sub_claim: str = "sub", scope_claim: str = "scope",
                 clock_skew_seconds: int = DEFAULT_CLOCK_SKEW_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        if clock_skew_seconds < 0:
            raise InvalidConfigError(f"sasl.oauthbearer.clock.skew.seconds must not be negative: {clock_skew_seconds}")
        self.jwks = jwks
        self.expected_audience = list(expected_audience or [])
        self.expected_issuer = expected_issuer
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.clock_skew = clock_skew_seconds
        self._clock = clock

    @property
    def keys(self) -> list[tuple[str | None, PublicKey]]:
        """The keys in use (the refreshed set's latest)."""
        return self.jwks.keys

    def start(self) -> None:
        """Keep the JWKS fresh from now on (on the broker's loop)."""
        self.jwks.start()

    def stop(self) -> None:
        self.jwks.stop()

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any], listener: str, **kw) -> JwksValidator:
        """The validator of ``listener`` from the broker's ``sasl.oauthbearer.*`` keys."""
        def get(key: str, default: Any = None) -> Any:
            return listener_config(configs, listener, "sasl.oauthbearer." + key, default)
        url = str(get("jwks.endpoint.url") or "").strip()
        if not url:
            raise InvalidConfigError("sasl.oauthbearer.jwks.endpoint.url is required by "
                                     "OAuthBearerValidatorCallbackHandler")
        audience = get("expected.audience")
        if isinstance(audience, str):
            audience = [a.strip() for a in audience.split(",") if a.strip()]
        try:
            skew = int(get("clock.skew.seconds", DEFAULT_CLOCK_SKEW_SECONDS))
        except (TypeError, ValueError):
            raise InvalidConfigError("sasl.oauthbearer.clock.skew.seconds must be an integer") from None
        issuer = get("expected.issuer")

        def ms(key: str, default: int) -> int:
            try:
                return int(get(key, default))
            except (TypeError, ValueError):
                raise InvalidConfigError(f"sasl.oauthbearer.{key} must be an integer") from None
        jwks = RefreshingJwks(url, load_jwks, refresh_ms=ms("jwks.endpoint.refresh.ms", DEFAULT_REFRESH_MS),
                              retry_backoff_ms=ms("jwks.endpoint.retry.backoff.ms", DEFAULT_RETRY_BACKOFF_MS),
                              retry_backoff_max_ms=ms("jwks.endpoint.retry.backoff.max.ms",
                                                      DEFAULT_RETRY_BACKOFF_MAX_MS))
        return cls(jwks, expected_audience=audience, expected_issuer=str(issuer) if issuer else None,
                   sub_claim=str(get("sub.claim.name") or "sub").strip(),
                   scope_claim=str(get("scope.claim.name") or "scope").strip(), clock_skew_seconds=skew, **kw)

    async def validate_async(self, token: str) -> OAuthBearerToken:
        """:meth:`validate`, but a ``kid`` not in the set first refreshes it (off the loop, within
        Kafka's limits) and the token is checked against the new set."""
        try:
            return self.validate(token)
        except _UnknownKeyIdError as e:
            if not await self.jwks.refresh_for_kid(e.kid):
                raise
        return self.validate(token)

    def validate(self, token: str) -> OAuthBearerToken:
        """The token's principal, scope and lifetime; OAuthBearerTokenError if it is refused."""
        parts = token.split(".")
        if len(parts) != 3 or not all(parts):
            raise OAuthBearerTokenError("Could not validate the access token: not a signed JWS compact "
                                        "serialization (three non-empty parts)")
        header = _json_part(parts[0], "header")
        alg = header.get("alg")
        if alg not in self.ALGORITHMS:
            raise OAuthBearerTokenError(f"Could not validate the access token: algorithm {alg!r} is not allowed")
        try:
            signature = _b64(parts[2])
        except (ValueError, binascii.Error):
            raise OAuthBearerTokenError("Could not validate the access token: malformed signature") from None
        kid = header.get("kid")
        keys = self.keys
        if isinstance(kid, str) and all(key_id != kid for key_id, _k in keys):
            raise _UnknownKeyIdError(kid)
        candidates = [k for key_id, k in keys if kid is None or key_id == kid]
        data = f"{parts[0]}.{parts[1]}".encode("ascii")
        if not any(_verify(alg, key, data, signature) for key in candidates):
            raise OAuthBearerTokenError("Could not validate the access token: no key of the JWKS verifies "
                                        f"its signature (kid {kid!r})")
        claims = _json_part(parts[1], "claims")
        now = self._clock()
        exp, iat = _seconds(claims, "exp"), _seconds(claims, "iat")
        if now - self.clock_skew >= exp:
            raise OAuthBearerTokenError(f"Could not validate the access token: expired at {exp} (now {now:.0f}, "
                                        f"allowed skew {self.clock_skew} s)")
        nbf = claims.get("nbf")
        if isinstance(nbf, (int, float)) and not isinstance(nbf, bool) and now + self.clock_skew < nbf:
            raise OAuthBearerTokenError(f"Could not validate the access token: not before {nbf}")
        if self.expected_audience:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not any(a in self.expected_audience for a in auds):
                raise OAuthBearerTokenError("Could not validate the access token: audience (aud) "
                                            f"{aud!r} is not one of {self.expected_audience}")
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise OAuthBearerTokenError(f"Could not validate the access token: issuer (iss) {claims.get('iss')!r} "
                                        f"is not {self.expected_issuer!r}")
        raw_scope = claims.get(self.scope_claim)
        items = [raw_scope] if isinstance(raw_scope, str) else raw_scope if isinstance(raw_scope, list) else []
        scope: set[str] = set()
        for item in items:
            item = _nonblank(self.scope_claim, item)
            if item in scope:
                raise OAuthBearerTokenError(f"{self.scope_claim} value must not contain duplicates - "
                                            f"{item} already present")
            scope.add(item)
        sub = _nonblank(self.sub_claim, claims.get(self.sub_claim))
        return OAuthBearerToken(token, sub, frozenset(scope), int(exp * 1000), int(iat * 1000), claims)
