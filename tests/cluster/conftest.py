"""Cluster mode against a real ZooKeeper (Debian's package) and real ``python -m engine serve``
processes on 127.0.0.1; each test starts what it needs (``zk``, ``cluster``).  Skipped, saying
why, without ZooKeeper or java (``apt-get install zookeeper``)."""

from __future__ import annotations

import json

import pytest
from kazoo.exceptions import NoNodeError

from engine.chaos.cluster import wait_until
from tests.serving import ServeProcess, ZooKeeperProcess, find_zookeeper

SESSION_MS = 6000       # brokers' zookeeper.session.timeout.ms: a SIGKILLed broker is gone in ~6 s


@pytest.fixture
def zk(tmp_path):
    cp, why = find_zookeeper()
    if cp is None:
        pytest.skip(why)
    z = ZooKeeperProcess(tmp_path / "zookeeper").start()
    yield z
    z.stop()


@pytest.fixture
def zk_client(zk):
    from kazoo.client import KazooClient
    k = KazooClient(zk.connect, timeout=20)
    k.start(60)
    yield k
    k.stop()
    k.close()


class Cluster:
    """N brokers (ids 1..N) of one ZooKeeper."""

    def __init__(self, tmp_path, zk, n: int, *extra: str):
        self.zk = zk
        self.brokers = {i: ServeProcess(tmp_path / f"broker-{i}", "--broker-id", str(i),
                                        "--zookeeper", zk.connect,
                                        "--config", f"zookeeper.session.timeout.ms={SESSION_MS}",
                                        "--config", "group.initial.rebalance.delay.ms=0", *extra)
                        for i in range(1, n + 1)}

    def start(self) -> Cluster:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(len(self.brokers)) as pool:      # the brokers start together
            for f in [pool.submit(b.start) for b in self.brokers.values()]:
                f.result()
        return self

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running)

    def stop(self) -> dict[int, str]:
        logs = {}
        for i, b in self.brokers.items():
            logs[i] = b.stop()[1]
        return logs


@pytest.fixture
def cluster_factory(tmp_path, zk):
    made = []

    def make(n: int = 3, *extra: str) -> Cluster:
        c = Cluster(tmp_path, zk, n, *extra).start()
        made.append(c)
        return c
    yield make
    for c in made:
        for i, log in c.stop().items():
            assert "Traceback" not in log, f"broker {i} logged a traceback:\n{log[-4000:]}"


def wait_for(cond, timeout: float = 30.0, what: str = "condition"):
    return wait_until(cond, timeout, what)


def zk_json(client, path):
    data, stat = client.get(path)
    return json.loads(data), stat


def controller_id(client) -> int | None:
    """The broker id in /controller, None while there is none (the old controller's ephemeral node
    can go between an exists() and a get(), so this asks once and takes NoNode as the answer)."""
    try:
        return zk_json(client, "/controller")[0]["brokerid"]
    except NoNodeError:
        return None
