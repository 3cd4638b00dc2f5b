"""Every served version of every API against a live broker.

Requests are written and responses read with kio (Kafka's JSON schemas), so
each version's field layout is checked independently of our own codecs."""

from __future__ import annotations

import io
import struct
import time
import uuid

import pytest

from engine.protocol import messages as m
from engine.records import build_batch

from .conftest import connect, recv_frame

kio_serial = pytest.importorskip("kio.serial")


def call(port: int, key: int, version: int, data: dict):
    from kio.serial import entity_reader, entity_writer
    req_cls = m._entity(key, version, False)
    resp_cls = m._entity(key, version, True)
    buf = io.BytesIO()
    entity_writer(req_cls)(buf, m._build(req_cls, data))
    flex = m.is_flexible(key, version)
    header = struct.pack(">hhih", key, version, 99, 4) + b"test" + (b"\x00" if flex else b"")
    frame = header + buf.getvalue()
    with connect(port) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        resp = recv_frame(s)
    assert struct.unpack_from(">i", resp)[0] == 99
    pos = 4 + (1 if flex and key != 18 else 0)
    body = memoryview(resp[pos:]).toreadonly()
    entity, size = entity_reader(resp_cls)(body, 0)
    assert size == len(body)
    return entity


def versions(key):
    lo, hi = m.SUPPORTED[key]
    return range(max(lo, 3) if key == 0 else lo, hi + 1)


@pytest.fixture(scope="module")
def vbroker(tmp_path_factory):
    from .conftest import BrokerThread
    b = BrokerThread(str(tmp_path_factory.mktemp("versions")))
    b.call(lambda: b.engine.create_topic("v", 2))
    b.call(lambda: b.engine.log("v", 0).append(bytearray(build_batch(
        [(b"a", None, [], 1000), (b"b", None, [], 2000), (b"c", None, [], 3000)]))))
    yield b
    b.stop()


@pytest.mark.parametrize("version", versions(18))
def test_api_versions(vbroker, version):
    data = {"client_software_name": "t", "client_software_version": "1"}
    resp = call(vbroker.port, 18, version, data)
    assert int(resp.error_code) == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys} == m.SUPPORTED


@pytest.mark.parametrize("version", versions(3))
def test_metadata(vbroker, version):
    zero = uuid.UUID(int=0)
    resp = call(vbroker.port, 3, version, {"topics": [{"name": "v", "topic_id": zero},
                                                      {"name": "bad name!", "topic_id": zero}],
                                          "allow_auto_topic_creation": True,
                                          "include_cluster_authorized_operations": False,
                                          "include_topic_authorized_operations": False})
    assert [(b.node_id, b.port) for b in resp.brokers] == [(0, vbroker.port)]
    topics = {t.name: t for t in resp.topics}
    assert int(topics["v"].error_code) == 0
    assert [(p.partition_index, p.leader_id, p.replica_nodes) for p in topics["v"].partitions] == \
        [(0, 0, (0,)), (1, 0, (0,))]
    assert int(topics["bad name!"].error_code) == 17      # INVALID_TOPIC_EXCEPTION
    if version >= 2:
        assert resp.cluster_id
    if version >= 10:   # topic ids (librdkafka's describe_topics shows them)
        tid = topics["v"].topic_id
        assert tid != zero
    if version >= 12:   # a topic named by id only
        other = uuid.UUID(int=12345)
        by_id = call(vbroker.port, 3, version, {"topics": [{"name": None, "topic_id": tid},
                                                           {"name": None, "topic_id": other}],
                                                "allow_auto_topic_creation": False,
                                                "include_topic_authorized_operations": False})
        assert [(t.name, t.topic_id, int(t.error_code)) for t in by_id.topics] == \
            [(None, other, 100), ("v", tid, 0)]        # UNKNOWN_TOPIC_ID for the unknown one
        java = call(vbroker.port, 3, version, {"topics": [{"name": "", "topic_id": tid}],
                                               "allow_auto_topic_creation": False,
                                               "include_topic_authorized_operations": False})
        assert [(t.name, t.topic_id, int(t.error_code)) for t in java.topics] == [("v", tid, 0)]


@pytest.mark.parametrize("version", versions(0))
def test_produce(vbroker, version):
    batch = build_batch([b"p%d" % version])
    resp = call(vbroker.port, 0, version, {
        "transactional_id": None, "acks": -1, "timeout": 1000,
        "topic_data": [{"name": "v", "partition_data": [{"index": 1, "records": batch}]}]})
    (topic,) = resp.responses
    (part,) = topic.partition_responses
    assert int(part.error_code) == 0 and part.base_offset >= 0
    assert vbroker.call(lambda: vbroker.engine.log("v", 1).log_end_offset) > part.base_offset


