"""Kafka's ACL model: resource types, pattern types, operations and permissions with Kafka's
codes, the ACL binding and the binding filter of CreateAcls / DescribeAcls / DeleteAcls.

Codes and names are those of ``org.apache.kafka.common.acl`` / ``.resource`` (Kafka 4.0); a code
this module does not know is ``UNKNOWN``, as Kafka's ``fromCode`` answers.  An ACL is an
:class:`AclBinding`: a resource pattern (type, name, LITERAL or PREFIXED) and an entry
(principal ``Type:name``, host, operation, ALLOW or DENY).  An :class:`AclBindingFilter`
selects bindings: ``None`` / ``ANY`` match everything, and pattern type ``MATCH`` on a name
selects every binding that would apply to that resource (the literal name, the literal ``*``
and every prefix of the name).

Validation follows Kafka's: :func:`validate_binding` is what a CreateAcls binding must pass
(Kafka's AclApis and AclControlManager), :func:`validate_filter` what a DeleteAcls /
DescribeAcls filter must pass; both raise :class:`~engine.errors.InvalidRequestError`
(INVALID_REQUEST) with Kafka's message.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from engine.errors import InvalidRequestError

WILDCARD = "*"                       # a resource name or host that matches any
WILDCARD_PRINCIPAL = "User:*"        # the principal that matches any principal
CLUSTER_NAME = "kafka-cluster"       # the one name of the CLUSTER resource


def _pascal(name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part[:1].upper() + part[1:].lower() for part in name.split("_"))


E = TypeVar("E", bound="_KafkaEnum")


class _KafkaEnum(IntEnum):
    """A Kafka ACL enum: unknown codes become UNKNOWN (Kafka's ``fromCode``)."""

    @classmethod
    def _missing_(cls, value: object) -> _KafkaEnum:
        return cls["UNKNOWN"]

    @classmethod
    def from_name(cls: type[E], name: str) -> E:
        """Kafka's ``fromString``: the enum name in any case, or its PascalCase form
        (``TransactionalId``, ``ClusterAction``); anything else is UNKNOWN."""
        key = name.strip().upper()
        if key in cls.__members__:
            return cls[key]
        for member in cls:
            if member.pascal == name.strip():
                return member
        return cls["UNKNOWN"]

    @property
    def pascal(self) -> str:
        """The name Kafka writes in ZooKeeper and logs: ``Topic``, ``ClusterAction``, ``Allow``."""
        return _pascal(self.name)

    @property
    def is_unknown(self) -> bool:
        return self.name == "UNKNOWN"


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


Op = AclOperation

# Kafka's AclEntry.supportedOperations: what each resource type's authorized-operations
# bitfield may hold (engine/server/authz.py holds the same sets for "no authorizer").
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}

# An ALLOW for one of these also allows DESCRIBE / DESCRIBE_CONFIGS (a DENY implies nothing).
IMPLIES_DESCRIBE = frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS})


def parse_principal(principal: str) -> tuple[str, str]:
    """``Type:name`` -> (type, name), split at the first colon (Kafka's
    SecurityUtils.parseKafkaPrincipal); neither part may be empty."""
    ptype, sep, name = principal.partition(":")
    if not sep or not ptype or not name:
        raise InvalidRequestError(
            f"expected a string in format principalType:principalName but got {principal!r}")
    return ptype, name


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: the resource pattern and the access control entry, with Kafka's fields."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __post_init__(self) -> None:
        # accept codes (from the wire) and keep the enums
        object.__setattr__(self, "resource_type", ResourceType(self.resource_type))
        object.__setattr__(self, "pattern_type", PatternType(self.pattern_type))
        object.__setattr__(self, "operation", AclOperation(self.operation))
        object.__setattr__(self, "permission", AclPermissionType(self.permission))

    def __str__(self) -> str:
        return (f"(pattern=ResourcePattern(resourceType={self.resource_type.name}, "
                f"name={self.name}, patternType={self.pattern_type.name}), "
                f"entry=(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission.name}))")

    def to_filter(self) -> AclBindingFilter:
        """The filter that matches exactly this binding."""
        return AclBindingFilter(self.resource_type, self.name, self.pattern_type,
                                self.principal, self.host, self.operation, self.permission)


