"""The ACL authorizer: Kafka's StandardAuthorizer decisions over an indexed ACL set, the
CreateAcls / DescribeAcls / DeleteAcls operations, and the ACL file that keeps them.

Decisions (Kafka's StandardAuthorizerData): a principal named in ``super.users`` may do
anything.  Otherwise the ACLs that apply to the resource are those of its type whose pattern
is the LITERAL name, the LITERAL ``*`` or a PREFIXED prefix of the name; of these, the ones
whose principal is the caller's or ``User:*`` and whose host is the caller's or ``*`` decide:
any DENY for the operation denies, else any ALLOW allows.  An ALLOW of READ, WRITE, DELETE or
ALTER also allows DESCRIBE, an ALLOW of ALTER_CONFIGS also DESCRIBE_CONFIGS; ALL covers every
operation (for DENY too).  If no ACL applies to the resource at all (for anyone),
``allow.everyone.if.no.acl.found`` (default false) decides; if some do but none for this
caller, the answer is no.

The request path calls :meth:`Authorizer.authorize` for every resource of every request, so
the ACLs are indexed per resource type: a dict per literal name and per prefix (looked up by
the distinct prefix lengths), each holding per (principal, host) the OR of the operations its
ALLOW and DENY ACLs cover; answers are memoised until the next ACL change.  Changes are
serialised by a lock and written to the store before they take effect.

The store (:class:`AclStore`) keeps the ACLs: :class:`AclFileStore` (``acls.json`` in the data
directory) for a node alone, engine/cluster/acl_zk_store.py (Kafka's ``/kafka-acl...`` znodes)
in cluster mode.  A change is given to it as one transform per changed resource pattern
("these ACLs added", "the ones these filters match removed"), which it applies to the ACLs as
IT holds them (a ZooKeeper store re-reads and retries on a conflicting write), answering what
each pattern held before and after; the authorizer then takes the "after".  A store that hears
of a change made elsewhere asks :meth:`Authorizer.refresh` to re-read those patterns.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from engine.errors import AclFormatError, AuthorizerConfigError, InvalidRequestError, KafkaApiError
from engine.security.acl import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_from_json,
    binding_to_json,
    validate_binding,
    validate_filter,
)
from engine.storage.checkpoint import write_atomic

AUTHORIZER_CLASS_NAME = "authorizer.class.name"
SUPER_USERS = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_FOUND = "allow.everyone.if.no.acl.found"
# the class names a Kafka server.properties uses for the ACL authorizer (KRaft, then ZooKeeper)
ACL_AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "kafka.security.authorizer.AclAuthorizer")

_ALL_OPS = (1 << (max(AclOperation) + 1)) - 1
_CACHE_MAX = 200_000

Masks = dict[tuple[str, str], tuple[int, int]]    # (principal, host) -> (allow bits, deny bits)
PatternKey = tuple[ResourceType, PatternType, str]
Transform = Callable[[frozenset[AclBinding]], frozenset[AclBinding]]
Change = tuple[frozenset[AclBinding], frozenset[AclBinding]]      # a pattern's ACLs (before, after)


def acl_authorizer_configured(configs: Mapping[str, object]) -> bool:
    """Whether ``authorizer.class.name`` asks for the ACL authorizer: True for Kafka's
    StandardAuthorizer or AclAuthorizer class names, False when unset or empty (no
    authorizer: everything allowed, the ACL APIs answer SECURITY_DISABLED); any other
    class is an :class:`~engine.errors.AuthorizerConfigError` naming the key."""
    value = str(configs.get(AUTHORIZER_CLASS_NAME) or "").strip()
    if not value:
        return False
    if value in ACL_AUTHORIZER_CLASSES:
        return True
    raise AuthorizerConfigError(
        AUTHORIZER_CLASS_NAME,
        f"{value!r} is not an authorizer this broker has; use {ACL_AUTHORIZER_CLASSES[0]} "
        f"(or {ACL_AUTHORIZER_CLASSES[1]}) for ACLs, or leave it empty for none")


def parse_super_users(value: object) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (``User:admin;User:ops``), blanks ignored."""
    return frozenset(p.strip() for p in str(value or "").split(";") if p.strip())


