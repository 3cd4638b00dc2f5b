"""The replication gauges of the Prometheus endpoint (engine/server/metrics.py) on in-process
brokers: partition and leader counts per broker, UnderReplicatedPartitions and the min-ISR
gauges when a follower drops out of the ISR, back to 0 when it rejoins."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from .conftest import produce, wait_until


def gauges(node) -> dict:
    """{(name, labels as a sorted tuple): value} of one scrape."""
    out = {}
    for fam in text_string_to_metric_families(node.bg.broker.enable_metrics().scrape().decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def g(node, name: str, **labels):
    return gauges(node).get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def test_under_replicated_and_min_isr_gauges(cluster):
    c = cluster(3)
    c.create("t", [0, 1, 2], config={"min.insync.replicas": "2"})
    leader, follower = c.nodes[0], c.nodes[1]
    assert produce(leader.address, "t", [b"a"], acks=-1) == (0, 0)
    rm = "kafka_server_replicamanager_"
    assert g(leader, rm + "partitioncount") == 1 and g(leader, rm + "leadercount") == 1
    assert g(follower, rm + "partitioncount") == 1 and g(follower, rm + "leadercount") == 0
    assert g(leader, rm + "underreplicatedpartitions") == 0
    assert g(leader, "kafka_cluster_partition_underreplicated", partition=0, topic="t") == 0
    assert g(follower, "kafka_cluster_partition_underreplicated", partition=0, topic="t") is None

    c.stop(2)
    wait_until(lambda: c.isr("t") == [0, 1], what="ISR shrink to [0, 1]")
    assert g(leader, rm + "underreplicatedpartitions") == 1
    assert g(leader, "kafka_cluster_partition_underreplicated", partition=0, topic="t") == 1
    assert g(leader, rm + "atminisrpartitioncount") == 1
    assert g(leader, rm + "underminisrpartitioncount") == 0
    assert g(follower, rm + "underreplicatedpartitions") == 0      # counted by the leader only

    c.stop(1)
    wait_until(lambda: c.isr("t") == [0], what="ISR shrink to [0]")
    assert g(leader, rm + "underminisrpartitioncount") == 1 and g(leader, rm + "atminisrpartitioncount") == 0

    node = c.start(1)
    node.rm.become_follower("t", 0, 0, 1, [0, 1, 2], c.view.partition_epoch("t", 0))
    wait_until(lambda: c.isr("t") == [0, 1], what="ISR expand to [0, 1]")
    assert g(leader, rm + "underminisrpartitioncount") == 0 and g(leader, rm + "underreplicatedpartitions") == 1
    assert g(leader, "kafka_controller_kafkacontroller_activecontrollercount") == 0   # the view names none