def validate_binding(binding: AclBinding) -> None:
    """What Kafka checks of a CreateAcls binding (AclApis, then AclControlManager), plus the
    principal's ``Type:name`` form that Kafka's tools check; raises InvalidRequestError with
    Kafka's message."""
    b = binding
    if b.resource_type is ResourceType.CLUSTER and b.name != CLUSTER_NAME:
        raise InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not b.name:
        raise InvalidRequestError("Invalid empty resource name")
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidRequestError(f"Invalid resourceType {b.resource_type.name}")
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidRequestError(f"Invalid patternType {b.pattern_type.name}")
    if b.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidRequestError(f"Invalid operation {b.operation.name}")
    if b.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidRequestError(f"Invalid permissionType {b.permission.name}")
    parse_principal(b.principal)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A filter over ACL bindings (Kafka's AclBindingFilter = ResourcePatternFilter +
    AccessControlEntryFilter).  ``None`` name / principal / host and the ANY values match
    anything; pattern type MATCH with a name matches the bindings that apply to that
    resource: LITERAL of the name, LITERAL ``*`` and PREFIXED of any prefix of the name.
    ``AclBindingFilter()`` matches every binding."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def __post_init__(self) -> None:
        object.__setattr__(self, "resource_type", ResourceType(self.resource_type))
        object.__setattr__(self, "pattern_type", PatternType(self.pattern_type))
        object.__setattr__(self, "operation", AclOperation(self.operation))
        object.__setattr__(self, "permission", AclPermissionType(self.permission))

    @property
    def is_unknown(self) -> bool:
        """True if a field is UNKNOWN: Kafka refuses such a filter with INVALID_REQUEST."""
        return (self.resource_type.is_unknown or self.pattern_type.is_unknown
                or self.operation.is_unknown or self.permission.is_unknown)

    def matches_pattern(self, rtype: ResourceType, name: str, ptype: PatternType) -> bool:
        """Kafka's ResourcePatternFilter.matches against a stored resource pattern."""
        if self.resource_type is not ResourceType.ANY and self.resource_type is not rtype:
            return False
        fp = self.pattern_type
        if fp not in (PatternType.ANY, PatternType.MATCH) and fp is not ptype:
            return False
        if self.name is None:
            return True
        if fp is PatternType.ANY or fp is ptype:
            return self.name == name
        # MATCH: the stored patterns that apply to a resource called self.name
        if ptype is PatternType.LITERAL:
            return self.name == name or name == WILDCARD
        if ptype is PatternType.PREFIXED:
            return self.name.startswith(name)
        return False

    def matches_entry(self, principal: str, host: str, operation: AclOperation,
                      permission: AclPermissionType) -> bool:
        """Kafka's AccessControlEntryFilter.matches against a stored entry."""
        if self.principal is not None and self.principal != principal:
            return False
        if self.host is not None and self.host != host:
            return False
        if self.operation is not AclOperation.ANY and self.operation is not operation:
            return False
        return self.permission is AclPermissionType.ANY or self.permission is permission

    def matches(self, binding: AclBinding) -> bool:
        b = binding
        return (self.matches_pattern(b.resource_type, b.name, b.pattern_type)
                and self.matches_entry(b.principal, b.host, b.operation, b.permission))


def validate_filter(flt: AclBindingFilter) -> None:
    """What Kafka checks of a DeleteAcls / DescribeAcls filter: no UNKNOWN field
    (AclControlManager.validateFilter); raises InvalidRequestError."""
    if flt.resource_type.is_unknown or flt.pattern_type.is_unknown:
        raise InvalidRequestError("Unknown patternFilter.")
    if flt.operation.is_unknown or flt.permission.is_unknown:
        raise InvalidRequestError("Unknown entryFilter.")


def binding_to_json(b: AclBinding) -> dict[str, str]:
    """A binding as a JSON object of Kafka's enum names (the broker's ACL file)."""
    return {"resourceType": b.resource_type.name, "name": b.name,
            "patternType": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permissionType": b.permission.name}


def binding_from_json(obj: object) -> AclBinding:
    """The inverse of :func:`binding_to_json`; the binding must pass :func:`validate_binding`
    (raises InvalidRequestError otherwise, ValueError/KeyError on a malformed object)."""
    if not isinstance(obj, dict):
        raise ValueError(f"an ACL must be a JSON object, not {obj!r}")
    fields = ("resourceType", "name", "patternType", "principal", "host", "operation",
              "permissionType")
    if any(not isinstance(obj.get(f), str) for f in fields):
        raise ValueError(f"an ACL needs the string fields {', '.join(fields)}: {obj!r}")
    binding = AclBinding(ResourceType.from_name(obj["resourceType"]), obj["name"],
                         PatternType.from_name(obj["patternType"]), obj["principal"],
                         obj["host"], AclOperation.from_name(obj["operation"]),
                         AclPermissionType.from_name(obj["permissionType"]))
    validate_binding(binding)
    return binding


def group_by_pattern(bindings: Iterable[AclBinding]) -> dict[tuple[ResourceType, str, PatternType], list[AclBinding]]:
    """Bindings grouped by resource pattern (type, name, pattern type), in first-seen order:
    the shape of DescribeAcls' response (a resource, then its ACLs)."""
    out: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for b in bindings:
        out.setdefault((b.resource_type, b.name, b.pattern_type), []).append(b)
    return out
