"""Brokers that log in to ZooKeeper with SASL DIGEST-MD5 and protect their znodes with ACLs
(``zookeeper.set.acl=true``; engine/cluster/zk_auth.py), against a real ZooKeeper that requires
SASL of every session (``enforce.auth.enabled``, users in its JAAS file's ``Server`` section).

One ZooKeeper and one 2-broker cluster for the module; the brokers that must fail to start are
started against the same ZooKeeper."""

from __future__ import annotations

import json
import os
import time

import pytest

from engine.cluster.zk_auth import ZkClientSecurity, java_system_properties, znode_acl
from engine.config import EngineConfig
from engine.errors import InvalidConfigError, JaasConfigError
from engine.security.jaas_file import parse_jaas_file
from tests.cluster.conftest import Cluster, wait_for
from tests.serving import ServeProcess, ZooKeeperProcess, find_zookeeper

SERVER_JAAS = """\
Server {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  user_kafka="kafka-secret"
  user_other="other-secret";
};
"""
CLIENT_JAAS = """\
KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required
  username="admin" password="admin-secret";
};
// the broker's ZooKeeper login
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="kafka"
  password="%s";
};
"""


def _sasl_client(zk, user: str | None, password: str | None = None):
    from kazoo.client import KazooClient
    kw = {} if user is None else {"sasl_options": {"mechanism": "DIGEST-MD5", "username": user,
                                                   "password": password}}
    k = KazooClient(zk.connect, timeout=10, connection_retry={"max_tries": 0}, **kw)
    k.start(20)
    return k


@pytest.fixture(scope="module")
def secure_zk(tmp_path_factory):
    cp, why = find_zookeeper()
    if cp is None:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("zk-sasl")
    (d / "zk_jaas.conf").write_text(SERVER_JAAS)
    for name, password in (("kafka_jaas.conf", "kafka-secret"), ("wrong_jaas.conf", "not-the-secret")):
        (d / name).write_text(CLIENT_JAAS % password)
    zk = ZooKeeperProcess(d / "zookeeper", settings={
        "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
        "enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"},
        jvm_args=[f"-Djava.security.auth.login.config={d / 'zk_jaas.conf'}"]).start()
    zk.dir = d
    yield zk
    zk.stop()


@pytest.fixture(scope="module")
def secure_cluster(secure_zk, tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("sasl-brokers"), secure_zk, 2,
                "--config", f"java.security.auth.login.config={secure_zk.dir / 'kafka_jaas.conf'}",
                "--config", "zookeeper.set.acl=true").start()
    yield c
    for i, log in c.stop().items():
        assert "Traceback" not in log, f"broker {i} logged a traceback:\n{log[-4000:]}"


def _acls(client, path):
    return sorted((a.id.scheme, a.id.id, a.perms) for a in client.get_acls(path)[0])


