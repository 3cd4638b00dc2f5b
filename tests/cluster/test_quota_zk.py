"""Client quotas in cluster mode (engine/cluster/quota_zk.py): a quota set through one broker is
written to ZooKeeper as Kafka's ZooKeeper-mode brokers kept it (/config/users/<user>[/clients/<id>],
/config/clients/<id>, /config/ips/<ip>, <default> entries, a /config/changes notification), every broker takes it,
and a user's SCRAM credentials in the same node are never lost to a quota change (nor the other
way round)."""

from __future__ import annotations

from engine.cluster.quota_zk import ZkClientQuotas
from engine.cluster.scram_zk import ZkScramCredentials
from engine.cluster.zk import ZkStore
from engine.security.credentials import ScramCredentialStore, ScramUpsertion
from engine.security.quotas import ClientQuotaStore, QuotaAlteration
from tests.cluster.conftest import wait_for, zk_json

ALICE = (("user", "alice"),)
ALICE_C1 = (("user", "alice"), ("client-id", "c1"))
DEFAULT_CLIENT = (("client-id", None),)
IP = (("ip", "10.0.0.1"),)
DEFAULT_IP = (("ip", None),)


def test_quotas_shared_through_zookeeper(tmp_path, zk, zk_client):
    stores, sessions = [], []
    for i in (1, 2):
        (tmp_path / f"b{i}").mkdir()
        session = ZkStore(zk.connect).start()
        sessions.append(session)
        q = ZkClientQuotas(ClientQuotaStore(str(tmp_path / f"b{i}")))
        q.share(session)
        stores.append(q)
    q1, q2 = stores
    scram = ZkScramCredentials(ScramCredentialStore(str(tmp_path / "b1")))
    scram.share(sessions[0])
    try:
        # a SCRAM credential first: the quota change keeps it
        assert scram.alter([], [ScramUpsertion("alice", 2, 4096, b"salt" * 4, b"p" * 64)])[0].error_code == 0
        res = q1.alter([
            QuotaAlteration(tuple(ALICE), (("producer_byte_rate", 1048576.0), ("request_percentage", 12.5))),
            QuotaAlteration(tuple(ALICE_C1), (("consumer_byte_rate", 2048.0),)),
            QuotaAlteration(tuple(DEFAULT_CLIENT), (("producer_byte_rate", 1000.0), ("controller_mutation_rate", 2.5))),
            QuotaAlteration((("user", "bad"),), (("producer_byte_rate", -1.0),)),
            QuotaAlteration(IP, (("connection_creation_rate", 5.0),)),
            QuotaAlteration(DEFAULT_IP, (("connection_creation_rate", 50.0),))])
        assert [code for code, _ in res] == [0, 0, 0, 42, 0, 0]
        node, _ = zk_json(zk_client, "/config/users/alice")
        assert node["version"] == 1
        assert node["config"]["producer_byte_rate"] == "1048576"
        assert node["config"]["request_percentage"] == "12.5"
        assert node["config"]["SCRAM-SHA-512"].startswith("salt=")
        assert zk_json(zk_client, "/config/users/alice/clients/c1")[0]["config"] == {"consumer_byte_rate": "2048"}
        assert zk_json(zk_client, "/config/clients/<default>")[0]["config"] == {
            "producer_byte_rate": "1000", "controller_mutation_rate": "2.5"}
        # KIP-612's ip entities: /config/ips/<ip>, as Kafka's ZooKeeper-mode brokers kept them
        assert zk_json(zk_client, "/config/ips/10.0.0.1")[0]["config"] == {"connection_creation_rate": "5"}
        assert zk_json(zk_client, "/config/ips/<default>")[0]["config"] == {"connection_creation_rate": "50"}
        assert zk_client.exists("/config/users/bad") is None
        changes = [zk_json(zk_client, f"/config/changes/{n}")[0] for n in zk_client.get_children("/config/changes")]
        for path in ("users/alice", "users/alice/clients/c1", "clients/<default>", "ips/10.0.0.1", "ips/<default>"):
            assert {"version": 2, "entity_path": path} in changes
        # the other broker takes them
        expected = {ALICE: {"producer_byte_rate": 1048576.0, "request_percentage": 12.5},
                    ALICE_C1: {"consumer_byte_rate": 2048.0},
                    DEFAULT_CLIENT: {"producer_byte_rate": 1000.0, "controller_mutation_rate": 2.5},
                    IP: {"connection_creation_rate": 5.0}, DEFAULT_IP: {"connection_creation_rate": 50.0}}
        wait_for(lambda: q2.snapshot() == expected, 30, "the quotas on broker 2")
        assert q1.snapshot() == expected
        # a SCRAM change keeps the quotas; a quota removal keeps the SCRAM credential
        assert scram.alter([], [ScramUpsertion("alice", 1, 4096, b"salt" * 4, b"q" * 32)])[0].error_code == 0
        config = zk_json(zk_client, "/config/users/alice")[0]["config"]
        assert config["producer_byte_rate"] == "1048576" and "SCRAM-SHA-256" in config
        assert q2.alter([QuotaAlteration(tuple(ALICE), (("producer_byte_rate", None), ("request_percentage", None)))]) \
            == [(0, None)]
        config = zk_json(zk_client, "/config/users/alice")[0]["config"]
        assert set(config) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        wait_for(lambda: ALICE not in q1.snapshot(), 30, "the removal on broker 1")
        assert scram.get("alice", "SCRAM-SHA-512") is not None
        # a quota written by another tool (Kafka's ZooKeeper-mode form) is taken too
        zk_client.create("/config/clients/tool", b'{"version":1,"config":{"consumer_byte_rate":"5000"}}',
                         makepath=True)
        zk_client.create("/config/changes/config_change_", b'{"version":2,"entity_path":"clients/tool"}',
                         sequence=True)
        wait_for(lambda: q1.snapshot().get((("client-id", "tool"),)) == {"consumer_byte_rate": 5000.0}, 30,
                 "a quota written by another tool")
        zk_client.create("/config/ips/10.9.9.9", b'{"version":1,"config":{"connection_creation_rate":"7"}}')
        zk_client.create("/config/changes/config_change_", b'{"version":2,"entity_path":"ips/10.9.9.9"}',
                         sequence=True)
        wait_for(lambda: q2.snapshot().get((("ip", "10.9.9.9"),)) == {"connection_creation_rate": 7.0}, 30,
                 "an ip quota written by another tool")
        # the local file is a cache of ZooKeeper's: a restart starts from it
        assert ClientQuotaStore(str(tmp_path / "b2")).snapshot() == q2.snapshot()
    finally:
        for s in sessions:
            s.close()


