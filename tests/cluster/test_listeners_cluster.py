"""A cluster whose clients and brokers use different listeners (a real ZooKeeper, three real
``python -m engine serve`` processes): CLIENT (PLAINTEXT) for clients, INTERNAL (SASL_SSL with
SCRAM-SHA-512) between brokers (``inter.broker.listener.name=INTERNAL``), as Kafka is usually run.

Each broker registers both listeners in Kafka's layout; a request is answered with the addresses
of the listener it came in on (Metadata, FindCoordinator: a group consumer on CLIENT works only
if it is never sent to an INTERNAL port); the followers replicate over INTERNAL (acks=all with
min.insync.replicas=3 needs all three); a leader without the request's listener is Kafka's
LISTENER_NOT_FOUND.  ``advertised.listeners`` names INTERNAL only, as ``localhost`` (the
certificate's name): INTERNAL is registered and answered by that name, CLIENT at its own address.
One cluster for the module (~3 s to start)."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid

import pytest

from engine.records import build_batch
from engine.server.common import _topic_uuid
from tests.cluster.conftest import Cluster, wait_for, zk_json
from tests.cluster.test_inter_broker_sasl_ssl import BROKER_JAAS, MECH, _create_user
from tests.differential.wire import Client, plain
from tests.security.certs import make_pki
from tests.serving import ZooKeeperProcess, find_zookeeper


def _internal_port(broker) -> int:
    m = re.search(r"listener INTERNAL \(SASL_SSL\) on [\d.]+:(\d+)", broker.log_text())
    assert m, broker.log_text()[-2000:]
    return int(m.group(1))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cp, why = find_zookeeper()
    if cp is None:
        pytest.skip(why)
    from kazoo.client import KazooClient
    base = tmp_path_factory.mktemp("listeners")
    zk = ZooKeeperProcess(base / "zookeeper").start()
    zkc = KazooClient(zk.connect, timeout=20)
    zkc.start(60)
    c = None
    try:
        pki = make_pki(str(base))
        _create_user(zkc, "broker", "broker-secret")
        _create_user(zkc, "alice", "alice-secret")
        c = Cluster(base, zk, 3,
                    "--config", "listeners=CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                    "--config", "listener.security.protocol.map=CLIENT:PLAINTEXT,INTERNAL:SASL_SSL",
                    "--config", "inter.broker.listener.name=INTERNAL",
                    "--config", "advertised.listeners=INTERNAL://localhost:0",   # port 0: the bound one
                    "--config", f"sasl.enabled.mechanisms={MECH}",
                    "--config", f"sasl.mechanism.inter.broker.protocol={MECH}",
                    "--config", f"listener.name.internal.{MECH.lower()}.sasl.jaas.config={BROKER_JAAS}",
                    "--config", "ssl.keystore.type=PEM", "--config", f"ssl.keystore.location={pki.path('server.pem')}",
                    "--config", "ssl.truststore.type=PEM", "--config", f"ssl.truststore.location={pki.path('ca.pem')}",
                    "--config", "replica.fetch.backoff.ms=200").start()
        c.zkc = zkc
        c.client_ports = {i: b.port for i, b in c.brokers.items()}
        c.internal_ports = {i: _internal_port(b) for i, b in c.brokers.items()}
        c.internal = {"bootstrap.servers": ",".join(f"localhost:{p}" for p in c.internal_ports.values()),
                      "security.protocol": "SASL_SSL", "ssl.ca.location": pki.path("ca.pem"),
                      "sasl.mechanism": MECH, "sasl.username": "alice", "sasl.password": "alice-secret"}
        yield c
    finally:
        logs = c.stop() if c is not None else {}
        zkc.stop()
        zkc.close()
        zk.stop()
    for i, text in logs.items():
        assert "Traceback" not in text, f"broker {i} logged a traceback:\n{text[-4000:]}"


def _brokers(conf: dict) -> dict[int, tuple[str, int]]:
    from confluent_kafka.admin import AdminClient
    md = AdminClient(conf).list_topics(timeout=15)
    return {b.id: (b.host, b.port) for b in md.brokers.values()}


def test_registration_has_every_listener_in_kafkas_layout(cluster):
    for i in cluster.brokers:
        reg, stat = zk_json(cluster.zkc, f"/brokers/ids/{i}")
        cport, iport = cluster.client_ports[i], cluster.internal_ports[i]
        assert reg["endpoints"] == [f"CLIENT://127.0.0.1:{cport}", f"INTERNAL://localhost:{iport}"], reg
        assert reg["listener_security_protocol_map"] == {"CLIENT": "PLAINTEXT", "INTERNAL": "SASL_SSL"}
        # host/port: the PLAINTEXT listener's (Kafka keeps them for old clients)
        assert (reg["host"], reg["port"], reg["version"], reg["jmx_port"]) == ("127.0.0.1", cport, 5, -1)
        assert stat.ephemeralOwner != 0


def test_metadata_answers_the_listener_it_was_asked_on(cluster):
    assert _brokers({"bootstrap.servers": cluster.brokers[1].bootstrap}) == \
        {i: ("127.0.0.1", p) for i, p in cluster.client_ports.items()}
    assert _brokers(cluster.internal) == {i: ("localhost", p) for i, p in cluster.internal_ports.items()}


def test_clients_on_client_listener_brokers_replicate_over_internal(cluster):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    plain = {"bootstrap.servers": ",".join(b.bootstrap for b in cluster.brokers.values())}
    topic = f"two-listeners-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(plain)
    admin.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "3"})])[topic].result(30)
    wait_for(lambda: all(len(p.isrs) == 3 for p in
                         admin.list_topics(topic, timeout=10).topics[topic].partitions.values()),
             30, "every replica in the ISR (followers fetching over INTERNAL)")
    errors: list = []
    p = Producer({**plain, "acks": "all", "enable.idempotence": True})
    n = 200
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), key=str(i % 7).encode(),
                  on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert p.flush(30) == 0
    assert errors == []
    consumer = Consumer({**plain, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.time() + 30
    while len(got) < n and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    consumer.close()      # commits through the group coordinator (found at its CLIENT address)
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(n))


def test_leader_without_the_listener_is_listener_not_found(cluster):
    """A broker registered with INTERNAL only (as Kafka's brokers with other listeners would be)
    leading a partition: asked on CLIENT, the partition is LISTENER_NOT_FOUND and the broker is
    not listed; asked on INTERNAL, it leads at its INTERNAL address.  (Its address is a socket
    that accepts, so the brokers' liveness watchers keep it registered.)"""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    from engine.metadata import new_topic_id
    zkc = cluster.zkc
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(16)
    port = holder.getsockname()[1]
    reg = {"version": 5, "host": None, "port": -1, "jmx_port": -1, "timestamp": str(int(time.time() * 1000)),
           "endpoints": [f"INTERNAL://127.0.0.1:{port}"], "features": {},
           "listener_security_protocol_map": {"INTERNAL": "SASL_SSL"}}
    topic = f"internal-only-{uuid.uuid4().hex[:8]}"
    zkc.create("/brokers/ids/9", json.dumps(reg).encode(), ephemeral=True)
    try:
        tx = zkc.transaction()
        tx.create(f"/config/topics/{topic}", json.dumps({"version": 1, "config": {}}).encode())
        tx.create(f"/brokers/topics/{topic}", json.dumps({"version": 3, "topic_id": new_topic_id(),
                                                           "partitions": {"0": [9]}}).encode())
        tx.commit()
        wait_for(lambda: zkc.exists(f"/brokers/topics/{topic}/partitions/0/state"), 15, "the partition state")
        client = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
        # (LEADER_NOT_AVAILABLE until the controller has elected 9 and broker 1's view has it)
        on_client = wait_for(lambda: (lambda md: md if topic in md.topics and md.topics[topic].partitions
                                      and (md.topics[topic].partitions[0].error is None or
                                           md.topics[topic].partitions[0].error.code()
                                           != KafkaError.LEADER_NOT_AVAILABLE)
                                      else None)(client.list_topics(topic, timeout=10)), 15, "the topic led by 9")
        assert on_client.topics[topic].partitions[0].error.code() == KafkaError.LISTENER_NOT_FOUND
        assert on_client.topics[topic].partitions[0].leader == -1
        assert 9 not in on_client.brokers
        on_internal = AdminClient(cluster.internal).list_topics(topic, timeout=10)
        assert on_internal.topics[topic].partitions[0].error is None
        assert on_internal.topics[topic].partitions[0].leader == 9
        assert on_internal.brokers[9].port == port
        # KIP-951: a Produce v10 to a broker not leading it names leader 9, with no endpoint on CLIENT
        with Client(cluster.client_ports[1]) as c:
            resp = plain(c.call(0, 10, _produce(topic)))
        part = resp["responses"][0]["partition_responses"][0]
        assert (part["error_code"], part["current_leader"]["leader_id"]) == (6, 9), resp
        assert "node_endpoints" not in resp, resp
    finally:
        zkc.create(f"/admin/delete_topics/{topic}", makepath=True)
        zkc.delete("/brokers/ids/9")
        holder.close()


def _produce(topic: str) -> dict:
    return {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": build_batch([b"kip-951"])}]}]}


def test_a_follower_names_the_leader_at_the_listener_asked_on(cluster):
    """KIP-951: Produce v10 and Fetch v16 sent on CLIENT to a broker that follows the partition
    are answered NOT_LEADER_OR_FOLLOWER with CurrentLeader -- the leader and epoch of the partition
    state in ZooKeeper -- and NodeEndpoints naming that leader at its CLIENT address (its INTERNAL
    one is registered under another name and port); older versions carry neither."""
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"kip951-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    state_path = f"/brokers/topics/{topic}/partitions/0/state"
    state = wait_for(lambda: cluster.zkc.exists(state_path) and zk_json(cluster.zkc, state_path)[0], 15,
                     "the partition state")
    leader, epoch = state["leader"], state["leader_epoch"]
    follower = next(i for i in cluster.brokers if i != leader)
    topic_id = _topic_uuid(zk_json(cluster.zkc, f"/brokers/topics/{topic}")[0]["topic_id"])
    wanted_leader = {"leader_id": leader, "leader_epoch": epoch}
    wanted_nodes = [{"node_id": leader, "host": "127.0.0.1", "port": cluster.client_ports[leader], "rack": None}]

    def fetch(version):
        return {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
                "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
                    {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                     "current_leader_epoch": -1, "log_start_offset": -1}]}]}

    with Client(cluster.client_ports[follower]) as c:
        resp = wait_for(lambda: (lambda r: r if r["responses"][0]["partition_responses"][0]["error_code"] == 6
                                 else None)(plain(c.call(0, 10, _produce(topic)))), 15, "NOT_LEADER_OR_FOLLOWER")
        assert resp["responses"][0]["partition_responses"][0]["current_leader"] == wanted_leader, resp
        assert resp["node_endpoints"] == wanted_nodes, resp
        old = plain(c.call(0, 9, _produce(topic)))
        assert old["responses"][0]["partition_responses"][0]["error_code"] == 6
        assert "current_leader" not in old["responses"][0]["partition_responses"][0]
        resp = plain(c.call(1, 16, fetch(16)))
        (part,) = resp["responses"][0]["partitions"]
        assert (part["error_code"], part["current_leader"]) == (6, wanted_leader), resp
        assert resp["node_endpoints"] == wanted_nodes and resp["responses"][0]["topic_id"] == str(topic_id), resp
        resp = plain(c.call(1, 15, fetch(15)))               # v15: neither (Kafka fills them from v16)
        assert resp["responses"][0]["partitions"][0]["error_code"] == 6, resp
        assert "current_leader" not in resp["responses"][0]["partitions"][0] and "node_endpoints" not in resp
    # the leader itself takes the same requests
    with Client(cluster.client_ports[leader]) as c:
        resp = plain(c.call(0, 10, _produce(topic)))
        assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp
        assert "node_endpoints" not in resp
        resp = plain(c.call(1, 16, fetch(16)))
        assert resp["responses"][0]["partitions"][0]["error_code"] == 0, resp
    assert zk_json(cluster.zkc, state_path)[0]["leader_epoch"] == epoch     # (nothing moved meanwhile)
