"""Differential tests: the same requests to Apache Kafka 4.0 and to our broker, answers compared
field by field.

Each test sends one sequence of requests (written with kio at the highest version both brokers
serve, plus older versions real clients still send) to both brokers and compares the decoded
answers.  Fields in ALLOWED may differ; everything else must be equal.

ALLOWED (in wire.py; kept short; each is a property of the deployment, not of behaviour):

* ``cluster_id``            random per cluster (KRaft format / our meta.properties).
* ``host``, ``port``        each broker's own listener.
* ``throttle_time_ms``      quota throttling: Kafka may report a nonzero value, we never throttle.
* ``topic_id``              random per topic; only "zero UUID or not" is compared (normalized).
* ``error_message``         free text; only "null or not" is compared (normalized).
* ``aborted_transactions``  Fetch: Kafka writes an empty array for an unknown partition and null
  elsewhere; both mean "no aborted transactions" to every client (normalized: [] -> null).
* node ids (``node_id``, ``leader_id``, ``controller_id``, ``replica_nodes``, ``isr_nodes``,
  ``coordinator``/``node_id`` inside FindCoordinator) are compared after mapping each broker's own
  id to "self" (run-kafka.sh uses node.id=1, we are node 0), so -1 vs a real id still counts.
* ``member_id``             a random UUID suffix after the client id (``<client_id>-<uuid>``);
  compared after cutting the UUID.
"""

from __future__ import annotations

import itertools
import time
import uuid

import pytest

from engine.records import build_batch

from .wire import ALLOWED, Pair, diff, plain
from .wire import error_codes as _codes
from .wire import normalize as _normalize

ZERO_UUID = uuid.UUID(int=0)        # Metadata v10+: topics asked by name carry a null topic id

_seq = itertools.count()


@pytest.fixture(scope="module")
def pair(ours, kafka):
    p = Pair(ours, kafka)
    yield p
    p.close()


def fresh(prefix: str = "d") -> str:
    return f"{prefix}-{next(_seq)}-{uuid.uuid4().hex[:6]}"


def create(pair, name, partitions=1, configs=()):
    resp = pair.same(19, {"topics": [{"name": name, "num_partitions": partitions,
                                      "replication_factor": 1, "assignments": [],
                                      "configs": [{"name": k, "value": v} for k, v in configs]}],
                          "timeout_ms": 30000, "validate_only": False},
                     ignore={"configs"})
    assert resp["topics"][0]["error_code"] == 0, resp
    settle(pair, [name])


def settle(pair, names, timeout=10.0):
    """Wait until Kafka's broker metadata shows `names` with all partitions led (its controller
    answers CreateTopics/CreatePartitions before the broker's metadata cache has caught up)."""
    deadline = time.monotonic() + timeout
    req = dict(MD, topics=[{"name": n, "topic_id": ZERO_UUID} for n in names])
    while True:
        resp = plain(pair.conns["kafka"].call(3, pair.version[3], req))
        if all(t["error_code"] == 0 and t["partitions"] and
               all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in t["partitions"])
               for t in resp["topics"]):
            return
        assert time.monotonic() < deadline, f"Kafka did not show {names}: {resp}"
        time.sleep(0.05)


def produce(pair, topic, batches, partition=0):
    """The same batches to both; Kafka's new partition may still answer NOT_LEADER (6) for a
    moment after its metadata shows the leader, so a retriable error is retried (as clients do)."""
    for batch in batches:
        req = {"transactional_id": None, "acks": -1, "timeout": 30000,
               "topic_data": [{"name": topic, "partition_data": [
                   {"index": partition, "records": batch}]}]}
        answers = []
        for broker in ("ours", "kafka"):
            for _ in range(100):
                resp = plain(pair.conns[broker].call(0, pair.version[0], req))
                if resp["responses"][0]["partition_responses"][0]["error_code"] not in (3, 6):
                    break
                time.sleep(0.05)
            answers.append(_normalize(resp, pair.self_id[broker]))
        d = diff(*answers, ALLOWED)
        assert not d, "Produce: ours != Kafka:\n" + "\n".join(d)
        assert answers[0]["responses"][0]["partition_responses"][0]["error_code"] == 0


