"""Admin APIs through real clients: CreatePartitions, DescribeConfigs,
IncrementalAlterConfigs, DeleteRecords, DescribeCluster (confluent-kafka's
AdminClient and kafka-python's KafkaAdminClient) and OffsetForLeaderEpoch."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    ResourceType,
)

from .conftest import connect, request_frame


def produce(broker, topic, n, partitions=1):
    def work():
        eng = broker.engine
        if topic not in eng.list_topics():
            eng.create_topic(topic, partitions)
        with eng.producer(linger_ms=0) as p:
            for i in range(n):
                p.send(topic, b"v%d" % i, partition=i % partitions)
    broker.call(work)


def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def wait(futures):
    return {k: f.result(timeout=15) for k, f in futures.items()}


def test_create_partitions_confluent(broker):
    produce(broker, "t", 1)
    a = admin(broker)
    wait(a.create_partitions([NewPartitions("t", 4)]))
    assert broker.call(lambda: broker.engine.partitions_for("t")) == 4
    with pytest.raises(Exception) as info:  # shrinking is refused with INVALID_PARTITIONS
        wait(a.create_partitions([NewPartitions("t", 2)]))
    assert "INVALID_PARTITIONS" in str(info.value) or "partitions" in str(info.value).lower()
    wait(a.create_partitions([NewPartitions("t", 6)], validate_only=True))
    assert broker.call(lambda: broker.engine.partitions_for("t")) == 4


def test_describe_and_incrementally_alter_topic_configs_confluent(broker):
    produce(broker, "t", 1)
    a = admin(broker)
    res = ConfigResource(ResourceType.TOPIC, "t")
    configs = wait(a.describe_configs([res]))[res]
    assert configs["retention.ms"].value == "604800000"
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["cleanup.policy"].value == "delete"
    res.add_incremental_config(ConfigEntry("retention.ms", "3600000",
                                           incremental_operation=AlterConfigOpType.SET))
    res.add_incremental_config(ConfigEntry("cleanup.policy", "compact",
                                           incremental_operation=AlterConfigOpType.APPEND))
    wait(a.incremental_alter_configs([res]))
    cfg = broker.call(lambda: broker.engine.topic_config("t"))
    assert cfg["retention.ms"] == 3600000 and cfg["cleanup.policy"] == "delete,compact"
    described = wait(a.describe_configs([ConfigResource(ResourceType.TOPIC, "t")]))
    entry = next(iter(described.values()))["retention.ms"]
    assert entry.value == "3600000" and not entry.is_default
    bad = ConfigResource(ResourceType.TOPIC, "t")
    bad.add_incremental_config(ConfigEntry("no.such.key", "1", incremental_operation=AlterConfigOpType.SET))
    with pytest.raises(Exception) as info:
        wait(a.incremental_alter_configs([bad]))
    assert "no.such.key" in str(info.value) or "INVALID_CONFIG" in str(info.value)
    delete = ConfigResource(ResourceType.TOPIC, "t")
    delete.add_incremental_config(ConfigEntry("retention.ms", None,
                                              incremental_operation=AlterConfigOpType.DELETE))
    wait(a.incremental_alter_configs([delete]))
    assert broker.call(lambda: broker.engine.topic_config("t"))["retention.ms"] == 604800000


def test_describe_configs_unknown_topic_confluent(broker):
    a = admin(broker)
    res = ConfigResource(ResourceType.TOPIC, "nope")
    with pytest.raises(KafkaException):     # the broker's error answer, not a timeout
        wait(a.describe_configs([res]))


def test_delete_records_confluent(broker):
    produce(broker, "t", 100)
    a = admin(broker)
    result = wait(a.delete_records([CkTopicPartition("t", 0, 40)]))
    (tp_result,) = result.values()
    assert tp_result.low_watermark == 40
    plog = broker.engine.log("t", 0)
    assert broker.call(lambda: plog.log_start_offset) == 40


def test_describe_cluster_confluent(broker):
    a = admin(broker)
    desc = a.describe_cluster().result(timeout=15)
    assert desc.cluster_id == broker.engine.cluster_id
    assert [n.id for n in desc.nodes] == [0]
    assert desc.nodes[0].port == broker.port


def test_kafka_python_admin_configs_partitions_cluster(broker):
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient
    from kafka.admin import NewPartitions as KpNewPartitions

    broker.call(lambda: broker.engine.create_topic("t", 1, {"retention.ms": 3600000}))
    produce(broker, "t", 10)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        a.create_partitions({"t": KpNewPartitions(3)})
        assert broker.call(lambda: broker.engine.partitions_for("t")) == 3
        # kafka-python's default filter: only keys whose value is not the default
        res = a.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "t")])
        modified = res["topic"]["t"]
        assert list(modified) == ["retention.ms"]
        assert "3600000" in str(modified["retention.ms"])
        cluster = a.describe_cluster()
        assert cluster["cluster_id"] == broker.engine.cluster_id
    finally:
        a.close()


def test_offset_for_leader_epoch_raw(broker):
    """OffsetForLeaderEpoch v2: the end offset of epoch 0 is the log end offset (one epoch so far)."""
    import struct

    produce(broker, "t", 25)
    body = (struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", 1)
            + struct.pack(">iii", 0, -1, 0))  # partition 0, current epoch unknown, epoch 0
    s = connect(broker.port)
    try:
        s.sendall(request_frame(23, 2, 7, body))
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    finally:
        s.close()
    corr, throttle, ntopics = struct.unpack_from(">iii", data, 0)
    assert (corr, ntopics) == (7, 1)
    pos = 12
    nlen = struct.unpack_from(">h", data, pos)[0]
    pos += 2 + nlen
    nparts = struct.unpack_from(">i", data, pos)[0]
    err, part, epoch, end = struct.unpack_from(">hiiq", data, pos + 4)
    assert (nparts, err, part, epoch, end) == (1, 0, 0, 0, 25)


def test_describe_configs_static_broker_source_and_synonyms(make_broker):
    """A topic default set in the broker's configuration is STATIC_BROKER_CONFIG, with the
    synonyms Kafka lists (override, static broker key, broker default); broker keys the
    configuration set are STATIC_BROKER_CONFIG, the others DEFAULT_CONFIG."""
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    b = make_broker({"log.segment.bytes": 2_000_000, "log.retention.hours": 24})
    b.call(lambda: b.engine.create_topic("t", 1, {"segment.bytes": 100_000}))
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
    try:
        got = a.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "t")],
                                 include_synonyms=True, config_filter="all")["topic"]["t"]
        syn = {k: [(s["name"], s["value"], s["source"]) for s in got[k]["synonyms"]] for k in got}
        assert syn["segment.bytes"] == [("segment.bytes", "100000", "DYNAMIC_TOPIC_CONFIG"),
                                        ("log.segment.bytes", "2000000", "STATIC_BROKER_CONFIG"),
                                        ("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")]
        assert (got["retention.ms"]["value"], got["retention.ms"]["config_source"]) \
            == ("86400000", "STATIC_BROKER_CONFIG")
        assert syn["segment.ms"] == []                       # log.roll.ms: null default in Kafka
        assert got["segment.index.bytes"]["config_source"] == "DEFAULT_CONFIG"
        broker = a.describe_configs([KpConfigResource(ConfigResourceType.BROKER, "0")],
                                    config_filter="all")["broker"]["0"]
        assert broker["log.segment.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert broker["log.index.size.max.bytes"]["config_source"] == "DEFAULT_CONFIG"
    finally:
        a.close()
