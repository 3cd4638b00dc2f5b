"""Targets for Kafka's Java clients: one ``serve`` node, a 3-broker cluster of ours (a real
ZooKeeper), and Apache Kafka 4.0 as a 3-node KRaft cluster (bench/_kafka_cluster.py), each
started once per module on 127.0.0.1.  Every target offers ``bootstrap``, ``node_ids``,
``kill9(node)`` and ``restart(node)``; a target that cannot run here skips, saying why."""

from __future__ import annotations

import os
import time

import pytest

from tests.java import jvm as javaapps
from tests.serving import ROOT, ServeProcess, ZooKeeperProcess, find_kafka, find_zookeeper

CLUSTER_SETTINGS = ("--config", "zookeeper.session.timeout.ms=6000",
                    "--config", "group.initial.rebalance.delay.ms=0")


class OursOneNode:
    name = "one-node"
    replication_factor = 1

    def __init__(self, base):
        self.brokers = {0: ServeProcess(os.path.join(base, "broker"), "--config",
                                        "group.initial.rebalance.delay.ms=0").start()}
        self.node_ids = [0]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running)

    def port(self, node: int) -> int:
        return self.brokers[node].port

    def kill9(self, node: int) -> None:
        self.brokers[node].kill9()

    def restart(self, node: int) -> None:
        self.brokers[node].start()

    def close(self) -> None:
        logs = {i: b.stop()[1] for i, b in self.brokers.items()}
        for i, log in logs.items():
            assert "Traceback" not in log, f"broker {i} logged a traceback:\n{log[-4000:]}"


class OursCluster(OursOneNode):
    name = "cluster"
    replication_factor = 3

    def __init__(self, base):
        cp, why = find_zookeeper()
        if cp is None:
            pytest.skip(why)
        self.zk = ZooKeeperProcess(os.path.join(base, "zookeeper")).start()
        self.brokers = {i: ServeProcess(os.path.join(base, f"broker-{i}"), "--broker-id", str(i),
                                        "--zookeeper", self.zk.connect, *CLUSTER_SETTINGS)
                        for i in (1, 2, 3)}
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(3) as pool:
            for f in [pool.submit(b.start) for b in self.brokers.values()]:
                f.result()
        self.node_ids = [1, 2, 3]

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.zk.stop()


class KafkaThreeNodes:
    name = "kafka-cluster"
    replication_factor = 3

    def __init__(self, base):
        home, why = find_kafka()
        if home is None:
            pytest.skip(why)
        import sys
        if ROOT not in sys.path:
            sys.path.insert(0, ROOT)
        from bench._kafka_cluster import KafkaCluster
        try:
            self.cluster = KafkaCluster(home, 3, {"transaction.state.log.min.isr": "2"})
        except RuntimeError as e:
            pytest.skip(f"Apache Kafka 4.0 could not be started here: {e}")
        self.node_ids = [1, 2, 3]

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def port(self, node: int) -> int:
        return self.cluster.brokers[node].port

    def kill9(self, node: int) -> None:
        import signal
        self.cluster.brokers[node].signal(signal.SIGKILL)

    def restart(self, node: int) -> None:
        self.cluster.brokers[node].start()

    def close(self) -> None:
        self.cluster.close()


TARGETS = {"one-node": OursOneNode, "cluster": OursCluster, "kafka-cluster": KafkaThreeNodes}


@pytest.fixture(scope="session")
def jvm():
    return javaapps.compiled()


def make_target(name: str, tmp_path_factory):
    t = TARGETS[name](str(tmp_path_factory.mktemp(name)))
    return t


def wait_until(cond, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