def by_name(key):
    """Kafka lists topics and partitions in hash order: sort both answers the same way."""
    def sort(resp):
        resp = dict(resp)
        topics = []
        for t in sorted(resp[key], key=lambda t: t["name"]):
            if "partitions" in t:
                t = dict(t, partitions=sorted(t["partitions"], key=lambda p: p["partition_index"]))
            topics.append(t)
        resp[key] = topics
        return resp
    return sort


MD = {"allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
      "include_topic_authorized_operations": False}


# -- Metadata ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [1, 4, None])
def test_metadata_some_none_unknown(pair, version):
    t1, t2 = fresh("md"), fresh("md")
    create(pair, t1, 3)
    create(pair, t2, 1)
    pair.same(3, dict(MD, topics=[{"name": t1, "topic_id": ZERO_UUID}, {"name": t2, "topic_id": ZERO_UUID}]),
              version, sort=by_name("topics"))
    if version is None or version >= 1:
        pair.same(3, dict(MD, topics=[]), version)
    if version is None or version >= 4:        # below v4 a Metadata request always auto-creates
        pair.same(3, dict(MD, topics=[{"name": fresh("nosuch"), "topic_id": ZERO_UUID}]), version)
    pair.same(3, dict(MD, topics=[{"name": "bad name!", "topic_id": ZERO_UUID},
                                  {"name": t1, "topic_id": ZERO_UUID}]), version,
              sort=by_name("topics"))


def test_metadata_auto_creation(pair):
    """Kafka (KRaft) answers the Metadata that triggers an auto-creation with
    UNKNOWN_TOPIC_OR_PARTITION while its controller creates the topic; we create it on the spot
    and answer it at once.  Clients retry either way, so only the settled answers are compared."""
    name = fresh("auto")
    ours, theirs = pair.both(3, dict(MD, topics=[{"name": name, "topic_id": ZERO_UUID}],
                                     allow_auto_topic_creation=True))
    assert ours["topics"][0]["error_code"] == 0
    assert theirs["topics"][0]["error_code"] in (0, 3, 5)
    for _ in range(100):
        _, theirs = pair.both(3, dict(MD, topics=[{"name": name, "topic_id": ZERO_UUID}]))
        if theirs["topics"][0]["error_code"] == 0 and theirs["topics"][0]["partitions"]:
            break
        time.sleep(0.1)
    # afterwards the topic exists on both, with num.partitions=1
    resp = pair.same(3, dict(MD, topics=[{"name": name, "topic_id": ZERO_UUID}]))
    assert resp["topics"][0]["error_code"] == 0 and len(resp["topics"][0]["partitions"]) == 1


def test_metadata_all_topics(pair):
    create(pair, fresh("all"), 2)
    for version in (1, pair.version[3]):
        resp = pair.same(3, dict(MD, topics=None), version, sort=by_name("topics"))
        assert resp["topics"]


# -- ListOffsets ------------------------------------------------------------------------------

def _timestamps_topic(pair) -> str:
    """Three batches: timestamps 1000 2000 2000 | 1500 3000 | 3000 2500 (offsets 0-7)."""
    name = fresh("lo")
    create(pair, name, 2)
    produce(pair, name, [
        build_batch([(b"a", None, [], 1000), (b"b", None, [], 2000), (b"c", None, [], 2000)]),
        build_batch([(b"d", b"k", [], 1500), (b"e", None, [], 3000)]),
        build_batch([(b"f", None, [("h", b"v")], 3000), (b"g", None, [], 2500)]),
    ])
    return name


