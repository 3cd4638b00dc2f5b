"""The ACL authorizer: Kafka's StandardAuthorizer decisions (DENY wins, literal / wildcard /
prefixed patterns, principal and host wildcards, implied operations, super.users,
allow.everyone.if.no.acl.found), authorized-operations bitfields, Create/Describe/DeleteAcls,
the ACL file across reopen, and authorizer.class.name."""

from __future__ import annotations

import json
import os
import random
import time

import pytest

from engine.errors import AclFormatError, AuthorizerConfigError, ErrorCode, InvalidConfigError, InvalidRequestError
from engine.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from engine.security.authorizer import (
    AclFileStore,
    Authorizer,
    acl_authorizer_configured,
    parse_allow_everyone,
    parse_super_users,
)
from engine.server import authz

R, P, Op, A = ResourceType, PatternType, AclOperation, AclPermissionType
TOPIC = R.TOPIC


def acl(name="Test-topic", principal="User:alice", op=Op.READ, perm=A.ALLOW, host="*",
        pt=P.LITERAL, rt=TOPIC) -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


def make(*bindings, **kw) -> Authorizer:
    a = Authorizer(**kw)
    assert a.create(bindings) == [None] * len(bindings)
    return a


def test_kafka_docs_example_two_users_two_hosts():
    # kafka-acls.sh --add --allow-principal User:Bob --allow-principal User:Alice
    #   --allow-host 198.51.100.0 --allow-host 198.51.100.1 --operation Read --operation Write --topic Test-topic
    a = make(*(acl(principal=p, host=h, op=o)
               for p in ("User:Bob", "User:Alice") for h in ("198.51.100.0", "198.51.100.1")
               for o in (Op.READ, Op.WRITE)))
    assert len(a) == 8
    for p in ("User:Bob", "User:Alice"):
        for h in ("198.51.100.0", "198.51.100.1"):
            assert a.authorize(p, h, Op.READ, TOPIC, "Test-topic")
            assert a.authorize(p, h, Op.WRITE, TOPIC, "Test-topic")
            assert a.authorize(p, h, Op.DESCRIBE, TOPIC, "Test-topic")          # implied
            assert not a.authorize(p, h, Op.DELETE, TOPIC, "Test-topic")
    assert not a.authorize("User:Bob", "198.51.100.2", Op.READ, TOPIC, "Test-topic")
    assert not a.authorize("User:Carol", "198.51.100.0", Op.READ, TOPIC, "Test-topic")
    assert not a.authorize("User:Bob", "198.51.100.0", Op.READ, TOPIC, "Other-topic")


def test_kafka_docs_example_everyone_but_badbob():
    # --allow-principal User:'*' --allow-host '*' --deny-principal User:BadBob
    #   --deny-host 198.51.100.3 --operation Read --topic Test-topic
    a = make(acl(principal="User:*"), acl(principal="User:BadBob", host="198.51.100.3", perm=A.DENY))
    assert a.authorize("User:anyone", "10.1.1.1", Op.READ, TOPIC, "Test-topic")
    assert a.authorize("User:BadBob", "198.51.100.4", Op.READ, TOPIC, "Test-topic")
    assert not a.authorize("User:BadBob", "198.51.100.3", Op.READ, TOPIC, "Test-topic")


def test_deny_wins_wherever_it_comes_from():
    allow = acl(principal="User:alice")
    cases = [
        acl(principal="User:alice", perm=A.DENY),                   # same ACL, other permission
        acl(principal="User:*", perm=A.DENY),                       # any principal
        acl(name="*", perm=A.DENY),                                 # any topic
        acl(name="Test", pt=P.PREFIXED, perm=A.DENY),               # a prefix of the name
        acl(op=Op.ALL, perm=A.DENY),                                # every operation
        acl(host="10.0.0.1", perm=A.DENY),                          # the caller's host
    ]
    for deny in cases:
        a = make(allow, acl(op=Op.ALL), deny)
        assert not a.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "Test-topic"), deny
    # a deny that does not fit the caller leaves the allow standing
    for other in (acl(principal="User:bob", perm=A.DENY), acl(host="10.0.0.2", perm=A.DENY),
                  acl(op=Op.WRITE, perm=A.DENY), acl(name="Test-topic-2", perm=A.DENY),
                  acl(name="Test-topics", pt=P.PREFIXED, perm=A.DENY)):
        a = make(allow, other)
        assert a.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "Test-topic"), other