def _call(bootstrap: str, key: int, version: int, data: dict) -> dict:
    import socket

    from engine.protocol import messages as m
    from engine.protocol.primitives import Reader
    from tests.security.test_broker_sasl import _read_frame, _request
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as s:
        s.sendall(_request(key, version, m.encode(key, version, data, response=False)))
        frame = _read_frame(s)
    assert frame is not None
    return m.read_struct(m._entity(key, version, True), Reader(frame[5:]))


def test_a_quota_set_on_one_broker_is_described_by_another(cluster_factory, zk_client):
    from engine.protocol import messages as m
    c = cluster_factory(2)
    b1, b2 = c.brokers[1], c.brokers[2]
    r = _call(b1.bootstrap, m.ApiKey.ALTER_CLIENT_QUOTAS, 1, {"entries": [
        {"entity": [{"entity_type": "user", "entity_name": "zoe"}],
         "ops": [{"key": "producer_byte_rate", "value": 4096.0, "remove": False}]}], "validate_only": False})
    assert [(e["error_code"], e["error_message"]) for e in r["entries"]] == [(0, None)]
    assert zk_json(zk_client, "/config/users/zoe")[0]["config"] == {"producer_byte_rate": "4096"}

    def described() -> list:
        d = _call(b2.bootstrap, m.ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
        return [([(e["entity_type"], e["entity_name"]) for e in x["entity"]],
                 [(v["key"], v["value"]) for v in x["values"]]) for x in d["entries"]]
    wait_for(lambda: described() == [([("user", "zoe")], [("producer_byte_rate", 4096.0)])], 30,
             "the quota described by broker 2")
