"""Brokers that reach ZooKeeper over TLS with Kafka 3.x's ``zookeeper.ssl.*`` keys (KIP-515;
engine/cluster/zk_tls.py), against a real ZooKeeper serving TLS on its ``secureClientPort``
(NettyServerCnxnFactory, ``ssl.clientAuth=need``: a client certificate is required) with
certificates the test makes (tests/security/certs.py).

One ZooKeeper and one 2-broker cluster for the module: broker 1 has a PKCS12 key store and a
PEM trust store and also logs in with SASL DIGEST-MD5 (SASL over TLS); broker 2 a PEM key store
and a PKCS12 trust store.  The brokers that must fail to start are started against the same
ZooKeeper."""

from __future__ import annotations

import json
import time

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from engine.cluster.zk import ZkStore
from engine.cluster.zk_auth import ZkClientSecurity
from engine.config import EngineConfig, is_sensitive
from engine.errors import InvalidConfigError, SslAuthenticationError, SslConfigError
from tests.cluster.conftest import Cluster, wait_for
from tests.security.certs import STORE_PASSWORD, make_pki
from tests.serving import ServeProcess, ZooKeeperProcess, find_zookeeper

NETTY = "org.apache.zookeeper.ClientCnxnSocketNetty"
SERVER_JAAS = """\
Server {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  user_kafka="kafka-secret";
};
"""
CLIENT_JAAS = """\
Client {
  org.apache.zookeeper.server.auth.DigestLoginModule required
  username="kafka"
  password="kafka-secret";
};
"""
KEYSTORE_SECRET = "zk-keystore-s3cret"       # must never show in a log or a describe


@pytest.fixture(scope="module")
def tls_zk(tmp_path_factory):
    cp, why = find_zookeeper()
    if cp is None:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("zk-tls")
    pki = make_pki(str(d))
    with open(pki.path("broker.p12"), "wb") as f:       # the brokers' client certificate, PKCS12
        f.write(pkcs12.serialize_key_and_certificates(
            b"broker", pki.client.key, pki.client.cert, [pki.ca.cert],
            serialization.BestAvailableEncryption(KEYSTORE_SECRET.encode())))
    (d / "zk_jaas.conf").write_text(SERVER_JAAS)
    (d / "kafka_jaas.conf").write_text(CLIENT_JAAS)
    zk = ZooKeeperProcess(d / "zookeeper", secure_port=0, settings={
        "ssl.keyStore.location": pki.path("server.p12"), "ssl.keyStore.password": STORE_PASSWORD,
        "ssl.keyStore.type": "PKCS12", "ssl.trustStore.location": pki.path("ca.pem"),
        "ssl.trustStore.type": "PEM", "ssl.clientAuth": "need",
        "authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"},
        jvm_args=[f"-Djava.security.auth.login.config={d / 'zk_jaas.conf'}"]).start()
    zk.dir, zk.pki = d, pki
    yield zk
    zk.stop()


def _tls_keys(zk, *, keystore: str = "pkcs12", truststore: str = "pem") -> dict[str, str]:
    pki = zk.pki
    keys = {"zookeeper.ssl.client.enable": "true", "zookeeper.clientCnxnSocket": NETTY}
    if keystore == "pkcs12":
        keys |= {"zookeeper.ssl.keystore.location": pki.path("broker.p12"),
                 "zookeeper.ssl.keystore.password": KEYSTORE_SECRET, "zookeeper.ssl.keystore.type": "PKCS12"}
    else:       # key and chain in one PEM file, its type told from the name
        keys |= {"zookeeper.ssl.keystore.location": pki.path("client.pem")}
    if truststore == "pem":
        keys |= {"zookeeper.ssl.truststore.location": pki.path("ca.pem"), "zookeeper.ssl.truststore.type": "PEM"}
    else:
        keys |= {"zookeeper.ssl.truststore.location": pki.path("truststore.p12"),
                 "zookeeper.ssl.truststore.password": STORE_PASSWORD, "zookeeper.ssl.truststore.type": "PKCS12"}
    return keys


def _flags(keys: dict[str, str]) -> list[str]:
    return [x for k, v in keys.items() for x in ("--config", f"{k}={v}")]


class _TlsZk:
    """The cluster's view of ZooKeeper: brokers are given its TLS port."""

    def __init__(self, zk):
        self.connect = zk.secure_connect


@pytest.fixture(scope="module")
def tls_cluster(tls_zk, tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("tls-brokers"), _TlsZk(tls_zk), 2)
    c.brokers[1].args += _flags(_tls_keys(tls_zk) | {
        "java.security.auth.login.config": str(tls_zk.dir / "kafka_jaas.conf")})
    c.brokers[2].args += _flags(_tls_keys(tls_zk, keystore="pem", truststore="pkcs12"))
    c.start()
    yield c
    for i, log in c.stop().items():
        assert "Traceback" not in log, f"broker {i} logged a traceback:\n{log[-4000:]}"