def test_literal_prefixed_and_wildcard_names():
    a = make(acl(name="Test", principal="User:lit"),
             acl(name="Test", pt=P.PREFIXED, principal="User:pre"),
             acl(name="*", principal="User:star"),
             acl(name="*", pt=P.PREFIXED, principal="User:prestar"))
    assert a.authorize("User:lit", "h", Op.READ, TOPIC, "Test")
    assert not a.authorize("User:lit", "h", Op.READ, TOPIC, "Test-topic")   # literal: exact only
    assert not a.authorize("User:lit", "h", Op.READ, TOPIC, "Tes")
    assert a.authorize("User:pre", "h", Op.READ, TOPIC, "Test")             # a prefix of itself
    assert a.authorize("User:pre", "h", Op.READ, TOPIC, "Test-topic")
    assert not a.authorize("User:pre", "h", Op.READ, TOPIC, "test-topic")   # case matters
    assert not a.authorize("User:pre", "h", Op.READ, TOPIC, "Tes")
    assert a.authorize("User:star", "h", Op.READ, TOPIC, "anything")
    assert a.authorize("User:star", "h", Op.READ, TOPIC, "*")
    # a PREFIXED "*" is no wildcard: it matches names that start with "*"
    assert not a.authorize("User:prestar", "h", Op.READ, TOPIC, "anything")
    assert a.authorize("User:prestar", "h", Op.READ, TOPIC, "*x")


def test_resource_types_are_separate():
    a = make(acl(name="x", rt=R.GROUP), acl(name="*", rt=R.TRANSACTIONAL_ID, op=Op.WRITE))
    assert a.authorize("User:alice", "h", Op.READ, R.GROUP, "x")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "x")
    assert a.authorize("User:alice", "h", Op.WRITE, R.TRANSACTIONAL_ID, "txn-1")
    assert not a.authorize("User:alice", "h", Op.WRITE, TOPIC, "txn-1")


def test_principal_wildcard_covers_every_principal_type_and_hosts_compare_as_text():
    a = make(acl(principal="User:*"), acl(name="h6", host="0:0:0:0:0:0:0:1"), acl(name="h4", host="10.0.0.1"))
    assert a.authorize("User:x", "h", Op.READ, TOPIC, "Test-topic")
    assert a.authorize("Group:devs", "h", Op.READ, TOPIC, "Test-topic")      # Kafka: User:* is any
    assert a.authorize("User:alice", "::1", Op.READ, TOPIC, "h6")            # Java's IPv6 spelling
    assert a.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "h4")
    assert not a.authorize("User:alice", "10.0.0.10", Op.READ, TOPIC, "h4")
    assert not a.authorize("user:alice", "10.0.0.1", Op.READ, TOPIC, "h4")   # principal type is exact


def test_implied_operations():
    a = make(*(acl(name=f"t-{op.name}", op=op) for op in Op if op not in (Op.UNKNOWN, Op.ANY)))
    for granted in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL):
        assert a.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, f"t-{granted.name}")
    for granted in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.CLUSTER_ACTION):
        assert not a.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, f"t-{granted.name}")
    assert a.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t-ALTER_CONFIGS")
    assert not a.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, TOPIC, "t-ALTER")
    assert not a.authorize("User:alice", "h", Op.ALTER_CONFIGS, TOPIC, "t-DESCRIBE_CONFIGS")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "t-WRITE")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "t-DESCRIBE")
    for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS):
        assert a.authorize("User:alice", "h", op, TOPIC, "t-ALL")


def test_a_deny_implies_nothing_but_deny_all_denies_all():
    a = make(acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=A.DENY))
    assert a.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "Test-topic")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "Test-topic")
    a = make(acl(op=Op.READ), acl(op=Op.ALL, perm=A.DENY))
    assert not a.authorize("User:alice", "h", Op.DESCRIBE, TOPIC, "Test-topic")


def test_super_users_may_do_anything():
    assert parse_super_users(" User:admin ; User:ops;;") == {"User:admin", "User:ops"}
    a = make(acl(principal="User:*", op=Op.ALL, perm=A.DENY), super_users=parse_super_users("User:admin;User:ops"))
    for op in (Op.READ, Op.ALTER, Op.CLUSTER_ACTION):
        assert a.authorize("User:admin", "h", op, TOPIC, "Test-topic")
        assert a.authorize("User:ops", "h", op, R.CLUSTER, "kafka-cluster")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "Test-topic")
    assert a.authorized_operations("User:admin", "h", TOPIC, "Test-topic") == authz.TOPIC_OPERATIONS


