"""Kafka's ACL model: codes, names, bindings, filters (ANY and MATCH as Create/Describe/
DeleteAcls use them) and the validation errors Kafka answers."""

from __future__ import annotations

import pytest

from engine.errors import ErrorCode, InvalidRequestError
from engine.security.acl import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_from_json,
    binding_to_json,
    group_by_pattern,
    parse_principal,
    validate_binding,
    validate_filter,
)
from engine.server import authz

R, P, Op, A = ResourceType, PatternType, AclOperation, AclPermissionType


def acl(name="t", rt=R.TOPIC, pt=P.LITERAL, principal="User:alice", host="*", op=Op.READ,
        perm=A.ALLOW) -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


def test_kafka_codes():
    assert [(m.name, m.value) for m in ResourceType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5), ("DELEGATION_TOKEN", 6), ("USER", 7)]
    assert [(m.name, m.value) for m in PatternType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4)]
    assert [m.value for m in AclOperation] == list(range(15))
    assert (Op.ALL, Op.CLUSTER_ACTION, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_TOKENS) == (2, 9, 12, 14)
    assert [(m.name, m.value) for m in AclPermissionType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("DENY", 2), ("ALLOW", 3)]


def test_unknown_codes_are_unknown_as_kafka_fromcode():
    assert ResourceType(99) is R.UNKNOWN
    assert PatternType(-1) is P.UNKNOWN
    assert AclOperation(42) is Op.UNKNOWN
    assert AclPermissionType(7) is A.UNKNOWN
    b = AclBinding(2, "t", 3, "User:a", "*", 3, 3)       # codes from the wire become enums
    assert (b.resource_type, b.pattern_type, b.operation, b.permission) == (R.TOPIC, P.LITERAL, Op.READ, A.ALLOW)