@pytest.mark.parametrize("version", [1, 4, None])
def test_list_offsets(pair, version):
    name = _timestamps_topic(pair)
    v = pair.version[2] if version is None else version
    times = [-1, -2, 0, 999, 1000, 1001, 1500, 2000, 2500, 2999, 3000, 3001]
    if v >= 7:
        times.append(-3)                     # KIP-734 MAX_TIMESTAMP
    for ts in times:
        resp = pair.same(2, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": name, "partitions": [{"partition_index": 0, "timestamp": ts,
                                           "current_leader_epoch": -1, "max_num_offsets": 1}]}]},
            version)
        assert resp["topics"][0]["partitions"][0]["error_code"] == 0
    # an empty partition, an unknown partition, an unknown topic, a stale leader epoch
    for parts in ([{"partition_index": 1, "timestamp": -2, "current_leader_epoch": -1}],
                  [{"partition_index": 1, "timestamp": 5000, "current_leader_epoch": -1}],
                  [{"partition_index": 7, "timestamp": -1, "current_leader_epoch": -1}],
                  [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": 5}]):
        pair.same(2, {"replica_id": -1, "isolation_level": 0,
                      "topics": [{"name": name, "partitions": parts}]}, version)
    # a partition asked twice: answered once with INVALID_REQUEST; a topic listed twice: merged
    dup = [{"partition_index": i, "timestamp": t} for i, t in ((1, -1), (0, -2), (1, 5000))]
    pair.same(2, {"replica_id": -1, "isolation_level": 0,
                  "topics": [{"name": name, "partitions": dup}]}, version, sort=by_name("topics"))
    pair.same(2, {"replica_id": -1, "isolation_level": 0,
                  "topics": [{"name": name, "partitions": dup[:1]},
                             {"name": name, "partitions": dup[1:2]}]}, version,
              sort=by_name("topics"))
    pair.same(2, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": fresh("nosuch"), "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
        version)
    # read_committed answers the last stable offset (the high watermark: no transactions)
    pair.same(2, {"replica_id": -1, "isolation_level": 1, "topics": [
        {"name": name, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}, version)


# -- Fetch ------------------------------------------------------------------------------------

def _fetch(topic, parts, max_bytes=1 << 20, min_bytes=1, max_wait=0, isolation=0, topic_id=ZERO_UUID):
    return {"replica_id": -1, "max_wait": max_wait, "min_bytes": min_bytes,
            "max_bytes": max_bytes, "isolation_level": isolation, "session_id": 0,
            "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
                dict({"current_leader_epoch": -1, "log_start_offset": -1,
                      "partition_max_bytes": 1 << 20}, **p) for p in parts]}]}


def topic_ids(pair, name) -> dict[str, uuid.UUID]:
    """Each broker's id of topic `name` (Fetch v13+ names topics by id; the ids differ)."""
    out = {}
    for broker in ("ours", "kafka"):
        resp = plain(pair.conns[broker].call(3, 12, dict(MD, topics=[{"name": name, "topic_id": ZERO_UUID}])))
        out[broker] = uuid.UUID(resp["topics"][0]["topic_id"])
    return out


def fetch_both(pair, name, parts, version=None, ids=None, **kw) -> tuple[dict, dict]:
    """One Fetch to each broker, by name or (v13+) by that broker's id of `name` (`ids`: given
    ids, e.g. one no topic has); the normalized answers."""
    v = pair.version[1] if version is None else version
    ids = ids or (topic_ids(pair, name) if v >= 13 else {"ours": ZERO_UUID, "kafka": ZERO_UUID})
    out = []
    for broker in ("ours", "kafka"):
        resp = plain(pair.conns[broker].call(1, v, _fetch(name, parts, topic_id=ids[broker], **kw)))
        out.append(_normalize(resp, pair.self_id[broker]))
    return out[0], out[1]


def same_fetch(pair, name, parts, version=None, ids=None, **kw) -> dict:
    ours, theirs = fetch_both(pair, name, parts, version, ids, **kw)
    d = diff(ours, theirs, ALLOWED)
    assert not d, f"Fetch v{version} {parts}: ours != Kafka:\n" + "\n".join(d)
    return ours


@pytest.mark.parametrize("version", [4, 12, 13, None])
def test_fetch_edges(pair, version):
    """Every Fetch version the clients use: 4, 12 (the last by name), 13 (by topic id; an id no
    topic has is UNKNOWN_TOPIC_ID) and the newest (16: KIP-951, nothing to name on one node)."""
    v = pair.version[1] if version is None else version
    name = fresh("fe")
    create(pair, name, 1)
    ids = topic_ids(pair, name) if v >= 13 else None
    produce(pair, name, [build_batch([(b"x" * 200, b"k%d" % i, [], 1000 + i) for i in range(5)]),
                         build_batch([(b"y" * 10, None, [], 2000)])])
    cases = [
        [{"partition": 0, "fetch_offset": 0}],                        # everything: two batches
        [{"partition": 0, "fetch_offset": 3}],                        # inside the first batch
        [{"partition": 0, "fetch_offset": 6}],                        # offset = high watermark
        [{"partition": 0, "fetch_offset": 7}],                        # above: OFFSET_OUT_OF_RANGE
        [{"partition": 0, "fetch_offset": -1}],                       # negative
        [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10}],  # smaller than a batch
        [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1200}],  # one batch fits
        [{"partition": 4, "fetch_offset": 0}],                        # unknown partition
        [{"partition": 0, "fetch_offset": 0, "current_leader_epoch": 9}],   # epoch from the future
    ]
    for parts in cases:
        same_fetch(pair, name, parts, v, ids)
    same_fetch(pair, name, [{"partition": 0, "fetch_offset": 0}], v, ids, max_bytes=10)
    nosuch = uuid.uuid4()           # an unknown topic; from v13 an id no topic has
    resp = same_fetch(pair, fresh("nosuch"), [{"partition": 0, "fetch_offset": 0}], v,
                      {"ours": nosuch, "kafka": nosuch})
    assert _codes(resp)[-1] == (100 if v >= 13 else 3), resp
    # below the log start offset after DeleteRecords: OFFSET_OUT_OF_RANGE, log_start_offset 5
    pair.same(21, {"topics": [{"name": name, "partitions": [{"partition_index": 0, "offset": 5}]}],
                   "timeout": 5000})
    same_fetch(pair, name, [{"partition": 0, "fetch_offset": 2}], v, ids)
    same_fetch(pair, name, [{"partition": 0, "fetch_offset": 5}], v, ids)


