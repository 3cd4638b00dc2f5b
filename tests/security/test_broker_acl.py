"""ACLs on the request path (engine/server/access.py): a broker with Kafka's ACL authorizer,
``super.users=User:admin``, users admin and alice logging in with SASL PLAIN; real clients see
Kafka's *_AUTHORIZATION_FAILED codes where the ACLs say no and work where they say yes."""

from __future__ import annotations

import socket
import time
import uuid

import pytest

from engine.errors import ErrorCode
from engine.protocol import messages as m
from engine.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

from .test_broker_sasl import SaslBroker, _authenticate, _handshake, _read_frame, _request, _response

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import admin as ck_admin  # noqa: E402

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}


@pytest.fixture
def acl_broker(tmp_path):
    b = SaslBroker(str(tmp_path / "data"), AUTHORIZER)
    yield b
    b.stop()


def _conf(b, user: str, **extra) -> dict:
    return {"bootstrap.servers": b.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret",
            **extra}


def _admin(b, user: str):
    return ck_admin.AdminClient(_conf(b, user))


def _allow(b, rtype, name, op, principal="User:alice", pattern=PatternType.LITERAL):
    b.broker.access.authorizer.create([AclBinding(rtype, name, pattern, principal, "*", op,
                                                  AclPermissionType.ALLOW)])


def _create_topic(b, name: str, partitions: int = 1):
    admin = _admin(b, "admin")          # kept alive until the answer (its handle owns the future)
    admin.create_topics([ck_admin.NewTopic(name, partitions, 1)])[name].result(30)


def _code(exc) -> int:
    err = exc.args[0]
    return err.code()


# -- the ACL APIs ------------------------------------------------------------------------------
def test_acl_apis_through_confluent_kafka(acl_broker):
    admin = _admin(acl_broker, "admin")
    binding = ck_admin.AclBinding(ck_admin.ResourceType.TOPIC, "orders", ck_admin.ResourcePatternType.PREFIXED,
                                  "User:alice", "*", ck_admin.AclOperation.READ, ck_admin.AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(30)
    flt = ck_admin.AclBindingFilter(ck_admin.ResourceType.ANY, None, ck_admin.ResourcePatternType.ANY,
                                    None, None, ck_admin.AclOperation.ANY, ck_admin.AclPermissionType.ANY)
    assert admin.describe_acls(flt).result(30) == [binding]
    # they are kept in the data directory: a restart loads them
    path = acl_broker.engine.path
    acl_broker.stop()
    again = SaslBroker(path, AUTHORIZER)
    try:
        admin = _admin(again, "admin")
        assert admin.describe_acls(flt).result(30) == [binding]
        assert admin.delete_acls([flt])[flt].result(30) == [binding]
        assert admin.describe_acls(flt).result(30) == []
    finally:
        again.stop()


def test_acl_apis_need_cluster_permissions(acl_broker):
    admin = _admin(acl_broker, "alice")
    flt = ck_admin.AclBindingFilter(ck_admin.ResourceType.ANY, None, ck_admin.ResourcePatternType.ANY,
                                    None, None, ck_admin.AclOperation.ANY, ck_admin.AclPermissionType.ANY)
    # (confluent-kafka answers DescribeAcls' top-level error with an empty list: asked on the wire)
    assert _describe_acls_error(acl_broker, "alice") == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                         "Cluster authorization failed.")
    binding = ck_admin.AclBinding(ck_admin.ResourceType.TOPIC, "t", ck_admin.ResourcePatternType.LITERAL,
                                  "User:alice", "*", ck_admin.AclOperation.ALL, ck_admin.AclPermissionType.ALLOW)
    with pytest.raises(ck.KafkaException) as e:
        admin.create_acls([binding])[binding].result(30)
    assert _code(e.value) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(ck.KafkaException) as e:
        admin.delete_acls([flt])[flt].result(30)
    assert _code(e.value) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert len(acl_broker.broker.access.authorizer) == 0
    # ALTER on the cluster lets alice manage ACLs (and DESCRIBE comes with it)
    _allow(acl_broker, ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER)
    admin.create_acls([binding])[binding].result(30)
    assert binding in admin.describe_acls(flt).result(30)


def _call(b, user: str, key: int, version: int, body: dict):
    """One request on the wire after a PLAIN login as ``user``: the decoded response."""
    with socket.create_connection(("127.0.0.1", b.sasl_port), timeout=10) as s:
        assert _handshake(s, "PLAIN").error_code == 0
        assert _authenticate(s, f"\0{user}\0{user}-secret".encode()).error_code == 0
        s.sendall(_request(key, version, m.encode(key, version, body, response=False)))
        return _response(key, version, _read_frame(s))