def test_names_kafka_spelling():
    assert R.TRANSACTIONAL_ID.pascal == "TransactionalId"
    assert Op.CLUSTER_ACTION.pascal == "ClusterAction"
    assert A.ALLOW.pascal == "Allow"
    assert R.from_name("transactional_id") is R.TRANSACTIONAL_ID
    assert R.from_name("TransactionalId") is R.TRANSACTIONAL_ID
    assert Op.from_name("IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert P.from_name("prefixed") is P.PREFIXED
    assert Op.from_name("Fly") is Op.UNKNOWN


def test_supported_operations_match_the_no_authorizer_bitfields():
    def bits(rt):
        return sum(1 << op for op in SUPPORTED_OPERATIONS[rt])
    assert bits(R.TOPIC) == authz.TOPIC_OPERATIONS
    assert bits(R.GROUP) == authz.GROUP_OPERATIONS
    assert bits(R.CLUSTER) == authz.CLUSTER_OPERATIONS


def test_principal_type_and_name():
    assert parse_principal("User:alice") == ("User", "alice")
    assert parse_principal("User:CN=a:b,O=x") == ("User", "CN=a:b,O=x")    # first colon splits
    for bad in ("alice", "", ":alice", "User:"):
        with pytest.raises(InvalidRequestError, match="principalType:principalName"):
            parse_principal(bad)


@pytest.mark.parametrize("binding, message", [
    (acl(rt=R.ANY), "Invalid resourceType ANY"),
    (acl(rt=R.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl(pt=P.ANY), "Invalid patternType ANY"),
    (acl(pt=P.MATCH), "Invalid patternType MATCH"),
    (acl(pt=P.UNKNOWN), "Invalid patternType UNKNOWN"),
    (acl(op=Op.ANY), "Invalid operation ANY"),
    (acl(op=Op.UNKNOWN), "Invalid operation UNKNOWN"),
    (acl(perm=A.ANY), "Invalid permissionType ANY"),
    (acl(perm=A.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (acl(name=""), "Invalid empty resource name"),
    (acl(rt=R.CLUSTER, name="c"), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(principal="alice"), "principalType:principalName"),
])
def test_create_validation_is_invalid_request(binding, message):
    with pytest.raises(InvalidRequestError, match=message) as e:
        validate_binding(binding)
    assert e.value.code == ErrorCode.INVALID_REQUEST


def test_valid_bindings_pass():
    validate_binding(acl())
    validate_binding(acl(pt=P.PREFIXED, name="team-"))
    validate_binding(acl(name="*", principal="User:*", op=Op.ALL, perm=A.DENY))
    validate_binding(acl(rt=R.CLUSTER, name="kafka-cluster", op=Op.IDEMPOTENT_WRITE))


def test_filter_validation_refuses_unknown():
    validate_filter(AclBindingFilter())
    with pytest.raises(InvalidRequestError, match="Unknown patternFilter"):
        validate_filter(AclBindingFilter(resource_type=R.UNKNOWN))
    with pytest.raises(InvalidRequestError, match="Unknown patternFilter"):
        validate_filter(AclBindingFilter(pattern_type=P.UNKNOWN))
    with pytest.raises(InvalidRequestError, match="Unknown entryFilter"):
        validate_filter(AclBindingFilter(operation=Op.UNKNOWN))
    with pytest.raises(InvalidRequestError, match="Unknown entryFilter"):
        validate_filter(AclBindingFilter(permission=A.UNKNOWN))
    assert AclBindingFilter(permission=A.UNKNOWN).is_unknown


LIT = acl("Test-topic")
STAR = acl("*")
PRE = acl("Test-", pt=P.PREFIXED)
PRE_OTHER = acl("Other-", pt=P.PREFIXED)
LIT_OTHER = acl("Test-topic-2")
GROUP = acl("Test-topic", rt=R.GROUP)
ALL_ACLS = [LIT, STAR, PRE, PRE_OTHER, LIT_OTHER, GROUP]


def selected(flt):
    return [b for b in ALL_ACLS if flt.matches(b)]


def test_filter_any_matches_everything():
    assert selected(AclBindingFilter()) == ALL_ACLS


def test_filter_any_pattern_with_name_matches_that_name_exactly():
    assert selected(AclBindingFilter(R.TOPIC, "Test-topic", P.ANY)) == [LIT]
    assert selected(AclBindingFilter(R.ANY, "Test-topic", P.ANY)) == [LIT, GROUP]
    assert selected(AclBindingFilter(R.TOPIC, "Test-", P.ANY)) == [PRE]


def test_filter_literal_and_prefixed_select_their_own_kind():
    assert selected(AclBindingFilter(R.TOPIC, None, P.LITERAL)) == [LIT, STAR, LIT_OTHER]
    assert selected(AclBindingFilter(R.TOPIC, None, P.PREFIXED)) == [PRE, PRE_OTHER]
    assert selected(AclBindingFilter(R.TOPIC, "*", P.LITERAL)) == [STAR]     # no wildcard magic


def test_filter_match_selects_what_applies_to_the_resource():
    # kafka-acls.sh --list --topic Test-topic --resource-pattern-type match: the literal
    # Test-topic, the literal * and the prefix Test-, not Other- nor Test-topic-2
    assert selected(AclBindingFilter(R.TOPIC, "Test-topic", P.MATCH)) == [LIT, STAR, PRE]
    assert selected(AclBindingFilter(R.TOPIC, "Test-", P.MATCH)) == [STAR, PRE]
    assert selected(AclBindingFilter(R.TOPIC, "nothing", P.MATCH)) == [STAR]
    assert selected(AclBindingFilter(R.TOPIC, None, P.MATCH)) == [LIT, STAR, PRE, PRE_OTHER, LIT_OTHER]


def test_filter_entry_fields():
    deny = acl("t", principal="User:bob", host="10.0.0.1", op=Op.WRITE, perm=A.DENY)
    assert AclBindingFilter(principal="User:bob").matches(deny)
    assert not AclBindingFilter(principal="User:*").matches(deny)       # no principal wildcard magic
    assert AclBindingFilter(host="10.0.0.1").matches(deny)
    assert not AclBindingFilter(host="*").matches(deny)
    assert AclBindingFilter(operation=Op.WRITE, permission=A.DENY).matches(deny)
    assert not AclBindingFilter(operation=Op.READ).matches(deny)
    assert not AclBindingFilter(operation=Op.ALL).matches(deny)
    assert not AclBindingFilter(permission=A.ALLOW).matches(deny)
    assert deny.to_filter().matches(deny)
    assert not deny.to_filter().matches(acl("t", principal="User:bob", host="10.0.0.1", op=Op.WRITE))


def test_json_round_trip_and_refusal():
    b = acl("team-", pt=P.PREFIXED, principal="User:*", host="10.0.0.1", op=Op.DESCRIBE_CONFIGS, perm=A.DENY)
    obj = binding_to_json(b)
    assert obj == {"resourceType": "TOPIC", "name": "team-", "patternType": "PREFIXED",
                   "principal": "User:*", "host": "10.0.0.1", "operation": "DESCRIBE_CONFIGS",
                   "permissionType": "DENY"}
    assert binding_from_json(obj) == b
    with pytest.raises(InvalidRequestError):
        binding_from_json({**obj, "patternType": "MATCH"})
    with pytest.raises(ValueError):
        binding_from_json({**obj, "host": None})
    with pytest.raises(ValueError):
        binding_from_json(["not", "an", "object"])


def test_group_by_pattern_for_describe_responses():
    a2 = acl("Test-topic", principal="User:bob")
    assert group_by_pattern([LIT, PRE, a2, GROUP]) == {
        (R.TOPIC, "Test-topic", P.LITERAL): [LIT, a2],
        (R.TOPIC, "Test-", P.PREFIXED): [PRE],
        (R.GROUP, "Test-topic", P.LITERAL): [GROUP]}