def test_two_brokers_with_acls_replicate_and_serve(secure_cluster, secure_zk):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import (
        AdminClient,
        NewTopic,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    admin = AdminClient({"bootstrap.servers": secure_cluster.bootstrap})
    admin.create_topics([NewTopic("secure-t", 1, 2)])["secure-t"].result(timeout=30)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "zoe", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"zoe-secret")])["zoe"].result(timeout=30)
    p = Producer({"bootstrap.servers": secure_cluster.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce("secure-t", b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": secure_cluster.bootstrap, "group.id": "g-sasl",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["secure-t"])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"v%d" % i for i in range(10)]

    assert "; SASL DIGEST-MD5 as sasl:kafka, Kafka ACLs on its znodes)" in secure_cluster.brokers[1].log_text()
    kafka = _sasl_client(secure_zk, "kafka", "kafka-secret")
    try:
        state = "/brokers/topics/secure-t/partitions/0/state"
        wait_for(lambda: len(json.loads(kafka.get(state)[0])["isr"]) == 2, 30, "ISR of 2")
        creator_and_world_read = [("sasl", "kafka", 31), ("world", "anyone", 1)]
        for path in ("/brokers/topics/secure-t", state, "/brokers/ids/1", "/brokers/ids/2", "/controller",
                     "/cluster/id", "/config/topics/secure-t", "/brokers", "/config"):
            assert _acls(kafka, path) == creator_and_world_read, path
        for path in ("/config/users", "/config/users/zoe"):
            assert _acls(kafka, path) == [("sasl", "kafka", 31)], path
    finally:
        kafka.stop()
        kafka.close()


def test_other_clients_cannot_read_credentials_nor_write_metadata(secure_cluster, secure_zk):
    from kazoo.exceptions import NoAuthError, SessionClosedRequireSaslError
    anonymous = _sasl_client(secure_zk, None)
    try:           # ZooKeeper requires SASL: an unauthenticated session can do nothing at all
        with pytest.raises(SessionClosedRequireSaslError):
            anonymous.get("/config/users")
    finally:
        anonymous.stop()
        anonymous.close()
    other = _sasl_client(secure_zk, "other", "other-secret")     # authenticated, not the brokers'
    try:
        assert sorted(other.get_children("/brokers/ids")) == ["1", "2"]
        other.get("/brokers/topics")                               # world-readable, as Kafka's
        for path in ("/config/users", "/config/users/zoe"):
            with pytest.raises(NoAuthError):
                other.get(path)
        with pytest.raises(NoAuthError):
            other.create("/brokers/topics/intruder", b"{}")
        with pytest.raises(NoAuthError):
            other.set("/brokers/topics/secure-t", b"{}")
        with pytest.raises(NoAuthError):       # deleting needs DELETE on the parent, /brokers/ids
            other.delete("/brokers/ids/1")
    finally:
        other.stop()
        other.close()


def _fails_to_start(d, zk, *args: str) -> tuple[float, str]:
    srv = ServeProcess(d, "--broker-id", "9", "--zookeeper", zk.connect,
                       "--config", "zookeeper.session.timeout.ms=6000", *args)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="exited at start") as e:
        srv.start(timeout=30)
    return time.monotonic() - t0, str(e.value)


def test_a_wrong_password_fails_the_start_with_a_clear_error(secure_zk, tmp_path):
    took, log = _fails_to_start(tmp_path / "wrong", secure_zk,
                                "--config", f"java.security.auth.login.config={secure_zk.dir / 'wrong_jaas.conf'}")
    assert took < 20, took
    assert "ZooKeeper" in log and "sasl:kafka" in log and "refused" in log, log
    assert "not-the-secret" not in log and "Traceback" not in log, log


def test_no_credentials_against_a_zookeeper_requiring_sasl_fail_the_start(secure_zk, tmp_path):
    took, log = _fails_to_start(tmp_path / "anon", secure_zk)
    assert took < 20, took
    assert "requires SASL" in log and "java.security.auth.login.config" in log, log
    assert "Traceback" not in log, log


# -- configuration: no ZooKeeper needed -----------------------------------------------------------
def test_jaas_file_sections_and_kafka_opts(tmp_path):
    sections = parse_jaas_file(CLIENT_JAAS % "p/}ss'")
    assert list(sections) == ["KafkaServer", "Client"]
    assert sections["Client"][0].options == {"username": "kafka", "password": "p/}ss'"}
    with pytest.raises(JaasConfigError, match="not closed"):
        parse_jaas_file("Client { x required a=b;")
    f = tmp_path / "kafka_jaas.conf"
    f.write_text(CLIENT_JAAS % "s3cret")
    assert java_system_properties(f"-Xmx1g -Djava.security.auth.login.config={f} -Dx") == {
        "java.security.auth.login.config": str(f), "x": ""}
    cfg = EngineConfig.from_mapping({"zookeeper.set.acl": "true"})
    sec = ZkClientSecurity.from_config(cfg, {"KAFKA_OPTS": f"-Djava.security.auth.login.config={f}"})
    assert (sec.username, sec.password, sec.set_acl) == ("kafka", "s3cret", True)
    assert "s3cret" not in repr(sec)
    with pytest.raises(InvalidConfigError, match="zookeeper.set.acl is true"):
        ZkClientSecurity.from_config(cfg, {})
    with pytest.raises(JaasConfigError, match="not supported for ZooKeeper"):
        ZkClientSecurity.from_config(cfg, {"KAFKA_OPTS": f"-Djava.security.auth.login.config={f} "
                                                         "-Dzookeeper.sasl.clientconfig=KafkaServer"})
    with pytest.raises(JaasConfigError, match="cannot read"):
        ZkClientSecurity.from_config(EngineConfig.from_mapping(
            {"java.security.auth.login.config": os.fspath(tmp_path / "none.conf")}), {})
    assert [a.perms for a in znode_acl("/config/users/zoe", True)] == [31]
    assert [a.id.scheme for a in znode_acl("/brokers/ids/1", True)] == ["auth", "world"]
    assert [a.id.scheme for a in znode_acl("/consumers", True)] == ["world"]
    assert [a.id.scheme for a in znode_acl("/config/users", False)] == ["world"]
