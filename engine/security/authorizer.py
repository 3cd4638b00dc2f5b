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
serialised by a lock and written to the ACL file before they take effect.
"""

from __future__ import annotations

import ipaddress
import json
import os
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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


def _sort_key(b: AclBinding) -> tuple:
    return (b.resource_type, b.pattern_type, b.name, b.principal, b.host, b.operation,
            b.permission)


class Authorizer:
    """Kafka's ACL authorizer: decisions, authorized-operations bitfields and the ACL admin
    operations.  ``store`` (an :class:`AclFileStore`) keeps the ACLs across restarts; without
    one they live in memory (tests, or a cluster that keeps them in ZooKeeper)."""

    def __init__(self, *, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False,
                 store: AclFileStore | None = None):
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.store = store
        self._lock = threading.Lock()
        self._by_pattern: dict[PatternKey, frozenset[AclBinding]] = {}
        self._index: dict[ResourceType, _TypeIndex] = {rt: _TypeIndex() for rt in SUPPORTED_OPERATIONS}
        self._cache: dict[tuple, bool] = {}
        if store is not None:
            self._apply(store.load(), (), persist=False)

    @classmethod
    def from_configs(cls, configs: Mapping[str, object], directory: str | None = None) -> Authorizer:
        """The authorizer from Kafka's keys (``super.users``, ``allow.everyone.if.no.acl.found``),
        its ACLs kept in ``directory`` if given.  Call only when :func:`acl_authorizer_configured`."""
        return cls(super_users=parse_super_users(configs.get(SUPER_USERS)),
                   allow_everyone_if_no_acl_found=parse_allow_everyone(
                       configs.get(ALLOW_EVERYONE_IF_NO_ACL_FOUND)),
                   store=AclFileStore(directory) if directory is not None else None)

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
        """CreateAcls: per binding None (created, or already there) or its InvalidRequestError.
        The valid ones are saved together before they take effect; a failed save (OSError)
        raises and changes nothing."""
        results: list[KafkaApiError | None] = []
        valid: list[AclBinding] = []
        for b in bindings:
            try:
                validate_binding(b)
            except InvalidRequestError as e:
                results.append(e)
                continue
            results.append(None)
            valid.append(b)
        with self._lock:
            self._apply([b for b in dict.fromkeys(valid) if not self._has(b)], ())
        return results

    def delete(self, filters: Iterable[AclBindingFilter]) -> list[AclDeleteResult]:
        """DeleteAcls: per filter the ACLs it matched (all filters see the ACLs as they were
        before the request) or its InvalidRequestError; all deletions are saved at once."""
        results: list[AclDeleteResult] = []
        doomed: dict[AclBinding, None] = {}
        with self._lock:
            for flt in filters:
                try:
                    validate_filter(flt)
                except InvalidRequestError as e:
                    results.append(AclDeleteResult(e))
                    continue
                matched = tuple(sorted((b for b in self._candidates(flt) if flt.matches(b)),
                                       key=_sort_key))
                doomed.update(dict.fromkeys(matched))
                results.append(AclDeleteResult(None, matched))
            self._apply((), list(doomed))
        return results

    def set_pattern_acls(self, resource_type: ResourceType, pattern_type: PatternType, name: str,
                         bindings: Iterable[AclBinding]) -> None:
        """Make the ACLs of one resource pattern exactly ``bindings`` (what a ZooKeeper ACL change
        notification asks: re-read ``/kafka-acl.../<type>/<name>`` and take it as it is)."""
        new = frozenset(bindings)
        for b in new:
            if (b.resource_type, b.pattern_type, b.name) != (resource_type, pattern_type, name):
                raise ValueError(f"{b} is not an ACL of {resource_type.name}:{pattern_type.name}:{name}")
        with self._lock:
            old = self._by_pattern.get((resource_type, pattern_type, name), frozenset())
            self._apply(list(new - old), list(old - new))

    def _has(self, b: AclBinding) -> bool:
        return b in self._by_pattern.get((b.resource_type, b.pattern_type, b.name), ())

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

    def _apply(self, added: Iterable[AclBinding], removed: Iterable[AclBinding], *,
               persist: bool = True) -> None:
        """Add and remove ACLs (the caller holds the lock or is the constructor): the file
        first, then the index, then a fresh answer cache."""
        changed: dict[PatternKey, set[AclBinding]] = {}
        for b in removed:
            key = (b.resource_type, b.pattern_type, b.name)
            changed.setdefault(key, set(self._by_pattern.get(key, ()))).discard(b)
        for b in added:
            key = (b.resource_type, b.pattern_type, b.name)
            changed.setdefault(key, set(self._by_pattern.get(key, ()))).add(b)
        if not changed:
            return
        if persist and self.store is not None:
            after = dict(self._by_pattern)
            after.update({k: frozenset(v) for k, v in changed.items()})
            self.store.save(b for bs in after.values() for b in bs)
        for key, bs in changed.items():
            rt, pt, name = key
            if bs:
                self._by_pattern[key] = frozenset(bs)
            else:
                self._by_pattern.pop(key, None)
            self._index.setdefault(rt, _TypeIndex()).put(pt, name, _masks(bs) if bs else None)
        self._cache = {}
