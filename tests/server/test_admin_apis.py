"""The admin APIs of engine/server/admin_handlers.py and ApiVersions' features: every served
version with real requests (written and read with kio), Kafka 4.0's answers (codes and messages
as a Kafka 4.0 broker gave them for the same requests), malformed bodies, and Kafka's own tools
against the broker (skipped when Kafka is absent: KAFKA_HOME, or <repo>/../shared/kafka)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess

import pytest

from engine.protocol import messages as m
from engine.records import build_batch
from tests.serving import kafka_home

from .conftest import connect, request_frame
from .test_bad_input import api_versions_ok, is_closed
from .test_versions import call, versions

pytest.importorskip("kio.serial")


@pytest.fixture(scope="module")
def abroker(tmp_path_factory):
    from .conftest import BrokerThread
    b = BrokerThread(str(tmp_path_factory.mktemp("admin")))

    def fill():
        b.engine.create_topic("t", 2, {"retention.ms": 1000000})
        b.engine.create_topic("u", 3)
        b.engine.log("t", 1).append(bytearray(build_batch([b"x" * 100, b"y" * 100])))
    b.call(fill)
    yield b
    b.stop()


def codes(results, key="error_code"):
    return [int(getattr(r, key)) for r in results]


# -- ApiVersions features (KIP-584) ---------------------------------------------------
@pytest.mark.parametrize("version", [3, 4])
def test_api_versions_features(abroker, version):
    resp = call(abroker.port, 18, version, {"client_software_name": "t", "client_software_version": "1"})
    supported = {f.name: (f.min_version, f.max_version) for f in resp.supported_features}
    # v3 omits features whose minimum is 0, as Kafka 4.0 does (KAFKA-17011)
    assert supported == ({"group.version": (0, 0), "transaction.version": (0, 0)} if version == 4 else {})
    assert resp.finalized_features == () and resp.finalized_features_epoch == -1
    assert resp.zk_migration_ready is False


# -- DescribeLogDirs (35) ------------------------------------------------------------
@pytest.mark.parametrize("version", versions(35))
def test_describe_log_dirs(abroker, version):
    resp = call(abroker.port, 35, version, {"topics": [{"topic": "t", "partitions": [0, 1, 9]},
                                                       {"topic": "missing", "partitions": [0]}]})
    (result,) = resp.results
    assert int(result.error_code) == 0
    assert result.log_dir == os.path.abspath(abroker.engine.path)
    (topic,) = result.topics                      # unknown topics and partitions are left out
    sizes = {p.partition_index: (p.partition_size, p.offset_lag, p.is_future_key) for p in topic.partitions}
    size1 = abroker.call(lambda: abroker.engine.log("t", 1).size)
    assert size1 > 200 and sizes == {0: (0, 0, False), 1: (size1, 0, False)}
    if version >= 4:
        st = os.statvfs(abroker.engine.path)
        assert result.total_bytes == st.f_blocks * st.f_frsize
        assert 0 < result.usable_bytes <= result.total_bytes
    every = call(abroker.port, 35, version, {"topics": None}).results[0].topics
    assert {(t.name, len(t.partitions)) for t in every} >= {("t", 2), ("u", 3)}


# -- AlterConfigs (33) -----------------------------------------------------------------
@pytest.mark.parametrize("version", versions(33))
def test_alter_configs_replaces_the_override_set(abroker, version):
    name = f"ac{version}"
    abroker.call(lambda: abroker.engine.create_topic(name, 1, {"retention.ms": 1000000}))

    def alter(configs, validate_only=False, rtype=2, rname=name):
        resp = call(abroker.port, 33, version, {"validate_only": validate_only, "resources": [
            {"resource_type": rtype, "resource_name": rname, "configs": configs}]})
        (r,) = resp.responses
        return int(r.error_code), r.error_message

    overrides = lambda: abroker.call(lambda: dict(abroker.engine.topic_metadata(name).config))  # noqa: E731
    assert alter([{"name": "segment.bytes", "value": "1048576"}], validate_only=True) == (0, None)
    assert overrides() == {"retention.ms": 1000000}
    assert alter([{"name": "segment.bytes", "value": "1048576"}]) == (0, None)
    assert overrides() == {"segment.bytes": 1048576}          # retention.ms went back to its default
    assert abroker.call(lambda: abroker.engine.log(name, 0).config["retention.ms"]) == 604800000
    assert alter([{"name": "retention.ms", "value": None}]) == \
        (42, "Null value not supported for : retention.ms")
    assert alter([{"name": "no.such.key", "value": "1"}])[0] == 40
    assert alter([{"name": "retention.ms", "value": "abc"}])[0] == 40
    assert overrides() == {"segment.bytes": 1048576}          # refused requests change nothing
    assert alter([], rname="missing") == (3, "The topic 'missing' does not exist.")
    assert alter([], rname="bad name!")[0] == 17
    assert alter([], rtype=9) == (42, "Unknown resource type 9")
    # broker configs are all static here: Kafka's answer for static configs
    assert alter([], rtype=4, rname="0") == (0, None)
    assert alter([{"name": "log.dirs", "value": "/x"}], rtype=4, rname="") == \
        (42, "Cannot update these configs dynamically: Set(log.dirs)")
    assert alter([], rtype=4, rname="7") == (42, "Unexpected broker id, expected 0, but received 7")
    assert alter([]) == (0, None)
    assert overrides() == {}


def test_incremental_alter_broker_configs(abroker):
    def ops(rname, op, validate_only=False):
        resp = call(abroker.port, 44, 1, {"validate_only": validate_only, "resources": [
            {"resource_type": 4, "resource_name": rname,
             "configs": [{"name": "leader.replication.throttled.rate", "config_operation": op,
                          "value": None if op == 1 else "100"}]}]})
        return int(resp.responses[0].error_code), resp.responses[0].error_message
    assert ops("0", 1) == (0, None)                 # delete: no dynamic value exists, as Kafka
    assert ops("", 0) == (42, "Cannot update these configs dynamically: Set(leader.replication.throttled.rate)")
    assert ops("3", 1) == (42, "Unexpected broker id, expected 0, but received 3")


# -- ACLs (29-31) -------------------------------------------------------------------------
_FILTER = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
           "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}


@pytest.mark.parametrize("version", versions(29))
def test_acls_without_authorizer(abroker, version):
    resp = call(abroker.port, 29, version, _FILTER)
    assert (int(resp.error_code), resp.error_message, resp.resources) == \
        (54, "No Authorizer is configured on the broker", ())
    resp = call(abroker.port, 30, version, {"creations": [
        {"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:a",
         "host": "*", "operation": 3, "permission_type": 3}] * 2})
    assert [(int(r.error_code), r.error_message) for r in resp.results] == [(54, "No Authorizer is configured.")] * 2
    resp = call(abroker.port, 31, version, {"filters": [_FILTER]})
    assert [(int(r.error_code), r.error_message, r.matching_acls) for r in resp.filter_results] == \
        [(54, "No Authorizer is configured.", ())]


# -- DescribeTopicPartitions (75) ---------------------------------------------------------
def _dtp(port, names, limit, cursor=None):
    resp = call(port, 75, 0, {"topics": [{"name": n} for n in names], "response_partition_limit": limit,
                              "cursor": cursor})
    cur = resp.next_cursor and (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
    return [(t.name, int(t.error_code), [p.partition_index for p in t.partitions]) for t in resp.topics], cur


def test_describe_topic_partitions_pages_as_kafka(abroker):
    """Expected answers are Kafka 4.0's for the same requests and topics (t: 2, u: 3 partitions)."""
    port = abroker.port
    assert _dtp(port, ["u", "missing", "t"], 2) == ([("missing", 3, []), ("t", 0, [0, 1])], ("u", 0))
    assert _dtp(port, ["t", "u"], 0) == ([("t", 0, [0])], ("t", 1))            # at least one
    assert _dtp(port, ["t", "u"], 3) == ([("t", 0, [0, 1]), ("u", 0, [0])], ("u", 1))
    assert _dtp(port, ["t", "u"], 2, {"topic_name": "t", "partition_index": 1}) == \
        ([("t", 0, [1]), ("u", 0, [0])], ("u", 1))
    assert _dtp(port, ["t", "u"], 2000, {"topic_name": "u", "partition_index": 7}) == ([("u", 0, [])], None)
    assert _dtp(port, ["t", "u", "a"], 5, {"topic_name": "t", "partition_index": -1}) == \
        ([("t", 42, []), ("u", 42, []), ("a", 42, [])], None)
    assert _dtp(port, ["t"], 5, {"topic_name": "zz", "partition_index": 0}) == ([("t", 42, [])], None)
    assert _dtp(port, ["bad name!", "t", "t"], 5) == ([("bad name!", 17, []), ("t", 0, [0, 1])], None)
    every, cur = _dtp(port, [], 2000, {"topic_name": "u", "partition_index": 1})
    assert every[0] == ("u", 0, [1, 2])
    resp = call(port, 75, 0, {"topics": [{"name": "t"}], "response_partition_limit": 10, "cursor": None})
    (t,) = resp.topics
    assert t.topic_authorized_operations == 3576 and not t.is_internal
    assert [(p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in t.partitions] == [(0, 0, (0,), (0,))] * 2
    from engine.server.common import _topic_uuid
    assert t.topic_id == _topic_uuid(abroker.call(lambda: abroker.engine.topic_metadata("t").topic_id))


# -- ElectLeaders (43) ----------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(43))
def test_elect_leaders(abroker, version):
    resp = call(abroker.port, 43, version, {"election_type": 0, "timeout": 5000, "topic_partitions": [
        {"topic": "t", "partitions": [0, 1, 7]}, {"topic": "missing", "partitions": [0]}]})
    got = [(r.topic, [(p.partition_id, int(p.error_code), p.error_message) for p in r.partition_result])
           for r in resp.replica_election_results]
    assert got == [("t", [(0, 84, "Leader election not needed for topic partition."),
                          (1, 84, "Leader election not needed for topic partition."),
                          (7, 3, "No such partition as t-7")]),
                   ("missing", [(0, 3, "No such topic as missing")])]
    if version >= 1:
        assert int(resp.error_code) == 0
        every = call(abroker.port, 43, version, {"election_type": 1, "timeout": 5000, "topic_partitions": None})
        assert {r.topic for r in every.replica_election_results} >= {"t", "u"}
        assert all(r.partition_result == () for r in every.replica_election_results)
        bad = call(abroker.port, 43, version, {"election_type": 5, "timeout": 5000,
                                               "topic_partitions": [{"topic": "t", "partitions": [0]}]})
        assert int(bad.error_code) == 42
        assert [(int(p.error_code), p.error_message) for p in bad.replica_election_results[0].partition_result] == \
            [(42, "Unknown election type 5")]


# -- Partition reassignments (45, 46) ---------------------------------------------------------
def test_partition_reassignments(abroker):
    resp = call(abroker.port, 46, 0, {"timeout": 5000, "topics": None})
    assert (int(resp.error_code), resp.topics) == (0, ())
    resp = call(abroker.port, 46, 0, {"timeout": 5000, "topics": [{"name": "t", "partition_indexes": [0, 9]}]})
    assert (int(resp.error_code), resp.topics) == (0, ())
    resp = call(abroker.port, 45, 0, {"timeout": 5000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [0]},
                                     {"partition_index": 1, "replicas": None},
                                     {"partition_index": 0, "replicas": []},
                                     {"partition_index": 0, "replicas": [0, 0]},
                                     {"partition_index": 0, "replicas": [0, 2]},
                                     {"partition_index": 9, "replicas": [0]}]},
        {"name": "missing", "partitions": [{"partition_index": 0, "replicas": None}]}]})
    assert int(resp.error_code) == 0
    got = [(r.name, [(p.partition_index, int(p.error_code), p.error_message) for p in r.partitions])
           for r in resp.responses]
    assert got == [("t", [
        (0, 0, None), (1, 85, None),
        (0, 39, "The manual partition assignment includes an empty replica list."),
        (0, 39, "The manual partition assignment includes the broker 0 more than once."),
        (0, 39, "The manual partition assignment includes broker 2, but no such broker is registered."),
        (9, 3, "Unable to find partition t:9.")]),
        ("missing", [(0, 3, "Unable to find a topic named missing.")])]
    assert abroker.call(lambda: abroker.engine.topic_metadata("t").partitions) == 2


