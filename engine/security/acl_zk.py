"""ACLs as Kafka kept them in ZooKeeper (AclAuthorizer, Kafka 2.0 to 3.x), so that a cluster
stores its ACLs where Kafka's brokers and tools look for them.

- LITERAL patterns: ``/kafka-acl/<ResourceType>/<name>``; PREFIXED:
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``, the type in Kafka's PascalCase
  (``Topic``, ``Group``, ``Cluster``, ``TransactionalId``, ``DelegationToken``, ``User``).
- The node holds every ACL of that pattern:
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}`` (permission and operation in PascalCase).
- A change is announced by a sequential node ``acl_changes_<seq>`` under
  ``/kafka-acl-changes`` holding ``TOPIC:<name>`` (LITERAL), or under
  ``/kafka-acl-extended-changes`` holding
  ``{"version":1,"resourceType":"TOPIC","name":"...","patternType":"PREFIXED"}``; a broker that
  sees one re-reads that resource's node.

A name holding ``/`` cannot be a znode name: Kafka's AclAuthorizer refuses such an ACL with
INVALID_REQUEST, and so does :func:`zk_acl_path`.  Malformed nodes raise
:class:`~engine.errors.AclFormatError`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from engine.errors import AclFormatError, InvalidRequestError
from engine.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_principal,
)

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGE_PATH = "/kafka-acl-changes"
EXTENDED_CHANGE_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
VERSION = 1

Pattern = tuple[ResourceType, PatternType, str]


def zk_store_path(pattern_type: PatternType) -> str:
    """``/kafka-acl`` for LITERAL, ``/kafka-acl-extended/prefixed`` for PREFIXED."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_PATH
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACL_PATH}/{pattern_type.name.lower()}"
    raise ValueError(f"no ZooKeeper ACL store for pattern type {pattern_type.name}")


def zk_acl_path(resource_type: ResourceType, pattern_type: PatternType, name: str) -> str:
    """The znode that holds the ACLs of one resource pattern."""
    if "/" in name:
        raise InvalidRequestError(f"ACL binding contains invalid resource name: {name}")
    if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise ValueError(f"no ZooKeeper ACL path for resource type {resource_type.name}")
    return f"{zk_store_path(pattern_type)}/{resource_type.pascal}/{name}"


def parse_zk_acl_path(path: str) -> Pattern:
    """The inverse of :func:`zk_acl_path`."""
    for ptype in (PatternType.PREFIXED, PatternType.LITERAL):
        root = zk_store_path(ptype) + "/"
        if path.startswith(root):
            rtype_name, sep, name = path[len(root):].partition("/")
            rtype = ResourceType.from_name(rtype_name)
            if sep and name and "/" not in name and rtype.pascal == rtype_name \
                    and rtype not in (ResourceType.ANY, ResourceType.UNKNOWN):
                return rtype, ptype, name
            break
    raise AclFormatError(f"{path!r} is not a ZooKeeper ACL node path")


def encode_zk_acls(bindings: Iterable[AclBinding]) -> bytes:
    """The node data for the ACLs of one resource pattern (all bindings must share it)."""
    acls = []
    pattern: Pattern | None = None
    for b in bindings:
        this = (b.resource_type, b.pattern_type, b.name)
        if pattern is not None and this != pattern:
            raise ValueError(f"one ZooKeeper ACL node holds one resource pattern, not {pattern} and {this}")
        pattern = this
        acls.append({"principal": b.principal, "permissionType": b.permission.pascal,
                     "operation": b.operation.pascal, "host": b.host})
    return json.dumps({"version": VERSION, "acls": acls}, separators=(",", ":")).encode("utf-8")


def decode_zk_acls(resource_type: ResourceType, pattern_type: PatternType, name: str,
                   data: bytes | None) -> list[AclBinding]:
    """The ACLs in a ``/kafka-acl...`` node (empty or missing data: none, as in Kafka)."""
    if not data:
        return []
    where = zk_acl_path(resource_type, pattern_type, name)
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise AclFormatError(f"{where}: not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("acls"), list):
        raise AclFormatError(f'{where}: expected {{"version":1,"acls":[...]}}')
    out = []
    for item in doc["acls"]:
        fields = ("principal", "permissionType", "operation", "host")
        if not isinstance(item, dict) or any(not isinstance(item.get(f), str) for f in fields):
            raise AclFormatError(f"{where}: an ACL needs the string fields {', '.join(fields)}: {item!r}")
        permission = AclPermissionType.from_name(item["permissionType"])
        operation = AclOperation.from_name(item["operation"])
        if permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY) \
                or operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise AclFormatError(f"{where}: unknown permission or operation in {item!r}")
        try:
            parse_principal(item["principal"])
        except InvalidRequestError as e:
            raise AclFormatError(f"{where}: {e}") from None
        out.append(AclBinding(resource_type, name, pattern_type, item["principal"], item["host"],
                              operation, permission))
    return out


def zk_change_path(pattern_type: PatternType) -> str:
    """The sequential node to create to announce a change of ACLs of this pattern type
    (``/kafka-acl-changes/acl_changes_`` or ``/kafka-acl-extended-changes/acl_changes_``)."""
    root = LITERAL_CHANGE_PATH if pattern_type is PatternType.LITERAL else EXTENDED_CHANGE_PATH
    return f"{root}/{CHANGE_PREFIX}"


def encode_zk_acl_change(resource_type: ResourceType, pattern_type: PatternType, name: str) -> bytes:
    """A change notification's data: ``TOPIC:<name>`` for LITERAL (Kafka writes the enum
    name), the extended JSON event otherwise."""
    if pattern_type is PatternType.LITERAL:
        return f"{resource_type.name}:{name}".encode()
    return json.dumps({"version": VERSION, "resourceType": resource_type.name, "name": name,
                       "patternType": pattern_type.name}, separators=(",", ":")).encode("utf-8")


def decode_zk_acl_change(change_root: str, data: bytes) -> Pattern:
    """The resource pattern a change notification under ``change_root``
    (``/kafka-acl-changes`` or ``/kafka-acl-extended-changes``) names."""
    text = data.decode("utf-8", "replace")
    if change_root.rstrip("/") == LITERAL_CHANGE_PATH:
        rtype_name, sep, name = text.partition(":")
        rtype = ResourceType.from_name(rtype_name)
        if not sep or rtype in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise AclFormatError(f"expected ResourceType:ResourceName in an ACL change, got {text!r}")
        return rtype, PatternType.LITERAL, name
    if change_root.rstrip("/") != EXTENDED_CHANGE_PATH:
        raise ValueError(f"{change_root!r} is not an ACL change path")
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        if int(doc.get("version", 0)) > VERSION:
            raise ValueError(f"unsupported version {doc['version']}")
        rtype = ResourceType.from_name(str(doc["resourceType"]))
        ptype = PatternType.from_name(str(doc["patternType"]))
        name = doc["name"]
    except (ValueError, KeyError, TypeError) as e:
        raise AclFormatError(f"failed to parse ACL change event {text!r}: {e}") from None
    if rtype in (ResourceType.ANY, ResourceType.UNKNOWN) or not isinstance(name, str) \
            or ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclFormatError(f"ACL change event names no resource pattern: {text!r}")
    return rtype, ptype, name