@pytest.mark.parametrize("everyone", [False, True])
def test_allow_everyone_if_no_acl_found(everyone):
    a = make(acl(name="guarded", principal="User:bob"), acl(name="team-", pt=P.PREFIXED, principal="User:bob"),
             allow_everyone_if_no_acl_found=everyone)
    # no ACL on the resource at all: the setting decides
    assert a.authorize("User:alice", "h", Op.READ, TOPIC, "open") is everyone
    assert a.authorize("User:alice", "h", Op.READ, R.GROUP, "guarded") is everyone
    # ACLs on it (literal or prefix), none for alice: denied either way
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "guarded")
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "team-a")
    assert a.authorize("User:bob", "h", Op.READ, TOPIC, "team-a")
    assert not a.authorize("User:bob", "h", Op.WRITE, TOPIC, "guarded")      # an ACL, not this op
    assert (a.authorized_operations("User:alice", "h", TOPIC, "open")
            == (authz.TOPIC_OPERATIONS if everyone else 0))


def test_authorized_operations_bitfield():
    bit = lambda *ops: sum(1 << op for op in ops)  # noqa: E731
    # kafka-acls.sh --consumer: READ + DESCRIBE on the topic, READ on the group
    a = make(acl(op=Op.READ), acl(op=Op.DESCRIBE), acl(name="g", rt=R.GROUP, op=Op.READ),
             acl(rt=R.CLUSTER, name="kafka-cluster", op=Op.IDEMPOTENT_WRITE),
             acl(name="cfg", op=Op.ALTER_CONFIGS), acl(name="cfg", op=Op.ALL, perm=A.DENY, principal="User:eve"),
             acl(name="cfg", op=Op.ALL, principal="User:eve"))
    assert a.authorized_operations("User:alice", "h", TOPIC, "Test-topic") == bit(Op.READ, Op.DESCRIBE)
    assert a.authorized_operations("User:alice", "h", R.GROUP, "g") == bit(Op.READ, Op.DESCRIBE)
    assert a.authorized_operations("User:alice", "h", R.CLUSTER, "kafka-cluster") == bit(Op.IDEMPOTENT_WRITE)
    assert a.authorized_operations("User:alice", "h", TOPIC, "cfg") == bit(Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)
    assert a.authorized_operations("User:eve", "h", TOPIC, "cfg") == 0
    assert a.authorized_operations("User:bob", "h", TOPIC, "Test-topic") == 0
    for op in Op:
        if (1 << op) & authz.TOPIC_OPERATIONS:
            assert bool(a.authorized_operations("User:alice", "h", TOPIC, "cfg") & (1 << op)) \
                == a.authorize("User:alice", "h", op, TOPIC, "cfg")


def test_authorize_by_resource_type():
    def by_type(*bindings, **kw):
        return make(*bindings, **kw).authorize_by_resource_type("User:alice", "h", Op.WRITE, TOPIC)
    assert not by_type()
    assert by_type(allow_everyone_if_no_acl_found=True)
    assert by_type(acl(name="t1", op=Op.WRITE))
    assert by_type(acl(name="x-", pt=P.PREFIXED, op=Op.ALL))
    assert not by_type(acl(name="t1", op=Op.READ))
    assert not by_type(acl(name="t1", op=Op.WRITE), acl(name="t1", op=Op.WRITE, perm=A.DENY))
    assert not by_type(acl(name="t1", op=Op.WRITE), acl(name="t", pt=P.PREFIXED, op=Op.WRITE, perm=A.DENY))
    assert not by_type(acl(name="t1", op=Op.WRITE), acl(name="*", op=Op.WRITE, perm=A.DENY, principal="User:*"))
    assert by_type(acl(name="t1", op=Op.WRITE), acl(name="t2", op=Op.WRITE, perm=A.DENY))
    assert by_type(acl(name="*", op=Op.WRITE))
    assert make(super_users={"User:alice"}).authorize_by_resource_type("User:alice", "h", Op.WRITE, TOPIC)