def parse_allow_everyone(value: object) -> bool:
    """``allow.everyone.if.no.acl.found``: ``true``/``false`` in any case (default false)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise AuthorizerConfigError(ALLOW_EVERYONE_IF_NO_ACL_FOUND,
                                    f"expected true or false, not {value!r}")
    return text == "true"


def _norm_host(host: str) -> str:
    """Hosts compare as text, as in Kafka; an IPv6 address is compared in one spelling
    (Java writes ``0:0:0:0:0:0:0:1`` where Python writes ``::1``)."""
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host).compressed
        except ValueError:
            return host
    return host


def _op_bits(operation: AclOperation, permission: AclPermissionType) -> int:
    """The operations one ACL decides: ALL covers everything; an ALLOW also covers the
    operations it implies (DESCRIBE, DESCRIBE_CONFIGS), a DENY only its own."""
    if operation is AclOperation.ALL:
        return _ALL_OPS
    bits = 1 << operation
    if permission is AclPermissionType.ALLOW:
        if operation in IMPLIES_DESCRIBE:
            bits |= 1 << AclOperation.DESCRIBE
        if operation in IMPLIES_DESCRIBE_CONFIGS:
            bits |= 1 << AclOperation.DESCRIBE_CONFIGS
    return bits


def _masks(bindings: Iterable[AclBinding]) -> Masks:
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for b in bindings:
        key = (b.principal, _norm_host(b.host))
        allow, deny = out.get(key, (0, 0))
        bits = _op_bits(b.operation, b.permission)
        if b.permission is AclPermissionType.ALLOW:
            allow |= bits
        else:
            deny |= bits
        out[key] = (allow, deny)
    return out


class _TypeIndex:
    """The ACLs of one resource type: masks per literal name and per prefix."""

    __slots__ = ("literal", "prefixed", "lengths", "_length_count")

    def __init__(self) -> None:
        self.literal: dict[str, Masks] = {}
        self.prefixed: dict[str, Masks] = {}
        self.lengths: tuple[int, ...] = ()
        self._length_count: Counter[int] = Counter()

    def put(self, ptype: PatternType, name: str, masks: Masks | None) -> None:
        table = self.literal if ptype is PatternType.LITERAL else self.prefixed
        had = name in table
        if masks:
            table[name] = masks                 # a new dict each time: readers never see it change
        else:
            table.pop(name, None)
        if ptype is PatternType.PREFIXED and had != bool(masks):
            self._length_count[len(name)] += 1 if masks else -1
            self.lengths = tuple(sorted(n for n, c in self._length_count.items() if c > 0))

    def applicable(self, name: str) -> list[Masks]:
        """The masks of every pattern that applies to a resource called ``name``."""
        out = []
        m = self.literal.get(name)
        if m is not None:
            out.append(m)
        if name != WILDCARD:
            m = self.literal.get(WILDCARD)
            if m is not None:
                out.append(m)
        prefixed = self.prefixed
        for n in self.lengths:
            if n > len(name):
                break
            m = prefixed.get(name[:n])
            if m is not None:
                out.append(m)
        return out


@dataclass(frozen=True)
class AclDeleteResult:
    """One DeleteAcls filter's answer: its error, or the bindings it deleted."""

    error: KafkaApiError | None
    bindings: tuple[AclBinding, ...] = ()


