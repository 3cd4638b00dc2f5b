"""ACLs in cluster mode (engine/cluster/acl_zk_store.py): kept in ZooKeeper as Kafka's
ZooKeeper-mode AclAuthorizer kept them, so an ACL created or deleted through one broker decides
on every broker, and a broker (re)started loads them.

The brokers listen on PLAINTEXT (inter-broker: its principal is User:ANONYMOUS, so it is a super
user -- the replica fetches and controller requests must pass the authorizer) and SASL_PLAINTEXT
(PLAIN users admin and alice)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import threading

import pytest

from engine.errors import ErrorCode
from engine.protocol import messages as m
from engine.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from engine.security.authorizer import Authorizer
from tests.cluster.conftest import wait_for, zk_json
from tests.security.test_broker_sasl import (
    PLAIN_JAAS,
    _authenticate,
    _handshake,
    _read_frame,
    _request,
    _response,
)
from tests.serving import kafka_home

R, P, Op, A = ResourceType, PatternType, AclOperation, AclPermissionType

ACL_CLUSTER = ("--config", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
               "--config", "sasl.enabled.mechanisms=PLAIN",
               "--config", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
               "--config", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
               "--config", "super.users=User:admin;User:ANONYMOUS")


def _sasl_port(broker) -> int:
    """The broker's SASL_PLAINTEXT port (its latest start's)."""
    ports = re.findall(r"listener SASL_PLAINTEXT \(SASL_PLAINTEXT\) on [\d.]+:(\d+)", broker.log_text())
    assert ports, broker.log_text()[-2000:]
    return int(ports[-1])


def _call(broker, user: str, key: int, version: int, body: dict):
    """One request to THIS broker's SASL listener as ``user`` (PLAIN), on the wire: Kafka's clients
    would follow Metadata to the brokers' registered (PLAINTEXT) endpoints."""
    with socket.create_connection(("127.0.0.1", _sasl_port(broker)), timeout=15) as s:
        assert _handshake(s, "PLAIN").error_code == 0
        assert _authenticate(s, f"\0{user}\0{user}-secret".encode()).error_code == 0
        s.sendall(_request(key, version, m.encode(key, version, body, response=False), corr=2))
        return _response(key, version, _read_frame(s))


ANY_FILTER = {"resource_type_filter": int(R.ANY), "resource_name_filter": None,
              "pattern_type_filter": int(P.ANY), "principal_filter": None, "host_filter": None,
              "operation": int(Op.ANY), "permission_type": int(A.ANY)}


def _may_describe_acls(broker) -> bool:
    """Alice's DescribeAcls on ``broker`` (needs DESCRIBE on the cluster)."""
    code = _call(broker, "alice", m.ApiKey.DESCRIBE_ACLS, 1, ANY_FILTER).error_code
    assert code in (ErrorCode.NONE, ErrorCode.CLUSTER_AUTHORIZATION_FAILED), code
    return code == ErrorCode.NONE


def _alice_sees(broker, topic: str) -> bool:
    """Alice's Metadata for ``topic`` on ``broker``: answered, or TOPIC_AUTHORIZATION_FAILED."""
    resp = _call(broker, "alice", m.ApiKey.METADATA, 1, {"topics": [{"name": topic}]})
    code = resp.topics[0]["error_code"]
    assert code in (ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED), code
    return code == ErrorCode.NONE


def _creation(rt, name: str, pt, op, principal: str = "User:alice") -> dict:
    return {"resource_type": int(rt), "resource_name": name, "resource_pattern_type": int(pt),
            "principal": principal, "host": "*", "operation": int(op), "permission_type": int(A.ALLOW)}


def _create_acls(broker, *creations: dict) -> None:
    resp = _call(broker, "admin", m.ApiKey.CREATE_ACLS, 1, {"creations": list(creations)})
    assert [r["error_code"] for r in resp.results] == [0] * len(creations), resp