# -- Transactions (65, 66) --------------------------------------------------------------------
@pytest.mark.parametrize("version", versions(66))
def test_list_transactions(abroker, version):
    resp = call(abroker.port, 66, version, {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
                                            "duration_filter": -1})
    assert (int(resp.error_code), resp.unknown_state_filters, resp.transaction_states) == (0, ("Bogus",), ())


def test_describe_transactions(abroker):
    resp = call(abroker.port, 65, 0, {"transactional_ids": ["never-seen", ""]})
    assert [(s.transactional_id, int(s.error_code)) for s in resp.transaction_states] == \
        [("never-seen", 105), ("", 42)]


# -- malformed bodies close the connection ----------------------------------------------------
@pytest.mark.parametrize("key", [29, 30, 31, 33, 35, 43, 45, 46, 48, 49, 65, 66, 75])
@pytest.mark.parametrize("body", [b"", b"\x05", b"\x80\x80\x80\x80\x04\x01", b"\x02\xff\xff\xff\xff\x0f"])
def test_malformed_bodies_close(abroker, key, body):
    version = m.SUPPORTED[key][1]
    with connect(abroker.port) as s:
        s.sendall(request_frame(key, version, 1, body, flexible=m.is_flexible(key, version)))
        assert is_closed(s)
    assert api_versions_ok(abroker.port)


