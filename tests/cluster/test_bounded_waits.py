"""Requests that wait on ZooKeeper or on another broker get an answer within their bound -- a
retriable Kafka error when what they wait on does not answer -- never silence (the rule of
engine/server/common.py ``bounded``).  The waits are made to hang for real: ZooKeeper or a peer
broker is SIGSTOPped (and continued afterwards), so every ZooKeeper round trip and every request
to that broker gets no answer at all."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from contextlib import contextmanager

import pytest

from engine.client.wire import WireClient
from engine.errors import ErrorCode, KafkaApiError
from engine.records import build_batch
from tests.cluster.conftest import SESSION_MS, wait_for

SMALL = ("--config", "offsets.topic.num.partitions=3", "--config", "transaction.state.log.num.partitions=3")
BOUND_S = SESSION_MS / 1000.0       # the brokers' zookeeper.session.timeout.ms: one ZooKeeper round trip
SLACK_S = 4.0                       # scheduling, a loaded machine
COMMIT_MS = 2000                    # offsets.commit.timeout.ms: the inter-broker bound


@contextmanager
def stopped(pid: int):
    """The process `pid` SIGSTOPped for the block's duration (SIGCONT after, whatever happens)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def timed(fn):
    """(fn(), seconds it took)."""
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def call(bootstrap: str, key: int, version: int, body: dict) -> dict:
    """One request to the broker at `bootstrap` on a connection of its own; the client's timeout
    (40 s) is well past every bound here, so a timeout of the client means the broker was silent."""
    with WireClient(bootstrap, request_timeout_ms=40_000) as w:
        return w._call(None, key, body, version=version)


def concurrently(calls: dict) -> dict:
    """{name: (answer or exception, seconds)} of the calls run at once, each in its own thread."""
    out: dict = {}

    def run(name, fn):
        t0 = time.monotonic()
        try:
            r = fn()
        except Exception as e:  # noqa: BLE001 - reported in the assertion
            r = e
        out[name] = (r, time.monotonic() - t0)
    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def _create(bootstrap: str, name: str, partitions: int = 1, rf: int = 1) -> None:
    r = call(bootstrap, 19, 5, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf,
                                            "assignments": [], "configs": []}],
                                "timeout": 15000, "validate_only": False})
    assert r["topics"][0]["error_code"] == 0, r


