"""Security differential tests: the same ACL scenarios against Apache Kafka 4.0 and against our
broker, configured the same way (tests/differential/secured.py: PLAINTEXT + SASL_PLAINTEXT,
PLAIN users admin/alice, StandardAuthorizer, ``super.users=User:admin;User:ANONYMOUS``).

Each case is one API call (or one short flow) made by alice through the raw wire (kio) or
confluent-kafka, written once and run against both brokers; the answers are compared field by
field with wire.ALLOWED's deployment differences only (error messages included).  Three stages,
in this order:

* alice without any ACL: every API answers its authorization error (or hides what exists);
* alice with targeted ACLs (READ implying DESCRIBE, PREFIXED patterns, DENY over ALLOW, the
  wildcard principal, host-specific ACLs, ALL, cluster DESCRIBE/IDEMPOTENT_WRITE);
* the ACL APIs themselves as admin: invalid creations, describe and delete filters.

Where we differ from Kafka the case is an xfail(strict) naming the difference
(security_differences.DIFFERS).
"""

from __future__ import annotations

import time

import pytest

from .secured import RETRIABLE, Secured, acls, binding, start_kafka, start_ours
from .security_calls import (
    FETCH_BY_NAME,
    acl_filter,
    broker_name,
    call,
    ck_admin,
    ck_admin_call,
    ck_consume,
    ck_idempotent_producer,
    ck_list_topics,
    ck_produce,
    ck_subscribe,
    ck_transactional_producer,
    commit,
    create_topic,
    describe_configs,
    fetch,
    group_described,
    groups_listed,
    incremental,
    init_pid,
    join,
    list_offsets,
    md,
    md_by_id,
    offset_fetch,
    offset_for_leader_epoch,
    ops,
    produce,
    scram_upsert,
    write_txn_markers,
)
from .security_differences import DIFFERS
from .wire import ALLOWED, diff

TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5                      # resource types
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
DESCRIBE_CONFIGS, IDEMPOTENT_WRITE = 10, 12
DENY, ALLOW = 2, 3
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4

T = "sec-t"                     # one record, offset 1 committed by admin in group G
G = "sec-g"
TOPICS = [T, "pfx-a", "pfx-deny", "px-b", "deny-t", "deny-r", "wild-t", "host-ok", "host-no",
          "all-t"]

# -- the two brokers ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sec(kafka_home, tmp_path_factory):
    try:
        kafka = start_kafka(kafka_home, str(tmp_path_factory.mktemp("kafka-sec")))
    except FileNotFoundError as e:
        pytest.skip(f"{e} (shared/kafka/run-kafka.sh starts the reference broker)")
    ours = start_ours(str(tmp_path_factory.mktemp("ours-sec") / "data"))
    s = Secured(ours, kafka)
    try:
        _prepare(s)
        yield s
    finally:
        s.close()
        ours.stop()
        kafka.stop()


def _prepare(s: Secured) -> None:
    """As admin on both: the topics, one record in T, group G with an offset committed."""
    for name in ("ours", "kafka"):
        side = s.side(name)
        resp = side.call(19, {"topics": [{"name": t, "num_partitions": 1, "replication_factor": 1,
                                          "assignments": [], "configs": []} for t in TOPICS],
                              "timeout": 30000, "validate_only": False}, user="admin")
        assert all(t["error_code"] == 0 for t in resp["topics"]), resp
        for t in TOPICS:
            side.call(3, md([t]), user="admin", retry=RETRIABLE | {5})
        resp = side.call(0, produce(T), user="admin", retry=RETRIABLE)
        assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp
        side.call(10, {"key_type": 0, "coordinator_keys": [G]}, user="admin", retry=RETRIABLE, timeout=60)
        side.call(10, {"key_type": 1, "coordinator_keys": ["warm-up"]}, user="admin",
                  retry=RETRIABLE, timeout=60)
        resp = side.call(8, commit(G, T), user="admin", retry=RETRIABLE)
        assert resp["topics"][0]["partitions"][0]["error_code"] == 0, resp


def _check(sec: Secured, case, ignore=()) -> None:
    answers = {name: _canonical(_quiet(case(sec.side(name)))) for name in ("ours", "kafka")}
    problems = diff(answers["ours"], answers["kafka"], ALLOWED | set(ignore))
    if any("no_answer" in p for p in problems):        # one side answered nothing: show the other
        problems += [f"ours answered {answers['ours']}", f"Kafka answered {answers['kafka']}"]
    assert not problems, "ours != Kafka:\n" + "\n".join(problems)