def test_fetch_waits_max_wait_when_nothing_to_read(pair):
    name = fresh("fw")
    create(pair, name, 1)
    ids = topic_ids(pair, name)
    spent = {}
    for broker in ("ours", "kafka"):
        t0 = time.monotonic()
        resp = plain(pair.conns[broker].call(1, pair.version[1], _fetch(
            name, [{"partition": 0, "fetch_offset": 0}], min_bytes=1, max_wait=400, topic_id=ids[broker])))
        spent[broker] = time.monotonic() - t0
        part = resp["responses"][0]["partitions"][0]
        assert (part["error_code"], part["high_watermark"], part["records"]) in \
            ((0, 0, None), (0, 0, b""))
    assert 0.35 < spent["ours"] < 2.0 and 0.35 < spent["kafka"] < 2.0, spent
    same_fetch(pair, name, [{"partition": 0, "fetch_offset": 0}], ids=ids, min_bytes=1, max_wait=200)


# -- CreateTopics -----------------------------------------------------------------------------

def _ct(name, partitions=1, rf=1, configs=(), validate_only=False, assignments=()):
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                        "assignments": list(assignments),
                        "configs": [{"name": k, "value": v} for k, v in configs]}],
            "timeout_ms": 30000, "validate_only": validate_only}


@pytest.mark.parametrize("version", [2, 4, None])
def test_create_topics_errors(pair, version):
    existing = fresh("ct")
    create(pair, existing, 1)
    for req in (_ct(existing), _ct("bad name!"), _ct("a" * 250), _ct(".."),
                _ct(fresh("ct"), configs=[("no.such.key", "1")]),
                _ct(fresh("ct"), configs=[("retention.ms", "soon")]),
                _ct(fresh("ct"), configs=[("cleanup.policy", "sometimes")]),
                _ct(fresh("ct"), partitions=0), _ct(fresh("ct"), partitions=-2),
                _ct(fresh("ct"), rf=3), _ct(fresh("ct"), rf=0),
                _ct(fresh("ct"), validate_only=True, rf=3),
                _ct(fresh("ct"), validate_only=True, partitions=0),
                _ct(fresh("ct"), validate_only=True, configs=[("segment.bytes", "x")])):
        resp = pair.same(19, req, version)
        assert resp["topics"][0]["error_code"] != 0, req
    # validate_only of a good topic: success, and nothing is created
    name = fresh("ct")
    resp = pair.same(19, _ct(name, 3, validate_only=True), version, ignore={"configs"})
    assert resp["topics"][0]["error_code"] == 0
    pair.same(3, dict(MD, topics=[{"name": name, "topic_id": ZERO_UUID}]))


