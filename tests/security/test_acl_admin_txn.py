"""ACLs on the transaction and admin APIs (engine/server/txn_handlers.py, producer_handlers.py,
admin_handlers.py, reassign_handlers.py, scram_handlers.py): a broker with Kafka's ACL authorizer
and ``super.users=User:admin`` over SASL_PLAINTEXT; alice without and then with the ACLs each API
needs, through confluent-kafka and on the raw wire, answered with Kafka 4.0's error codes."""

from __future__ import annotations

import datetime
import socket
import time
import uuid
from types import SimpleNamespace

import pytest

from engine.errors import ErrorCode
from engine.protocol import messages as m
from engine.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from tests.security.test_broker_sasl import SaslBroker, _authenticate, _handshake, _read_frame, _request, _response

ACL_CONFIG = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin"}
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture
def broker(tmp_path):
    b = SaslBroker(str(tmp_path / "data"), ACL_CONFIG)
    yield b
    b.stop()


def auth(user: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": PASSWORDS[user]}


def allow(broker, rtype: ResourceType, name: str, *operations: AclOperation, user: str = "alice") -> None:
    errors = broker.broker.access.authorizer.create([
        AclBinding(rtype, name, PatternType.LITERAL, f"User:{user}", "*", op, AclPermissionType.ALLOW)
        for op in operations])
    assert errors == [None] * len(operations)


def create_topics(broker, *names: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.sasl_bootstrap, **auth("admin")})
    for fut in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        fut.result(timeout=30)


class Wire:
    """A raw connection to the SASL_PLAINTEXT listener, logged in with PLAIN."""

    def __init__(self, broker, user: str):
        self.sock = socket.create_connection(("127.0.0.1", broker.sasl_port), timeout=15)
        assert _handshake(self.sock, "PLAIN").error_code == 0
        assert _authenticate(self.sock, f"\0{user}\0{PASSWORDS[user]}".encode()).error_code == 0
        self.corr = 1

    def call(self, key: int, version: int, fields: dict) -> SimpleNamespace:
        self.corr += 1
        body = m.encode(key, version, fields, response=False)
        self.sock.sendall(_request(key, version, body, corr=self.corr))
        frame = _read_frame(self.sock)
        assert frame is not None, "the broker closed the connection"
        return _response(key, version, frame)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def wire(broker):
    opened: list[Wire] = []

    def connect(user: str = "alice") -> Wire:
        w = Wire(broker, user)
        opened.append(w)
        return w
    yield connect
    for w in opened:
        w.close()


def wait_for_group_coordinator(broker, group: str) -> None:
    """Until FindCoordinator finds one for `group` (the first ask creates __consumer_offsets).
    librdkafka's send_offsets_to_transaction can hang past its timeout when its own lookups of
    the group coordinator run out of retries while the topic is being created."""
    w = Wire(broker, "admin")
    try:
        deadline = time.monotonic() + 30
        while w.call(m.ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0}).error_code:
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.1)
    finally:
        w.close()


def partition_codes(topics, name_key: str = "name", parts_key: str = "partitions",
                    index_key: str = "partition_index", code_key: str = "error_code") -> dict:
    return {(t[name_key], p[index_key]): p[code_key] for t in topics for p in t[parts_key]}