@pytest.mark.parametrize("version", versions(1))
def test_fetch(vbroker, version):
    """v13+ names the topic by id (an unknown id: UNKNOWN_TOPIC_ID, the id echoed)."""
    from engine.server.common import _topic_uuid
    tid = _topic_uuid(vbroker.call(lambda: vbroker.engine.topic_metadata("v").topic_id))
    unknown = uuid.uuid4()
    parts = [{"partition": 0, "fetch_offset": 1, "partition_max_bytes": 1 << 20, "current_leader_epoch": -1},
             {"partition": 5, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]
    topics = [{"topic": "v", "topic_id": tid, "partitions": parts}]
    if version >= 13:
        topics.append({"topic_id": unknown, "partitions": parts[:1]})
    resp = call(vbroker.port, 1, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": topics})
    topic = resp.responses[0]
    p0, p5 = topic.partitions
    assert (int(p0.error_code), p0.high_watermark, int(p5.error_code)) == (0, 3, 3)
    from engine.records import decode
    assert [r.value for r in decode(bytes(p0.records))] == [b"a", b"b", b"c"]
    if version >= 13:
        assert topic.topic_id == tid
        (other,) = resp.responses[1:]
        assert other.topic_id == unknown and [int(p.error_code) for p in other.partitions] == [100]


@pytest.mark.parametrize("version", versions(2))
def test_list_offsets(vbroker, version):
    got = []
    for ts in ((-2, -1, 1500, -3) if version >= 7 else (-2, -1, 1500)):   # one partition a request:
        parts = [{"partition_index": 0, "timestamp": ts, "current_leader_epoch": -1,  # a repeat is
                  "max_num_offsets": 1}]                                   # INVALID_REQUEST
        resp = call(vbroker.port, 2, version, {"replica_id": -1, "isolation_level": 0,
                                              "topics": [{"name": "v", "partitions": parts}]})
        got += [(int(p.error_code), p.offset) for p in resp.topics[0].partitions]
    assert got == [(0, 0), (0, 3), (0, 1), (0, 2)][:len(got)]


def test_list_offsets_max_timestamp_is_the_first_record_carrying_it(vbroker):
    """ListOffsets -3 (KIP-734) answers the first offset with the largest timestamp, as Kafka
    4.0 does: ties inside a batch and across batches go to the earliest record."""
    def fill():
        vbroker.engine.create_topic("maxts", 1)
        log = vbroker.engine.log("maxts", 0)
        log.append(bytearray(build_batch([(b"a", None, [], 1000), (b"b", None, [], 3000),
                                          (b"c", None, [], 3000)])))
        log.append(bytearray(build_batch([(b"d", None, [], 3000), (b"e", None, [], 2000)])))
    vbroker.call(fill)
    resp = call(vbroker.port, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "maxts", "partitions": [{"partition_index": 0, "timestamp": -3,
                                          "current_leader_epoch": -1}]}]})
    (p,) = resp.topics[0].partitions
    assert (int(p.error_code), p.offset, p.timestamp) == (0, 1, 3000)


@pytest.mark.parametrize("version", versions(19))
def test_create_and_delete_topics(vbroker, version):
    name = f"c{version}"
    resp = call(vbroker.port, 19, version, {
        "topics": [{"name": name, "num_partitions": 2, "replication_factor": -1, "assignments": [],
                    "configs": [{"name": "cleanup.policy", "value": "delete"}]},
                   {"name": "v", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []},
                   {"name": name + "x", "num_partitions": 1, "replication_factor": 3, "assignments": [],
                    "configs": []}],
        "timeout": 5000, "validate_only": False})
    codes = [(t.name, int(t.error_code)) for t in resp.topics]
    assert codes == [(name, 0), ("v", 36), (name + "x", 38)]
    assert vbroker.call(lambda: vbroker.engine.partitions_for(name)) == 2
    dver = min(max(version - 1, m.SUPPORTED[20][0]), m.SUPPORTED[20][1])
    resp = call(vbroker.port, 20, dver, {"topic_names": [name, "missing"], "timeout": 5000})
    assert [(r.name, int(r.error_code)) for r in resp.responses] == [(name, 0), ("missing", 3)]
    assert name not in vbroker.call(vbroker.engine.list_topics)


@pytest.mark.parametrize("version", versions(37))
def test_create_partitions(vbroker, version):
    name = f"cp{version}"
    vbroker.call(lambda: vbroker.engine.create_topic(name, 1))
    resp = call(vbroker.port, 37, version, {
        "topics": [{"name": name, "count": 3, "assignments": None},
                   {"name": "missing", "count": 2, "assignments": None},
                   {"name": "v", "count": 1, "assignments": None}],
        "timeout": 5000, "validate_only": False})
    assert [(r.name, int(r.error_code)) for r in resp.results] == [(name, 0), ("missing", 3), ("v", 37)]
    assert vbroker.call(lambda: vbroker.engine.partitions_for(name)) == 3