# -- DescribeConfigs --------------------------------------------------------------------------

def _configs(resp) -> dict:
    (res,) = resp["results"]
    return {c["name"]: c for c in res["configs"]}


def _describe(pair, rtype, name, keys=None, synonyms=True, documentation=False):
    return pair.both(32, {"resources": [{"resource_type": rtype, "resource_name": name,
                                         "configuration_keys": keys}],
                          "include_synonyms": synonyms, "include_documentation": documentation})


# Topic keys Kafka 4.0 describes that we do not: every other key of Kafka's must be ours, with
# the same value, source, flags, type and synonyms.
TOPIC_KEYS_NOT_OURS = {
    # tiered storage (KIP-405): no remote log here
    "remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable",
    "local.retention.ms", "local.retention.bytes",
    # replication throttles: a single node replicates nothing
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    # KIP-390 compression levels: not implemented by our producer-side codecs (not accepted either)
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
}


def _sorted_configs(resp):
    resp = dict(resp)
    resp["results"] = [dict(r, configs=sorted(r["configs"], key=lambda c: c["name"]))
                       for r in resp["results"]]
    return resp


def test_describe_topic_configs(pair):
    name = fresh("dc")
    create(pair, name, 1, configs=[("retention.ms", "123456"), ("cleanup.policy", "compact")])
    ours, theirs = _describe(pair, 2, name)
    problems = diff({k: v for k, v in ours["results"][0].items() if k != "configs"},
                    {k: v for k, v in theirs["results"][0].items() if k != "configs"}, ALLOWED)
    mine, kafka = _configs(ours), _configs(theirs)
    if set(kafka) - set(mine) - TOPIC_KEYS_NOT_OURS:
        problems.append(f"keys only Kafka has: {sorted(set(kafka) - set(mine))}")
    if set(mine) - set(kafka):
        problems.append(f"keys only we have: {sorted(set(mine) - set(kafka))}")
    for key in sorted(set(mine) & set(kafka)):
        problems += diff(mine[key], kafka[key], ALLOWED | {"documentation"}, key)
    assert not problems, "\n".join(problems)
    # only some keys, an unknown key, an unknown topic
    for keys in (["retention.ms", "segment.bytes"], ["no.such.key"]):
        ours, theirs = _describe(pair, 2, name, keys)
        assert diff(_sorted_configs(ours), _sorted_configs(theirs), ALLOWED) == []
    ours, theirs = _describe(pair, 2, fresh("nosuch"))
    assert diff(ours, theirs, ALLOWED) == []


# Broker keys whose values are this deployment's (addresses, paths, ids, run-kafka.sh's settings).
BROKER_VALUE_DIFFERS = {"num.partitions", "listeners", "advertised.listeners", "log.dirs", "broker.id", "node.id",
                        "controller.quorum.voters", "controller.listener.names", "process.roles",
                        "listener.security.protocol.map", "inter.broker.listener.name",
                        "offsets.topic.replication.factor", "group.initial.rebalance.delay.ms",
                        "transaction.state.log.replication.factor", "transaction.state.log.min.isr"}


