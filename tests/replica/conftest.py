"""In-process clusters for the replica layer: two or three real brokers (an Engine each, in its
own data directory, served by a BackgroundBroker on 127.0.0.1:<free port>) sharing a
StaticClusterView; tests make leaders and followers with become_leader / become_follower, as the
cluster controller (engine/cluster) does in a real cluster."""

from __future__ import annotations

import os
import time

import pytest

from engine.client.connection import Connection
from engine.protocol.fetch import parse_fetch_response
from engine.protocol.messages import ApiKey, _entity, encode, read_struct

FAST = {"replica.lag.time.max.ms": 1000, "replica.fetch.wait.max.ms": 100,
        "replica.fetch.backoff.ms": 50}


class Node:
    """One broker of the test cluster."""

    def __init__(self, cluster, node_id: int, config: dict):
        import engine
        from engine.server import BackgroundBroker

        self.node_id = node_id
        self.path = os.path.join(cluster.root, f"node{node_id}")
        self.engine = engine.open(self.path, {**config, "log.cleaner.enable": False}, background=False,
                                  replicated=True)
        try:
            self.bg = BackgroundBroker(self.engine.node, "127.0.0.1", 0, view=cluster.view.for_node(node_id))
        except BaseException:
            self.engine.close()
            raise
        self.rm = self.bg.broker.replicas
        self.address = ("127.0.0.1", self.bg.port)
        self.running = True

    def log(self, topic: str, p: int = 0):
        return self.engine.log(topic, p)

    def stop(self) -> None:
        if self.running:
            self.running = False
            self.bg.stop()
            self.engine.close()


class Cluster:
    def __init__(self, root: str, n: int, config: dict | None = None):
        from engine.replica import StaticClusterView

        self.root = root
        self.config = {**FAST, **(config or {})}
        self.view = StaticClusterView(-1)
        self.nodes: dict[int, Node] = {}
        for i in range(n):
            self.start(i)

    def start(self, node_id: int) -> Node:
        node = self.nodes[node_id] = Node(self, node_id, self.config)
        self.view.set_brokers({i: (*nd.address, None) for i, nd in self.nodes.items() if nd.running})
        return node

    def stop(self, node_id: int) -> None:
        self.nodes[node_id].stop()
        self.view.set_brokers({i: (*nd.address, None) for i, nd in self.nodes.items() if nd.running})

    def bootstrap(self, node_id: int) -> str:
        host, port = self.nodes[node_id].address
        return f"{host}:{port}"

    def create(self, topic: str, replicas: list[int], leader: int | None = None, epoch: int = 1,
               config: dict | None = None) -> None:
        """A one-partition topic on `replicas`, led by `leader` (default: the first)."""
        leader = replicas[0] if leader is None else leader
        for r in replicas:
            self.nodes[r].engine.create_topic(topic, 1, config)
        self.elect(topic, leader, epoch, replicas, isr=replicas)

    def elect(self, topic: str, leader: int, epoch: int, replicas: list[int], isr: list[int],
              partition_epoch: int = 0) -> None:
        """What a controller does: publish the state, then tell the leader and the followers."""
        self.view.set_partition(topic, 0, leader, epoch, replicas, isr, partition_epoch)
        self.nodes[leader].rm.become_leader(topic, 0, epoch, replicas, isr, partition_epoch)
        for r in replicas:
            if r != leader and self.nodes[r].running:
                self.nodes[r].rm.become_follower(topic, 0, leader, epoch, replicas, partition_epoch)

    def isr(self, topic: str) -> list[int]:
        return self.view.partition_state(topic, 0)[3]

    def close(self) -> None:
        for node in self.nodes.values():
            node.stop()


def wait_until(cond, timeout: float = 10.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def request(address, key: int, version: int, body: dict) -> dict:
    """One raw request (kio's schemas) to a broker; the decoded response."""
    conn = Connection(*address, b"replica-test", 10.0)
    try:
        r = conn.request(key, version, [encode(key, version, body, response=False)])
        if key == ApiKey.FETCH:
            err, _sid, found = parse_fetch_response(r, version)
            return {"error_code": err, "partitions": found}
        return read_struct(_entity(key, version, True), r)
    finally:
        conn.close()


def fetch(address, topic: str, offset: int, *, current_leader_epoch: int = -1, replica_id: int = -1,
          max_wait_ms: int = 0):
    body = {"replica_id": replica_id, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": current_leader_epoch, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    return request(address, ApiKey.FETCH, 12, body)["partitions"][(topic, 0)]


def produce(address, topic: str, values: list[bytes], *, acks: int = -1, timeout_ms: int = 5000):
    """Produce v9 of one batch; (error_code, base_offset)."""
    from engine._native import BatchBuilder
    b = BatchBuilder()
    for v in values:
        b.append(v)
    data = bytes(b.build())
    body = {"transactional_id": None, "acks": acks, "timeout": timeout_ms,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": data}]}]}
    resp = request(address, ApiKey.PRODUCE, 9, body)
    p = resp["responses"][0]["partition_responses"][0]
    return p["error_code"], p["base_offset"]


@pytest.fixture
def cluster(tmp_path):
    made = []

    def make(n: int = 2, config: dict | None = None) -> Cluster:
        c = Cluster(str(tmp_path), n, config)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