def test_acls_created_and_deleted_through_any_broker_decide_on_all(cluster_factory, zk_client):
    from confluent_kafka.admin import AdminClient, NewTopic
    c = cluster_factory(2, *ACL_CLUSTER)
    b1, b2 = c.brokers[1], c.brokers[2]
    # the brokers' own traffic (PLAINTEXT: User:ANONYMOUS, a super user) passes: a replicated topic
    plain = AdminClient({"bootstrap.servers": b1.bootstrap})
    plain.create_topics([NewTopic("team-x", 1, 2)], operation_timeout=20)["team-x"].result(timeout=30)
    assert not _may_describe_acls(b2)
    assert not _alice_sees(b2, "team-x")

    _create_acls(b1, _creation(R.CLUSTER, "kafka-cluster", P.LITERAL, Op.DESCRIBE),
                 _creation(R.TOPIC, "team-", P.PREFIXED, Op.DESCRIBE))
    # in ZooKeeper as Kafka's AclAuthorizer wrote them, and announced
    assert zk_json(zk_client, "/kafka-acl/Cluster/kafka-cluster")[0] == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"}]}
    assert zk_json(zk_client, "/kafka-acl-extended/prefixed/Topic/team-")[0]["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"}]
    literal = [zk_client.get(f"/kafka-acl-changes/{n}")[0] for n in zk_client.get_children("/kafka-acl-changes")]
    assert b"CLUSTER:kafka-cluster" in literal
    extended = [json.loads(zk_client.get(f"/kafka-acl-extended-changes/{n}")[0])
                for n in zk_client.get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "TOPIC", "name": "team-", "patternType": "PREFIXED"} in extended
    assert _may_describe_acls(b1)                          # the writer took them at once

    wait_for(lambda: _may_describe_acls(b2), 15, "alice's DescribeAcls allowed on broker 2")
    wait_for(lambda: _alice_sees(b2, "team-x"), 15, "alice seeing team-x on broker 2")

    # deleted through broker 2: broker 1 refuses again; the node is gone
    resp = _call(b2, "admin", m.ApiKey.DELETE_ACLS, 1, {"filters": [dict(
        ANY_FILTER, resource_type_filter=int(R.CLUSTER), pattern_type_filter=int(P.LITERAL),
        principal_filter="User:alice")]})
    (result,) = resp.filter_results
    assert result["error_code"] == 0 and len(result["matching_acls"]) == 1, result
    assert zk_client.exists("/kafka-acl/Cluster/kafka-cluster") is None
    wait_for(lambda: not _may_describe_acls(b1), 15, "alice's DescribeAcls refused on broker 1")
    assert _alice_sees(b1, "team-x")

    # broker 1 down; a change made meanwhile; restarted, it loads every ACL from ZooKeeper
    code, _log = b1.stop()
    assert code == 0
    _create_acls(b2, _creation(R.CLUSTER, "kafka-cluster", P.LITERAL, Op.DESCRIBE))
    b1.start()
    assert _may_describe_acls(b1)                          # no wait: loaded before "serving"
    assert _alice_sees(b1, "team-x")
    assert "ACLs loaded from ZooKeeper: 2" in b1.log_text()


