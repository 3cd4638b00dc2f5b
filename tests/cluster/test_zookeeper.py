"""Cluster metadata in a real ZooKeeper: registration, the controller, partition states.

What is checked is what Kafka's ZooKeeper-era brokers leave in ZooKeeper (the znode layout of
engine/cluster/zk.py), read with kazoo, while real ``python -m engine serve`` processes run.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from tests.cluster.conftest import SESSION_MS, controller_id, wait_for, zk_json
from tests.serving import ServeProcess


def _admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def _create(bootstrap, name, partitions, rf, config=None):
    from confluent_kafka.admin import NewTopic
    admin = _admin(bootstrap)           # kept: the futures die with their client
    fut = admin.create_topics([NewTopic(name, partitions, rf, config=config or {})],
                              operation_timeout=20)[name]
    fut.result(30)


def _states(zkc, topic):
    a, _ = zk_json(zkc, f"/brokers/topics/{topic}")
    out = {}
    for p in sorted(int(x) for x in a["partitions"]):
        st, stat = zk_json(zkc, f"/brokers/topics/{topic}/partitions/{p}/state")
        out[p] = (a["partitions"][str(p)], st, stat.version)
    return out


def test_registration_and_duplicate_id(tmp_path, zk, zk_client, cluster_factory):
    c = cluster_factory(2)
    ids = sorted(int(x) for x in zk_client.get_children("/brokers/ids"))
    assert ids == [1, 2]
    reg, stat = zk_json(zk_client, "/brokers/ids/1")
    b1 = c.brokers[1]
    assert stat.ephemeralOwner != 0                            # ephemeral: gone with the session
    assert reg["host"] == "127.0.0.1" and reg["port"] == b1.port
    assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{b1.port}"]
    assert reg["jmx_port"] == -1 and reg["version"] == 5 and int(reg["timestamp"]) > 0
    cid, _ = zk_json(zk_client, "/cluster/id")
    assert len(cid["id"]) == 22
    # a second broker with id 1: refused, saying which broker holds the id
    dup = ServeProcess(tmp_path / "dup", "--broker-id", "1", "--zookeeper", zk.connect)
    with pytest.raises(RuntimeError) as e:
        dup.start()
    assert "broker id 1 is already registered" in str(e.value)
    assert f"127.0.0.1:{b1.port}" in str(e.value)
    assert dup.proc.returncode not in (0, None)
    # the first registration is untouched
    assert zk_json(zk_client, "/brokers/ids/1")[0]["port"] == b1.port
    # a clean stop removes the registration at once (the session is closed, not left to expire)
    c.brokers[2].stop()
    assert sorted(int(x) for x in zk_client.get_children("/brokers/ids")) == [1]
    # killed and restarted at once on the same address: the old registration is its own previous
    # incarnation, so the broker waits for that session to expire instead of refusing the id
    owner = zk_client.get("/brokers/ids/1")[1].ephemeralOwner
    b1.kill9()
    b1.start()
    reg, stat = zk_json(zk_client, "/brokers/ids/1")
    assert stat.ephemeralOwner != owner and reg["port"] == b1.port


def test_controller_failover(zk_client, cluster_factory):
    c = cluster_factory(3)
    ctrl = wait_for(lambda: controller_id(zk_client), what="a controller")
    assert ctrl in (1, 2, 3)
    epoch = int(zk_client.get("/controller_epoch")[0])
    assert epoch >= 1
    c.brokers[ctrl].kill9()
    # the dead controller's ephemeral node goes with its session; another broker takes the seat
    new = wait_for(lambda: (lambda i: i if i not in (None, ctrl) else None)(controller_id(zk_client)),
                   timeout=SESSION_MS / 1000 + 20, what="a new controller")
    assert new in {1, 2, 3} - {ctrl}
    new_epoch = int(zk_client.get("/controller_epoch")[0])
    assert new_epoch > epoch
    # the old controller comes back as an ordinary broker: it neither takes the seat nor bumps
    # the epoch (unless the new controller's own session lapsed meanwhile, on a loaded machine)
    c.brokers[ctrl].start()
    wait_for(lambda: str(ctrl) in zk_client.get_children("/brokers/ids"), what="re-registration")
    now = zk_json(zk_client, "/controller")[0]["brokerid"]
    if now == new:
        assert int(zk_client.get("/controller_epoch")[0]) == new_epoch


def test_topic_rf3_states_and_election_from_isr(zk_client, cluster_factory):
    c = cluster_factory(3)
    topic = f"rf3-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 6, 3, {"retention.ms": "3600000"})
    states = wait_for(lambda: len(zk_client.get_children(f"/brokers/topics/{topic}/partitions")) == 6
                      and _states(zk_client, topic), what="6 partition states")
    a, _ = zk_json(zk_client, f"/brokers/topics/{topic}")
    assert a["version"] == 3 and len(a["topic_id"]) == 22
    leaders = [replicas[0] for replicas, _st, _v in states.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]               # leaders balanced
    for replicas, st, _version in states.values():
        assert sorted(replicas) == [1, 2, 3]
        assert st["leader"] == replicas[0] and st["leader_epoch"] == 0
        assert sorted(st["isr"]) == [1, 2, 3] and st["version"] == 1
        assert st["controller_epoch"] >= 1
    assert zk_json(zk_client, f"/config/topics/{topic}")[0]["config"] == {"retention.ms": "3600000"}
    # every broker holds local logs of the topic, under the cluster's topic id
    def local_id(b):
        try:
            with open(os.path.join(b.data, f"{topic}-0", "partition.metadata")) as f:
                return f.read()
        except FileNotFoundError:
            return ""
    for b in c.brokers.values():      # (made by the broker's watch, just after the states)
        wait_for(lambda b=b: a["topic_id"] in local_id(b), timeout=10, what=f"the topic id in {b.data}")

    c.brokers[2].kill9()

    def moved():
        s = _states(zk_client, topic)
        return all(2 not in st["isr"] for _r, st, _v in s.values()) and s
    after = wait_for(moved, timeout=SESSION_MS / 1000 + 20, what="broker 2 out of every ISR")
    for p, (replicas, st, version) in after.items():
        before = states[p][1]
        assert version > states[p][2]                          # a conditional write each
        if before["leader"] == 2:
            # elected from the ISR in assignment order, leader epoch bumped
            assert st["leader"] == [b for b in replicas if b != 2][0]
            assert st["leader_epoch"] == 1
        else:
            assert st["leader"] == before["leader"] and st["leader_epoch"] == 0
        assert sorted(st["isr"]) == sorted(b for b in replicas if b != 2)


def _set_state(zkc, topic, p, **changes):
    import json
    st, stat = zk_json(zkc, f"/brokers/topics/{topic}/partitions/{p}/state")
    st.update(changes)
    zkc.set(f"/brokers/topics/{topic}/partitions/{p}/state", json.dumps(st).encode(), version=stat.version)


@pytest.mark.parametrize("unclean", [False, True])
def test_no_leader_without_isr_unless_unclean(zk_client, cluster_factory, unclean):
    c = cluster_factory(2)
    topic = f"isr-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 1, 2,
            {"unclean.leader.election.enable": "true"} if unclean else {})
    (replicas, st, _v), = wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state")
                                   and _states(zk_client, topic), what="the state").values()
    leader = st["leader"]
    other = [b for b in replicas if b != leader][0]
    # the leader shrank the ISR to itself (what a leader's alter_isr writes when a follower lags)
    _set_state(zk_client, topic, 0, isr=[leader])
    c.brokers[leader].kill9()

    def settled():
        _r, s, _v = _states(zk_client, topic)[0]
        return s["leader"] != leader and s
    s = wait_for(settled, timeout=SESSION_MS / 1000 + 20, what="the controller's decision")
    if unclean:
        assert s["leader"] == other and s["isr"] == [other] and s["leader_epoch"] == 1
    else:
        assert s["leader"] == -1 and s["isr"] == [leader] and s["leader_epoch"] == 1
        # the ISR member returns: elected cleanly
        c.brokers[leader].start()
        back = wait_for(lambda: _states(zk_client, topic)[0][1]["leader"] == leader
                        and _states(zk_client, topic)[0][1], what="clean election of the returning ISR member")
        assert back["leader_epoch"] == 2


def test_create_partitions_and_delete_topic(zk_client, cluster_factory):
    c = cluster_factory(3, "--config", "default.replication.factor=2", "--config", "num.partitions=2")
    topic = f"cp-{uuid.uuid4().hex[:6]}"
    bootstrap = c.brokers[2].bootstrap
    _create(bootstrap, topic, 2, 2)
    from confluent_kafka.admin import NewPartitions
    admin = _admin(bootstrap)
    admin.create_partitions([NewPartitions(topic, 5)], operation_timeout=20)[topic].result(30)
    a, stat = zk_json(zk_client, f"/brokers/topics/{topic}")
    assert sorted(int(p) for p in a["partitions"]) == [0, 1, 2, 3, 4] and stat.version == 1
    assert all(len(r) == 2 and len(set(r)) == 2 for r in a["partitions"].values())
    wait_for(lambda: len(zk_client.get_children(f"/brokers/topics/{topic}/partitions")) == 5,
             what="states of the new partitions")
    # a config change through one broker lands in /config/topics and on every broker
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    res = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("retention.ms", "1234567", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    assert zk_json(zk_client, f"/config/topics/{topic}")[0]["config"] == {"retention.ms": "1234567"}

    def local_config(b):
        with open(os.path.join(b.data, "engine-topics.json")) as f:
            return json.load(f)["topics"][topic]["config"]
    for b in c.brokers.values():
        wait_for(lambda b=b: local_config(b).get("retention.ms") in (1234567, "1234567"), timeout=10,
                 what=f"retention.ms on {b.data}")
    # auto-creation (Metadata for an unknown topic) goes through ZooKeeper with the broker defaults
    from confluent_kafka import Producer
    auto = f"auto-{uuid.uuid4().hex[:6]}"
    prod = Producer({"bootstrap.servers": c.brokers[3].bootstrap, "broker.address.family": "v4"})
    delivered = []
    prod.produce(auto, b"v", on_delivery=lambda err, msg: delivered.append(err))
    prod.flush(30)
    assert delivered == [None]
    a2, _ = zk_json(zk_client, f"/brokers/topics/{auto}")
    assert sorted(a2["partitions"]) == ["0", "1"] and all(len(r) == 2 for r in a2["partitions"].values())

    admin.delete_topics([topic], operation_timeout=20)[topic].result(30)
    assert zk_client.exists(f"/brokers/topics/{topic}") is None
    assert zk_client.exists(f"/config/topics/{topic}") is None
    assert zk_client.exists(f"/admin/delete_topics/{topic}") is None
    for b in c.brokers.values():       # every broker drops its local logs
        wait_for(lambda b=b: not os.path.exists(os.path.join(b.data, f"{topic}-0")), timeout=10,
                 what=f"{topic}-0 removed from {b.data}")
