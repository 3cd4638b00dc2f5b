"""The client side of SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), sans I/O.

:class:`ScramClient` makes the two client messages of one exchange and checks the server's
signature, as Kafka's ScramSaslClient does::

    c = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
    server_first = send(c.first_message())
    server_final = send(c.final_message(server_first))
    c.verify(server_final)          # the server knew the credential: c.complete

gs2 header ``n,,`` (no channel binding, no authorization id), the username escaped (``=2C``,
``=3D``), a random nonce of 32 bytes base64'd, the password taken as its UTF-8 bytes (as Kafka:
no SASLprep).  The salted password is PBKDF2 from ``hashlib``, the proofs HMACs from ``hmac``.
Any failure -- a server-first whose nonce does not extend ours, fewer iterations than Kafka's
minimum, a server error ``e=...``, a wrong server signature -- raises
:class:`~engine.errors.SaslAuthenticationError` naming the mechanism.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets

from engine.errors import IllegalSaslStateError, SaslAuthenticationError
from engine.security.scram import HASHES, MIN_ITERATIONS, escape_username, salted_password

__all__ = ["ScramClient"]

_GS2 = "n,,"


def _attributes(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or len(key) != 1:
            raise ValueError(f"malformed SCRAM attribute {part[:20]!r}")
        out.setdefault(key, value)
    return out


class ScramClient:
    """One client exchange (see the module docstring)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None):
        if mechanism not in HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism!r} (one of {', '.join(HASHES)})")
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._password = password
        self._nonce = nonce or base64.b64encode(secrets.token_bytes(32)).decode()
        self._bare = f"n={escape_username(username)},r={self._nonce}"
        self._auth_message: bytes | None = None
        self._salted: bytes | None = None
        self._state = "first"
        self.complete = False

    def __repr__(self) -> str:      # never the password
        return f"ScramClient({self.mechanism}, state={self._state})"

    def _fail(self, reason: str) -> SaslAuthenticationError:
        self._state = "failed"
        return SaslAuthenticationError(f"SASL {self.mechanism} authentication failed: {reason}")

    def _step(self, expected: str) -> None:
        if self._state != expected:
            raise IllegalSaslStateError(f"SCRAM client asked for the {expected} step in state {self._state}")

    def first_message(self) -> bytes:
        """client-first-message: ``n,,n=<user>,r=<nonce>``."""
        self._step("first")
        self._state = "final"
        return (_GS2 + self._bare).encode()

    def final_message(self, server_first: bytes) -> bytes:
        """client-final-message (``c=biws,r=<nonce>,p=<proof>``) for the server's first message."""
        self._step("final")
        try:
            text = bytes(server_first).decode("utf-8")
            attrs = _attributes(text)
            if "e" in attrs:
                raise self._fail(f"the server answered {attrs['e']}")
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"], validate=True), int(attrs["i"])
        except (UnicodeDecodeError, ValueError, KeyError, binascii.Error) as e:
            raise self._fail(f"malformed server-first message ({e})") from None
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise self._fail("the server's nonce does not extend the client's")
        if iterations < MIN_ITERATIONS:
            raise self._fail(f"the server asks for {iterations} iterations, under the minimum {MIN_ITERATIONS}")
        self._salted = salted_password(self.mechanism, self._password, salt, iterations)
        without_proof = f"c={base64.b64encode(_GS2.encode()).decode()},r={nonce}"
        self._auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = hmac.new(self._salted, b"Client Key", self._hash).digest()
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = hmac.new(stored_key, self._auth_message, self._hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._state = "verify"
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server-final message (``v=<server signature>``); the exchange is complete."""
        self._step("verify")
        assert self._salted is not None and self._auth_message is not None
        try:
            attrs = _attributes(bytes(server_final).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise self._fail(f"malformed server-final message ({e})") from None
        if "e" in attrs:
            raise self._fail(f"the server answered {attrs['e']}")
        server_key = hmac.new(self._salted, b"Server Key", self._hash).digest()
        expected = hmac.new(server_key, self._auth_message, self._hash).digest()
        try:
            got = base64.b64decode(attrs.get("v", ""), validate=True)
        except binascii.Error:
            got = b""
        if not hmac.compare_digest(got, expected):
            raise self._fail("the server's signature is wrong (it does not hold this credential)")
        self._state, self.complete = "complete", True
        self._salted = None