# -- Kafka's own tools ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kafka_tool():
    home = kafka_home()
    if home is None or shutil.which("java") is None:
        pytest.skip("Apache Kafka's tools not found (set KAFKA_HOME, or <repo>/../shared/kafka) or no java")

    def run(tool, *args):
        p = subprocess.run([os.path.join(home, "bin", tool), *args], capture_output=True, text=True, timeout=120)
        return p.returncode, p.stdout, p.stderr
    return run


def test_kafka_log_dirs_tool(abroker, kafka_tool):
    rc, out, err = kafka_tool("kafka-log-dirs.sh", "--bootstrap-server", abroker.bootstrap,
                              "--describe", "--topic-list", "t")
    assert rc == 0, err
    doc = json.loads(out.strip().splitlines()[-1])
    (broker,) = doc["brokers"]
    (d,) = broker["logDirs"]
    assert broker["broker"] == 0 and d["error"] is None and d["logDir"] == os.path.abspath(abroker.engine.path)
    size1 = abroker.call(lambda: abroker.engine.log("t", 1).size)
    assert sorted((p["partition"], p["size"], p["offsetLag"], p["isFuture"]) for p in d["partitions"]) == \
        [("t-0", 0, 0, False), ("t-1", size1, 0, False)]


def test_kafka_features_tool(abroker, kafka_tool):
    rc, out, err = kafka_tool("kafka-features.sh", "--bootstrap-server", abroker.bootstrap, "describe")
    assert rc == 0, err
    assert out.split("\n")[:2] == [
        "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\tFinalizedVersionLevel: 0\tEpoch: -",
        "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 0\tFinalizedVersionLevel: 0"
        "\tEpoch: -"]