def test_create_describe_delete():
    a = Authorizer()
    good = [acl(), acl(name="t-", pt=P.PREFIXED, principal="User:bob", op=Op.WRITE),
            acl(name="*", principal="User:*", op=Op.DESCRIBE, rt=R.GROUP)]
    results = a.create([good[0], acl(pt=P.MATCH), good[1], good[0], acl(principal="bob"), good[2]])
    assert [type(r).__name__ if r else None for r in results] == [
        None, "InvalidRequestError", None, None, "InvalidRequestError", None]
    assert results[1].code == ErrorCode.INVALID_REQUEST and "patternType MATCH" in str(results[1])
    assert len(a) == 3 and set(a.bindings()) == set(good)
    assert a.create([good[0]]) == [None] and len(a) == 3          # creating again: success, no copy

    assert set(a.describe(AclBindingFilter())) == set(good)
    assert a.describe(AclBindingFilter(TOPIC, "t-x", P.MATCH)) == [good[1]]
    assert a.describe(AclBindingFilter(TOPIC, "Test-topic", P.MATCH)) == [good[0]]
    assert a.describe(AclBindingFilter(R.GROUP, "g", P.MATCH)) == [good[2]]
    assert a.describe(AclBindingFilter(principal="User:bob")) == [good[1]]
    with pytest.raises(InvalidRequestError):
        a.describe(AclBindingFilter(operation=Op.UNKNOWN))

    out = a.delete([AclBindingFilter(TOPIC, "Test-topic", P.MATCH), AclBindingFilter(operation=Op.UNKNOWN),
                    AclBindingFilter(resource_type=TOPIC), AclBindingFilter(principal="User:nobody")])
    assert out[0].error is None and out[0].bindings == (good[0],)
    assert isinstance(out[1].error, InvalidRequestError) and out[1].bindings == ()
    assert out[2].error is None and set(out[2].bindings) == {good[0], good[1]}  # both filters saw good[0]
    assert out[3].error is None and out[3].bindings == ()
    assert a.bindings() == [good[2]]
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "Test-topic")


def test_changes_take_effect_at_once():
    a = make(acl())
    assert a.authorize("User:alice", "h", Op.READ, TOPIC, "Test-topic")        # now memoised
    a.create([acl(perm=A.DENY)])
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "Test-topic")
    a.delete([AclBindingFilter(permission=A.DENY)])
    assert a.authorize("User:alice", "h", Op.READ, TOPIC, "Test-topic")
    a.set_pattern_acls(TOPIC, P.LITERAL, "Test-topic", [acl(principal="User:bob")])
    assert a.bindings() == [acl(principal="User:bob")]
    assert not a.authorize("User:alice", "h", Op.READ, TOPIC, "Test-topic")
    with pytest.raises(ValueError):
        a.set_pattern_acls(TOPIC, P.PREFIXED, "Test-topic", [acl()])


def test_acls_persist_across_reopen(tmp_path):
    d = str(tmp_path)
    a = Authorizer.from_configs({"super.users": "User:admin"}, d)
    bindings = [acl(), acl(name="t-", pt=P.PREFIXED, op=Op.ALL, perm=A.DENY, host="10.0.0.1"),
                acl(rt=R.CLUSTER, name="kafka-cluster", op=Op.ALTER, principal="User:ops")]
    a.create(bindings)
    a.delete([AclBindingFilter(principal="User:ops")])
    assert sorted(os.listdir(d)) == ["acls.json"]                  # no temporary file left
    doc = json.loads((tmp_path / "acls.json").read_text())
    assert doc["version"] == 1 and len(doc["acls"]) == 2
    assert {"resourceType": "TOPIC", "name": "t-", "patternType": "PREFIXED", "principal": "User:alice",
            "host": "10.0.0.1", "operation": "ALL", "permissionType": "DENY"} in doc["acls"]
    b = Authorizer.from_configs({}, d)
    assert set(b.bindings()) == set(bindings[:2])
    assert b.authorize("User:alice", "h", Op.READ, TOPIC, "Test-topic")
    assert not b.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "t-1")
    assert b.super_users == frozenset()


def test_a_failed_save_changes_nothing(tmp_path, monkeypatch):
    a = Authorizer(store=AclFileStore(str(tmp_path)))
    a.create([acl()])

    def broken(bindings):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(a.store, "save", broken)
    with pytest.raises(OSError):
        a.create([acl(perm=A.DENY)])
    with pytest.raises(OSError):
        a.delete([AclBindingFilter()])
    assert a.bindings() == [acl()]
    assert a.authorize("User:alice", "h", Op.READ, TOPIC, "Test-topic")
    assert Authorizer(store=AclFileStore(str(tmp_path))).bindings() == [acl()]


@pytest.mark.parametrize("content", [b"{not json", b'{"version": 2, "acls": []}', b'{"version": 1}',
                                     b'{"version": 1, "acls": [{"name": "x"}]}',
                                     b'{"version": 1, "acls": [{"resourceType": "TOPIC", "name": "x", '
                                     b'"patternType": "MATCH", "principal": "User:a", "host": "*", '
                                     b'"operation": "READ", "permissionType": "ALLOW"}]}'])
