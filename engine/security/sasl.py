"""The SASL mechanisms a listener serves, and a server-side authenticator for each exchange.

A broker builds one :class:`SaslServerFactory` per SASL listener (:meth:`from_configs` reads
Kafka's keys) and, per connection:

- SaslHandshake(mechanism): ``factory.create(mechanism)``; an unserved mechanism raises
  :class:`~engine.errors.UnsupportedSaslMechanismError` and the response lists
  ``factory.enabled_mechanisms``;
- each SaslAuthenticate(token): ``auth.evaluate(token)`` -> the response's auth bytes, until
  ``auth.complete``; then the connection's principal is ``auth.principal`` (``User:<name>``).
  :class:`~engine.errors.SaslAuthenticationError` (code 58, its message is for the client) and
  :class:`~engine.errors.IllegalSaslStateError` (34) end the exchange; ``auth.failure`` says
  why, for the broker's log only.

Kafka's keys: ``sasl.enabled.mechanisms`` (default ``GSSAPI``, which is not served: a listener
must name PLAIN, SCRAM-SHA-256/512 and/or OAUTHBEARER) with the per-listener override
``listener.name.<listener>.sasl.enabled.mechanisms``; PLAIN's users come from
``listener.name.<listener>.plain.sasl.jaas.config`` (a PlainLoginModule line with
``user_<name>="<password>"``) -- as in Kafka, a broker does not take its server-side JAAS from
the unprefixed ``sasl.jaas.config``; SCRAM's credentials come from a credential store
(:class:`engine.security.credentials.ScramCredentialStore` or any ``(user, mechanism) ->
ScramCredential | None``); OAUTHBEARER's validator options come from
``listener.name.<listener>.oauthbearer.sasl.jaas.config`` (an OAuthBearerLoginModule line,
required): without ``listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class``
tokens are checked by Kafka's default, the unsecured validator
(engine/security/oauthbearer_unsecured.py); naming Kafka's ``OAuthBearerValidatorCallbackHandler``
checks signed tokens against ``sasl.oauthbearer.jwks.endpoint.url``
(engine/security/oauthbearer_jwt.py), whose JWKS is refreshed between the factory's
:meth:`~SaslServerFactory.start` and :meth:`~SaslServerFactory.stop` (the broker's).  Any other
class is refused, and so is a JWKS URL without that class (Kafka would then silently keep the
unsecured validator).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from engine.errors import InvalidConfigError, UnsupportedSaslMechanismError
from engine.security.jaas import PLAIN_LOGIN_MODULE, listener_jaas_key, plain_users, single_entry
from engine.security.oauthbearer import OAUTHBEARER, OAUTHBEARER_LOGIN_MODULE, OAuthBearerServer, TokenValidator
from engine.security.oauthbearer_jwt import JwksValidator
from engine.security.oauthbearer_unsecured import UnsecuredValidator
from engine.security.plain import PLAIN, PlainServer
from engine.security.scram import DEFAULT_ITERATIONS, HASHES, ScramCredential, ScramServer

SERVED_MECHANISMS = (PLAIN, *HASHES, OAUTHBEARER)
DEFAULT_ENABLED_MECHANISMS = "GSSAPI"       # Kafka's default for sasl.enabled.mechanisms
UNSECURED_VALIDATOR_CLASS = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                             "OAuthBearerUnsecuredValidatorCallbackHandler")
SECURED_VALIDATOR_CLASSES = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                             # its deprecated name (KIP-768's first package)
                             "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")

ScramLookup = Callable[[str, str], "ScramCredential | None"]   # (user, mechanism)


class SaslAuthenticator(Protocol):
    """The server side of one SASL exchange (PlainServer, ScramServer, OAuthBearerServer; the
    last also has ``credential_expiry_ms``, which bounds the session)."""

    mechanism: str
    failure: str | None

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    @property
    def principal(self) -> str: ...

    def evaluate(self, token: bytes) -> bytes: ...


def _names(value: str | Iterable[str]) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value)
    out: list[str] = []
    for item in items:
        name = item.strip()
        if name and name not in out:
            out.append(name)
    return out


class SaslServerFactory:
    """The mechanisms one listener serves and what each checks against.

    ``plain_users`` (name -> password) is needed when PLAIN is enabled, ``scram_credentials``
    when a SCRAM mechanism is, ``oauthbearer`` (the token validator) when OAUTHBEARER is.
    ``fake_secret`` keys the fake SCRAM answer for unknown users
    (random per factory unless given); ``fake_iterations`` should be what real users have."""

    def __init__(self, enabled_mechanisms: str | Iterable[str], *,
                 plain_users: Mapping[str, str] | None = None,
                 scram_credentials: ScramLookup | None = None,
                 oauthbearer: TokenValidator | None = None,
                 fake_secret: bytes | None = None,
                 fake_iterations: int = DEFAULT_ITERATIONS) -> None:
        self.enabled_mechanisms = _names(enabled_mechanisms)
        if not self.enabled_mechanisms:
            raise InvalidConfigError("sasl.enabled.mechanisms is empty: a SASL listener needs "
                                     f"at least one of {', '.join(SERVED_MECHANISMS)}")
        unserved = [m for m in self.enabled_mechanisms if m not in SERVED_MECHANISMS]
        if unserved:
            raise InvalidConfigError(f"SASL mechanism(s) {', '.join(unserved)} are not served; "
                                     f"sasl.enabled.mechanisms takes {', '.join(SERVED_MECHANISMS)}")
        if PLAIN in self.enabled_mechanisms and plain_users is None:
            raise InvalidConfigError("PLAIN is enabled but no users are configured (a "
                                     "PlainLoginModule JAAS line with user_<name>=\"<password>\")")
        if any(m in HASHES for m in self.enabled_mechanisms) and scram_credentials is None:
            raise InvalidConfigError("SCRAM is enabled but no SCRAM credential store is given")
        if OAUTHBEARER in self.enabled_mechanisms and oauthbearer is None:
            raise InvalidConfigError("OAUTHBEARER is enabled but no token validator is given")
        self._oauthbearer = oauthbearer
        self._plain_users = plain_users
        self._scram = scram_credentials
        self._fake_secret = fake_secret if fake_secret is not None else secrets.token_bytes(32)
        self._fake_iterations = fake_iterations

    def start(self) -> None:
        """Start the mechanisms' background work on the running loop (the broker's start):
        the secured OAUTHBEARER validator's JWKS refresh."""
        start = getattr(self._oauthbearer, "start", None)
        if start is not None:
            start()

    def stop(self) -> None:
        """Stop what :meth:`start` started (the broker's stop)."""
        stop = getattr(self._oauthbearer, "stop", None)
        if stop is not None:
            stop()

    def create(self, mechanism: str) -> SaslAuthenticator:
        """A fresh authenticator for one exchange of ``mechanism``."""
        if mechanism not in self.enabled_mechanisms:
            raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}")
        if mechanism == PLAIN:
            assert self._plain_users is not None
            return PlainServer(self._plain_users)
        if mechanism == OAUTHBEARER:
            assert self._oauthbearer is not None
            return OAuthBearerServer(self._oauthbearer)
        scram = self._scram
        assert scram is not None
        return ScramServer(mechanism, lambda user: scram(user, mechanism),
                           fake_secret=self._fake_secret, fake_iterations=self._fake_iterations)

    @classmethod
    def from_configs(cls, configs: Mapping[str, object], listener: str, *,
                     scram_credentials: ScramLookup | None = None,
                     fake_secret: bytes | None = None) -> SaslServerFactory:
        """The factory for ``listener`` from a broker's Kafka keys (see the module doc)."""
        prefix = f"listener.name.{listener.lower()}."
        raw = configs.get(prefix + "sasl.enabled.mechanisms",
                          configs.get("sasl.enabled.mechanisms", DEFAULT_ENABLED_MECHANISMS))
        if isinstance(raw, str):
            enabled = _names(raw)
        elif isinstance(raw, Iterable):
            enabled = _names([str(x) for x in raw])
        else:
            raise InvalidConfigError(f"sasl.enabled.mechanisms must be a list, not {raw!r}")
        users = None
        if PLAIN in enabled:
            key = listener_jaas_key(listener, PLAIN)
            jaas = configs.get(key)
            if not isinstance(jaas, str):
                raise InvalidConfigError(f"PLAIN is enabled on listener {listener} but {key} is "
                                         "not set (a PlainLoginModule line with the users)")
            users = plain_users(single_entry(jaas, PLAIN_LOGIN_MODULE))
        validator = _oauthbearer_validator(configs, listener) if OAUTHBEARER in enabled else None
        return cls(enabled, plain_users=users, scram_credentials=scram_credentials,
                   oauthbearer=validator, fake_secret=fake_secret)


