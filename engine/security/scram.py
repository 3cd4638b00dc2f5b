"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka serves them, sans I/O.

The broker keeps, per user and mechanism, a :class:`ScramCredential`: salt, iterations,
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and ``ServerKey = HMAC(SaltedPassword,
"Server Key")`` -- never the password.  Its text form is Kafka's (``ScramCredentialUtils``):
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``.

:class:`ScramServer` is the server side of one exchange: feed it each SaslAuthenticate token
with :meth:`ScramServer.evaluate`, send back what it returns; after the second token it is
:attr:`~ScramServer.complete` with the user in :attr:`~ScramServer.authorization_id`.  Any
failure raises :class:`~engine.errors.SaslAuthenticationError` (a token out of turn:
:class:`~engine.errors.IllegalSaslStateError`) and leaves the exchange failed.

Kafka's details kept: gs2 header ``n`` only (no channel binding), ``a=`` must be empty or the
user, the ``tokenauth`` extension asks for delegation-token credentials (not served here, so it
fails) and other extensions are ignored, credentials under 4096 iterations are refused, the
failure message names no reason.  Two deliberate differences: an unknown user is answered with
a fake salt derived from a per-process secret and fails at the proof, exactly as a wrong
password does (Kafka fails it at once, which tells who exists -- RFC 5802 section 5.1 asks for
the fake salt); and the client-final ``c=`` must be the base64 of the gs2 header sent (RFC 5802
section 5.1; Kafka does not check it).  Usernames are UTF-8 with ``,`` and ``=`` escaped as
``=2C`` and ``=3D``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from engine.errors import IllegalSaslStateError, SaslAuthenticationError, ScramCredentialFormatError

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MIN_ITERATIONS = 4096           # Kafka's ScramMechanism.minIterations, both mechanisms
MAX_ITERATIONS = 16384          # Kafka's ScramControlManager.MAX_ITERATIONS
DEFAULT_ITERATIONS = 4096       # kafka-configs.sh's default
SALT_BYTES = 32
# the mechanism numbers of AlterUserScramCredentials / DescribeUserScramCredentials
MECHANISM_TYPES = {1: SCRAM_SHA_256, 2: SCRAM_SHA_512}
MECHANISM_TYPE_OF = {name: t for t, name in MECHANISM_TYPES.items()}
TOKEN_AUTH_EXTENSION = "tokenauth"


def _hash_name(mechanism: str) -> str:
    try:
        return HASHES[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r} (one of {', '.join(HASHES)})") \
            from None


def _hmac(name: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, name).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2-HMAC with the mechanism's hash.  The password
    is taken as its UTF-8 bytes, as Kafka does (no SASLprep)."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True)
class ScramCredential:
    """What the broker stores for one user and mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:   # the keys let anyone who reads them log in: never in logs
        return f"ScramCredential(iterations={self.iterations}, salt=<{len(self.salt)} bytes>)"

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted: bytes,
                             iterations: int) -> ScramCredential:
        """The credential for a salted password -- what AlterUserScramCredentials carries."""
        name = _hash_name(mechanism)
        client_key = _hmac(name, salted, b"Client Key")
        return cls(bytes(salt), hashlib.new(name, client_key).digest(),
                   _hmac(name, salted, b"Server Key"), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        """A new credential for ``password`` (a random salt unless one is given)."""
        if salt is None:
            salt = secrets.token_bytes(SALT_BYTES)
        return cls.from_salted_password(mechanism, salt,
                                        salted_password(mechanism, password, salt, iterations),
                                        iterations)

    def to_kafka_string(self) -> str:
        """Kafka's text form, as kept in ZooKeeper's ``/config/users/<user>``."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_kafka_string(cls, text: str) -> ScramCredential:
        """The credential of Kafka's text form (exactly the four keys, any order)."""
        props: dict[str, str] = {}
        for part in text.split(","):
            key, eq, value = part.partition("=")
            if not eq or not key:
                raise ScramCredentialFormatError("SCRAM credential is not key=value,...: "
                                                 f"{part[:20]!r}")
            props[key] = value
        if sorted(props) != ["iterations", "salt", "server_key", "stored_key"]:
            raise ScramCredentialFormatError(
                "SCRAM credential must have exactly salt, stored_key, server_key and iterations, "
                f"not {sorted(props)}")
        try:
            decoded = [base64.b64decode(props[k], validate=True)
                       for k in ("salt", "stored_key", "server_key")]
            iterations = int(props["iterations"])
        except (binascii.Error, ValueError) as e:
            raise ScramCredentialFormatError(f"SCRAM credential has a bad value: {e}") from None
        return cls(decoded[0], decoded[1], decoded[2], iterations)