def test_zookeeper_gone_every_request_answers_within_its_bound(cluster_factory, zk):
    """With ZooKeeper SIGSTOPped (and the broker's kazoo aware of it), the requests that need it
    (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs, an idempotent
    InitProducerId that needs a new id block, Metadata auto-creating a topic,
    AlterPartitionReassignments) each answer a retriable error within one ZooKeeper round trip's
    bound, and the broker keeps answering the rest meanwhile (nothing of it runs on its event
    loop)."""
    c = cluster_factory(1, "--config", "auto.create.topics.enable=true")
    b = c.brokers[1].bootstrap
    _create(b, "kept")
    wait_for(lambda: call(b, 3, 7, {"topics": [{"name": "kept"}], "allow_auto_topic_creation": False})
             ["topics"][0]["partitions"][0]["leader_id"] == 1, what="a leader for kept-0")
    requests = {
        "CreateTopics": lambda: call(b, 19, 5, {
            "topics": [{"name": "late", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout": 2000, "validate_only": False})["topics"][0]["error_code"],
        "DeleteTopics": lambda: call(b, 20, 4, {"topic_names": ["kept"], "timeout": 2000})
        ["responses"][0]["error_code"],
        "CreatePartitions": lambda: call(b, 37, 1, {
            "topics": [{"name": "kept", "count": 2, "assignments": None}], "timeout": 2000,
            "validate_only": False})["results"][0]["error_code"],
        "IncrementalAlterConfigs": lambda: call(b, 44, 0, {
            "resources": [{"resource_type": 2, "resource_name": "kept", "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}],
            "validate_only": False})["responses"][0]["error_code"],
        "InitProducerId": lambda: call(b, 22, 1, {"transactional_id": None, "transaction_timeout": 60000})
        ["error_code"],
        "Metadata": lambda: call(b, 3, 7, {"topics": [{"name": "auto-" + uuid.uuid4().hex[:8]}],
                                           "allow_auto_topic_creation": True})["topics"][0]["error_code"],
        "AlterPartitionReassignments": lambda: call(b, 45, 0, {"timeout": 2000, "topics": [
            {"name": "kept", "partitions": [{"partition_index": 0, "replicas": [1]}]}]})["error_code"],
    }
    retriable = {
        "CreateTopics": {ErrorCode.REQUEST_TIMED_OUT},
        "DeleteTopics": {ErrorCode.REQUEST_TIMED_OUT},
        "CreatePartitions": {ErrorCode.REQUEST_TIMED_OUT},
        "IncrementalAlterConfigs": {ErrorCode.REQUEST_TIMED_OUT},
        "InitProducerId": {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS},
        "Metadata": {ErrorCode.LEADER_NOT_AVAILABLE},
        # the controller may already have stepped down (its ZooKeeper connection is suspended)
        "AlterPartitionReassignments": {ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_CONTROLLER},
    }
    with stopped(zk.server.proc.pid):
        # kazoo notices after 2/3 of the session timeout: from then on it queues every request
        # until a connection comes back (before the bounds: for ever)
        wait_for(lambda: "ZooKeeper connection suspended" in c.brokers[1].log_text(), 15,
                 "the broker to see ZooKeeper gone")
        pending = threading.Thread(target=lambda: out.update(concurrently(requests)))
        out: dict = {}
        pending.start()
        time.sleep(1.0)
        # meanwhile the broker's loop is free: a request that needs no ZooKeeper answers at once
        versions, took = timed(lambda: call(b, 18, 3, {"client_software_name": "t",
                                                       "client_software_version": "1"}))
        assert versions["error_code"] == 0 and took < 2.0, took
        pending.join(60)
    for name, (code, took) in sorted(out.items()):
        print(f"{name}: {code!r} after {took:.2f} s")
        assert not isinstance(code, Exception), f"{name}: {code!r}"
        assert code in retriable[name], f"{name} answered {code} after {took:.1f} s"
        assert took < BOUND_S + SLACK_S, f"{name} answered after {took:.1f} s"
    assert set(out) == set(requests)


def _coordinator(bootstrap: str, key: str, key_type: int) -> int:
    r = call(bootstrap, 10, 3, {"key": key, "key_type": key_type})
    return r["node_id"] if r["error_code"] == 0 else -1


def _key_led_by(bootstraps: list[str], key_type: int, wanted, prefix: str) -> tuple[str, int]:
    """A key (transactional id or group) whose coordinator satisfies `wanted(node)`, as every
    broker agrees."""
    def find():
        for _ in range(50):
            key = f"{prefix}-{uuid.uuid4().hex[:8]}"
            nodes = {_coordinator(b, key, key_type) for b in bootstraps}
            if len(nodes) == 1 and (node := nodes.pop()) >= 0 and wanted(node):
                return key, node
        return None
    return wait_for(find, 30, f"a key of type {key_type} with the coordinator wanted")


def test_peer_broker_stopped_verification_answers_retriable_within_bound(cluster_factory):
    """KIP-890 verification at a transaction coordinator on another broker that is SIGSTOPped:
    transactional Produce answers NOT_ENOUGH_REPLICAS and TxnOffsetCommit COORDINATOR_NOT_AVAILABLE
    within the inter-broker bound (offsets.commit.timeout.ms), also when several wait at once (they
    no longer queue one timeout after another on the connection to that broker); an acks=all
    Produce whose follower is stopped answers REQUEST_TIMED_OUT at its timeout_ms."""
    c = cluster_factory(3, *SMALL, "--config", f"offsets.commit.timeout.ms={COMMIT_MS}")
    boots = [x.bootstrap for x in c.brokers.values()]
    _create(boots[0], "data", partitions=1, rf=3)

    def leader_of_data():
        with WireClient(boots[0]) as w:
            node = w.leader("data", 0, refresh=True)
        return node if node > 0 else None
    leader = wait_for(leader_of_data, what="a leader for data-0")
    tid, txn_node = _key_led_by(boots, 1, lambda n: n != leader, "tx")
    group, _group_node = _key_led_by(boots, 0, lambda n: n != txn_node, "g")
    wait_for(lambda: call(boots[0], 3, 7, {"topics": [{"name": "data"}], "allow_auto_topic_creation": False})
             ["topics"][0]["partitions"][0]["isr_nodes"].__len__() == 3, what="a full ISR for data-0")
    lead = c.brokers[leader].bootstrap
    pid_of = {i: x.proc.pid for i, x in c.brokers.items()}
    batch = build_batch([b"v"], producer_id=4242, producer_epoch=0, base_sequence=0, is_transactional=True)

    def txn_produce():
        with WireClient(lead, request_timeout_ms=40_000) as w:
            w.transactional_id = tid
            try:
                w.produce_receive(w.produce_send("data", 0, [batch], acks=1, timeout_ms=5000))
                return 0
            except KafkaApiError as e:
                return e.code

    def acks_all_produce():
        with WireClient(lead, request_timeout_ms=40_000) as w:
            try:
                w.produce_receive(w.produce_send("data", 0, [build_batch([b"x"])], acks=-1, timeout_ms=2000))
                return 0
            except KafkaApiError as e:
                return e.code

    group_lead = c.brokers[_group_node].bootstrap

    def txn_offset_commit():
        r = call(group_lead, 28, 3, {
            "transactional_id": tid, "group_id": group, "producer_id": 4242, "producer_epoch": 0,
            "generation_id": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "data", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                        "committed_leader_epoch": -1,
                                                        "committed_metadata": ""}]}]})
        return r["topics"][0]["partitions"][0]["error_code"]

    with stopped(pid_of[txn_node]):
        time.sleep(0.3)
        out = concurrently({
            **{f"produce-{i}": txn_produce for i in range(4)},
            "txn-offset-commit": txn_offset_commit,
            "acks-all": acks_all_produce,
        })
    bound = 2 * COMMIT_MS / 1000    # common.coordinator_bound_s: twice offsets.commit.timeout.ms
    for name, (code, took) in sorted(out.items()):
        print(f"{name}: {code!r} after {took:.2f} s")
        assert not isinstance(code, Exception), f"{name}: {code!r}"
        if name.startswith("produce"):
            assert code == ErrorCode.NOT_ENOUGH_REPLICAS, (name, code, took)
        elif name == "txn-offset-commit":
            assert code == ErrorCode.COORDINATOR_NOT_AVAILABLE, (name, code, took)
        else:
            # the stopped broker is a follower in the ISR: acks=all waits its timeout_ms
            assert code == ErrorCode.REQUEST_TIMED_OUT, (name, code, took)
        assert took < bound + SLACK_S, f"{name} answered after {took:.1f} s"
    # four verifications waited at once and none queued behind another's timeout (one after
    # another they would take 2, 4, ... s, cut at the coordinator bound of 4 s)
    slowest = max(took for name, (_c, took) in out.items() if name.startswith("produce"))
    assert slowest < COMMIT_MS / 1000 + 1.6, slowest



def test_bounded_answers_in_time_and_leaves_the_work_going():
    """common.bounded: RequestTimedOutError at the bound, the work itself not cancelled; and a
    coordinator call that never returns -- on the broker's loop or on a loop of its own -- is
    answered None (COORDINATOR_NOT_AVAILABLE to the client) at its bound."""
    import asyncio
    import concurrent.futures
    from types import SimpleNamespace

    from engine.errors import RequestTimedOutError
    from engine.server.common import bounded
    from engine.server.txn_handlers import call

    class Stuck:
        running = True

        def __init__(self, on_loop: bool):
            self.on_current_loop = on_loop
            self.never: concurrent.futures.Future = concurrent.futures.Future()

        async def verify_anywhere(self, *args):
            await asyncio.Event().wait()

        def submit(self, fn, *args, **kwargs):
            return self.never

    async def main():
        loop = asyncio.get_running_loop()
        finished = asyncio.Event()

        async def work():
            await asyncio.sleep(0.3)
            finished.set()
            return 1
        t0 = loop.time()
        with pytest.raises(RequestTimedOutError):
            await bounded(work(), 0.05, "work")
        assert loop.time() - t0 < 0.25
        await asyncio.wait_for(finished.wait(), 5)          # not cancelled: it went on
        assert await bounded(asyncio.sleep(0, 7), 1.0, "quick") == 7
        for on_loop in (True, False):
            coord = Stuck(on_loop)
            engine = SimpleNamespace(read_only=False, closed=False, config={"offsets.commit.timeout.ms": 100},
                                     node=SimpleNamespace(coordinator=lambda kind, c=coord: c))
            t0 = loop.time()
            assert await call(engine, "verify_anywhere", "tx", 1, 0, []) is None
            assert loop.time() - t0 < 1.0                  # twice offsets.commit.timeout.ms
    asyncio.run(main())