def test_describe_broker_configs(pair):
    answers = {}
    for broker in ("ours", "kafka"):
        resp = plain(pair.conns[broker].call(32, pair.version[32], {"resources": [
            {"resource_type": 4, "resource_name": str(pair.self_id[broker]),
             "configuration_keys": None}], "include_synonyms": True,
            "include_documentation": False}))
        (res,) = resp["results"]
        assert res["error_code"] == 0, res
        answers[broker] = {c["name"]: c for c in res["configs"]}
    mine, kafka = answers["ours"], answers["kafka"]
    from engine.config import OWN_BROKER_KEYS  # metrics.port, console.port, ...: ours only
    for key in OWN_BROKER_KEYS:
        mine.pop(key, None)
    assert set(mine) <= set(kafka), f"keys Kafka does not have: {sorted(set(mine) - set(kafka))}"
    problems = []
    for key in sorted(mine):
        a, b = dict(mine[key]), dict(kafka[key])
        if key in BROKER_VALUE_DIFFERS:
            # set in one deployment's config and not the other's: compare type and flags only
            for x in (a, b):
                x.pop("value"), x.pop("synonyms"), x.pop("config_source")
        problems += diff(a, b, ALLOWED | {"documentation", "read_only"}, key)
        # Every broker key is read-only here (no dynamic broker configs: IncrementalAlterConfigs
        # on a BROKER resource is refused), where Kafka marks its dynamically updatable keys False.
        assert a["read_only"] is True, key
    assert not problems, "\n".join(problems)
    # what our broker was started with (--config) is STATIC_BROKER_CONFIG
    for key in ("group.initial.rebalance.delay.ms",):
        assert mine[key]["config_source"] == 4 and mine[key]["synonyms"][0]["source"] == 4, mine[key]


# -- Consumer group APIs ----------------------------------------------------------------------

def scenario(pair, steps):
    """Run ``steps(call)`` against each broker (requests may use earlier answers, e.g. the member
    id a broker handed out) and compare the whole list of answers."""
    runs = {}
    for broker in ("ours", "kafka"):
        answers = []

        def call(key, data, version=None, record=True, _b=broker, _a=answers):
            resp = plain(pair.conns[_b].call(key, pair.version[key] if version is None else version,
                                             data))
            if record:
                _a.append((key, _normalize(resp, pair.self_id[_b])))
            return resp
        steps(call)
        runs[broker] = answers
    problems = []
    for i, ((key, a), (_, b)) in enumerate(zip(runs["ours"], runs["kafka"], strict=False)):
        problems += diff(a, b, ALLOWED | {"client_host"}, f"step {i} ({key})")
    assert not problems, "\n".join(problems)
    assert len(runs["ours"]) == len(runs["kafka"])
    return runs["ours"]


def find_coordinator(call, group):
    """FindCoordinator until the coordinator is ready (Kafka creates __consumer_offsets on the
    first lookup and answers COORDINATOR_NOT_AVAILABLE meanwhile); the last answer is kept."""
    for _ in range(200):
        resp = call(10, {"key_type": 0, "coordinator_keys": [group], "key": group}, record=False)
        if resp["coordinators"][0]["error_code"] == 0:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(resp)
    for _ in range(200):          # and until the coordinator has loaded the group's partition
        fetch = call(9, {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                                     "topics": None}], "require_stable": False}, record=False)
        if fetch["groups"][0]["error_code"] not in (14, 15, 16):
            break
        time.sleep(0.05)
    return call(10, {"key_type": 0, "coordinator_keys": [group], "key": group})


def _join(group, member_id="", session=10000, protocols=(("range", b"\x00\x01"),),
          protocol_type="consumer", instance=None):
    return {"group_id": group, "session_timeout": session, "rebalance_timeout": 10000,
            "member_id": member_id, "group_instance_id": instance, "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": md} for n, md in protocols], "reason": None}