def _oauthbearer_validator(configs: Mapping[str, object], listener: str) -> TokenValidator:
    """OAUTHBEARER's validator on ``listener`` (see the module doc)."""
    prefix = f"listener.name.{listener.lower()}."
    handler_key = prefix + "oauthbearer.sasl.server.callback.handler.class"
    handler = str(configs.get(handler_key) or "").strip()
    if handler and handler != UNSECURED_VALIDATOR_CLASS and handler not in SECURED_VALIDATOR_CLASSES:
        raise InvalidConfigError(f"{handler_key}={handler} is not served: OAUTHBEARER tokens are "
                                 f"validated by {UNSECURED_VALIDATOR_CLASS} (Kafka's default) or "
                                 f"{SECURED_VALIDATOR_CLASSES[0]}")
    jwks = configs.get(prefix + "sasl.oauthbearer.jwks.endpoint.url", configs.get("sasl.oauthbearer.jwks.endpoint.url"))
    if jwks and handler not in SECURED_VALIDATOR_CLASSES:
        raise InvalidConfigError(f"sasl.oauthbearer.jwks.endpoint.url is set but {handler_key} is not "
                                 f"{SECURED_VALIDATOR_CLASSES[0]}: Kafka would check only unsecured "
                                 "(alg none) tokens; set the handler class")
    key = listener_jaas_key(listener, OAUTHBEARER)
    jaas = configs.get(key)
    if not isinstance(jaas, str):
        raise InvalidConfigError(f"OAUTHBEARER is enabled on listener {listener} but {key} is not "
                                 "set (an OAuthBearerLoginModule line)")
    options = single_entry(jaas, OAUTHBEARER_LOGIN_MODULE).options
    if handler in SECURED_VALIDATOR_CLASSES:
        return JwksValidator.from_configs(configs, listener)
    return UnsecuredValidator.from_options(options)