@pytest.mark.parametrize("version", versions(32))
def test_describe_configs(vbroker, version):
    resp = call(vbroker.port, 32, version, {
        "resources": [{"resource_type": 2, "resource_name": "v", "configuration_keys": ["segment.bytes"]},
                      {"resource_type": 2, "resource_name": "missing", "configuration_keys": None},
                      {"resource_type": 4, "resource_name": "0", "configuration_keys": ["num.partitions"]}],
        "include_synonyms": True, "include_documentation": False})
    topic, missing, brk = resp.results
    assert int(topic.error_code) == 0
    assert [(c.name, c.value) for c in topic.configs] == [("segment.bytes", "1073741824")]
    assert int(missing.error_code) == 3
    assert int(brk.error_code) == 0 and [(c.name, c.value) for c in brk.configs] == [("num.partitions", "1")]


@pytest.mark.parametrize("version", versions(44))
def test_incremental_alter_configs(vbroker, version):
    name = f"ia{version}"
    vbroker.call(lambda: vbroker.engine.create_topic(name, 1))
    resp = call(vbroker.port, 44, version, {
        "resources": [{"resource_type": 2, "resource_name": name, "configs": [
            {"name": "retention.bytes", "config_operation": 0, "value": "1000"}]},
                      {"resource_type": 2, "resource_name": "missing", "configs": []},
                      {"resource_type": 2, "resource_name": name, "configs": [
            {"name": "segment.bytes", "config_operation": 0, "value": "not-a-number"}]}],
        "validate_only": False})
    assert [int(r.error_code) for r in resp.responses] == [0, 3, 40]
    assert vbroker.call(lambda: vbroker.engine.topic_config(name))["retention.bytes"] == 1000


@pytest.mark.parametrize("version", versions(21))
def test_delete_records(vbroker, version):
    name = f"dr{version}"
    vbroker.call(lambda: vbroker.engine.create_topic(name, 1))
    vbroker.call(lambda: vbroker.engine.log(name, 0).append(bytearray(build_batch([b"x"] * 10))))
    resp = call(vbroker.port, 21, version, {"topics": [{"name": name, "partitions": [
        {"partition_index": 0, "offset": 4}, {"partition_index": 5, "offset": 1}]}], "timeout": 5000})
    got = [(p.partition_index, p.low_watermark, int(p.error_code)) for p in resp.topics[0].partitions]
    assert got == [(0, 4, 0), (5, -1, 3)]
    resp = call(vbroker.port, 21, version, {"topics": [{"name": name, "partitions": [
        {"partition_index": 0, "offset": 99}]}], "timeout": 5000})
    assert int(resp.topics[0].partitions[0].error_code) == 1  # OFFSET_OUT_OF_RANGE above the HW


@pytest.mark.parametrize("version", versions(23))
def test_offset_for_leader_epoch(vbroker, version):
    resp = call(vbroker.port, 23, version, {"replica_id": -1, "topics": [{"topic": "v", "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0},
        {"partition": 0, "current_leader_epoch": 5, "leader_epoch": 0}]}]})
    ok, fenced = resp.topics[0].partitions
    assert (int(ok.error_code), ok.leader_epoch, ok.end_offset) == (0, 0, 3)
    assert int(fenced.error_code) == 75  # UNKNOWN_LEADER_EPOCH: newer than ours


@pytest.mark.parametrize("version", versions(60))
def test_describe_cluster(vbroker, version):
    data = {"include_cluster_authorized_operations": False}
    if version >= 1:
        data["endpoint_type"] = 1
    resp = call(vbroker.port, 60, version, data)
    assert int(resp.error_code) == 0
    assert resp.cluster_id == vbroker.engine.cluster_id
    assert [(b.broker_id, b.port) for b in resp.brokers] == [(0, vbroker.port)]


@pytest.mark.parametrize("version", versions(22))
def test_init_producer_id(vbroker, version):
    data = {"transactional_id": None, "transaction_timeout": 60000}
    if version >= 3:
        data.update(producer_id=-1, producer_epoch=-1)
    first = call(vbroker.port, 22, version, data)
    assert int(first.error_code) == 0 and first.producer_id >= 0 and first.producer_epoch == 0
    if version >= 3:  # KIP-360: the same producer asks again and gets its epoch bumped
        data.update(producer_id=first.producer_id, producer_epoch=0)
        bumped = call(vbroker.port, 22, version, data)
        assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)
    # a transactional id: the transaction coordinator (COORDINATOR_NOT_AVAILABLE while it creates
    # __transaction_state, as Kafka); a new id takes any KIP-360 pair and starts at epoch 0
    tid = f"txn-v{version}"
    for _ in range(100):
        txn = call(vbroker.port, 22, version, {**data, "transactional_id": tid})
        if int(txn.error_code) != 15:
            break
        time.sleep(0.05)
    assert int(txn.error_code) == 0 and txn.producer_id >= 0 and txn.producer_epoch == 0
    again = call(vbroker.port, 22, version, {**data, "transactional_id": tid,
                                             **({"producer_id": -1, "producer_epoch": -1} if version >= 3 else {})})
    assert (int(again.error_code), again.producer_id, again.producer_epoch) == (0, txn.producer_id, 1)
