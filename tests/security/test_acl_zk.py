"""ACLs in ZooKeeper as Kafka's AclAuthorizer kept them: znode paths, node JSON, change
notifications; round trips through the authorizer."""

from __future__ import annotations

import json

import pytest

from engine.errors import AclFormatError, InvalidRequestError
from engine.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from engine.security.acl_zk import (
    decode_zk_acl_change,
    decode_zk_acls,
    encode_zk_acl_change,
    encode_zk_acls,
    parse_zk_acl_path,
    zk_acl_path,
    zk_change_path,
)
from engine.security.authorizer import Authorizer

R, P, Op, A = ResourceType, PatternType, AclOperation, AclPermissionType


def test_paths_as_kafka_named_them():
    assert zk_acl_path(R.TOPIC, P.LITERAL, "orders") == "/kafka-acl/Topic/orders"
    assert zk_acl_path(R.TOPIC, P.PREFIXED, "team-") == "/kafka-acl-extended/prefixed/Topic/team-"
    assert zk_acl_path(R.TRANSACTIONAL_ID, P.LITERAL, "*") == "/kafka-acl/TransactionalId/*"
    assert zk_acl_path(R.CLUSTER, P.LITERAL, "kafka-cluster") == "/kafka-acl/Cluster/kafka-cluster"
    assert zk_acl_path(R.DELEGATION_TOKEN, P.LITERAL, "t") == "/kafka-acl/DelegationToken/t"
    assert zk_acl_path(R.GROUP, P.PREFIXED, "g") == "/kafka-acl-extended/prefixed/Group/g"
    for rt in (R.TOPIC, R.GROUP, R.CLUSTER, R.TRANSACTIONAL_ID, R.DELEGATION_TOKEN, R.USER):
        for pt in (P.LITERAL, P.PREFIXED):
            assert parse_zk_acl_path(zk_acl_path(rt, pt, "n.a-me")) == (rt, pt, "n.a-me")
    with pytest.raises(InvalidRequestError, match="invalid resource name"):
        zk_acl_path(R.TOPIC, P.LITERAL, "a/b")
    with pytest.raises(ValueError):
        zk_acl_path(R.TOPIC, P.MATCH, "a")
    for bad in ("/kafka-acl/Topic", "/kafka-acl/Topics/x", "/kafka-acl/TOPIC/x", "/other/Topic/x",
                "/kafka-acl-extended/prefixed/Topic/a/b"):
        with pytest.raises(AclFormatError):
            parse_zk_acl_path(bad)


def test_node_json_is_kafkas():
    bindings = [AclBinding(R.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.READ, A.ALLOW),
                AclBinding(R.TOPIC, "orders", P.LITERAL, "User:bob", "10.0.0.1", Op.CLUSTER_ACTION, A.DENY),
                AclBinding(R.TOPIC, "orders", P.LITERAL, "User:*", "*", Op.DESCRIBE_CONFIGS, A.ALLOW)]
    data = encode_zk_acls(bindings)
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "ClusterAction", "host": "10.0.0.1"},
        {"principal": "User:*", "permissionType": "Allow", "operation": "DescribeConfigs", "host": "*"}]}
    assert decode_zk_acls(R.TOPIC, P.LITERAL, "orders", data) == bindings
    with pytest.raises(ValueError, match="one resource pattern"):
        encode_zk_acls([bindings[0], AclBinding(R.TOPIC, "x", P.LITERAL, "User:a", "*", Op.READ, A.ALLOW)])


def test_decode_what_kafka_wrote():
    # a node as Kafka 3.x's AclAuthorizer writes it (Jackson, any key order)
    kafka = (b'{"version":1,"acls":[{"host":"*","permissionType":"Allow","operation":"IdempotentWrite",'
             b'"principal":"User:producer"},{"operation":"All","principal":"User:admin","host":"*",'
             b'"permissionType":"Allow"}]}')
    got = decode_zk_acls(R.CLUSTER, P.LITERAL, "kafka-cluster", kafka)
    assert [(b.principal, b.operation, b.permission) for b in got] == [
        ("User:producer", Op.IDEMPOTENT_WRITE, A.ALLOW), ("User:admin", Op.ALL, A.ALLOW)]
    assert decode_zk_acls(R.TOPIC, P.LITERAL, "t", b"") == []
    assert decode_zk_acls(R.TOPIC, P.LITERAL, "t", None) == []


