"""Differential tests: the same requests to Apache Kafka 4.0 and to our broker, answers compared
field by field.

Each test sends one sequence of requests (written with kio at the highest version both brokers
serve, plus older versions real clients still send) to both brokers and compares the decoded
answers.  Fields in ALLOWED may differ; everything else must be equal.

ALLOWED (kept short; each is a property of the deployment, not of behaviour):

* ``cluster_id``            random per cluster (KRaft format / our meta.properties).
* ``host``, ``port``        each broker's own listener.
* ``throttle_time_ms``      quota throttling: Kafka may report a nonzero value, we never throttle.
* ``topic_id``              random per topic; only "zero UUID or not" is compared (normalized).
* ``error_message``         free text; only "null or not" is compared (normalized).
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

from .wire import Client, diff, plain

ALLOWED = frozenset({"cluster_id", "host", "port", "throttle_time_ms"})
NODE_FIELDS = {"node_id", "leader_id", "controller_id", "replica_nodes", "isr_nodes",
               "offline_replicas", "coordinator_id"}

_seq = itertools.count()


def _normalize(value, self_id: int, field: str = ""):
    if isinstance(value, dict):
        return {k: _normalize(v, self_id, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalize(v, self_id, field) for v in value]
    if field in NODE_FIELDS and isinstance(value, int):
        return "self" if value == self_id else value
    if field == "topic_id":
        return "zero" if value in ("00000000-0000-0000-0000-000000000000", None) else "id"
    if field == "error_message":
        return None if value is None else "<text>"
    if field == "member_id" and isinstance(value, str) and len(value) > 37:
        return value[:-36] + "<uuid>"
    return value


class Pair:
    """Our broker and Kafka; ``same()`` sends one request to both and returns both answers."""

    def __init__(self, ours, kafka):
        self.ports = {"ours": ours.port, "kafka": kafka.port}
        self.conns = {name: Client(port) for name, port in self.ports.items()}
        ranges = {name: c.api_ranges() for name, c in self.conns.items()}
        self.version = {k: min(hi, ranges["kafka"].get(k, (0, -1))[1])
                        for k, (lo, hi) in ranges["ours"].items()}
        self.self_id = {}
        for name, c in self.conns.items():
            md = plain(c.call(3, 9, {"topics": [], "allow_auto_topic_creation": False,
                                     "include_cluster_authorized_operations": False,
                                     "include_topic_authorized_operations": False}))
            self.self_id[name] = md["brokers"][0]["node_id"]

    def both(self, key: int, data: dict, version: int | None = None) -> tuple[dict, dict]:
        v = self.version[key] if version is None else version
        out = []
        for name in ("ours", "kafka"):
            resp = plain(self.conns[name].call(key, v, data))
            out.append(_normalize(resp, self.self_id[name]))
        return out[0], out[1]

    def same(self, key: int, data: dict, version: int | None = None, ignore=(),
             sort=None) -> dict:
        """Assert both answers are equal outside ALLOWED (+ ``ignore``); return ours."""
        a, b = self.both(key, data, version)
        if sort:
            a, b = sort(a), sort(b)
        d = diff(a, b, ALLOWED | set(ignore))
        assert not d, "ours != Kafka:\n" + "\n".join(d)
        return a

    def close(self):
        for c in self.conns.values():
            c.close()


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
    req = dict(MD, topics=[{"name": n} for n in names])
    while True:
        resp = plain(pair.conns["kafka"].call(3, pair.version[3], req))
        if all(t["error_code"] == 0 and t["partitions"] and
               all(p["error_code"] == 0 and p["leader_id"] >= 0 for p in t["partitions"])
               for t in resp["topics"]):
            return
        assert time.monotonic() < deadline, f"Kafka did not show {names}: {resp}"
        time.sleep(0.05)


def produce(pair, topic, batches, partition=0):
    for batch in batches:
        pair.same(0, {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
                      "topic_data": [{"name": topic, "partition_data": [
                          {"index": partition, "records": batch}]}]})


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
    pair.same(3, dict(MD, topics=[{"name": t1}, {"name": t2}]), version, sort=by_name("topics"))
    if version is None or version >= 1:
        pair.same(3, dict(MD, topics=[]), version)
    if version is None or version >= 4:        # below v4 a Metadata request always auto-creates
        pair.same(3, dict(MD, topics=[{"name": fresh("nosuch")}]), version)
    pair.same(3, dict(MD, topics=[{"name": "bad name!"}, {"name": t1}]), version,
              sort=by_name("topics"))


def test_metadata_auto_creation(pair):
    """Kafka (KRaft) answers the Metadata that triggers an auto-creation with
    UNKNOWN_TOPIC_OR_PARTITION while its controller creates the topic; we create it on the spot
    and answer it at once.  Clients retry either way, so only the settled answers are compared."""
    name = fresh("auto")
    ours, theirs = pair.both(3, dict(MD, topics=[{"name": name}], allow_auto_topic_creation=True))
    assert ours["topics"][0]["error_code"] == 0
    assert theirs["topics"][0]["error_code"] in (0, 3, 5)
    for _ in range(100):
        _, theirs = pair.both(3, dict(MD, topics=[{"name": name}]))
        if theirs["topics"][0]["error_code"] == 0 and theirs["topics"][0]["partitions"]:
            break
        time.sleep(0.1)
    # afterwards the topic exists on both, with num.partitions=1
    resp = pair.same(3, dict(MD, topics=[{"name": name}]))
    assert resp["topics"][0]["error_code"] == 0 and len(resp["topics"][0]["partitions"]) == 1


def test_metadata_all_topics(pair):
    create(pair, fresh("all"), 2)
    for version in (1, pair.version[3]):
        resp = pair.same(3, dict(MD, topics=None), version, sort=by_name("topics"))
        assert resp["topics"]