def _store(zk, **keys) -> ZkStore:
    cfg = EngineConfig.from_mapping(_tls_keys(zk) | keys)
    return ZkStore(zk.secure_connect, 6000, 5.0, ZkClientSecurity.from_config(cfg, {}))


def test_two_brokers_register_elect_replicate_and_serve_over_tls(tls_cluster, tls_zk):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": tls_cluster.bootstrap})
    admin.create_topics([NewTopic("tls-t", 1, 2)])["tls-t"].result(timeout=30)
    p = Producer({"bootstrap.servers": tls_cluster.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce("tls-t", b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": tls_cluster.bootstrap, "group.id": "g-tls", "auto.offset.reset": "earliest"})
    c.subscribe(["tls-t"])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"v%d" % i for i in range(10)]

    # broker 1 logged in with SASL over TLS; both reached ZooKeeper over TLS only (its TLS port)
    assert "SASL DIGEST-MD5 as sasl:kafka, TLS (client certificate" in tls_cluster.brokers[1].log_text()
    assert "no SASL login, TLS (client certificate" in tls_cluster.brokers[2].log_text()
    store = _store(tls_zk).start()
    try:
        assert sorted(store.client.get_children("/brokers/ids")) == ["1", "2"]
        assert json.loads(store.client.get("/controller")[0])["brokerid"] in (1, 2)
        state = "/brokers/topics/tls-t/partitions/0/state"
        wait_for(lambda: len(json.loads(store.client.get(state)[0])["isr"]) == 2, 30, "ISR of 2")
    finally:
        store.close()


def test_secrets_are_hidden_in_the_log_and_describe_configs(tls_cluster):
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
    for b in tls_cluster.brokers.values():
        assert KEYSTORE_SECRET not in b.log_text() and STORE_PASSWORD not in b.log_text()
    assert is_sensitive("zookeeper.ssl.keystore.password") and is_sensitive("zookeeper.ssl.truststore.password")
    admin = AdminClient({"bootstrap.servers": tls_cluster.brokers[1].bootstrap})
    res = ConfigResource(ResourceType.BROKER, "1")
    entries = admin.describe_configs([res])[res].result(timeout=30)
    pw = entries["zookeeper.ssl.keystore.password"]
    assert pw.is_sensitive and pw.value is None
    assert entries["zookeeper.ssl.client.enable"].value == "true"
    assert entries["zookeeper.clientCnxnSocket"].value == NETTY


def test_set_acl_with_a_tls_client_certificate_gives_znodes_to_its_x509_principal(tls_zk):
    """As Kafka: zookeeper.set.acl needs SASL or TLS client authentication; the znodes belong to
    the certificate's DN (ZooKeeper's x509 provider), world READ."""
    with pytest.raises(InvalidConfigError, match="no TLS client certificate"):
        ZkClientSecurity.from_config(EngineConfig.from_mapping({"zookeeper.set.acl": "true"}), {})
    store = _store(tls_zk, **{"zookeeper.set.acl": "true"})
    assert store.security.set_acl
    store.start()
    try:
        store.client.create("/x509-owned", b"")
        acls = sorted((a.id.scheme, a.id.id, a.perms) for a in store.client.get_acls("/x509-owned")[0])
        assert acls == [("world", "anyone", 1), ("x509", "CN=alice,OU=eng,O=acme,C=US", 31)]
    finally:
        store.close()


def test_a_wrong_truststore_refuses_to_start_naming_zookeeper_tls(tls_zk, tmp_path):
    keys = _tls_keys(tls_zk) | {"zookeeper.ssl.truststore.location": tls_zk.pki.path("other-ca.pem"),
                                "zookeeper.connection.timeout.ms": "8000"}
    with pytest.raises(SslAuthenticationError, match="ZooKeeper TLS handshake .* failed .*certificate"):
        _store(tls_zk, **keys).start()
    srv = ServeProcess(tmp_path / "b", "--broker-id", "7", "--zookeeper", tls_zk.secure_connect, *_flags(keys))
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="exited at start") as e:
        srv.start()
    assert time.monotonic() - t0 < 8.0 + 5.0        # the connection timeout, plus the broker's own start
    assert "ZooKeeper TLS handshake with 127.0.0.1:" in str(e.value)
    assert "zookeeper.ssl.truststore.location" in str(e.value)


def test_tls_without_the_netty_socket_is_kafkas_config_error(tls_zk, tmp_path):
    keys = _tls_keys(tls_zk)
    del keys["zookeeper.clientCnxnSocket"]
    srv = ServeProcess(tmp_path / "b", "--broker-id", "8", "--zookeeper", tls_zk.secure_connect, *_flags(keys))
    with pytest.raises(RuntimeError, match="zookeeper.ssl.client.enable is true, so zookeeper.clientCnxnSocket "
                                           "must be set \\(typically to org.apache.zookeeper.ClientCnxnSocketNetty\\)"):
        srv.start()


@pytest.mark.parametrize("keys, key, message", [
    ({"zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNIO"}, None, "must be set"),
    ({"zookeeper.clientCnxnSocket": "com.example.Socket"}, None, "not a ZooKeeper client socket"),
    ({"zookeeper.ssl.crl.enable": "true"}, "zookeeper.ssl.crl.enable", "revocation"),
    ({"zookeeper.ssl.ocsp.enable": "true"}, "zookeeper.ssl.ocsp.enable", "OCSP"),
    ({"zookeeper.ssl.keystore.type": "JKS"}, "zookeeper.ssl.keystore.type", "JKS"),
    ({"zookeeper.ssl.truststore.location": "/x/trust.jks", "zookeeper.ssl.truststore.type": ""},
     "zookeeper.ssl.truststore.type", "JKS"),
    ({"zookeeper.ssl.keystore.password": "wrong"}, "zookeeper.ssl.keystore.password", "does not open"),
    ({"zookeeper.ssl.protocol": "TLSv1.1"}, "zookeeper.ssl.protocol", "below TLSv1.2"),
    ({"zookeeper.ssl.endpoint.identification.algorithm": "none"},
     "zookeeper.ssl.endpoint.identification.algorithm", "not supported"),
])
def test_bad_settings_are_refused_naming_the_key(tls_zk, keys, key, message):
    cfg = EngineConfig.from_mapping(_tls_keys(tls_zk) | keys)
    with pytest.raises(InvalidConfigError, match=message) as e:
        ZkClientSecurity.from_config(cfg, {})
    if key is not None:
        assert isinstance(e.value, SslConfigError) and e.value.key == key, e.value


def test_tls_off_reads_no_store():
    """zookeeper.ssl.client.enable=false (the default): the other keys are unused, as Kafka."""
    cfg = EngineConfig.from_mapping({"zookeeper.ssl.keystore.location": "/nowhere.p12"})
    assert ZkClientSecurity.from_config(cfg, {}).tls is None


def test_hostname_verification_is_on_by_default(tls_zk):
    """zookeeper.ssl.endpoint.identification.algorithm: HTTPS (Kafka's default, any case) checks
    that ZooKeeper's certificate names the host; empty does not."""
    def tls(**keys):
        return ZkClientSecurity.from_config(EngineConfig.from_mapping(_tls_keys(tls_zk) | keys), {}).tls
    assert tls().check_hostname and tls().context.check_hostname
    assert tls(**{"zookeeper.ssl.endpoint.identification.algorithm": "https"}).check_hostname
    off = tls(**{"zookeeper.ssl.endpoint.identification.algorithm": ""})
    assert not off.check_hostname and not off.context.check_hostname


def test_a_certificate_not_naming_the_host_is_refused_unless_the_check_is_off(tls_zk):
    """ZooKeeper's certificate names localhost and 127.0.0.1; 127.1 is the same address under a
    name it does not have."""
    other_name = "127.1:" + tls_zk.secure_connect.rpartition(":")[2]
    with pytest.raises(SslAuthenticationError, match="ZooKeeper TLS handshake .*mismatch"):
        ZkStore(other_name, 6000, 5.0, ZkClientSecurity.from_config(
            EngineConfig.from_mapping(_tls_keys(tls_zk)), {})).start()
    store = ZkStore(other_name, 6000, 5.0, ZkClientSecurity.from_config(EngineConfig.from_mapping(
        _tls_keys(tls_zk) | {"zookeeper.ssl.endpoint.identification.algorithm": ""}), {})).start()
    try:
        assert "brokers" in store.client.get_children("/")
    finally:
        store.close()


def test_an_encrypted_pem_key_and_a_plaintext_port(tls_zk):
    """A PEM key store whose key is encrypted: zookeeper.ssl.keystore.password decrypts it (one
    password for both, as ZooKeeper).  TLS against ZooKeeper's plaintext port fails at once."""
    pki = tls_zk.pki
    with open(pki.path("client-encrypted.pem"), "wb") as f:
        f.write(pki.client.key_pem(KEYSTORE_SECRET) + pki.client.chain_pem())
    keys = {"zookeeper.ssl.keystore.location": pki.path("client-encrypted.pem"),
            "zookeeper.ssl.keystore.type": "", "zookeeper.ssl.keystore.password": KEYSTORE_SECRET}
    store = _store(tls_zk, **keys).start()
    try:
        assert "brokers" in store.client.get_children("/")
    finally:
        store.close()
    with pytest.raises(SslConfigError, match="zookeeper.ssl.keystore.password: does not decrypt"):
        _store(tls_zk, **(keys | {"zookeeper.ssl.keystore.password": "wrong"}))
    plaintext = ZkStore(tls_zk.connect, 6000, 5.0, _store(tls_zk).security)
    t0 = time.monotonic()
    with pytest.raises(SslAuthenticationError, match="secureClientPort"):
        plaintext.start()
    assert time.monotonic() - t0 < 3.0