def test_a_corrupt_acl_file_is_an_error_naming_it(tmp_path, content):
    (tmp_path / "acls.json").write_bytes(content)
    with pytest.raises(AclFormatError, match="acls.json"):
        Authorizer(store=AclFileStore(str(tmp_path)))


def test_authorizer_class_name():
    standard = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert acl_authorizer_configured({"authorizer.class.name": standard})
    assert acl_authorizer_configured({"authorizer.class.name": " kafka.security.authorizer.AclAuthorizer "})
    assert not acl_authorizer_configured({"authorizer.class.name": ""})
    assert not acl_authorizer_configured({})
    with pytest.raises(AuthorizerConfigError, match="authorizer.class.name") as e:
        acl_authorizer_configured({"authorizer.class.name": "com.example.OpaAuthorizer"})
    assert isinstance(e.value, InvalidConfigError) and e.value.key == "authorizer.class.name"
    assert "com.example.OpaAuthorizer" in str(e.value) and "StandardAuthorizer" in str(e.value)


def test_allow_everyone_config_values():
    assert parse_allow_everyone(None) is False
    assert parse_allow_everyone("TRUE") is True and parse_allow_everyone(" false ") is False
    assert parse_allow_everyone(True) is True
    with pytest.raises(AuthorizerConfigError, match="allow.everyone.if.no.acl.found"):
        parse_allow_everyone("yes")
    a = Authorizer.from_configs({"allow.everyone.if.no.acl.found": "true", "super.users": "User:a;User:b"})
    assert a.allow_everyone_if_no_acl_found and a.super_users == {"User:a", "User:b"}
    assert a.store is None


def test_decisions_agree_with_a_plain_scan():
    """The index against the rules applied ACL by ACL, over random ACLs and questions."""
    rnd = random.Random(7)
    names = ["a", "ab", "abc", "b", "*", "abd"]
    principals = ["User:u1", "User:u2", "User:*"]
    ops = [Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.DELETE]
    implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE},
               Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}}

    def applies(b, name):
        if b.pattern_type is P.LITERAL:
            return b.name in (name, "*")
        return name.startswith(b.name)

    def covers(b, op):
        if b.operation is Op.ALL:
            return True
        if b.permission is A.ALLOW and op in implied:
            return b.operation in implied[op]
        return b.operation is op

    for _ in range(30):
        bindings = {acl(name=rnd.choice(names), pt=rnd.choice([P.LITERAL, P.PREFIXED]),
                        principal=rnd.choice(principals), host=rnd.choice(["*", "h1", "h2"]),
                        op=rnd.choice(ops), perm=rnd.choice([A.ALLOW, A.DENY]))
                    for _ in range(rnd.randrange(1, 12))}
        everyone = rnd.random() < 0.5
        a = make(*bindings, allow_everyone_if_no_acl_found=everyone)
        for name in ["a", "ab", "abc", "abcd", "b", "c", "*"]:
            for principal in ["User:u1", "User:u2"]:
                for op in ops[:3] + ops[4:]:
                    on_resource = [b for b in bindings if applies(b, name)]
                    mine = [b for b in on_resource if b.principal in (principal, "User:*")
                            and b.host in ("h1", "*") and covers(b, op)]
                    if any(b.permission is A.DENY for b in mine):
                        expect = False
                    elif mine:
                        expect = True
                    else:
                        expect = everyone and not on_resource
                    assert a.authorize(principal, "h1", op, TOPIC, name) is expect, (bindings, name, principal, op)


def test_authorize_is_fast_enough_for_the_request_path():
    """Thousands of ACLs, every answer computed afresh: far below the request path's budget
    (the measured figure is in docs/security.md; this bound only catches a slow index)."""
    a = Authorizer()
    a.create([acl(name=f"team{i % 50}-svc{i}" if i % 3 else f"team{i % 50}-", pt=P.LITERAL if i % 3 else P.PREFIXED,
                  principal=f"User:u{i % 300}", op=(Op.READ, Op.WRITE, Op.ALL)[i % 3],
                  perm=A.DENY if i % 13 == 0 else A.ALLOW) for i in range(3000)])
    calls = 20_000
    t = time.perf_counter()
    for i in range(calls):
        a.authorize(f"User:u{i % 300}", "10.0.0.1", Op.READ, TOPIC, f"team{i % 50}-svc{i}")
    per_call = (time.perf_counter() - t) / calls
    assert per_call < 100e-6, f"{per_call * 1e6:.1f} us per authorize()"
