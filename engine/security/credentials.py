"""SCRAM credentials: Kafka's AlterUserScramCredentials / DescribeUserScramCredentials rules as
pure functions, a store that keeps them in a JSON file across restarts, and ZooKeeper's
``/config/users/<user>`` form for the cluster.

The rules are those of Kafka's ScramControlManager (KRaft, Kafka 4.0): an upsertion carries
the salt, the salted password and the iterations (the client salts; the broker derives the
stored and server keys); deletions are taken first, then upsertions; a user named twice in
one request, in either list, gets DUPLICATE_RESOURCE (and nothing of that user changes); an
empty user UNACCEPTABLE_CREDENTIAL, an unknown mechanism UNSUPPORTED_SASL_MECHANISM,
iterations outside [4096, 16384] UNACCEPTABLE_CREDENTIAL, deleting a credential that is not
there RESOURCE_NOT_FOUND.  Results list the successful deletions, then the successful
upsertions, then the errors, as Kafka builds them.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from engine.errors import (
    ErrorCode,
    ResourceNotFoundError,
    ScramCredentialFormatError,
    UnacceptableCredentialError,
)
from engine.security.scram import (
    DEFAULT_ITERATIONS,
    HASHES,
    MAX_ITERATIONS,
    MECHANISM_TYPE_OF,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    ScramCredential,
)
from engine.storage.checkpoint import write_atomic

Key = tuple[str, str]       # (user, mechanism name)


@dataclass(frozen=True)
class ScramDeletion:
    """One deletion of an AlterUserScramCredentials request (mechanism: 1 SHA-256, 2 SHA-512)."""

    name: str
    mechanism: int


@dataclass(frozen=True)
class ScramUpsertion:
    """One upsertion of an AlterUserScramCredentials request."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True)
class AlterResult:
    user: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class CredentialInfo:
    mechanism: int
    iterations: int


@dataclass(frozen=True)
class DescribeResult:
    user: str
    error_code: int = ErrorCode.NONE
    error_message: str | None = None
    credential_infos: tuple[CredentialInfo, ...] = ()