# -- transactions with a real producer ------------------------------------------------------
def test_transactional_producer_needs_write_on_its_transactional_id(broker):
    from confluent_kafka import KafkaError, KafkaException, Producer
    create_topics(broker, "txt")
    allow(broker, ResourceType.TOPIC, "txt", AclOperation.WRITE)
    p = Producer({"bootstrap.servers": broker.sasl_bootstrap, "transactional.id": "tx-alice", **auth("alice")})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(20)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_transactional_producer_with_the_acls_commits(broker):
    from confluent_kafka import Consumer, Producer
    create_topics(broker, "txt")
    allow(broker, ResourceType.TRANSACTIONAL_ID, "tx-alice", AclOperation.WRITE)
    allow(broker, ResourceType.TOPIC, "txt", AclOperation.WRITE)
    p = Producer({"bootstrap.servers": broker.sasl_bootstrap, "transactional.id": "tx-alice", **auth("alice")})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(3):
        p.produce("txt", f"v{i}".encode())
    p.commit_transaction(20)
    c = Consumer({"bootstrap.servers": broker.sasl_bootstrap, "group.id": "reader",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed", **auth("admin")})
    try:
        c.subscribe(["txt"])
        got = []
        for _ in range(60):
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) == 3:
                break
        assert got == [b"v0", b"v1", b"v2"]
    finally:
        c.close()


def test_send_offsets_to_transaction_needs_read_on_the_group(broker):
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    create_topics(broker, "txt")
    allow(broker, ResourceType.TRANSACTIONAL_ID, "tx-alice", AclOperation.WRITE)
    allow(broker, ResourceType.TOPIC, "txt", AclOperation.WRITE, AclOperation.READ)
    wait_for_group_coordinator(broker, "g-alice")
    consumer = Consumer({"bootstrap.servers": broker.sasl_bootstrap, "group.id": "g-alice", **auth("alice")})
    p = Producer({"bootstrap.servers": broker.sasl_bootstrap, "transactional.id": "tx-alice", **auth("alice")})
    try:
        p.init_transactions(20)
        p.begin_transaction()
        p.produce("txt", b"x")
        with pytest.raises(KafkaException) as e:
            p.send_offsets_to_transaction([TopicPartition("txt", 0, 1)], consumer.consumer_group_metadata(), 20)
        assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
        p.abort_transaction(20)
        # with READ on the group the offsets go in with the transaction
        allow(broker, ResourceType.GROUP, "g-alice", AclOperation.READ)
        p.begin_transaction()
        p.produce("txt", b"y")
        p.send_offsets_to_transaction([TopicPartition("txt", 0, 1)], consumer.consumer_group_metadata(), 20)
        p.commit_transaction(20)
    finally:
        consumer.close()
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": broker.sasl_bootstrap, **auth("admin")})
    from confluent_kafka import ConsumerGroupTopicPartitions
    [fut] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("g-alice")]).values()
    assert [(tp.topic, tp.partition, tp.offset) for tp in fut.result(timeout=30).topic_partitions] == [("txt", 0, 1)]