def test_kafka_acls_tool_against_the_cluster(cluster_factory, zk_client):
    home = kafka_home()
    if home is None or shutil.which("java") is None:
        pytest.skip("Apache Kafka's tools not found (set KAFKA_HOME, or <repo>/../shared/kafka) or no java")

    def acls(bootstrap: str, *args: str) -> str:
        p = subprocess.run([os.path.join(home, "bin", "kafka-acls.sh"), "--bootstrap-server", bootstrap,
                            *args], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout

    c = cluster_factory(2, *ACL_CLUSTER)
    b1, b2 = c.brokers[1], c.brokers[2]
    acls(b1.bootstrap, "--add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders",
         "--resource-pattern-type", "literal")
    assert zk_json(zk_client, "/kafka-acl/Topic/orders")[0]["acls"] == [
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Read", "host": "*"}]
    wait_for(lambda: "principal=User:bob, host=*, operation=READ, permissionType=ALLOW"
             in acls(b2.bootstrap, "--list", "--topic", "orders"), 30, "bob's ACL listed by broker 2")
    acls(b2.bootstrap, "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Read",
         "--topic", "orders")
    assert zk_client.exists("/kafka-acl/Topic/orders") is None
    wait_for(lambda: "User:bob" not in acls(b1.bootstrap, "--list"), 30, "bob's ACL gone from broker 1")


def test_concurrent_changes_of_one_pattern_from_two_brokers_keep_both(zk):
    """Two brokers' authorizers (real ZooKeeper sessions) adding ACLs to one pattern at once:
    the version-conditional writes retry on conflict and every ACL ends up in the node and in
    both brokers' ACLs."""
    from engine.cluster.acl_zk_store import ZkAclStore
    from engine.cluster.zk import ZkStore
    sessions, stores, auths = [], [], []
    for _ in range(2):
        s = ZkStore(zk.connect).start()
        store = ZkAclStore()
        a = Authorizer(store=store)
        store.share(s, a)
        sessions.append(s)
        stores.append(store)
        auths.append(a)
    try:
        def add(i: int) -> None:
            for n in range(15):
                assert auths[i].create([AclBinding(R.TOPIC, "shared", P.LITERAL, f"User:u{i}-{n}", "*",
                                                   Op.READ, A.ALLOW)]) == [None]
        threads = [threading.Thread(target=add, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        data, _ = sessions[0].client.get("/kafka-acl/Topic/shared")
        assert len(json.loads(data)["acls"]) == 30
        for a in auths:
            wait_for(lambda a=a: len(a) == 30, 15, "every ACL on both brokers")
            assert a.authorize("User:u1-14", "h", Op.READ, R.TOPIC, "shared")
        # a name Kafka's ZooKeeper store cannot hold is refused per binding
        (err,) = auths[0].create([AclBinding(R.TOPIC, "a/b", P.LITERAL, "User:x", "*", Op.READ, A.ALLOW)])
        assert err is not None and err.code == 42 and "invalid resource name" in str(err)
        # one DeleteAcls through broker 2 removes them everywhere
        (res,) = auths[1].delete([AclBindingFilter(name="shared")])
        assert res.error is None and len(res.bindings) == 30
        assert sessions[0].client.exists("/kafka-acl/Topic/shared") is None
        wait_for(lambda: len(auths[0]) == 0, 15, "the deletion on broker 1")
    finally:
        for store, s in zip(stores, sessions, strict=True):
            store.close()
            s.close()


def test_change_listener_purges_old_notifications(zk):
    from engine.cluster.zk import ZkStore
    from engine.cluster.zk_change import ChangeListener, notify
    s = ZkStore(zk.connect).start()
    seen: list[bytes] = []
    try:
        notify(s, "/t-changes/c_", b"before")              # there before start: skipped
        listener = ChangeListener(s, "/t-changes", "c_", seen.append, expiration_ms=0).start()
        for n in range(3):
            notify(s, "/t-changes/c_", f"n{n}".encode())
        wait_for(lambda: seen == [b"n0", b"n1", b"n2"], 15, "the three notifications in order")
        # handled more than expiration_ms (0) ago: deleted, the one skipped at start too
        wait_for(lambda: s.client.get_children("/t-changes") in ([], ["c_0000000003"]), 15,
                 "the expired notifications deleted")
        listener.close()
        notify(s, "/t-changes/c_", b"after close")
        assert s.client.get_children("/t-changes")             # nobody purges it now
        assert seen == [b"n0", b"n1", b"n2"]
    finally:
        s.close()


def test_a_malformed_node_or_notification_fails_only_its_pattern(zk):
    """Another writer's malformed pattern node refuses the ACLs of that pattern (the node named),
    the others are created; a malformed change notification is skipped, the next ones applied."""
    from engine.cluster.acl_zk_store import ZkAclStore
    from engine.cluster.zk import ZkStore
    s = ZkStore(zk.connect).start()
    store = ZkAclStore()
    a = Authorizer(store=store)
    try:
        store.share(s, a)
        s.client.create("/kafka-acl/Topic/broken", b"{not json", makepath=True)
        bad = AclBinding(R.TOPIC, "broken", P.LITERAL, "User:x", "*", Op.READ, A.ALLOW)
        good = AclBinding(R.TOPIC, "fine", P.LITERAL, "User:x", "*", Op.READ, A.ALLOW)
        with pytest.raises(Exception, match="/kafka-acl/Topic/broken"):
            a.reload()
        err, ok = a.create([bad, good])
        assert ok is None and err is not None and "/kafka-acl/Topic/broken" in str(err)
        assert a.bindings() == [good]
        s.client.create("/kafka-acl-changes/acl_changes_", b"no colon here", sequence=True)
        other = b'{"version":1,"acls":[{"principal":"User:y","permissionType":"Deny","operation":"All","host":"*"}]}'
        s.client.create("/kafka-acl/Group/g", other, makepath=True)
        s.client.create("/kafka-acl-changes/acl_changes_", b"GROUP:g", sequence=True)
        wait_for(lambda: len(a) == 2, 15, "the valid notification after the malformed one")
        assert not a.authorize("User:y", "h", Op.READ, R.GROUP, "g")
    finally:
        store.close()
        s.close()