def escape_username(username: str) -> str:
    """The saslname of a user: ``=`` as ``=3D`` and ``,`` as ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def unescape_username(saslname: str) -> str:
    """The user of a saslname; any ``=`` not starting ``=2C`` or ``=3D`` is malformed."""
    if "=" in saslname.replace("=2C", "").replace("=3D", ""):
        raise ValueError("malformed saslname: '=' not followed by 2C or 3D")
    return saslname.replace("=2C", ",").replace("=3D", "=")


_B64 = r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?"
_SASLNAME = r"(?:[^\x00,=]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_EXTENSIONS = r"(?:,[A-Za-z]+=[^\x00,]+)*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"(?P<bare>n=(?P<name>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<ext>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<cbind>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_B64})")

LookupCredential = Callable[[str], "ScramCredential | None"]


class ScramServer:
    """The server side of one SCRAM exchange over ``lookup(user) -> ScramCredential | None``.

    ``fake_secret`` keys the fake salt and keys an unknown user is answered with (one random
    secret per process or broker keeps that user's salt the same on every try);
    ``fake_iterations`` should be what real users have.  ``nonce`` makes the server nonce
    (tests give a fixed one)."""

    _FIRST, _FINAL, _COMPLETE, _FAILED = "first", "final", "complete", "failed"

    def __init__(self, mechanism: str, lookup: LookupCredential, *, fake_secret: bytes,
                 fake_iterations: int = DEFAULT_ITERATIONS,
                 nonce: Callable[[], str] | None = None) -> None:
        self.mechanism = mechanism
        self._hash = _hash_name(mechanism)
        self._lookup = lookup
        self._fake_secret = fake_secret
        self._fake_iterations = fake_iterations
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self._state = self._FIRST
        self._user: str | None = None
        self._credential: ScramCredential | None = None
        self._unknown_user = False
        self._gs2 = self._bare = self._server_first = self._full_nonce = ""
        self.failure: str | None = None     # why it failed, for the broker's log only

    @property
    def complete(self) -> bool:
        return self._state == self._COMPLETE

    @property
    def authorization_id(self) -> str:
        """The authenticated user (after completion)."""
        if self._state != self._COMPLETE or self._user is None:
            raise IllegalSaslStateError("SCRAM authentication exchange has not completed")
        return self._user

    @property
    def principal(self) -> str:
        """Kafka's principal of the authenticated user: ``User:<name>``."""
        return "User:" + self.authorization_id

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next token: server-first, then server-final."""
        if self._state == self._FIRST:
            step = self._client_first
        elif self._state == self._FINAL:
            step = self._client_final
        else:
            state, self._state = self._state, self._FAILED
            raise IllegalSaslStateError(f"Unexpected SCRAM token in server state {state}")
        try:
            return step(token)
        except SaslAuthenticationError:
            self._state, self._credential = self._FAILED, None
            raise

    def _fail(self, reason: str) -> SaslAuthenticationError:
        self.failure = reason
        return SaslAuthenticationError("Authentication failed during authentication due to "
                                       f"invalid credentials with SASL mechanism {self.mechanism}")

    def _decode(self, token: bytes, what: str) -> str:
        try:
            return bytes(token).decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail(f"SCRAM {what} is not UTF-8") from None

    def _client_first(self, token: bytes) -> bytes:
        m = _CLIENT_FIRST.fullmatch(self._decode(token, "client-first message"))
        if m is None:
            raise self._fail("invalid SCRAM client-first message (gs2 header 'n', n=, r=)")
        extensions = dict(e.split("=", 1) for e in m["ext"][1:].split(",")) if m["ext"] else {}
        if extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            raise self._fail("delegation-token authentication (tokenauth) is not served")
        try:
            user = unescape_username(m["name"])
        except ValueError as e:
            raise self._fail(str(e)) from None
        if m["authzid"] and m["authzid"] != m["name"]:
            self.failure = "authzid differs from the user"
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        try:
            cred = self._lookup(user)
        except Exception as e:      # a broken store fails the login, it does not crash the broker
            raise self._fail(f"credentials could not be obtained: {e!r}") from None
        if cred is not None and cred.iterations < MIN_ITERATIONS:
            raise self._fail(f"credential of {cred.iterations} iterations is under the minimum "
                             f"{MIN_ITERATIONS}")
        fake = self._fake_credential(user)   # made for every user: the same work either way
        if cred is None:     # answer as for a real user; the proof check fails later
            cred, self._unknown_user = fake, True
        self._user, self._credential = user, cred
        self._gs2, self._bare = m["gs2"], m["bare"]
        self._full_nonce = m["nonce"] + self._nonce()
        self._server_first = (f"r={self._full_nonce},s={base64.b64encode(cred.salt).decode()},"
                              f"i={cred.iterations}")
        self._state = self._FINAL
        return self._server_first.encode()

    def _fake_credential(self, user: str) -> ScramCredential:
        def derive(label: bytes) -> bytes:
            return hmac.new(self._fake_secret, label + b"\x00" + self.mechanism.encode()
                            + b"\x00" + user.encode("utf-8"), self._hash).digest()
        return ScramCredential(derive(b"salt")[:SALT_BYTES], derive(b"stored_key"),
                               derive(b"server_key"), self._fake_iterations)

    def _client_final(self, token: bytes) -> bytes:
        m = _CLIENT_FINAL.fullmatch(self._decode(token, "client-final message"))
        if m is None:
            raise self._fail("invalid SCRAM client-final message (c=, r=, p=)")
        cred = self._credential
        assert cred is not None and self._user is not None
        if not hmac.compare_digest(m["nonce"].encode(), self._full_nonce.encode()):
            raise self._fail("invalid client nonce in the client-final message")
        if base64.b64decode(m["cbind"]) != self._gs2.encode("utf-8"):
            raise self._fail("channel binding c= is not the gs2 header of the first message")
        auth_message = f"{self._bare},{self._server_first},{m['without_proof']}".encode()
        proof = base64.b64decode(m["proof"])
        client_signature = _hmac(self._hash, cred.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._fail("client proof has the wrong length")
        computed = hashlib.new(self._hash, _xor(proof, client_signature)).digest()
        if not hmac.compare_digest(computed, cred.stored_key) or self._unknown_user:
            raise self._fail("unknown user" if self._unknown_user else "invalid client proof")
        signature = _hmac(self._hash, cred.server_key, auth_message)
        self._credential = None
        self._state = self._COMPLETE
        return b"v=" + base64.b64encode(signature)