@pytest.mark.parametrize("data", [
    b"{", b"[]", b'{"version":1}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe","operation":"Read","host":"*"}]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Fly","host":"*"}]}',
    b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow","operation":"Read","host":"*"}]}',
    b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read"}]}',
])
def test_malformed_nodes_are_errors_naming_the_node(data):
    with pytest.raises(AclFormatError, match="/kafka-acl/Topic/t"):
        decode_zk_acls(R.TOPIC, P.LITERAL, "t", data)


def test_change_notifications():
    assert zk_change_path(P.LITERAL) == "/kafka-acl-changes/acl_changes_"
    assert zk_change_path(P.PREFIXED) == "/kafka-acl-extended-changes/acl_changes_"
    assert encode_zk_acl_change(R.TOPIC, P.LITERAL, "orders") == b"TOPIC:orders"
    assert json.loads(encode_zk_acl_change(R.GROUP, P.PREFIXED, "g-")) == {
        "version": 1, "resourceType": "GROUP", "name": "g-", "patternType": "PREFIXED"}
    assert decode_zk_acl_change("/kafka-acl-changes", b"TOPIC:a:b") == (R.TOPIC, P.LITERAL, "a:b")
    assert decode_zk_acl_change("/kafka-acl-changes", b"Topic:x") == (R.TOPIC, P.LITERAL, "x")
    assert decode_zk_acl_change("/kafka-acl-extended-changes",
                                encode_zk_acl_change(R.GROUP, P.PREFIXED, "g-")) == (R.GROUP, P.PREFIXED, "g-")
    for root, bad in [("/kafka-acl-changes", b"orders"), ("/kafka-acl-changes", b"Planet:x"),
                      ("/kafka-acl-extended-changes", b"TOPIC:x"),
                      ("/kafka-acl-extended-changes", b'{"version":2,"resourceType":"TOPIC","name":"x",'
                                                      b'"patternType":"PREFIXED"}'),
                      ("/kafka-acl-extended-changes", b'{"version":1,"resourceType":"TOPIC","name":"x",'
                                                      b'"patternType":"MATCH"}')]:
        with pytest.raises(AclFormatError):
            decode_zk_acl_change(root, bad)


def test_round_trip_through_the_authorizer():
    """What a cluster broker will do: write each pattern's node from one authorizer, announce
    it, and on the announcement re-read the node into another."""
    source = Authorizer()
    source.create([AclBinding(R.TOPIC, "orders", P.LITERAL, "User:alice", "*", Op.READ, A.ALLOW),
                   AclBinding(R.TOPIC, "orders", P.LITERAL, "User:eve", "*", Op.ALL, A.DENY),
                   AclBinding(R.TOPIC, "team-", P.PREFIXED, "User:bob", "10.0.0.1", Op.WRITE, A.ALLOW),
                   AclBinding(R.CLUSTER, "kafka-cluster", P.LITERAL, "User:*", "*", Op.IDEMPOTENT_WRITE, A.ALLOW)])
    znodes: dict[str, bytes] = {}
    changes: list[tuple[str, bytes]] = []
    patterns = {(b.resource_type, b.pattern_type, b.name) for b in source.bindings()}
    for rt, pt, name in patterns:
        znodes[zk_acl_path(rt, pt, name)] = encode_zk_acls(
            b for b in source.bindings() if (b.resource_type, b.pattern_type, b.name) == (rt, pt, name))
        changes.append((zk_change_path(pt).rsplit("/", 1)[0], encode_zk_acl_change(rt, pt, name)))
    replica = Authorizer()
    for root, data in changes:
        rt, pt, name = decode_zk_acl_change(root, data)
        replica.set_pattern_acls(rt, pt, name, decode_zk_acls(rt, pt, name, znodes.get(zk_acl_path(rt, pt, name))))
    assert replica.bindings() == source.bindings()
    assert replica.authorize("User:bob", "10.0.0.1", Op.WRITE, R.TOPIC, "team-x")
    assert not replica.authorize("User:eve", "h", Op.READ, R.TOPIC, "orders")