def test_group_lifecycle_and_errors(pair, monkeypatch):
    topic = fresh("gt")
    create(pair, topic, 2)

    def steps(call):
        g = "grp-" + topic
        # coordinator lookup, then retry what Kafka answered while loading
        find_coordinator(call, g)
        call(15, {"groups": [g], "include_authorized_operations": False})     # unknown group
        call(9, {"group_id": g, "topics": [{"name": topic, "partition_indexes": [0, 1]}],
                 "groups": [{"group_id": g, "member_id": None, "member_epoch": -1, "topics": [
                     {"name": topic, "partition_indexes": [0, 1]}]}],
                 "require_stable": True})                                      # nothing committed
        call(42, {"groups_names": [g]})                                        # unknown: not found
        call(11, _join(g, session=1))                                          # session too short
        call(11, _join(g, member_id="nobody"))                                 # unknown member
        call(11, _join(g, protocols=()))                                       # no protocols
        first = call(11, _join(g))                                             # MEMBER_ID_REQUIRED
        member = first["member_id"]
        joined = call(11, _join(g, member))                                    # leader of gen 1
        gen = joined["generation_id"]
        call(11, _join(g, member, protocol_type="connect"))                    # wrong protocol type
        sync = {"group_id": g, "generation_id": gen, "member_id": member, "group_instance_id": None,
                "protocol_type": "consumer", "protocol_name": "range",
                "assignments": [{"member_id": member, "assignment": b"\x00\x01assign"}]}
        call(14, dict(sync, generation_id=gen + 5))                            # ILLEGAL_GENERATION
        call(14, dict(sync, member_id="nobody"))                               # UNKNOWN_MEMBER_ID
        call(14, dict(sync, protocol_name="roundrobin"))                       # INCONSISTENT_GROUP_PROTOCOL
        call(14, sync)
        call(12, {"group_id": g, "generation_id": gen, "member_id": member,
                  "group_instance_id": None})
        call(12, {"group_id": g, "generation_id": gen + 1, "member_id": member,
                  "group_instance_id": None})
        commit = {"group_id": g, "generation_id_or_member_epoch": gen, "member_id": member,
                  "group_instance_id": None, "retention_time_ms": -1, "topics": [
                      {"name": topic, "partitions": [
                          {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                           "committed_metadata": "m"},
                          {"partition_index": 1, "committed_offset": 7, "committed_leader_epoch": 3,
                           "committed_metadata": None}]}]}
        call(8, commit)
        call(8, dict(commit, generation_id_or_member_epoch=gen + 1))           # ILLEGAL_GENERATION
        call(8, dict(commit, member_id="nobody"))                              # UNKNOWN_MEMBER_ID
        call(8, dict(commit, topics=[{"name": topic, "partitions": [
            {"partition_index": 0, "committed_offset": 6, "committed_leader_epoch": -1,
             "committed_metadata": "x" * 5000}]}]))                           # metadata too large
        call(9, {"group_id": g, "topics": None, "require_stable": False,
                 "groups": [{"group_id": g, "member_id": None, "member_epoch": -1,
                             "topics": None}]})                                # all committed
        call(9, {"group_id": g, "topics": None, "require_stable": False, "groups": [
            {"group_id": g, "member_id": None, "member_epoch": -1,
             "topics": [{"name": topic, "partition_indexes": [1, 0, 9]}]}]})
        call(15, {"groups": [g], "include_authorized_operations": False})      # Stable, 1 member
        call(16, {"states_filter": ["Stable"], "types_filter": []})
        call(42, {"groups_names": [g]})                                        # NON_EMPTY_GROUP
        call(13, {"group_id": g, "member_id": member,
                  "members": [{"member_id": member, "group_instance_id": None, "reason": None}]})
        call(13, {"group_id": g, "member_id": member,
                  "members": [{"member_id": member, "group_instance_id": None, "reason": None}]})
        call(15, {"groups": [g], "include_authorized_operations": False})      # Empty
        call(16, {"states_filter": ["Empty"], "types_filter": []})
        call(42, {"groups_names": [g]})                                        # deleted
        call(15, {"groups": [g], "include_authorized_operations": False})      # Dead
        call(9, {"group_id": g, "topics": None, "require_stable": False,
                 "groups": [{"group_id": g, "member_id": None, "member_epoch": -1,
                             "topics": None}]})
    answers = scenario(pair, steps)
    # both brokers agreed; and the steps reached the paths they are about
    assert [_codes(a) for _, a in answers] == [
        [0], [0], [0, 0, 0], [69], [26], [25], [23], [79], [0], [23], [22], [25], [23], [0], [0],
        [22], [0, 0], [22, 22], [25, 25], [12], [0, 0, 0], [0, 0, 0, 0], [0], [0], [68], [0, 0],
        [0, 25], [0], [0], [0], [0], [0]]


