"""The calls of the security differential tests (test_security_differential.py): request bodies
written with kio's field names, and confluent-kafka calls whose outcome (error codes, names,
what is seen) is returned as plain values comparable between the two brokers.  A *case* is a
function of a secured.Side returning its answer."""

from __future__ import annotations

import re
import time
import uuid

import pytest

from engine.records import build_batch

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import admin as ck_admin  # noqa: E402

ZERO_UUID = uuid.UUID(int=0)
ANY = 1                          # AclBindingFilter: any resource type / pattern / operation / permission


# -- request bodies ----------------------------------------------------------------------------
def md(names, auto=False):
    return {"topics": None if names is None else [{"name": n, "topic_id": ZERO_UUID} for n in names],
            "allow_auto_topic_creation": auto, "include_topic_authorized_operations": True,
            "include_cluster_authorized_operations": True}


# the same bytes to both, timestamped now: a record older than retention.ms (7 days) is deleted by
# Kafka's first retention pass, 5 min after its start, and a slower run then read nothing from Kafka
RECORDS = bytes(build_batch([(b"v", None, [], int(time.time() * 1000))]))


def produce(topic, tid=None):
    return {"transactional_id": tid, "acks": -1, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": RECORDS}]}]}


# Fetch by name (v12, the last before topic ids): each broker gives the topic its own id;
# test_differential.py compares v13+ by id
FETCH_BY_NAME = 12


def fetch(topic):
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}


def list_offsets(topic):
    return {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}


def commit(group, topic, generation=-1, member=""):
    return {"group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
            "group_instance_id": None, "retention_time_ms": -1, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]}


def offset_fetch(group, topic=None):
    topics = None if topic is None else [{"name": topic, "partition_indexes": [0]}]
    return {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": topics}],
            "require_stable": False}