def _describe_acls_error(b, user: str) -> tuple[int, str | None]:
    resp = _call(b, user, m.ApiKey.DESCRIBE_ACLS, 3, {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    return resp.error_code, resp.error_message


def test_acl_apis_without_an_authorizer_answer_security_disabled(tmp_path):
    b = SaslBroker(str(tmp_path / "data"))
    try:
        assert _describe_acls_error(b, "alice")[0] == ErrorCode.SECURITY_DISABLED
        binding = ck_admin.AclBinding(ck_admin.ResourceType.TOPIC, "t", ck_admin.ResourcePatternType.LITERAL,
                                      "User:alice", "*", ck_admin.AclOperation.ALL,
                                      ck_admin.AclPermissionType.ALLOW)
        alice = _admin(b, "alice")
        with pytest.raises(ck.KafkaException) as e:
            alice.create_acls([binding])[binding].result(30)
        assert _code(e.value) == ErrorCode.SECURITY_DISABLED
    finally:
        b.stop()


def test_unknown_authorizer_class_is_refused(tmp_path):
    from engine.errors import AuthorizerConfigError
    with pytest.raises(AuthorizerConfigError, match="authorizer.class.name"):
        SaslBroker(str(tmp_path / "data"), {"authorizer.class.name": "com.example.Mine"})


# -- topics: metadata, produce, fetch, offsets -------------------------------------------------
def test_metadata_shows_only_described_topics(acl_broker):
    for name in ("visible", "hidden"):
        _create_topic(acl_broker, name)
    alice = _admin(acl_broker, "alice")
    assert set(alice.list_topics(timeout=30).topics) == set()
    _allow(acl_broker, ResourceType.TOPIC, "visible", AclOperation.READ)    # READ implies DESCRIBE
    assert set(alice.list_topics(timeout=30).topics) == {"visible"}
    # named: the hidden one is TOPIC_AUTHORIZATION_FAILED, whether it exists or not
    for name in ("hidden", "does-not-exist"):
        md = alice.list_topics(name, timeout=30)
        assert md.topics[name].error.code() == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    admin = _admin(acl_broker, "admin")
    assert set(admin.list_topics(timeout=30).topics) == {"visible", "hidden"}


def test_produce_and_consume_need_write_and_read(acl_broker):
    topic = "t-" + uuid.uuid4().hex[:8]
    _create_topic(acl_broker, topic)
    errors = []
    p = ck.Producer(_conf(acl_broker, "alice", **{"enable.idempotence": False, "message.timeout.ms": 10000}))
    try:            # refused at once if the metadata already said so, else in the delivery report
        p.produce(topic, b"refused", on_delivery=lambda e, m: errors.append(e))
        p.flush(30)
    except ck.KafkaException as e:
        errors.append(e.args[0])
    assert errors and errors[0].code() == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    _allow(acl_broker, ResourceType.TOPIC, topic, AclOperation.WRITE)
    errors.clear()
    p = ck.Producer(_conf(acl_broker, "alice", **{"enable.idempotence": False}))   # fresh metadata
    p.produce(topic, b"taken", on_delivery=lambda e, m: errors.append(e))
    p.flush(30)
    assert errors == [None]

    # the group allowed before the consumer exists: its first group request must not be refused
    # (GROUP_AUTHORIZATION_FAILED) -- only the topic's READ is missing here
    _allow(acl_broker, ResourceType.GROUP, "g", AclOperation.READ)
    c = ck.Consumer(_conf(acl_broker, "alice", **{"group.id": "g", "auto.offset.reset": "earliest"}))
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        seen = _poll_error(c)
        assert seen == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        _allow(acl_broker, ResourceType.TOPIC, topic, AclOperation.READ)
        deadline = time.monotonic() + 30
        got = []
        while not got and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [b"taken"]
    finally:
        c.close()


def _poll_error(c, timeout: float = 30.0) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is not None:
            return msg.error().code()
    return None


def test_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(acl_broker):
    topic = "idem-" + uuid.uuid4().hex[:8]
    _create_topic(acl_broker, topic)
    errors = []
    p = ck.Producer(_conf(acl_broker, "alice", **{"enable.idempotence": True},
                          error_cb=lambda e: errors.append(e.code())))
    p.produce(topic, b"x")
    deadline = time.monotonic() + 30
    while ErrorCode.CLUSTER_AUTHORIZATION_FAILED not in errors and time.monotonic() < deadline:
        try:
            p.poll(0.2)
        except ck.KafkaException as e:       # the fatal error surfaces from poll too
            errors.append(e.args[0].code())
    assert ErrorCode.CLUSTER_AUTHORIZATION_FAILED in errors
    # WRITE on a topic is enough (KIP-679)
    _allow(acl_broker, ResourceType.TOPIC, topic, AclOperation.WRITE)
    delivered = []
    p2 = ck.Producer(_conf(acl_broker, "alice", **{"enable.idempotence": True}))
    p2.produce(topic, b"y", on_delivery=lambda e, m: delivered.append(e))
    p2.flush(30)
    assert delivered == [None]


def test_transactional_produce_needs_write_on_the_transactional_id(acl_broker):
    topic = "txn-" + uuid.uuid4().hex[:8]
    _create_topic(acl_broker, topic)
    _allow(acl_broker, ResourceType.TOPIC, topic, AclOperation.WRITE)
    body = {"transactional_id": "tx1", "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}
    resp = _call(acl_broker, "alice", m.ApiKey.INIT_PRODUCER_ID, 4, body)
    assert resp.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    _allow(acl_broker, ResourceType.TRANSACTIONAL_ID, "tx1", AclOperation.WRITE)
    resp = _call(acl_broker, "alice", m.ApiKey.INIT_PRODUCER_ID, 4, body)
    assert resp.error_code == 0 and resp.producer_id >= 0


def test_list_offsets_and_admin_need_their_operations(acl_broker):
    topic = "adm-" + uuid.uuid4().hex[:8]
    _create_topic(acl_broker, topic)
    alice = _admin(acl_broker, "alice")
    # CreateTopics: CREATE on the cluster or the topic
    fs = alice.create_topics([ck_admin.NewTopic("alice-new", 1, 1)])
    with pytest.raises(ck.KafkaException) as e:
        fs["alice-new"].result(30)
    assert _code(e.value) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    _allow(acl_broker, ResourceType.TOPIC, "alice-", AclOperation.CREATE, pattern=PatternType.PREFIXED)
    alice.create_topics([ck_admin.NewTopic("alice-new", 1, 1)])["alice-new"].result(30)
    # DeleteTopics: DELETE
    with pytest.raises(ck.KafkaException) as e:
        alice.delete_topics([topic])[topic].result(30)
    assert _code(e.value) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # CreatePartitions: ALTER
    with pytest.raises(ck.KafkaException) as e:
        alice.create_partitions([ck_admin.NewPartitions(topic, 2)])[topic].result(30)
    assert _code(e.value) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # DescribeConfigs: DESCRIBE_CONFIGS on the topic / on the cluster for a broker
    res = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)
    with pytest.raises(ck.KafkaException) as e:
        alice.describe_configs([res])[res].result(30)
    assert _code(e.value) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    broker_res = ck_admin.ConfigResource(ck_admin.ResourceType.BROKER, "0")
    with pytest.raises(ck.KafkaException) as e:
        alice.describe_configs([broker_res])[broker_res].result(30)
    assert _code(e.value) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    _allow(acl_broker, ResourceType.TOPIC, topic, AclOperation.ALTER_CONFIGS)   # implies DESCRIBE_CONFIGS
    assert "retention.ms" in alice.describe_configs([res])[res].result(30)
    # ListOffsets: DESCRIBE on the topic (on the wire: clients stop at Metadata's answer)
    body = {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}
    resp = _call(acl_broker, "alice", m.ApiKey.LIST_OFFSETS, 7, body)
    assert resp.topics[0]["partitions"][0]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    _allow(acl_broker, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    resp = _call(acl_broker, "alice", m.ApiKey.LIST_OFFSETS, 7, body)
    part = resp.topics[0]["partitions"][0]
    assert (part["error_code"], part["offset"]) == (0, 0)
    # DeleteRecords: DELETE on the topic
    with pytest.raises(ck.KafkaException) as e:
        alice.delete_records([ck.TopicPartition(topic, 0, 0)])[ck.TopicPartition(topic, 0, 0)].result(30)
    assert _code(e.value) == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_authorized_operations_are_the_callers(acl_broker):
    topic = "ops-" + uuid.uuid4().hex[:8]
    _create_topic(acl_broker, topic)
    _allow(acl_broker, ResourceType.TOPIC, topic, AclOperation.READ)
    alice = _admin(acl_broker, "alice")
    desc = alice.describe_topics(ck.TopicCollection([topic]), include_authorized_operations=True)[topic].result(30)
    assert sorted(op.name for op in desc.authorized_operations) == ["DESCRIBE", "READ"]
    cluster = alice.describe_cluster(include_authorized_operations=True).result(30)
    assert not cluster.authorized_operations
    admin = _admin(acl_broker, "admin")
    admin_cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert "ALTER" in {op.name for op in admin_cluster.authorized_operations}


def test_plaintext_listener_is_anonymous(acl_broker):
    """The PLAINTEXT listener's callers are User:ANONYMOUS: refused like anyone without ACLs."""
    _create_topic(acl_broker, "anon")
    anon = ck_admin.AdminClient({"bootstrap.servers": acl_broker.plain_bootstrap})
    assert set(anon.list_topics(timeout=30).topics) == set()
    _allow(acl_broker, ResourceType.TOPIC, "anon", AclOperation.DESCRIBE, principal="User:ANONYMOUS")
    assert set(anon.list_topics(timeout=30).topics) == {"anon"}