def test_produce_of_transactional_batches_and_markers(pair):
    """Transactional batches in a client's Produce: without a transactional id the whole request
    is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; with one, a marker with no producer id is not
    verified and is refused by the append (INVALID_RECORD); nothing is written either way."""
    from engine import _native
    name = fresh("tx")
    create(pair, name, 1)
    b = _native.BatchBuilder()
    b.append(b"v", None, None, int(time.time() * 1000))
    data_batch = bytes(b.build(0, 0, 5, 0, 0, True))
    for tid, records in ((None, data_batch), (None, bytes(_native.build_control_batch(7, 0, True, 0))),
                         ("tx-diff", bytes(_native.build_control_batch(-1, 0, True, 0)))):
        # (for the refused marker ours says why and answers log_start_offset -1 as for every
        # append error; Kafka answers no message and the log start: left out of the comparison)
        pair.same(0, {"transactional_id": tid, "acks": -1, "timeout": 5000, "topic_data": [
            {"name": name, "partition_data": [{"index": 0, "records": records}]}]}, 9,
            ignore={"error_message", "log_start_offset"} if tid else ())
    pair.same(2, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]})


@pytest.mark.parametrize("version", [9, 10, 11])
def test_produce_versions_and_transaction_abortable(pair, version):
    """Produce 9-11: appends, an unknown partition and topic (no CurrentLeader: KIP-951 names a
    leader only for NOT_LEADER_OR_FOLLOWER, which one node never answers), and a transactional
    batch to a partition not added to the transaction -- INVALID_TXN_STATE below v11,
    KIP-890's TRANSACTION_ABORTABLE from v11."""
    name = fresh("pv")
    create(pair, name, 1)
    batch = build_batch([(b"v", None, [], 1000)])
    for topic, index in ((name, 0), (name, 3), (fresh("nosuch"), 0)):
        # (ours says why a partition is unknown, Kafka answers no message: not compared)
        pair.same(0, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": index, "records": batch}]}]}, version,
            ignore={"error_message"})
    tid = fresh("tid")

    def steps(call):
        for _ in range(200):        # Kafka creates __transaction_state on the first lookup
            found = call(10, {"key_type": 1, "coordinator_keys": [tid], "key": tid}, record=False)
            if found["coordinators"][0]["error_code"] == 0:
                break
            time.sleep(0.05)
        for _ in range(200):
            init = call(22, {"transactional_id": tid, "transaction_timeout": 60000, "producer_id": -1,
                             "producer_epoch": -1}, record=False)
            if init["error_code"] == 0:
                break
            time.sleep(0.05)
        txn_batch = build_batch([(b"t", None, [], 1000)], producer_id=init["producer_id"],
                                producer_epoch=init["producer_epoch"], base_sequence=0, is_transactional=True)
        call(0, {"transactional_id": tid, "acks": -1, "timeout": 5000, "topic_data": [
            {"name": name, "partition_data": [{"index": 0, "records": txn_batch}]}]}, version)
    (answer,) = scenario(pair, steps)
    assert _codes(answer[1]) == [48 if version < 11 else 120], answer