def _quiet(value):
    """Kafka's controller-side refusals say 'Request Request(processor=.., connectionId=..,
    session=..@hash, ..) is not authorized.': the request's dump differs at every call.  And
    Kafka's ACL APIs answer an empty error_message where the others answer null (no message to
    any client): both compared as null."""
    if isinstance(value, dict):
        return {k: None if k == "error_message" and v == "" else _quiet(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_quiet(v) for v in value]
    if isinstance(value, str) and value.startswith("Request Request(") and value.endswith(" is not authorized."):
        return "Request <the request> is not authorized."
    return value


def _canonical(value):
    """Lists of structs sorted (Kafka answers topics, groups and ACLs in hash order)."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_canonical(v) for v in value]
        if items and all(isinstance(v, dict) for v in items):
            items.sort(key=repr)
        return items
    return value


def case(cid: str, fn, *ignore: str):
    marks = [pytest.mark.xfail(strict=True, reason=DIFFERS[cid])] if cid in DIFFERS else []
    return pytest.param(fn, ignore, id=cid, marks=marks)


# -- stage 1: alice without any ACL --------------------------------------------------------------
NO_ACL = [
    case("Metadata-all-topics", call(3, md(None))),
    case("Metadata-named-existing", call(3, md([T]))),
    case("Metadata-named-missing", call(3, md(["sec-missing"]))),
    case("Metadata-named-missing-auto-create", call(3, md(["sec-missing"], auto=True))),
    case("Metadata-v10-cluster-authorized-operations", call(3, md([T]), version=10)),
    case("Metadata-by-topic-id", md_by_id(T)),
    case("Metadata-by-unknown-topic-id", md_by_id(None)),
    case("Produce", call(0, produce(T))),
    case("Produce-missing-topic", call(0, produce("sec-missing"))),
    case("Fetch", call(1, fetch(T), FETCH_BY_NAME)),
    case("Fetch-missing-topic", call(1, fetch("sec-missing"), FETCH_BY_NAME)),
    case("Fetch-as-follower", call(1, dict(fetch(T), replica_id=1), FETCH_BY_NAME)),
    case("ListOffsets", call(2, list_offsets(T))),
    case("ListOffsets-missing-topic", call(2, list_offsets("sec-missing"))),
    case("OffsetForLeaderEpoch", call(23, offset_for_leader_epoch(T))),
    case("OffsetForLeaderEpoch-as-follower", call(23, offset_for_leader_epoch(T, replica_id=1))),
    case("WriteTxnMarkers", call(27, write_txn_markers(T))),
    case("CreateTopics", call(19, create_topic("alice-p1"))),
    case("DeleteTopics", call(20, {"topic_names": [T, "sec-missing"], "timeout": 5000})),
    case("CreatePartitions", call(37, {"topics": [{"name": T, "count": 2, "assignments": None}],
                                       "timeout": 5000, "validate_only": False})),
    case("DescribeConfigs-topic", call(32, describe_configs(2, T))),
    case("DescribeConfigs-missing-topic", call(32, describe_configs(2, "sec-missing"))),
    case("DescribeConfigs-broker", call(32, lambda s: describe_configs(4, broker_name(s))), "resource_name"),
    case("AlterConfigs-topic", call(33, {"resources": [{"resource_type": 2, "resource_name": T, "configs": [
        {"name": "retention.ms", "value": "3600000"}]}], "validate_only": False})),
    case("IncrementalAlterConfigs-topic", call(44, incremental(2, T))),
    case("IncrementalAlterConfigs-broker", call(44, incremental(4, "", "log.cleaner.threads", "2"))),
    case("DeleteRecords", call(21, {"topics": [{"name": T, "partitions": [{"partition_index": 0, "offset": 0}]}],
                                    "timeout": 5000})),
    case("DescribeAcls", call(29, acl_filter())),
    case("CreateAcls", call(30, {"creations": [binding(TOPIC, T, READ)]})),
    case("DeleteAcls", call(31, {"filters": [acl_filter()]})),
    case("FindCoordinator-group", call(10, {"key_type": 0, "coordinator_keys": [G]})),
    case("FindCoordinator-group-v3", call(10, {"key_type": 0, "key": G}, version=3)),
    case("FindCoordinator-transactional-id", call(10, {"key_type": 1, "coordinator_keys": ["tx-1"]})),
    case("JoinGroup", call(11, join(G))),
    case("SyncGroup", call(14, {"group_id": G, "generation_id": 1, "member_id": "m", "group_instance_id": None,
                                "protocol_type": "consumer", "protocol_name": "range", "assignments": []})),
    case("Heartbeat", call(12, {"group_id": G, "generation_id": 1, "member_id": "m", "group_instance_id": None})),
    case("LeaveGroup", call(13, {"group_id": G, "members": [{"member_id": "m", "group_instance_id": None,
                                                               "reason": None}]})),
    case("OffsetCommit", call(8, commit(G, T))),
    case("OffsetFetch-all", call(9, offset_fetch(G))),
    case("OffsetFetch-topic", call(9, offset_fetch(G, T))),
    case("DescribeGroups", call(15, {"groups": [G, "nosuch-g"], "include_authorized_operations": True})),
    case("ListGroups", call(16, {"states_filter": [], "types_filter": []})),
    case("DeleteGroups", call(42, {"groups_names": [G]})),
    case("OffsetDelete", call(47, {"group_id": G, "topics": [{"name": T, "partitions": [{"partition_index": 0}]}]})),
    case("InitProducerId-transactional", call(22, init_pid("tx-1"))),
    case("InitProducerId-idempotent", call(22, init_pid(None))),
    case("AddPartitionsToTxn-v3", call(24, {"v3_and_below_transactional_id": "tx-1", "v3_and_below_producer_id": 5,
                                            "v3_and_below_producer_epoch": 0,
                                            "v3_and_below_topics": [{"name": T, "partitions": [0]}]}, version=3)),
    case("AddOffsetsToTxn", call(25, {"transactional_id": "tx-1", "producer_id": 5, "producer_epoch": 0,
                                      "group_id": G})),
    case("TxnOffsetCommit", call(28, {"transactional_id": "tx-1", "group_id": G, "producer_id": 5,
                                      "producer_epoch": 0, "generation_id": -1, "member_id": "",
                                      "group_instance_id": None, "topics": [{"name": T, "partitions": [
                                          {"partition_index": 0, "committed_offset": 1,
                                           "committed_leader_epoch": -1, "committed_metadata": ""}]}]})),
    case("EndTxn", call(26, {"transactional_id": "tx-1", "producer_id": 5, "producer_epoch": 0,
                             "committed": True})),
    case("DescribeTransactions", call(65, {"transactional_ids": ["tx-1"]})),
    case("ListTransactions", call(66, {"state_filters": [], "producer_id_filters": [], "duration_filter": -1})),
    case("DescribeProducers", call(61, {"topics": [{"name": T, "partition_indexes": [0]}]})),
    case("DescribeTopicPartitions", call(75, {"topics": [{"name": T}, {"name": "sec-missing"}],
                                              "response_partition_limit": 100, "cursor": None})),
    case("DescribeUserScramCredentials-all", call(50, {"users": []})),
    case("DescribeUserScramCredentials-named", call(50, {"users": [{"name": "alice"}]})),
    case("AlterUserScramCredentials", call(51, scram_upsert("alice"))),
    case("DescribeLogDirs", call(35, {"topics": None})),
    case("ElectLeaders", call(43, {"election_type": 0, "topic_partitions": [{"topic": T, "partitions": [0]}],
                                   "timeout": 5000})),
    case("ListPartitionReassignments", call(46, {"timeout": 5000, "topics": None})),
    case("AlterPartitionReassignments", call(45, {"timeout": 5000, "topics": [
        {"name": T, "partitions": [{"partition_index": 0, "replicas": None}]}]})),
    case("DescribeCluster-authorized-operations", call(60, {"include_cluster_authorized_operations": True,
                                                            "endpoint_type": 1})),
    case("ck-list_topics-all", ck_list_topics(None)),
    case("ck-list_topics-named-existing", ck_list_topics([T])),
    case("ck-list_topics-named-missing", ck_list_topics(["sec-missing"])),
    case("ck-produce", ck_produce(T)),
    case("ck-idempotent-producer", ck_idempotent_producer(T)),
    case("ck-transactional-producer", ck_transactional_producer("tx-1", T)),
    case("ck-consume", ck_consume(T)),
    case("ck-subscribe", ck_subscribe(T, G)),
    case("ck-create_topics", ck_admin_call("create_topics", [ck_admin.NewTopic("alice-p1", 1, 1)])),
    case("ck-describe_configs", ck_admin_call("describe_configs",
                                              [ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, T)])),
    case("ck-list_consumer_groups", ck_admin_call("list_consumer_groups", shape=groups_listed)),
    case("ck-describe_consumer_groups", ck_admin_call("describe_consumer_groups", [G], shape=group_described,
                                                      include_authorized_operations=True)),
    case("ck-delete_consumer_groups", ck_admin_call("delete_consumer_groups", [G])),
    case("ck-describe_cluster", ck_admin_call("describe_cluster", shape=lambda c: ops(c.authorized_operations),
                                                     include_authorized_operations=True)),
]


@pytest.mark.parametrize("fn,ignore", NO_ACL)
def test_alice_without_acls(sec, fn, ignore):
    _check(sec, fn, ignore)


# -- stage 2: alice with targeted ACLs ------------------------------------------------------------
GRANTED = [
    binding(TOPIC, T, READ),                                         # READ implies DESCRIBE
    binding(TOPIC, "pfx-", WRITE, pattern=PREFIXED),
    binding(TOPIC, "pfx-deny", WRITE, DENY, principal="User:*"),     # a wildcard DENY over that ALLOW
    binding(TOPIC, "alice-", CREATE, pattern=PREFIXED),
    binding(TOPIC, "deny-t", ALL), binding(TOPIC, "deny-t", WRITE, DENY),
    binding(TOPIC, "deny-r", READ), binding(TOPIC, "deny-r", READ, DENY),
    binding(TOPIC, "wild-t", DESCRIBE, principal="User:*"),
    binding(GROUP, "wild-g", READ, principal="User:*"),
    binding(TOPIC, "host-ok", READ, host="127.0.0.1"),
    binding(TOPIC, "host-no", READ, host="10.9.8.7"),
    binding(TOPIC, "all-t", ALL),
    binding(GROUP, "alice-g", READ, pattern=PREFIXED),
    binding(GROUP, "alice-gdel", DELETE),
    binding(TXN, "alice-tx", WRITE),
    binding(CLUSTER, "kafka-cluster", DESCRIBE),
    binding(CLUSTER, "kafka-cluster", IDEMPOTENT_WRITE),
]


def _txn_flow(s):
    """InitProducerId, AddPartitionsToTxn with one refused topic then the allowed one, EndTxn."""
    init = s.call(22, init_pid("alice-tx"), retry=RETRIABLE | {51})
    pid, epoch = init.get("producer_id", -1), init.get("producer_epoch", -1)
    add = {"v3_and_below_transactional_id": "alice-tx", "v3_and_below_producer_id": pid,
           "v3_and_below_producer_epoch": epoch}
    both = s.call(24, dict(add, v3_and_below_topics=[{"name": "pfx-a", "partitions": [0]},
                                                     {"name": T, "partitions": [0]}]), 3)
    one = s.call(24, dict(add, v3_and_below_topics=[{"name": "pfx-a", "partitions": [0]}]), 3, retry={51})
    produced = s.call(0, dict(produce("pfx-a", "alice-tx"), topic_data=[{"name": "pfx-a", "partition_data": [
        {"index": 0, "records": bytes(_txn_batch(pid, epoch))}]}]))
    end = s.call(26, {"transactional_id": "alice-tx", "producer_id": pid, "producer_epoch": epoch,
                      "committed": True}, 4, retry={51})     # v5 is transaction.version 2's epoch bump
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:          # the markers written: CompleteCommit
        state = s.call(65, {"transactional_ids": ["alice-tx"]}, user="admin")
        if state["transaction_states"][0]["transaction_state"] not in ("PrepareCommit", "Ongoing"):
            break
        time.sleep(0.05)
    for step in (init,):
        step.pop("producer_id", None)
    return {"init": init, "add-both": both, "add-one": one, "produce": produced, "end": end}


def _txn_batch(pid, epoch):
    from engine import _native
    b = _native.BatchBuilder()
    b.append(b"t", None, None, int(time.time() * 1000))     # within retention.ms (see RECORDS)
    return b.build(0, pid, epoch, 0, 0, True)


def _log_dirs(s):
    resp = s.call(35, {"topics": [{"topic": T, "partitions": [0]}]})
    return {"error_code": resp.get("error_code"), "results": [
        {"error_code": r["error_code"], "topics": [
            {"name": t["name"], "partitions": [p["partition_index"] for p in t["partitions"]]} for t in r["topics"]]}
        for r in resp.get("results", [])]}


def _without(fn, *fields):
    """A case whose answer's ``fields`` (at any depth) are this broker's own (producer ids, times)."""
    def drop(v):
        if isinstance(v, dict):
            return {k: drop(x) for k, x in v.items() if k not in fields}
        if isinstance(v, list):
            return [drop(x) for x in v]
        return v
    return lambda s: drop(fn(s))


NAMED = [T, "pfx-a", "pfx-deny", "px-b", "deny-t", "deny-r", "wild-t", "host-ok", "host-no", "all-t", "sec-missing"]

WITH_ACLS = [
    case("acl-Metadata-all-topics", call(3, md(None))),
    case("acl-Metadata-named", call(3, md(NAMED))),
    case("acl-Metadata-auto-create-PREFIXED-CREATE", call(3, md(["alice-auto"], auto=True), retry={3, 5})),
    case("acl-Metadata-v10-cluster-authorized-operations", call(3, md([T, "all-t"]), version=10)),
    case("acl-Produce-READ-only", call(0, produce(T))),
    case("acl-Produce-PREFIXED-WRITE", call(0, produce("pfx-a"))),
    case("acl-Produce-prefix-not-matching", call(0, produce("px-b"))),
    case("acl-Produce-wildcard-principal-DENY", call(0, produce("pfx-deny"))),
    case("acl-Produce-DENY-WRITE-over-ALL", call(0, produce("deny-t"))),
    case("acl-Produce-ALL", call(0, produce("all-t"))),
    case("acl-Fetch-READ", call(1, fetch(T), FETCH_BY_NAME)),
    case("acl-Fetch-DENY-READ-over-ALLOW", call(1, fetch("deny-r"), FETCH_BY_NAME)),
    case("acl-Fetch-host-matching", call(1, fetch("host-ok"), FETCH_BY_NAME)),
    case("acl-Fetch-host-not-matching", call(1, fetch("host-no"), FETCH_BY_NAME)),
    case("acl-Fetch-WRITE-only", call(1, fetch("pfx-a"), FETCH_BY_NAME)),
    case("acl-Metadata-by-topic-id-READ", md_by_id(T)),
    case("acl-Metadata-by-topic-id-not-described", md_by_id("px-b")),
    case("acl-ListOffsets-READ", call(2, list_offsets(T))),
    case("acl-OffsetForLeaderEpoch-READ", call(23, offset_for_leader_epoch(T))),
    case("acl-OffsetForLeaderEpoch-not-described", call(23, offset_for_leader_epoch("px-b"))),
    case("acl-ListOffsets-wildcard-principal-DESCRIBE", call(2, list_offsets("wild-t"))),
    case("acl-ListOffsets-DENY-READ-keeps-DESCRIBE", call(2, list_offsets("deny-r"))),
    case("acl-CreateTopics-PREFIXED-CREATE", call(19, create_topic("alice-new"))),
    case("acl-CreateTopics-validate-only", call(19, create_topic("alice-v", validate_only=True))),
    case("acl-CreateTopics-no-CREATE", call(19, create_topic("bob-new"))),
    case("acl-CreatePartitions-ALL", call(37, {"topics": [{"name": "all-t", "count": 2, "assignments": None}],
                                               "timeout": 10000, "validate_only": False})),
    case("acl-CreatePartitions-READ-only", call(37, {"topics": [{"name": T, "count": 2, "assignments": None}],
                                                     "timeout": 10000, "validate_only": False})),
    case("acl-DescribeConfigs-ALL", call(32, describe_configs(2, "all-t")), "configs"),
    case("acl-DescribeConfigs-READ-only", call(32, describe_configs(2, T))),
    case("acl-DescribeConfigs-broker-cluster-DESCRIBE-only", call(32, lambda s: describe_configs(4, broker_name(s))),
         "resource_name"),
    case("acl-IncrementalAlterConfigs-ALL", call(44, incremental(2, "all-t"))),
    case("acl-AlterConfigs-ALL", call(33, {"resources": [{"resource_type": 2, "resource_name": "all-t", "configs": [
        {"name": "retention.ms", "value": "7200000"}]}], "validate_only": False})),
    case("acl-DeleteRecords-ALL", call(21, {"topics": [{"name": "all-t", "partitions": [
        {"partition_index": 0, "offset": 1}]}], "timeout": 10000})),
    case("acl-DeleteRecords-READ-only", call(21, {"topics": [{"name": T, "partitions": [
        {"partition_index": 0, "offset": 0}]}], "timeout": 10000})),
    case("acl-FindCoordinator-PREFIXED-group", call(10, {"key_type": 0, "coordinator_keys": ["alice-g1", G]},
                                                    retry=RETRIABLE)),
    case("acl-FindCoordinator-wildcard-principal-group", call(10, {"key_type": 0, "coordinator_keys": ["wild-g"]},
                                                              retry=RETRIABLE)),
    case("acl-FindCoordinator-transactional-id", call(10, {"key_type": 1, "coordinator_keys": ["alice-tx", "other-tx"]},
                                                      retry=RETRIABLE)),
    case("acl-JoinGroup-PREFIXED-READ", call(11, join("alice-g1"))),
    case("acl-JoinGroup-wildcard-principal", call(11, join("wild-g"))),
    case("acl-OffsetCommit-group-and-topic-READ", call(8, commit("alice-g1", T), retry=RETRIABLE)),
    case("acl-OffsetCommit-topic-not-READ", call(8, commit("alice-g1", "pfx-a"), retry=RETRIABLE)),
    case("acl-OffsetFetch-all", call(9, offset_fetch("alice-g1"))),
    case("acl-OffsetFetch-topic-without-DESCRIBE", call(9, offset_fetch("alice-g1", "px-b"))),
    case("acl-OffsetFetch-group-denied", call(9, offset_fetch(G, T))),
    case("acl-DescribeGroups", call(15, {"groups": ["alice-g1", "wild-g", G], "include_authorized_operations": True})),
    case("acl-ListGroups-cluster-DESCRIBE", call(16, {"states_filter": [], "types_filter": []})),
    case("acl-OffsetDelete-no-DELETE", call(47, {"group_id": "alice-g1", "topics": [
        {"name": T, "partitions": [{"partition_index": 0}]}]})),
    case("acl-DeleteGroups", call(42, {"groups_names": ["alice-gdel", "alice-g1"]})),
    case("acl-transaction-flow", _txn_flow),
    case("acl-InitProducerId-transactional-denied", call(22, init_pid("other-tx"))),
    case("acl-InitProducerId-idempotent-IDEMPOTENT_WRITE", _without(call(22, init_pid(None)), "producer_id")),
    case("acl-DescribeTransactions", _without(call(65, {"transactional_ids": ["alice-tx", "other-tx"]}),
                                              "producer_id", "transaction_start_time")),
    case("acl-ListTransactions", _without(call(66, {"state_filters": [], "producer_id_filters": [],
                                                    "duration_filter": -1}), "producer_id")),
    case("acl-DescribeProducers-ALL", _without(call(61, {"topics": [{"name": "all-t", "partition_indexes": [0]},
                                                                    {"name": "px-b", "partition_indexes": [0]}]}),
                                               "last_timestamp", "producer_id")),
    case("acl-DescribeTopicPartitions", call(75, {"topics": [{"name": T}, {"name": "px-b"}],
                                                  "response_partition_limit": 100, "cursor": None})),
    case("acl-DescribeCluster-authorized-operations", call(60, {"include_cluster_authorized_operations": True,
                                                                "endpoint_type": 1})),
    case("acl-DescribeLogDirs-cluster-DESCRIBE", _log_dirs),
    case("acl-ListPartitionReassignments-cluster-DESCRIBE", call(46, {"timeout": 5000, "topics": None})),
    case("acl-AlterPartitionReassignments-no-ALTER", call(45, {"timeout": 5000, "topics": [
        {"name": T, "partitions": [{"partition_index": 0, "replicas": None}]}]})),
    case("acl-ElectLeaders-no-ALTER", call(43, {"election_type": 0, "topic_partitions": [
        {"topic": T, "partitions": [0]}], "timeout": 5000})),
    case("acl-DescribeUserScramCredentials-cluster-DESCRIBE", call(50, {"users": []})),
    case("acl-AlterUserScramCredentials-no-ALTER", call(51, scram_upsert("alice"))),
    case("acl-DescribeAcls-cluster-DESCRIBE", call(29, acl_filter(principal="User:alice"))),
    case("acl-CreateAcls-no-ALTER", call(30, {"creations": [binding(TOPIC, T, WRITE)]})),
    case("acl-ck-list_topics-all", ck_list_topics(None)),
    case("acl-ck-produce-PREFIXED-WRITE", ck_produce("pfx-a")),
    case("acl-ck-idempotent-producer-IDEMPOTENT_WRITE", ck_idempotent_producer("pfx-a")),
    case("acl-ck-transactional-producer", ck_transactional_producer("alice-tx", "pfx-a")),
    case("acl-ck-transactional-producer-denied", ck_transactional_producer("other-tx", "pfx-a")),
    case("acl-ck-consume-READ", ck_consume(T, "alice-g-ck", expect_value=True)),
    case("acl-ck-subscribe-READ", ck_subscribe(T, "alice-g-sub", expect_assignment=True)),
    case("acl-ck-create_topics", ck_admin_call("create_topics", [ck_admin.NewTopic("alice-ck", 1, 1)])),
    case("acl-ck-list_consumer_groups", ck_admin_call("list_consumer_groups", shape=groups_listed)),
    case("acl-ck-describe_cluster", ck_admin_call("describe_cluster", shape=lambda c: ops(c.authorized_operations),
                                                  include_authorized_operations=True)),
    case("acl-DeleteTopics-no-DELETE", call(20, {"topic_names": [T], "timeout": 10000})),
    case("acl-DeleteTopics-ALL", call(20, {"topic_names": ["all-t"], "timeout": 10000})),
]


@pytest.fixture(scope="class")
def granted(sec):
    """TestWithAcls' ACLs, set once for the class (a module-level fixture: pytest deprecates
    class-scoped fixtures defined as instance methods)."""
    with acls(sec, GRANTED):
        yield sec


class TestWithAcls:
    @pytest.mark.parametrize("fn,ignore", WITH_ACLS)
    def test_alice_with_acls(self, granted, fn, ignore):
        _check(granted, fn, ignore)


# -- stage 3: the ACL APIs themselves, as admin --------------------------------------------------
def admin_call(key, body, version=None):
    return lambda s: s.call(key, body, version, user="admin")


def _create(b):
    return admin_call(30, {"creations": [b]})


CAROL = "User:carol"            # not a user: her ACLs change nothing for alice
INVALID_CREATIONS = [
    case("CreateAcls-CLUSTER-not-kafka-cluster", _create(binding(CLUSTER, "other", ALTER, principal=CAROL))),
    case("CreateAcls-CLUSTER-PREFIXED", _create(binding(CLUSTER, "kafka-cluster", ALTER, pattern=PREFIXED,
                                                        principal=CAROL))),
    case("CreateAcls-resource-UNKNOWN", _create(binding(0, "c-x", READ, principal=CAROL))),
    case("CreateAcls-resource-ANY", _create(binding(ANY, "c-x", READ, principal=CAROL))),
    case("CreateAcls-empty-name", _create(binding(TOPIC, "", READ, principal=CAROL))),
    case("CreateAcls-principal-without-type", _create(binding(TOPIC, "c-x", READ, principal="carol"))),
    case("CreateAcls-principal-empty", _create(binding(TOPIC, "c-x", READ, principal=""))),
    case("CreateAcls-principal-empty-name", _create(binding(TOPIC, "c-x", READ, principal="User:"))),
    case("CreateAcls-principal-other-type", _create(binding(TOPIC, "c-other", READ, principal="Group:carol"))),
    case("CreateAcls-operation-UNKNOWN", _create(binding(TOPIC, "c-x", 0, principal=CAROL))),
    case("CreateAcls-operation-ANY", _create(binding(TOPIC, "c-x", ANY, principal=CAROL))),
    case("CreateAcls-permission-UNKNOWN", _create(binding(TOPIC, "c-x", READ, 0, principal=CAROL))),
    case("CreateAcls-permission-ANY", _create(binding(TOPIC, "c-x", READ, ANY, principal=CAROL))),
    case("CreateAcls-pattern-MATCH", _create(binding(TOPIC, "c-x", READ, pattern=MATCH, principal=CAROL))),
    case("CreateAcls-pattern-ANY", _create(binding(TOPIC, "c-x", READ, pattern=ANY, principal=CAROL))),
    case("CreateAcls-pattern-UNKNOWN", _create(binding(TOPIC, "c-x", READ, pattern=0, principal=CAROL))),
    case("CreateAcls-operation-not-for-topic", _create(binding(TOPIC, "c-idem", IDEMPOTENT_WRITE,
                                                               principal=CAROL))),
    case("CreateAcls-empty-host", _create(binding(TOPIC, "c-host", READ, principal=CAROL, host=""))),
    case("CreateAcls-valid-and-invalid", admin_call(30, {"creations": [
        binding(TOPIC, "c-ok", READ, principal=CAROL), binding(CLUSTER, "other", ALTER, principal=CAROL),
        binding(GROUP, "c-", READ, pattern=PREFIXED, principal=CAROL)]})),
]

ERIN = "User:erin"              # the describe cases' ACLs (not a user either)
FIXTURE_ACLS = [
    binding(TOPIC, "api-foo", READ, principal=ERIN),
    binding(TOPIC, "api-", WRITE, pattern=PREFIXED, principal=ERIN),
    binding(TOPIC, "*", DESCRIBE, principal=ERIN),
    binding(TOPIC, "api-foo", READ, DENY, principal="User:*", host="10.0.0.1"),
    binding(GROUP, "api-g", READ, principal=ERIN),
    binding(CLUSTER, "kafka-cluster", ALTER, principal=ERIN),
]

DESCRIBES = [
    case("DescribeAcls-MATCH-topic-name", admin_call(29, acl_filter(TOPIC, "api-foo", MATCH))),
    case("DescribeAcls-MATCH-other-name", admin_call(29, acl_filter(TOPIC, "api-bar", MATCH))),
    case("DescribeAcls-MATCH-no-name", admin_call(29, acl_filter(TOPIC, None, MATCH, principal=ERIN))),
    case("DescribeAcls-ANY-pattern-named", admin_call(29, acl_filter(ANY, "api-", ANY))),
    case("DescribeAcls-LITERAL-wildcard-name", admin_call(29, acl_filter(TOPIC, "*", LITERAL))),
    case("DescribeAcls-PREFIXED", admin_call(29, acl_filter(TOPIC, None, PREFIXED))),
    case("DescribeAcls-principal", admin_call(29, acl_filter(principal=ERIN))),
    case("DescribeAcls-wildcard-principal", admin_call(29, acl_filter(principal="User:*"))),
    case("DescribeAcls-host", admin_call(29, acl_filter(host="10.0.0.1"))),
    case("DescribeAcls-operation-and-permission", admin_call(29, acl_filter(op=READ, perm=DENY))),
    case("DescribeAcls-cluster", admin_call(29, acl_filter(CLUSTER, principal=ERIN))),
    case("DescribeAcls-no-match", admin_call(29, acl_filter(principal="User:nobody"))),
    case("DescribeAcls-filter-resource-UNKNOWN", admin_call(29, acl_filter(0))),
    case("DescribeAcls-filter-pattern-UNKNOWN", admin_call(29, acl_filter(pattern=0))),
    case("DescribeAcls-filter-operation-UNKNOWN", admin_call(29, acl_filter(op=0))),
    case("DescribeAcls-as-alice", call(29, acl_filter())),
]


def _delete(tag, filters):
    """Fresh bindings for User:dave-<tag> on this broker, then DeleteAcls with ``filters``."""
    dave = f"User:dave-{tag}"
    made = [binding(TOPIC, f"{tag}-x", READ, principal=dave), binding(TOPIC, f"{tag}-", READ, pattern=PREFIXED,
                                                                      principal=dave),
            binding(TOPIC, f"{tag}-y", WRITE, principal=dave), binding(GROUP, f"{tag}-x", READ, principal=dave)]

    def run(s):
        created = s.call(30, {"creations": made}, user="admin")
        deleted = s.call(31, {"filters": [f(dave, tag) for f in filters]}, user="admin")
        gone = {tuple(sorted(m.items())) for r in deleted.get("filter_results", []) for m in r["matching_acls"]}
        deadline = time.monotonic() + 10
        while True:     # until the broker's authorizer shows the change (Kafka's learns it from its log)
            left = s.call(29, acl_filter(principal=dave), user="admin")
            if sum(len(r["acls"]) for r in left["resources"]) == len(made) - len(gone) or time.monotonic() > deadline:
                return {"created": created, "deleted": deleted, "left": left}
            time.sleep(0.05)
    return run


DELETES = [
    case("DeleteAcls-exact", _delete("d1", [lambda p, t: acl_filter(TOPIC, f"{t}-x", LITERAL, p, "*", READ,
                                                                      ALLOW)])),
    case("DeleteAcls-MATCH", _delete("d2", [lambda p, t: acl_filter(TOPIC, f"{t}-x", MATCH, p)])),
    case("DeleteAcls-ANY-by-principal", _delete("d3", [lambda p, t: acl_filter(principal=p)])),
    case("DeleteAcls-PREFIXED-only", _delete("d4", [lambda p, t: acl_filter(TOPIC, None, PREFIXED, p)])),
    case("DeleteAcls-no-match", _delete("d5", [lambda p, t: acl_filter(GROUP, "nothing", LITERAL, p)])),
    case("DeleteAcls-overlapping-filters", _delete("d6", [lambda p, t: acl_filter(TOPIC, None, ANY, p),
                                                          lambda p, t: acl_filter(ANY, f"{t}-x", LITERAL, p)])),
    case("DeleteAcls-filter-pattern-UNKNOWN", _delete("d7", [lambda p, t: acl_filter(TOPIC, None, 0, p)])),
    case("DeleteAcls-filter-resource-UNKNOWN", _delete("d8", [lambda p, t: acl_filter(0, None, ANY, p)])),
    case("DeleteAcls-valid-and-invalid-filters", _delete("d9", [lambda p, t: acl_filter(TOPIC, None, 0, p),
                                                                lambda p, t: acl_filter(GROUP, None, ANY, p)])),
]


@pytest.fixture(scope="class")
def erin(sec):
    """TestAclApis' fixture ACLs, set once for the class."""
    with acls(sec, FIXTURE_ACLS):
        yield sec


class TestAclApis:
    @pytest.mark.parametrize("fn,ignore", DESCRIBES)
    def test_describe_acls(self, erin, fn, ignore):
        _check(erin, fn, ignore)

    @pytest.mark.parametrize("fn,ignore", DELETES)
    def test_delete_acls(self, sec, fn, ignore):
        _check(sec, fn, ignore)

    @pytest.mark.parametrize("fn,ignore", INVALID_CREATIONS)
    def test_create_acls(self, sec, fn, ignore):
        _check(sec, fn, ignore)


def test_every_listed_difference_is_a_case():
    ids = {p.id for cases in (NO_ACL, WITH_ACLS, DESCRIBES, DELETES, INVALID_CREATIONS) for p in cases}
    assert set(DIFFERS) <= ids, sorted(set(DIFFERS) - ids)