def join(group, member=""):
    return {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": member,
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x01"}], "reason": None}


def create_topic(name, validate_only=False):
    return {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout": 30000, "validate_only": validate_only}


def describe_configs(rtype, name):
    return {"resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}


def incremental(rtype, name, key="retention.ms", value="3600000"):
    return {"resources": [{"resource_type": rtype, "resource_name": name, "configs": [
        {"name": key, "config_operation": 0, "value": value}]}], "validate_only": False}


def init_pid(tid):
    return {"transactional_id": tid, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1}


def acl_filter(rtype=ANY, name=None, pattern=ANY, principal=None, host=None, op=ANY, perm=ANY):
    return {"resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": perm}


def scram_upsert(user):
    return {"deletions": [], "upsertions": [{"name": user, "mechanism": 1, "iterations": 8192,
                                             "salt": b"s" * 16, "salted_password": b"p" * 32}]}


def call(key, body, version=None, retry=frozenset()):
    """A case: one request as alice."""
    return lambda s: s.call(key, body(s) if callable(body) else body, version, retry=retry)


def broker_name(s) -> str:
    return str(s.self_id)


# -- confluent-kafka cases -----------------------------------------------------------------------
def _err(e):
    """A client error as comparable values (librdkafka names the broker in some texts)."""
    if e is None:
        return None
    text = re.sub(r"(sasl_plaintext|plaintext)://[\d.]+:\d+/\w+", "<broker>", e.str())
    return {"code": e.code(), "name": e.name(), "str": text}


def _future(f, shape=repr):
    try:
        return {"ok": shape(f.result(15))}
    except ck.KafkaException as e:
        return _err(e.args[0])


def _admin(s, user="alice"):
    return ck_admin.AdminClient(s.conf(user))


def ck_list_topics(names):
    def run(s):
        if names is None:
            md = _admin(s).list_topics(timeout=15)
            return {"topics": sorted(md.topics)}
        md = _admin(s).list_topics(names[0], timeout=15)
        return {n: _err(t.error) for n, t in md.topics.items()}
    return run


def ck_produce(topic):
    def run(s):
        errors = []
        p = ck.Producer(s.conf(**{"enable.idempotence": False, "message.timeout.ms": 5000}))
        try:
            p.produce(topic, b"ck", on_delivery=lambda e, m: errors.append(e))
            p.flush(15)
        except ck.KafkaException as e:
            errors.append(e.args[0])
        return [_err(e) for e in errors]
    return run


def _consumer_errors(c, seconds=4.0, want_value=False):
    codes, values = set(), []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            codes.add(msg.error().code())
        else:
            values.append(msg.value())
            if want_value:
                break
    return {"error_codes": sorted(codes), "values": values}


def ck_consume(topic, group="ck-consume", expect_value=False):
    def run(s):
        for _attempt in range(2 if expect_value else 1):   # (a loaded machine: once more, fresh)
            c = ck.Consumer(s.conf(**{"group.id": group, "enable.auto.commit": False}))
            try:
                c.assign([ck.TopicPartition(topic, 0, 0)])
                seen = _consumer_errors(c, seconds=15.0 if expect_value else 4.0, want_value=True)
            finally:
                c.close()
            if seen["values"] or seen["error_codes"]:
                break
        return seen
    return run


def ck_subscribe(topic, group, expect_assignment=False):
    """A consumer joining ``group`` for ``topic``: the errors seen and the partitions assigned
    (what the group protocol gave it; fetching is ck_consume's part)."""
    def run(s):
        c = ck.Consumer(s.conf(**{"group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False}))
        codes: set[int] = set()
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + (20.0 if expect_assignment else 4.0)
            while time.monotonic() < deadline and not (expect_assignment and c.assignment()):
                msg = c.poll(0.2)
                if msg is not None and msg.error() is not None:
                    codes.add(msg.error().code())
            return {"error_codes": sorted(codes),
                    "assigned": sorted((tp.topic, tp.partition) for tp in c.assignment())}
        finally:
            c.close()
    return run


def ck_admin_call(method, *args, shape=repr, **kwargs):
    """An AdminClient method as alice; its futures' results through ``shape`` (what may be
    compared: no node addresses) or their errors."""
    def run(s):
        a = _admin(s)
        fs = getattr(a, method)(*args, **kwargs)
        if isinstance(fs, dict):
            return {repr(k): _future(f, shape) for k, f in fs.items()}
        return _future(fs, shape)
    return run


def ops(ops):
    return None if ops is None else sorted(op.name for op in ops)


def groups_listed(r):
    return {"valid": sorted(g.group_id for g in r.valid), "errors": [_err(e.args[0]) for e in r.errors]}


def group_described(d):
    return {"group_id": d.group_id, "state": str(d.state), "members": len(d.members),
            "authorized_operations": ops(d.authorized_operations)}


def md_by_id(topic: str | None):
    """A case: Metadata asking for ``topic`` by its id (learned as admin from this broker; None:
    an id no topic has)."""
    def run(s):
        topic_id = uuid.uuid4()
        if topic is not None:
            raw = s.sec.pairs["admin"].conns[s.name].call(3, s.sec.version[3], md([topic]))
            topic_id = raw["topics"][0]["topic_id"]
        body = dict(md(None), topics=[{"name": None, "topic_id": topic_id}])
        return s.call(3, body)
    return run


def offset_for_leader_epoch(topic, replica_id=-1):
    return {"replica_id": replica_id, "topics": [{"topic": topic, "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}


def write_txn_markers(topic):
    return {"markers": [{"producer_id": 5, "producer_epoch": 0, "transaction_result": True,
                         "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0}]}


def ck_idempotent_producer(topic):
    """An idempotent producer's errors (its InitProducerId needs IDEMPOTENT_WRITE or WRITE)."""
    def run(s):
        codes: set[int] = set()
        p = ck.Producer(s.conf(**{"enable.idempotence": True, "message.timeout.ms": 5000},
                               error_cb=lambda e: codes.add(e.code())))
        delivered = []
        try:
            p.produce(topic, b"idem", on_delivery=lambda e, m: delivered.append(_err(e)))
            p.flush(8)
        except ck.KafkaException as e:
            codes.add(e.args[0].code())
        return {"error_codes": sorted(codes), "delivered": delivered}
    return run


def ck_transactional_producer(tid, topic):
    """init_transactions, then one record in a committed transaction: each step's error."""
    def run(s):
        p = ck.Producer(s.conf(**{"transactional.id": tid, "transaction.timeout.ms": 60000}))
        steps = {}
        for name, step in (("init", lambda: p.init_transactions(15)), ("begin", p.begin_transaction),
                           ("produce", lambda: (p.produce(topic, b"txn"), p.flush(10))),
                           ("commit", lambda: p.commit_transaction(15))):
            try:
                step()
                steps[name] = None
            except ck.KafkaException as e:
                steps[name] = _err(e.args[0])
                break
        return steps
    return run