class AclStore(Protocol):
    """Where an :class:`Authorizer` keeps its ACLs (called with the authorizer's lock held)."""

    def load(self) -> Iterable[AclBinding]:
        """Every ACL (at start, and on :meth:`Authorizer.reload`)."""

    def read(self, pattern: PatternKey) -> Iterable[AclBinding]:
        """One pattern's ACLs as the store holds them now (:meth:`Authorizer.refresh`)."""

    def validate(self, binding: AclBinding) -> None:
        """Raise InvalidRequestError for an ACL this store cannot keep."""

    def update(self, transforms: Mapping[PatternKey, Transform],
               current: Mapping[PatternKey, frozenset[AclBinding]]
               ) -> tuple[dict[PatternKey, Change], dict[PatternKey, Exception]]:
        """Apply each pattern's transform to its ACLs as the store holds them (``current``:
        the authorizer's) and keep the result: (before, after) of each pattern that changed,
        and the exception of each that could not be changed (or raise: nothing changed)."""


class AclFileStore:
    """The broker's ACLs in ``acls.json`` in a directory: ``{"version": 1, "acls": [...]}``
    with each binding's fields in Kafka's enum names, rewritten atomically (temporary file,
    fsync, rename, directory fsync) on every change."""

    VERSION = 1
    FILENAME = "acls.json"

    def __init__(self, directory: str):
        self.path = os.path.join(directory, self.FILENAME)

    def load(self) -> list[AclBinding]:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return []
        try:
            doc = json.loads(raw)
            if not isinstance(doc, dict) or doc.get("version") != self.VERSION \
                    or not isinstance(doc.get("acls"), list):
                raise ValueError(f'expected {{"version": {self.VERSION}, "acls": [...]}}')
            return [binding_from_json(obj) for obj in doc["acls"]]
        except (ValueError, KeyError) as e:     # InvalidRequestError is a ValueError too
            raise AclFormatError(f"{self.path}: {e}") from None

    def save(self, bindings: Iterable[AclBinding]) -> None:
        acls = [binding_to_json(b) for b in sorted(bindings, key=_sort_key)]
        data = json.dumps({"version": self.VERSION, "acls": acls}, indent=1).encode("utf-8")
        write_atomic(self.path, data, 0o644)

    def read(self, pattern: PatternKey) -> list[AclBinding]:
        return [b for b in self.load() if (b.resource_type, b.pattern_type, b.name) == pattern]

    def validate(self, binding: AclBinding) -> None:
        return None

    def update(self, transforms: Mapping[PatternKey, Transform],
               current: Mapping[PatternKey, frozenset[AclBinding]]
               ) -> tuple[dict[PatternKey, Change], dict[PatternKey, Exception]]:
        """The whole file rewritten once with every change (an OSError: nothing changed)."""
        changes = _transformed(transforms, current)
        if changes:
            after = dict(current)
            after.update({k: new for k, (_old, new) in changes.items()})
            self.save(b for bs in after.values() for b in bs)
        return changes, {}


def _transformed(transforms: Mapping[PatternKey, Transform],
                 current: Mapping[PatternKey, frozenset[AclBinding]]) -> dict[PatternKey, Change]:
    out = {}
    for key, transform in transforms.items():
        old = current.get(key, frozenset())
        new = transform(old)
        if new != old:
            out[key] = (old, new)
    return out


def _sort_key(b: AclBinding) -> tuple:
    return (b.resource_type, b.pattern_type, b.name, b.principal, b.host, b.operation,
            b.permission)


