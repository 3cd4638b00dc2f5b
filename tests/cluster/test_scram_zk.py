"""SCRAM credentials in cluster mode (engine/cluster/scram_zk.py): a user added through one broker
is written to ZooKeeper as Kafka kept it and every broker's SASL listener takes it."""

from __future__ import annotations

import re

from tests.cluster.conftest import wait_for, zk_json


def _sasl_port(broker) -> int:
    m = re.search(r"listener SASL_PLAINTEXT \(SASL_PLAINTEXT\) on [\d.]+:(\d+)", broker.log_text())
    assert m, broker.log_text()[-2000:]
    return int(m.group(1))


def _can_login(port: int, user: str, password: str) -> bool:
    from confluent_kafka.admin import AdminClient
    errors = []
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
                         "error_cb": errors.append})
    try:
        admin.list_topics(timeout=5)
        return True
    except Exception:
        return False


def test_a_user_added_on_one_broker_logs_in_on_another(cluster_factory, zk_client):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    c = cluster_factory(2, "--config", "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                        "--config", "sasl.enabled.mechanisms=SCRAM-SHA-512")
    b1, b2 = c.brokers[1], c.brokers[2]
    admin = AdminClient({"bootstrap.servers": b1.bootstrap})
    futs = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "zoe", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"zoe-secret")])
    futs["zoe"].result(timeout=30)
    node, _ = zk_json(zk_client, "/config/users/zoe")
    assert node["version"] == 1
    assert re.fullmatch(r"salt=[^,]+,stored_key=[^,]+,server_key=[^,]+,iterations=4096",
                        node["config"]["SCRAM-SHA-512"])
    changes = [zk_json(zk_client, f"/config/changes/{n}")[0]
               for n in zk_client.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "users/zoe"} in changes
    wait_for(lambda: _can_login(_sasl_port(b2), "zoe", "zoe-secret"), 30, "zoe's login on broker 2")
    assert not _can_login(_sasl_port(b2), "zoe", "wrong")
    # deleted through broker 2: broker 1 refuses the login
    from confluent_kafka.admin import UserScramCredentialDeletion
    admin2 = AdminClient({"bootstrap.servers": b2.bootstrap})
    admin2.alter_user_scram_credentials([UserScramCredentialDeletion(
        "zoe", ScramMechanism.SCRAM_SHA_512)])["zoe"].result(timeout=30)
    wait_for(lambda: not _can_login(_sasl_port(b1), "zoe", "zoe-secret"), 30, "zoe refused on broker 1")
    assert zk_json(zk_client, "/config/users/zoe")[0]["config"] == {}