def _validate(name: str, mechanism: int) -> AlterResult | None:
    if not name:
        return AlterResult(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if mechanism not in MECHANISM_TYPES:
        return AlterResult(name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


def _duplicate(name: str) -> AlterResult:
    return AlterResult(name, ErrorCode.DUPLICATE_RESOURCE,
                       "A user credential cannot be altered twice in the same request")


def plan_alter(current: Mapping[Key, ScramCredential], deletions: Iterable[ScramDeletion],
               upsertions: Iterable[ScramUpsertion],
               ) -> tuple[list[AlterResult], dict[Key, ScramCredential | None]]:
    """Kafka's answer to AlterUserScramCredentials over ``current``: the per-user results and
    the changes to make (key -> new credential, or None to delete)."""
    errors: dict[str, AlterResult] = {}
    to_delete: dict[str, ScramDeletion] = {}
    to_upsert: dict[str, ScramUpsertion] = {}
    for d in deletions:
        if d.name in errors:
            continue
        if to_delete.pop(d.name, None) is not None:
            errors[d.name] = _duplicate(d.name)
            continue
        err = _validate(d.name, d.mechanism)
        if err is None and (d.name, MECHANISM_TYPES[d.mechanism]) not in current:
            err = AlterResult(d.name, ErrorCode.RESOURCE_NOT_FOUND,
                              "Attempt to delete a user credential that does not exist")
        if err is not None:
            errors[d.name] = err
        else:
            to_delete[d.name] = d
    for u in upsertions:
        if u.name in errors:
            continue
        if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
            errors[u.name] = _duplicate(u.name)
            continue
        err = _validate(u.name, u.mechanism)
        if err is None and u.iterations < MIN_ITERATIONS:
            err = AlterResult(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif err is None and u.iterations > MAX_ITERATIONS:
            err = AlterResult(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if err is not None:
            errors[u.name] = err
        else:
            to_upsert[u.name] = u
    results: list[AlterResult] = []
    changes: dict[Key, ScramCredential | None] = {}
    for d in to_delete.values():
        changes[(d.name, MECHANISM_TYPES[d.mechanism])] = None
        results.append(AlterResult(d.name))
    for u in to_upsert.values():
        mech = MECHANISM_TYPES[u.mechanism]
        changes[(u.name, mech)] = ScramCredential.from_salted_password(
            mech, u.salt, u.salted_password, u.iterations)
        results.append(AlterResult(u.name))
    results.extend(errors.values())
    return results, changes


def describe_credentials(current: Mapping[Key, ScramCredential],
                         users: Sequence[str] | None = None) -> list[DescribeResult]:
    """Kafka's answer to DescribeUserScramCredentials: mechanism and iterations per user (never
    salt or keys); ``users`` None or empty describes every user that has a credential."""
    by_user: dict[str, list[CredentialInfo]] = {}
    for (user, mech), cred in sorted(current.items()):
        by_user.setdefault(user, []).append(CredentialInfo(MECHANISM_TYPE_OF[mech], cred.iterations))
    if not users:
        return [DescribeResult(u, credential_infos=tuple(infos)) for u, infos in by_user.items()]
    seen: dict[str, int] = {}
    for u in users:
        seen[u] = seen.get(u, 0) + 1
    out = []
    for u, count in seen.items():
        if count > 1:
            out.append(DescribeResult(u, ErrorCode.DUPLICATE_RESOURCE, "Cannot describe SCRAM "
                                      f"credentials for the same user twice in a single request: {u}"))
        elif u not in by_user:
            out.append(DescribeResult(u, ErrorCode.RESOURCE_NOT_FOUND,
                                      f"Attempt to describe a user credential that does not exist: {u}"))
        else:
            out.append(DescribeResult(u, credential_infos=tuple(by_user[u])))
    return out


class ScramCredentialStore:
    """SCRAM credentials per (user, mechanism name), kept in ``<directory>/<FILENAME>``.

    Every change rewrites the file atomically (a temporary file written, fsynced and renamed
    over it, mode 0600), so a crash leaves the old or the new set, never a mix.  Calling the
    store, ``store(user, mechanism)``, is the lookup a :class:`~engine.security.sasl.
    SaslServerFactory` takes.  Thread-safe."""

    FILENAME = "scram-credentials.json"
    VERSION = 1

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, self.FILENAME)
        self._lock = threading.Lock()
        self._creds: dict[Key, ScramCredential] = self._load()

    def _load(self) -> dict[Key, ScramCredential]:
        try:
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            raise ScramCredentialFormatError(f"{self.path}: not a SCRAM credential file: {e}") \
                from None
        if not isinstance(doc, dict) or doc.get("version") != self.VERSION \
                or not isinstance(doc.get("users"), dict):
            raise ScramCredentialFormatError(
                f"{self.path}: expected {{\"version\": {self.VERSION}, \"users\": {{...}}}}")
        out: dict[Key, ScramCredential] = {}
        for user, mechs in doc["users"].items():
            if not isinstance(mechs, dict):
                raise ScramCredentialFormatError(f"{self.path}: user {user!r} is not an object")
            for mech, text in mechs.items():
                if mech not in HASHES or not isinstance(text, str):
                    raise ScramCredentialFormatError(f"{self.path}: bad entry {mech!r} of {user!r}")
                out[(user, mech)] = ScramCredential.from_kafka_string(text)
        return out

    def _save(self) -> None:
        users: dict[str, dict[str, str]] = {}
        for (user, mech), cred in sorted(self._creds.items()):
            users.setdefault(user, {})[mech] = cred.to_kafka_string()
        data = json.dumps({"version": self.VERSION, "users": users}, indent=1).encode("utf-8")
        write_atomic(self.path, data, 0o600)

    def __call__(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.get(user, mechanism)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        with self._lock:
            return self._creds.get((user, mechanism))

    def snapshot(self) -> dict[Key, ScramCredential]:
        with self._lock:
            return dict(self._creds)

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """Add or replace one credential (iterations and user checked as Kafka checks them)."""
        if not user:
            raise UnacceptableCredentialError("Username must not be empty")
        if mechanism not in HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mechanism!r}")
        if not MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS:
            raise UnacceptableCredentialError(
                f"iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}], "
                f"not {credential.iterations}")
        self._apply({(user, mechanism): credential})

    def set_password(self, user: str, mechanism: str, password: str,
                     iterations: int = DEFAULT_ITERATIONS) -> None:
        """Add or replace a credential from a password (fresh random salt)."""
        self.upsert(user, mechanism, ScramCredential.from_password(mechanism, password, iterations))

    def delete(self, user: str, mechanism: str) -> None:
        with self._lock:
            if (user, mechanism) not in self._creds:
                raise ResourceNotFoundError(
                    f"Attempt to delete a user credential that does not exist: {user} {mechanism}")
            self._apply_locked({(user, mechanism): None})

    def alter(self, deletions: Iterable[ScramDeletion],
              upsertions: Iterable[ScramUpsertion]) -> list[AlterResult]:
        """AlterUserScramCredentials: the per-user results; the changes are saved at once."""
        with self._lock:
            results, changes = plan_alter(self._creds, deletions, upsertions)
            self._apply_locked(changes)
        return results

    def describe(self, users: Sequence[str] | None = None) -> list[DescribeResult]:
        """DescribeUserScramCredentials (see :func:`describe_credentials`)."""
        with self._lock:
            return describe_credentials(self._creds, users)

    def replace_user(self, user: str, credentials: Mapping[str, ScramCredential]) -> None:
        """Make ``user``'s credentials exactly ``credentials`` (mechanism -> credential), as a
        ZooKeeper ``/config/users/<user>`` change notification asks."""
        with self._lock:
            changes: dict[Key, ScramCredential | None] = {
                k: None for k in self._creds if k[0] == user and k[1] not in credentials}
            changes.update({(user, m): c for m, c in credentials.items()})
            self._apply_locked(changes)

    def _apply(self, changes: Mapping[Key, ScramCredential | None]) -> None:
        with self._lock:
            self._apply_locked(changes)

    def _apply_locked(self, changes: Mapping[Key, ScramCredential | None]) -> None:
        if not changes:
            return
        before = dict(self._creds)
        for key, cred in changes.items():
            if cred is None:
                self._creds.pop(key, None)
            else:
                self._creds[key] = cred
        try:
            self._save()
        except BaseException:
            self._creds = before       # memory never runs ahead of the file
            raise


# ---- ZooKeeper: /config/users/<sanitized user>, as Kafka's ZK-mode brokers kept them ----

def sanitize_user(user: str) -> str:
    """Kafka's Sanitizer.sanitize of a user name for a ZooKeeper path: URL-encoding, ``*`` as
    ``%2A``, a space as ``%20``, ``~`` left as is."""
    return urllib.parse.quote(user, safe="")


def zk_user_path(user: str) -> str:
    return "/config/users/" + sanitize_user(user)


def encode_zk_user_config(credentials: Mapping[str, ScramCredential],
                          other_configs: Mapping[str, str] | None = None) -> bytes:
    """The ``/config/users/<user>`` node: ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,
    stored_key=...,server_key=...,iterations=4096",...}}``; ``other_configs`` are the node's
    other keys (quotas such as ``producer_byte_rate``), kept as they are."""
    config = dict(other_configs or {})
    for mech, cred in credentials.items():
        if mech not in HASHES:
            raise ValueError(f"not a SCRAM mechanism: {mech!r}")
        config[mech] = cred.to_kafka_string()
    return json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode("utf-8")


def decode_zk_user_config(data: bytes) -> tuple[dict[str, ScramCredential], dict[str, str]]:
    """The SCRAM credentials (mechanism -> credential) and the other configs of a
    ``/config/users/<user>`` node."""
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise ScramCredentialFormatError(f"user config node is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise ScramCredentialFormatError("user config node has no \"config\" object")
    creds: dict[str, ScramCredential] = {}
    other: dict[str, str] = {}
    for key, value in doc["config"].items():
        if key in HASHES:
            creds[key] = ScramCredential.from_kafka_string(str(value))
        else:
            other[key] = str(value)
    return creds, other


def zk_change_notification(user: str) -> bytes:
    """The ``/config/changes/config_change_<seq>`` payload that tells brokers a user's config
    changed (Kafka's version 2 form)."""
    return json.dumps({"version": 2, "entity_path": "users/" + sanitize_user(user)},
                      separators=(",", ":")).encode("utf-8")