def test_kafka_admin_tools(abroker, kafka_tool, tmp_path):
    bs = ("--bootstrap-server", abroker.bootstrap)
    rc, out, err = kafka_tool("kafka-leader-election.sh", *bs, "--election-type", "preferred",
                              "--all-topic-partitions")
    assert rc == 0, err
    rc, out, err = kafka_tool("kafka-leader-election.sh", *bs, "--election-type", "preferred",
                              "--topic", "t", "--partition", "0")
    assert (rc, out.strip()) == (0, "Valid replica already elected for partitions t-0"), err
    rc, out, err = kafka_tool("kafka-transactions.sh", *bs, "list")
    assert (rc, out.split()) == (0, ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]), err
    rc, out, err = kafka_tool("kafka-acls.sh", *bs, "--list")
    assert "SecurityDisabledException: No Authorizer is configured on the broker" in out + err
    rc, out, err = kafka_tool("kafka-reassign-partitions.sh", *bs, "--list")
    assert (rc, out.strip()) == (0, "No partition reassignments found."), err
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [0]}]}))
    rc, out, err = kafka_tool("kafka-reassign-partitions.sh", *bs, "--execute", "--reassignment-json-file", str(plan))
    assert rc == 0 and "Successfully started partition reassignment for t-0" in out, err
    rc, out, err = kafka_tool("kafka-reassign-partitions.sh", *bs, "--verify", "--reassignment-json-file", str(plan))
    assert rc == 0 and "Reassignment of partition t-0 is completed." in out, err
    rc, out, err = kafka_tool("kafka-topics.sh", *bs, "--describe", "--topic", "u")   # DescribeTopicPartitions
    assert rc == 0, err
    assert [line.split("\t")[2:5] for line in out.strip().splitlines()[1:]] == \
        [[f"Partition: {p}", "Leader: 0", "Replicas: 0"] for p in range(3)]


