"""Three brokers whose inter-broker listener is SASL_SSL with SCRAM-SHA-512 (a real ZooKeeper, real
``python -m engine serve`` processes): each registers its PLAINTEXT and SASL_SSL addresses, the
followers replicate over SASL_SSL with the broker user's credential -- created in ZooKeeper's
``/config/users/broker`` before the brokers start, as Kafka's ``kafka-configs.sh --zookeeper ...
--add-config SCRAM-SHA-512=...`` did -- and confluent-kafka produces (acks=all, RF=3,
min.insync.replicas=3: every follower must fetch) and consumes over SASL_SSL, as does
engine.connect."""

from __future__ import annotations

import re
import time
import uuid

import pytest

from engine.security.credentials import encode_zk_user_config, zk_user_path
from engine.security.scram import ScramCredential
from tests.cluster.conftest import wait_for, zk_json
from tests.security.certs import make_pki

MECH = "SCRAM-SHA-512"
BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
               'username="broker" password="broker-secret";')


def _sasl_ssl_port(broker) -> int:
    m = re.search(r"listener SASL_SSL \(SASL_SSL\) on [\d.]+:(\d+)", broker.log_text())
    assert m, broker.log_text()[-2000:]
    return int(m.group(1))


def _create_user(zk_client, user: str, password: str) -> None:
    """The user's SCRAM-SHA-512 credential in ZooKeeper, as Kafka's ZooKeeper-mode tools wrote it."""
    zk_client.create(zk_user_path(user), encode_zk_user_config({MECH: ScramCredential.from_password(MECH, password)}),
                     makepath=True)


@pytest.fixture
def secured_cluster(tmp_path, zk_client, cluster_factory):
    pki = make_pki(str(tmp_path))
    _create_user(zk_client, "broker", "broker-secret")
    _create_user(zk_client, "alice", "alice-secret")
    c = cluster_factory(
        3, "--config", "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "--config", "inter.broker.listener.name=SASL_SSL",
        "--config", f"sasl.enabled.mechanisms={MECH}",
        "--config", f"sasl.mechanism.inter.broker.protocol={MECH}",
        "--config", f"listener.name.sasl_ssl.{MECH.lower()}.sasl.jaas.config={BROKER_JAAS}",
        "--config", "ssl.keystore.type=PEM", "--config", f"ssl.keystore.location={pki.path('server.pem')}",
        "--config", "ssl.truststore.type=PEM", "--config", f"ssl.truststore.location={pki.path('ca.pem')}",
        "--config", "replica.fetch.backoff.ms=200")
    c.pki = pki
    c.sasl_ssl = ",".join(f"127.0.0.1:{_sasl_ssl_port(b)}" for b in c.brokers.values())
    return c


def test_replication_and_clients_over_sasl_ssl(secured_cluster, zk_client):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    c = secured_cluster
    # each broker registered both listeners (Kafka's layout: host/port are the PLAINTEXT one's);
    # the others reach it at its inter-broker (SASL_SSL) address
    for i, b in c.brokers.items():
        reg, _ = zk_json(zk_client, f"/brokers/ids/{i}")
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{b.port}",
                                    f"SASL_SSL://127.0.0.1:{_sasl_ssl_port(b)}"], reg
        assert reg["port"] == b.port, reg
    auth = {"bootstrap.servers": c.sasl_ssl, "security.protocol": "SASL_SSL",
            "ssl.ca.location": c.pki.path("ca.pem"), "sasl.mechanism": MECH,
            "sasl.username": "alice", "sasl.password": "alice-secret"}
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(auth)
    admin.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "3"})])[topic].result(30)
    wait_for(lambda: all(len(p.isrs) == 3 for p in
                         admin.list_topics(topic, timeout=10).topics[topic].partitions.values()),
             60, "every replica in the ISR (followers fetching over SASL_SSL)")

    errors: list = []
    p = Producer({**auth, "acks": "all", "enable.idempotence": True})
    n = 200
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), key=str(i % 7).encode(),
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert p.flush(60) == 0
    assert errors == []

    consumer = Consumer({**auth, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.time() + 60
    while len(got) < n and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()           # commits through the group coordinator (acks=all on __consumer_offsets)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(n))

    # our own client over the same listener; with min.insync.replicas=3 acks=all needs all three
    import pyarrow as pa

    import engine
    with engine.connect(c.sasl_ssl, **{"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
                                       "ssl.truststore.location": c.pki.path("ca.pem"), "sasl.mechanism": MECH,
                                       "sasl.jaas.config": BROKER_JAAS.replace('"broker"', '"alice"')
                                       .replace("broker-secret", "alice-secret")}) as eng:
        with eng.producer(acks="all") as prod:
            prod.send_batch(topic, values=pa.array([b"x", b"y"], pa.binary()),
                            partitions=pa.array([0, 0], pa.int32()))
        values = eng.read_arrow(topic, 0).column("value").to_pylist()
        assert values[-2:] == [b"x", b"y"]