# -- transactions on the wire ---------------------------------------------------------------
def test_add_partitions_to_txn_v3(broker, wire):
    create_topics(broker, "ok", "secret")
    w = wire()
    req = {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 7,
           "v3_and_below_producer_epoch": 0,
           "v3_and_below_topics": [{"name": "ok", "partitions": [0]}, {"name": "secret", "partitions": [0]},
                                   {"name": "missing", "partitions": [0]},
                                   {"name": "__consumer_offsets", "partitions": [0]}]}

    def codes():
        r = w.call(m.ApiKey.ADD_PARTITIONS_TO_TXN, 3, req)
        return partition_codes(r.results_by_topic_v3_and_below, parts_key="results_by_partition",
                               code_key="partition_error_code")
    assert set(codes().values()) == {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    allow(broker, ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE)
    allow(broker, ResourceType.TOPIC, "ok", AclOperation.WRITE)
    allow(broker, ResourceType.TOPIC, "missing", AclOperation.WRITE)
    allow(broker, ResourceType.TOPIC, "*", AclOperation.READ)           # not WRITE: no help
    assert codes() == {("ok", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                       ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                       ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       ("__consumer_offsets", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    # all allowed: the coordinator answers (producer 7 is unknown to it)
    req["v3_and_below_topics"] = [{"name": "ok", "partitions": [0]}]
    assert codes() == {("ok", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}


def test_add_partitions_to_txn_v4_needs_cluster_action(broker, wire):
    create_topics(broker, "ok")
    w = wire()
    req = {"transactions": [{"transactional_id": "tx", "producer_id": 7, "producer_epoch": 0,
                             "verify_only": True, "topics": [{"name": "ok", "partitions": [0]}]}]}
    r = w.call(m.ApiKey.ADD_PARTITIONS_TO_TXN, 4, req)
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and r.results_by_transaction == []
    allow(broker, ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION)
    r = w.call(m.ApiKey.ADD_PARTITIONS_TO_TXN, 4, req)
    assert r.error_code == 0
    assert [t["transactional_id"] for t in r.results_by_transaction] == ["tx"]


def test_add_offsets_and_end_txn(broker, wire):
    w = wire()
    add = {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 0, "group_id": "g"}
    end = {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 0, "committed": True}
    assert w.call(m.ApiKey.ADD_OFFSETS_TO_TXN, 3, add).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    r = w.call(m.ApiKey.END_TXN, 4, end)
    assert r.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    allow(broker, ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE)
    assert w.call(m.ApiKey.ADD_OFFSETS_TO_TXN, 3, add).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert w.call(m.ApiKey.END_TXN, 4, end).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    allow(broker, ResourceType.GROUP, "g", AclOperation.READ)
    assert w.call(m.ApiKey.ADD_OFFSETS_TO_TXN, 3, add).error_code == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_txn_offset_commit(broker, wire):
    create_topics(broker, "ok", "secret")
    w = wire()
    req = {"transactional_id": "tx", "group_id": "g", "producer_id": 7, "producer_epoch": 0,
           "topics": [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                     "committed_metadata": ""}]}
                      for t in ("ok", "secret", "missing")]}

    def codes():
        return partition_codes(w.call(m.ApiKey.TXN_OFFSET_COMMIT, 3, req).topics)
    assert set(codes().values()) == {ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    allow(broker, ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE)
    assert set(codes().values()) == {ErrorCode.GROUP_AUTHORIZATION_FAILED}
    allow(broker, ResourceType.GROUP, "g", AclOperation.READ)
    allow(broker, ResourceType.TOPIC, "ok", AclOperation.READ)
    got = codes()
    assert got[("secret", 0)] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert got[("missing", 0)] == ErrorCode.TOPIC_AUTHORIZATION_FAILED        # not told it is missing
    # "ok" went to the coordinator, which does not know producer 7 in a transaction
    assert got[("ok", 0)] not in (0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def test_write_txn_markers_needs_cluster_action_or_alter(broker, wire):
    w = wire()
    req = {"markers": [{"producer_id": 7, "producer_epoch": 0, "transaction_result": False,
                        "coordinator_epoch": 0, "topics": [{"name": "missing", "partition_indexes": [0, 1]}]}]}
    r = w.call(m.ApiKey.WRITE_TXN_MARKERS, 1, req)
    assert partition_codes(r.markers[0]["topics"]) == {("missing", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                       ("missing", 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    allow(broker, ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION)
    r = w.call(m.ApiKey.WRITE_TXN_MARKERS, 1, req)
    assert set(partition_codes(r.markers[0]["topics"]).values()) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    # ALTER on the cluster is enough too (Kafka checks it first)
    w2 = wire("alice")
    broker.broker.access.authorizer.delete([AclBinding(
        ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:alice", "*",
        AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW).to_filter()])
    r = w2.call(m.ApiKey.WRITE_TXN_MARKERS, 1, req)
    assert set(partition_codes(r.markers[0]["topics"]).values()) == {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    allow(broker, ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER)
    r = w2.call(m.ApiKey.WRITE_TXN_MARKERS, 1, req)
    assert set(partition_codes(r.markers[0]["topics"]).values()) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_describe_producers_needs_read(broker, wire):
    create_topics(broker, "ok", "secret")
    allow(broker, ResourceType.TOPIC, "ok", AclOperation.READ)
    allow(broker, ResourceType.TOPIC, "secret", AclOperation.DESCRIBE)    # DESCRIBE is not READ
    w = wire()
    r = w.call(m.ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [
        {"name": "ok", "partition_indexes": [0]}, {"name": "secret", "partition_indexes": [0, 1]},
        {"name": "missing", "partition_indexes": [0]}, {"name": "bad name", "partition_indexes": [0]}]})
    assert partition_codes(r.topics) == {
        ("ok", 0): 0, ("secret", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ("secret", 1): ErrorCode.TOPIC_AUTHORIZATION_FAILED, ("missing", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ("bad name", 0): ErrorCode.INVALID_TOPIC_EXCEPTION}


def test_list_and_describe_transactions_are_filtered(broker, wire):
    from confluent_kafka import Producer
    create_topics(broker, "pub", "hidden")
    producers = []
    for tid, topic in (("tx-seen", "pub"), ("tx-seen-2", "hidden"), ("tx-other", "pub")):
        p = Producer({"bootstrap.servers": broker.sasl_bootstrap, "transactional.id": tid, **auth("admin")})
        p.init_transactions(20)
        p.begin_transaction()                    # left open: Ongoing, with its partition
        p.produce(topic, b"x")
        assert p.flush(20) == 0
        producers.append(p)
    w = wire()
    listed = w.call(m.ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []})
    assert listed.error_code == 0 and listed.transaction_states == []
    allow(broker, ResourceType.TRANSACTIONAL_ID, "tx-seen", AclOperation.DESCRIBE)
    allow(broker, ResourceType.TRANSACTIONAL_ID, "tx-seen-2", AclOperation.WRITE)     # implies DESCRIBE
    allow(broker, ResourceType.TOPIC, "pub", AclOperation.DESCRIBE)
    listed = w.call(m.ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []})
    assert sorted(s["transactional_id"] for s in listed.transaction_states) == ["tx-seen", "tx-seen-2"]
    admin_listed = wire("admin").call(m.ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []})
    assert len(admin_listed.transaction_states) == 3
    r = w.call(m.ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx-seen", "tx-seen-2", "tx-other", "nope"]})
    states = {s["transactional_id"]: s for s in r.transaction_states}
    assert states["tx-seen"]["error_code"] == 0 and states["tx-seen"]["transaction_state"] == "Ongoing"
    assert [t["topic"] for t in states["tx-seen"]["topics"]] == ["pub"]
    assert states["tx-seen-2"]["error_code"] == 0 and states["tx-seen-2"]["topics"] == []   # "hidden" left out
    assert states["tx-other"]["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert states["nope"]["error_code"] == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    for p in producers:
        p.abort_transaction(20)


# -- admin APIs -----------------------------------------------------------------------------
def test_describe_log_dirs_needs_describe_on_the_cluster(broker, wire):
    create_topics(broker, "ld")
    w = wire()
    r = w.call(m.ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and r.results == []
    assert w.call(m.ApiKey.DESCRIBE_LOG_DIRS, 1, {"topics": None}).results == []     # v1: no error field
    allow(broker, ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE)
    r = w.call(m.ApiKey.DESCRIBE_LOG_DIRS, 4, {"topics": None})
    assert r.error_code == 0 and [t["name"] for t in r.results[0]["topics"]] == ["ld"]


def test_describe_log_dirs_with_kafka_python(broker):
    from kafka import KafkaAdminClient
    create_topics(broker, "ld")

    def admin(user):
        return KafkaAdminClient(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="PLAIN", sasl_plain_username=user,
                                sasl_plain_password=PASSWORDS[user])
    alice, root = admin("alice"), admin("admin")
    try:
        # (kafka-python does not read the top-level error: no log dirs is Kafka's other sign)
        assert alice.describe_log_dirs() == [{"broker": 0, "log_dirs": []}]
        [answer] = root.describe_log_dirs()
        assert [t["name"] for t in answer["log_dirs"][0]["topics"]] == ["ld"]
    finally:
        alice.close()
        root.close()


def test_alter_configs(broker, wire):
    create_topics(broker, "ok", "secret")
    allow(broker, ResourceType.TOPIC, "ok", AclOperation.ALTER_CONFIGS)
    w = wire()

    def alter(conn):
        r = conn.call(m.ApiKey.ALTER_CONFIGS, 2, {"validate_only": True, "resources": [
            {"resource_type": 2, "resource_name": n, "configs": [{"name": "retention.ms", "value": "1000"}]}
            for n in ("ok", "secret", "missing")] + [
            {"resource_type": 4, "resource_name": "0", "configs": [{"name": "log.retention.ms", "value": "1"}]}]})
        return {(x["resource_type"], x["resource_name"]): x["error_code"] for x in r.responses}
    assert alter(w) == {(2, "ok"): 0, (2, "secret"): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        (2, "missing"): ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        (4, "0"): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert alter(wire("admin")) == {(2, "ok"): 0, (2, "secret"): 0,
                                    (2, "missing"): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    (4, "0"): ErrorCode.INVALID_REQUEST}        # static broker configs


def test_describe_topic_partitions(broker, wire):
    create_topics(broker, "ok", "secret", partitions=2)
    allow(broker, ResourceType.TOPIC, "ok", AclOperation.READ)
    w = wire()
    r = w.call(m.ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
        "topics": [{"name": "ok"}, {"name": "secret"}, {"name": "missing"}], "response_partition_limit": 100})
    by = {t["name"]: t for t in r.topics}
    assert by["ok"]["error_code"] == 0 and len(by["ok"]["partitions"]) == 2
    read_describe = (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)
    assert by["ok"]["topic_authorized_operations"] == read_describe
    for name in ("secret", "missing"):          # the same answer whether or not it exists
        assert by[name]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert by[name]["topic_id"] in (None, ZERO_UUID) and by[name]["partitions"] == []
    # all topics: the ones not allowed are left out
    r = w.call(m.ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 100})
    assert [t["name"] for t in r.topics] == ["ok"]
    r = wire("admin").call(m.ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 100})
    assert sorted(t["name"] for t in r.topics) == ["ok", "secret"]


def test_elect_leaders(broker, wire):
    create_topics(broker, "el")
    req = {"election_type": 0,
           "topic_partitions": [{"topic": "el", "partitions": [0]}, {"topic": "missing", "partitions": [3]}],
           "timeout": datetime.timedelta(seconds=10)}
    r = wire().call(m.ApiKey.ELECT_LEADERS, 2, req)
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert partition_codes(r.replica_election_results, "topic", "partition_result", "partition_id") == {
        ("el", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ("missing", 3): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    r = wire().call(m.ApiKey.ELECT_LEADERS, 2, dict(req, topic_partitions=None))
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and r.replica_election_results == []
    r = wire("admin").call(m.ApiKey.ELECT_LEADERS, 2, req)
    assert r.error_code == 0
    assert partition_codes(r.replica_election_results, "topic", "partition_result", "partition_id") == {
        ("el", 0): ErrorCode.ELECTION_NOT_NEEDED, ("missing", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_elect_leaders_with_confluent(broker):
    from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient
    create_topics(broker, "el")
    alice = AdminClient({"bootstrap.servers": broker.sasl_bootstrap, **auth("alice")})
    with pytest.raises(KafkaException) as e:
        alice.elect_leaders(ElectionType.PREFERRED, [TopicPartition("el", 0)]).result(timeout=30)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    allow(broker, ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER)
    res = alice.elect_leaders(ElectionType.PREFERRED, [TopicPartition("el", 0)]).result(timeout=30)
    assert res[TopicPartition("el", 0)].code() == KafkaError.ELECTION_NOT_NEEDED


def test_partition_reassignments(broker, wire):
    create_topics(broker, "rs")
    alter = {"timeout": datetime.timedelta(seconds=10),
             "topics": [{"name": "rs", "partitions": [{"partition_index": 0, "replicas": [1]}]}]}
    listing = {"timeout": datetime.timedelta(seconds=10), "topics": [{"name": "rs", "partition_indexes": [0]}]}
    w = wire()
    r = w.call(m.ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, alter)
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert partition_codes(r.responses) == {("rs", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    r = w.call(m.ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    allow(broker, ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE)
    r = w.call(m.ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, listing)
    assert r.error_code == 0 and r.topics == []
    r = w.call(m.ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, alter)          # DESCRIBE is not ALTER
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    r = wire("admin").call(m.ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, alter)
    assert r.error_code == 0
    assert set(partition_codes(r.responses).values()) != {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}


# -- SCRAM credentials ----------------------------------------------------------------------
def test_scram_credential_apis_need_the_cluster_acls(broker):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    def ups():          # (a fresh object per call: librdkafka takes the salt it generates)
        return [UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                             b"bob-secret", b"bob-salt")]
    alice = AdminClient({"bootstrap.servers": broker.sasl_bootstrap, **auth("alice")})
    root = AdminClient({"bootstrap.servers": broker.sasl_bootstrap, **auth("admin")})
    for fut in alice.alter_user_scram_credentials(ups()).values():
        with pytest.raises(KafkaException) as e:
            fut.result(timeout=30)
        assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert broker.store.describe(["bob"])[0].error_code == ErrorCode.RESOURCE_NOT_FOUND     # unchanged
    # (refused: through kafka-python -- confluent-kafka 2.16 crashes the process on the
    # top-level error of a DescribeUserScramCredentials answer, Kafka's form)
    from kafka import KafkaAdminClient
    from kafka.errors import ClusterAuthorizationFailedError
    kp = KafkaAdminClient(bootstrap_servers=broker.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="PLAIN", sasl_plain_username="alice",
                          sasl_plain_password=PASSWORDS["alice"])
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp.describe_user_scram_credentials(["bob"])
    finally:
        kp.close()
    for fut in root.alter_user_scram_credentials(ups()).values():
        assert fut.result(timeout=30) is None
    described = {u: f.result(timeout=30) for u, f in root.describe_user_scram_credentials(["bob"]).items()}
    assert described["bob"].scram_credential_infos[0].iterations == 4096
    # DESCRIBE on the cluster lets alice describe, not alter
    allow(broker, ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE)
    described = {u: f.result(timeout=30) for u, f in alice.describe_user_scram_credentials(["bob"]).items()}
    assert described["bob"].scram_credential_infos[0].mechanism == ScramMechanism.SCRAM_SHA_256
    for fut in alice.alter_user_scram_credentials(ups()).values():
        with pytest.raises(KafkaException):
            fut.result(timeout=30)


def test_scram_apis_on_the_wire(broker, wire):
    w = wire()
    r = w.call(m.ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "bob"}, {"name": "carol"}]})
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [(x["user"], x["error_code"]) for x in r.results] == [
        ("bob", ErrorCode.CLUSTER_AUTHORIZATION_FAILED), ("carol", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    r = w.call(m.ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and r.results == []
    r = w.call(m.ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
        "deletions": [{"name": "zed", "mechanism": 1}, {"name": "bob", "mechanism": 2}],
        "upsertions": [{"name": "bob", "mechanism": 1, "iterations": 4096, "salt": b"s" * 16,
                        "salted_password": b"p" * 32}]})
    assert [(x["user"], x["error_code"]) for x in r.results] == [
        ("bob", ErrorCode.CLUSTER_AUTHORIZATION_FAILED), ("zed", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
