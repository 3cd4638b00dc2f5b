"""SASL PLAIN (RFC 4616) as Kafka's PlainSaslServer serves it, sans I/O.

One token, ``[authzid] NUL authcid NUL passwd`` in UTF-8, checked against the users of the
listener's PlainLoginModule JAAS entry (``user_<name>="<password>"``, see
:func:`engine.security.jaas.plain_users`); the answer is an empty token.  The authzid must be
empty or the user.  The password compare takes the same time whatever the user, known or not,
and whatever the password's length (both sides are hashed, then compared with
``hmac.compare_digest``).  Failures raise :class:`~engine.errors.SaslAuthenticationError` with
Kafka's messages; a second token raises :class:`~engine.errors.IllegalSaslStateError`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from engine.errors import IllegalSaslStateError, SaslAuthenticationError

PLAIN = "PLAIN"
_NO_SUCH_USER = "\x00no such user\x00"    # compared against for an unknown user (never matches)


class PlainServer:
    """The server side of one PLAIN exchange over ``users`` (name -> password)."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self.mechanism = PLAIN
        self._users = users
        self._done = False
        self._user: str | None = None
        self.failure: str | None = None     # why it failed, for the broker's log only

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        if self._user is None:
            raise IllegalSaslStateError("PLAIN authentication exchange has not completed")
        return self._user

    @property
    def principal(self) -> str:
        """Kafka's principal of the authenticated user: ``User:<name>``."""
        return "User:" + self.authorization_id

    def evaluate(self, token: bytes) -> bytes:
        """Authenticate the client's one token; the answer is empty."""
        if self._done:
            raise IllegalSaslStateError("Unexpected PLAIN token after the exchange ended")
        self._done = True
        try:
            text = bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("Invalid SASL/PLAIN response: not UTF-8", generic=True) from None
        parts = text.split("\x00")
        if len(parts) != 3:
            raise self._fail(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}",
                             generic=True)
        authzid, user, password = parts
        if not user:
            raise self._fail("Authentication failed: username not specified", generic=True)
        if not password:
            raise self._fail("Authentication failed: password not specified", generic=True)
        expected = self._users.get(user)
        want = hashlib.sha256((expected if expected is not None else _NO_SUCH_USER)
                              .encode("utf-8")).digest()
        good = hmac.compare_digest(hashlib.sha256(password.encode("utf-8")).digest(), want)
        if not good or expected is None:
            raise self._fail("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise self._fail("Authentication failed: Client requested an authorization id "
                             "that is different from username")
        self._user = user
        return b""

    def _fail(self, message: str, generic: bool = False) -> SaslAuthenticationError:
        """The error to raise; a malformed token gets Kafka's generic answer (its SaslException),
        a refused login Kafka's own message (its SaslAuthenticationException)."""
        self.failure = message
        if generic:
            message = ("Authentication failed during authentication due to invalid credentials "
                       f"with SASL mechanism {PLAIN}")
        return SaslAuthenticationError(message)