# -- a short fuzz of the new APIs (as test_fuzz.py for the others) ----------------------------
_FUZZ_BASE = {
    29: _FILTER,
    30: {"creations": [{"resource_type": 2, "resource_name": "t", "resource_pattern_type": 3,
                        "principal": "User:a", "host": "*", "operation": 3, "permission_type": 3}]},
    31: {"filters": [_FILTER]},
    33: {"validate_only": False, "resources": [
        {"resource_type": 2, "resource_name": "fz", "configs": [{"name": "retention.ms", "value": "100000"}]},
        {"resource_type": 4, "resource_name": "0", "configs": []}]},
    35: {"topics": [{"topic": "fz", "partitions": [0, 1]}]},
    43: {"election_type": 0, "timeout": 1000, "topic_partitions": [{"topic": "fz", "partitions": [0]}]},
    45: {"timeout": 1000, "topics": [{"name": "fz", "partitions": [{"partition_index": 0, "replicas": [0]}]}]},
    46: {"timeout": 1000, "topics": [{"name": "fz", "partition_indexes": [0]}]},
    65: {"transactional_ids": ["x"]},
    66: {"state_filters": ["Ongoing"], "producer_id_filters": [1], "duration_filter": -1},
    75: {"topics": [{"name": "fz"}, {"name": "t"}], "response_partition_limit": 1,
         "cursor": {"topic_name": "fz", "partition_index": 0}},
}


def test_mutated_admin_requests(abroker, caplog):
    import io
    import logging
    import random
    import socket

    from kio.serial import entity_writer
    abroker.call(lambda: abroker.engine.create_topic("fz", 2))
    frames = []
    for key, data in _FUZZ_BASE.items():
        lo, hi = m.SUPPORTED[key]
        for version in range(lo, hi + 1):
            cls = m._entity(key, version, False)
            buf = io.BytesIO()
            entity_writer(cls)(buf, m._build(cls, data))
            flex = m.is_flexible(key, version)
            frames.append(struct.pack(">hhih", key, version, 1, 4) + b"fuzz" + (b"\x00" if flex else b"")
                          + buf.getvalue())
    rnd = random.Random(int(os.environ.get("FUZZ_SEED", "20261124")))
    answered = closed = 0
    with caplog.at_level(logging.WARNING, logger="engine.server"):
        for _ in range(int(os.environ.get("FUZZ_N", "400"))):
            msg = bytearray(rnd.choice(frames))
            for _ in range(rnd.randint(1, 4)):
                msg[rnd.randrange(8, len(msg))] = rnd.randrange(256)    # keep key/version
            if rnd.random() < 0.2:
                del msg[rnd.randrange(8, len(msg)):]
            with connect(abroker.port, timeout=2) as s:
                s.sendall(struct.pack(">i", len(msg)) + msg)
                s.shutdown(socket.SHUT_WR)
                try:
                    data = s.recv(4)
                except (TimeoutError, ConnectionResetError):
                    data = b""
                answered += bool(data)
                closed += not data
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors[:5]]
    assert answered > 20 and closed > 20
    assert api_versions_ok(abroker.port)