class Authorizer:
    """Kafka's ACL authorizer: decisions, authorized-operations bitfields and the ACL admin
    operations.  ``store`` (an :class:`AclStore`: the ACL file, or ZooKeeper in cluster mode)
    keeps the ACLs across restarts; without one they live in memory (tests)."""

    def __init__(self, *, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 store: AclStore | None = None):
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.store = store
        self._lock = threading.Lock()
        self._by_pattern: dict[PatternKey, frozenset[AclBinding]] = {}
        self._index: dict[ResourceType, _TypeIndex] = {rt: _TypeIndex() for rt in SUPPORTED_OPERATIONS}
        self._cache: dict[tuple, bool] = {}
        if store is not None:
            self._install(_by_pattern(store.load()))

    @classmethod
    def from_configs(cls, configs: Mapping[str, object], directory: str | None = None,
                     store: AclStore | None = None) -> Authorizer:
        """The authorizer from Kafka's keys (``super.users``, ``allow.everyone.if.no.acl.found``),
        its ACLs kept in ``store``, else in ``directory`` if given.  Call only when
        :func:`acl_authorizer_configured`."""
        if store is None and directory is not None:
            store = AclFileStore(directory)
        return cls(super_users=parse_super_users(configs.get(SUPER_USERS)),
                   allow_everyone_if_no_acl_found=parse_allow_everyone(
                       configs.get(ALLOW_EVERYONE_IF_NO_ACL_FOUND)),
                   store=store)

    # -- decisions ------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        """May ``principal`` (``User:alice``) connected from ``host`` (the client's IP as
        text) do ``operation`` on the resource ``name`` of ``resource_type``?"""
        if principal in self.super_users:
            return True
        key = (principal, host, operation, resource_type, name)
        cache = self._cache             # before the index: a change swaps the cache after it
        hit = cache.get(key)
        if hit is not None:
            return hit
        allow, deny, applies = self._collect(principal, host, resource_type, name)
        bit = 1 << operation
        if deny & bit:
            result = False
        elif allow & bit:
            result = True
        else:
            result = not applies and self.allow_everyone_if_no_acl_found
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[key] = result
        return result

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """The authorized-operations bitfield (bit = AclOperation code) of Metadata,
        DescribeCluster and DescribeGroups: each operation ``resource_type`` supports that
        :meth:`authorize` allows (engine/server/authz.py's constants when all are)."""
        supported = SUPPORTED_OPERATIONS.get(ResourceType(resource_type), ())
        if principal in self.super_users:
            return sum(1 << op for op in supported)
        allow, deny, applies = self._collect(principal, host, resource_type, name)
        default = not applies and self.allow_everyone_if_no_acl_found
        bits = 0
        for op in supported:
            b = 1 << op
            if not deny & b and (allow & b or default):
                bits |= b
        return bits

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the caller do ``operation`` on at
        least one resource of the type (e.g. an idempotent producer's WRITE on some topic)?
        A wildcard DENY refuses; an ALLOW counts unless a DENY covers it (the same literal,
        or a prefix of it)."""
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        host = _norm_host(host)
        allowed: list[tuple[PatternType, str]] = []
        denied_literal: set[str] = set()
        denied_prefix: set[str] = set()
        wildcard_allow = False
        for (rt, ptype, name), bindings in list(self._by_pattern.items()):
            if rt is not resource_type:
                continue
            for b in bindings:
                if b.principal not in (principal, WILDCARD_PRINCIPAL) \
                        or _norm_host(b.host) not in (host, WILDCARD) \
                        or b.operation not in (AclOperation.ALL, operation):
                    continue
                if b.permission is AclPermissionType.DENY:
                    if ptype is PatternType.LITERAL and name == WILDCARD:
                        return False
                    (denied_literal if ptype is PatternType.LITERAL else denied_prefix).add(name)
                elif ptype is PatternType.LITERAL and name == WILDCARD:
                    wildcard_allow = True
                else:
                    allowed.append((ptype, name))
        if wildcard_allow:
            return True
        for ptype, name in allowed:
            if ptype is PatternType.LITERAL and name in denied_literal:
                continue
            if not any(name[:n] in denied_prefix for n in range(1, len(name) + 1)):
                return True
        return False

    def _collect(self, principal: str, host: str, resource_type: ResourceType,
                 name: str) -> tuple[int, int, bool]:
        """(allow bits, deny bits, whether any ACL applies to the resource) for the caller."""
        index = self._index.get(resource_type)
        if index is None:
            return 0, 0, False
        tables = index.applicable(name)
        if not tables:
            return 0, 0, False
        host = _norm_host(host)
        keys = ((principal, host), (principal, WILDCARD), (WILDCARD_PRINCIPAL, host),
                (WILDCARD_PRINCIPAL, WILDCARD))
        allow = deny = 0
        for masks in tables:
            for k in keys:
                m = masks.get(k)
                if m is not None:
                    allow |= m[0]
                    deny |= m[1]
        return allow, deny, True

    # -- ACL administration ---------------------------------------------------------------

    def bindings(self) -> list[AclBinding]:
        """Every ACL, in a stable order."""
        return sorted((b for bs in list(self._by_pattern.values()) for b in bs), key=_sort_key)

    def __len__(self) -> int:
        return sum(len(bs) for bs in list(self._by_pattern.values()))

    def describe(self, flt: AclBindingFilter) -> list[AclBinding]:
        """DescribeAcls: the ACLs the filter matches (InvalidRequestError for an UNKNOWN field)."""
        validate_filter(flt)
        return sorted((b for b in self._candidates(flt) if flt.matches(b)), key=_sort_key)

    def create(self, bindings: Iterable[AclBinding]) -> list[KafkaApiError | None]:
        """CreateAcls: per binding None (created, or already there) or its error: its
        InvalidRequestError, or why the store could not keep its pattern's ACLs.  A store that
        raises (a failed write of the ACL file) changes nothing."""
        bindings = list(bindings)
        results: list[KafkaApiError | None] = []
        added: dict[PatternKey, set[AclBinding]] = {}
        for b in bindings:
            try:
                validate_binding(b)
                if self.store is not None:
                    self.store.validate(b)
            except InvalidRequestError as e:
                results.append(e)
                continue
            results.append(None)
            added.setdefault(_pattern(b), set()).add(b)
        transforms = {key: functools.partial(_with, frozenset(bs)) for key, bs in added.items()}
        with self._lock:
            _changes, failures = self._update(transforms)
        for i, b in enumerate(bindings):
            if results[i] is None and _pattern(b) in failures:
                results[i] = _api_error(failures[_pattern(b)])
        return results

    def delete(self, filters: Iterable[AclBindingFilter]) -> list[AclDeleteResult]:
        """DeleteAcls: per filter the ACLs it deleted (all filters see the ACLs as they were
        before the request: the store's, pattern by pattern) or its error (InvalidRequestError,
        or why the store could not change a pattern it matched); the patterns to change are the
        ones this broker knows that a filter matches."""
        valid: list[AclBindingFilter | None] = []
        errors: list[KafkaApiError | None] = []
        for flt in filters:
            try:
                validate_filter(flt)
            except InvalidRequestError as e:
                valid.append(None)
                errors.append(e)
                continue
            valid.append(flt)
            errors.append(None)
        with self._lock:
            targets: dict[PatternKey, list[AclBindingFilter]] = {}
            touched: list[set[PatternKey]] = []
            for maybe in valid:
                keys: set[PatternKey] = set()
                if maybe is not None:
                    keys = {_pattern(b) for b in self._candidates(maybe) if maybe.matches(b)}
                    for key in keys:
                        targets.setdefault(key, []).append(maybe)
                touched.append(keys)
            transforms = {key: functools.partial(_without, tuple(fs)) for key, fs in targets.items()}
            changes, failures = self._update(transforms)
        deleted = [b for old, new in changes.values() for b in old - new]
        results = []
        for one, error, keys in zip(valid, errors, touched, strict=True):
            failed = [failures[k] for k in keys if k in failures]
            if error is None and failed:
                error = _api_error(failed[0])
            if error is not None or one is None:
                results.append(AclDeleteResult(error))
                continue
            results.append(AclDeleteResult(None, tuple(sorted((b for b in deleted if one.matches(b)),
                                                              key=_sort_key))))
        return results

    def set_pattern_acls(self, resource_type: ResourceType, pattern_type: PatternType, name: str,
                         bindings: Iterable[AclBinding]) -> None:
        """Make the ACLs of one resource pattern exactly ``bindings`` here, without writing the
        store (what the store holds already: a pattern re-read from ZooKeeper)."""
        key = (resource_type, pattern_type, name)
        new = frozenset(bindings)
        for b in new:
            if _pattern(b) != key:
                raise ValueError(f"{b} is not an ACL of {resource_type.name}:{pattern_type.name}:{name}")
        with self._lock:
            self._install({key: new})

    def refresh(self, patterns: Iterable[PatternKey]) -> None:
        """Re-read these patterns from the store and take them as they are (a change made
        elsewhere was announced).  Under the lock, so that a re-read and this broker's own
        changes take effect in the order the store saw them."""
        store = self.store
        if store is None:
            return
        with self._lock:
            self._install({key: frozenset(store.read(key)) for key in dict.fromkeys(patterns)})

    def reload(self) -> None:
        """Take every ACL from the store again (a store that now holds the cluster's ACLs)."""
        store = self.store
        if store is None:
            return
        with self._lock:
            loaded = _by_pattern(store.load())
            loaded.update({key: frozenset() for key in self._by_pattern if key not in loaded})
            self._install(loaded)

    def _candidates(self, flt: AclBindingFilter) -> Iterable[AclBinding]:
        """The ACLs a filter may match, looked up by pattern where the filter names one."""
        rt, pt, name = flt.resource_type, flt.pattern_type, flt.name
        by_pattern = self._by_pattern
        if rt is not ResourceType.ANY and name is not None:
            if pt in (PatternType.LITERAL, PatternType.PREFIXED):
                return by_pattern.get((rt, pt, name), frozenset())
            if pt is PatternType.MATCH:
                keys = [(rt, PatternType.LITERAL, name), (rt, PatternType.LITERAL, WILDCARD)]
                keys += [(rt, PatternType.PREFIXED, name[:n]) for n in range(1, len(name) + 1)]
                return [b for k in dict.fromkeys(keys) for b in by_pattern.get(k, ())]
        return [b for bs in list(by_pattern.values()) for b in bs]

    def _update(self, transforms: Mapping[PatternKey, Transform]
                ) -> tuple[dict[PatternKey, Change], dict[PatternKey, Exception]]:
        """Change patterns (the caller holds the lock): the store first, then here."""
        if not transforms:
            return {}, {}
        if self.store is None:
            changes = _transformed(transforms, self._by_pattern)
            failures: dict[PatternKey, Exception] = {}
        else:
            changes, failures = self.store.update(transforms, self._by_pattern)
        self._install({key: new for key, (_old, new) in changes.items()})
        return changes, failures

    def _install(self, patterns: Mapping[PatternKey, frozenset[AclBinding]]) -> None:
        """Make each pattern's ACLs these (the caller holds the lock or is the constructor):
        the index, then a fresh answer cache."""
        if not patterns:
            return
        for key, bs in patterns.items():
            rt, pt, name = key
            if bs:
                self._by_pattern[key] = frozenset(bs)
            else:
                self._by_pattern.pop(key, None)
            self._index.setdefault(rt, _TypeIndex()).put(pt, name, _masks(bs) if bs else None)
        self._cache = {}


def _pattern(b: AclBinding) -> PatternKey:
    return (b.resource_type, b.pattern_type, b.name)


def _by_pattern(bindings: Iterable[AclBinding]) -> dict[PatternKey, frozenset[AclBinding]]:
    out: dict[PatternKey, set[AclBinding]] = {}
    for b in bindings:
        out.setdefault(_pattern(b), set()).add(b)
    return {key: frozenset(bs) for key, bs in out.items()}


def _with(added: frozenset[AclBinding], current: frozenset[AclBinding]) -> frozenset[AclBinding]:
    return current | added


def _without(filters: tuple[AclBindingFilter, ...], current: frozenset[AclBinding]) -> frozenset[AclBinding]:
    return frozenset(b for b in current if not any(f.matches(b) for f in filters))


def _api_error(e: Exception) -> KafkaApiError:
    """A store's failure as a per-ACL error (Kafka's ApiException: UNKNOWN_SERVER_ERROR when
    it has no code of its own)."""
    return e if isinstance(e, KafkaApiError) else KafkaApiError(f"{type(e).__name__}: {e}")
