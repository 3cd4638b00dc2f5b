"""A local cluster for network-partition scenarios (issue 20): one ZooKeeper, N brokers (``python -m
engine serve`` processes on 127.0.0.1), every link of which a scenario can cut.

* Each broker reaches ZooKeeper through its own :class:`~engine.chaos.netproxy.LinkProxy`
  (``zk_proxy``): blackholing it cuts that broker alone from ZooKeeper.
* Each broker *advertises* its own inbound LinkProxy (``kafka=True``) in front of its listener,
  so every connection to it -- clients' and peers' alike -- passes there.  Peers' connections carry
  their client id (engine/replica/fetcher.py: ``replica-<id>``; the coordinators' link:
  ``broker-<id>-inter-broker``), so a client-id rule cuts one peer's fetches without cutting
  anyone else (:meth:`PartitionCluster.cut_peers`).

::

    c = PartitionCluster(base_dir, brokers=3).start()
    c.create_topic("t", partitions=1, rf=3, min_isr=2)
    c.state("t", 0)            # {"leader":..,"leader_epoch":..,"isr":[..],..} from ZooKeeper
    c.cut_peers(leader)        # the leader and every other broker cannot talk (both ways)
    c.zk_cut(leader)           # the leader cannot reach ZooKeeper
    c.heal()                   # every link back to pass, every rule gone
    c.replicas_identical("t", 0)   # every replica's batches below the HW byte-identical
    logs = c.stop()

Needs Debian's zookeeper package and confluent-kafka (topic creation).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import _native
from ..cluster.zkserver import ZooKeeperServer
from ..errors import CorruptRecordError
from .netproxy import LinkProxy
from .procs import free_port, reserve_ports, signal_and_wait, start_listening

__all__ = ["PartitionCluster", "ProxiedBroker", "log_batches", "replicas_identical"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def wait_until(cond, timeout: float, what: str, step: float = 0.05):
    """`cond()`'s first true value; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(step)


class ProxiedBroker:
    """One broker process with its ZooKeeper proxy and its advertised inbound proxy."""

    def __init__(self, base: str, n: int, zk_host: str, zk_port: int, extra: list[str],
                 port: int | None = None):
        """`port`: the broker's own listener (default: a free one now); a cluster reserves its
        brokers' ports together (procs.reserve_ports) so no proxy's port 0 takes one of them."""
        self.n = n
        self.dir = os.path.join(base, f"broker-{n}")
        os.makedirs(self.dir, exist_ok=True)
        self.data = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "broker.log")
        self.port = free_port() if port is None else port
        self.zk_proxy = LinkProxy(zk_host, zk_port).start()
        self.proxy = LinkProxy("127.0.0.1", self.port, kafka=True).start()
        self.address = f"127.0.0.1:{self.proxy.port}"          # what clients and peers use
        self.args = [sys.executable, "-m", "engine", "serve", "--data-dir", self.data,
                     "--listen", f"127.0.0.1:{self.port}", "--advertised", self.address,
                     "--broker-id", str(n), "--zookeeper", f"127.0.0.1:{self.zk_proxy.port}",
                     "--log-level", "info", *extra]
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = start_listening(self.args, self.log_path, self.port, f"broker {self.n}", timeout,
                                    ready=rf"serving .* on 127\.0\.0\.1:{self.port}\b", cwd=_ROOT, env=env)

    def stop(self) -> str:
        signal_and_wait(self.proc, signal.SIGTERM, 30)
        self.proxy.close()
        self.zk_proxy.close()
        return self.log_text()

    def log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""


def log_batches(partition_dir: str) -> list[tuple[int, int, bytes]]:
    """(base offset, last offset, the batch's bytes) of every whole batch in a partition
    directory's ``.log`` segments, in offset order (headers read natively: _native.read_header)."""
    out: list[tuple[int, int, bytes]] = []
    for name in sorted(n for n in os.listdir(partition_dir) if n.endswith(".log")):
        with open(os.path.join(partition_dir, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + _native.BATCH_HEADER_SIZE <= len(data):
            try:
                h = _native.read_header(data, pos)
            except (CorruptRecordError, ValueError):
                break                                   # (a torn tail)
            end = pos + h.size
            if h.batch_length <= 0 or end > len(data):
                break                                   # (a tail being written)
            out.append((h.base_offset, h.last_offset, data[pos:end]))
            pos = end
    return out


def replicas_identical(dirs: dict[int, str], hw: int, timeout: float = 30.0) -> str:
    """Wait until every replica (broker id -> partition directory) holds whole batches up to `hw`
    (the leader's high watermark), then check that their batches below it are byte-identical;
    returns the common digest.  AssertionError naming the first differing batch otherwise."""
    def below(d: str) -> list[tuple[int, int, bytes]]:
        return [x for x in log_batches(d) if x[0] < hw] if os.path.isdir(d) else []

    def reached() -> dict[int, list[tuple[int, int, bytes]]] | None:
        got = {i: below(d) for i, d in dirs.items()}
        return got if hw == 0 or all(bs and bs[-1][1] >= hw - 1 for bs in got.values()) else None
    try:
        got = wait_until(reached, timeout, f"every replica up to the high watermark {hw}", 0.2)
    except AssertionError:
        ends = {i: (bs[-1][1] + 1 if (bs := below(d)) else 0) for i, d in dirs.items()}
        raise AssertionError(f"{dirs}: replicas do not all reach the high watermark {hw}: log ends {ends}") from None
    ref_id = min(got)
    ref = got[ref_id]
    for i, bs in got.items():
        for k, (a, b) in enumerate(zip(ref, bs, strict=False)):
            if a[2] != b[2]:
                raise AssertionError(f"{os.path.basename(dirs[i])}: broker {i}'s batch {k} (offsets {b[0]}..{b[1]}) "
                                     f"differs from broker {ref_id}'s (offsets {a[0]}..{a[1]}) below the high "
                                     f"watermark {hw}")
        if len(bs) != len(ref):
            raise AssertionError(f"{os.path.basename(dirs[i])}: broker {i} holds {len(bs)} batches below the high "
                                 f"watermark {hw}, broker {ref_id} {len(ref)}")
    return hashlib.sha256(b"".join(x[2] for x in ref)).hexdigest()[:16]


class PartitionCluster:
    """ZooKeeper and `brokers` ProxiedBrokers under `base` (see the module's text)."""

    def __init__(self, base: str, brokers: int = 3, session_ms: int = 5000, lag_ms: int = 2000,
                 extra: tuple[str, ...] = ()):
        self.base = base
        self.session_ms = session_ms
        self.lag_ms = lag_ms
        self.zk = ZooKeeperServer(os.path.join(base, "zookeeper"))
        self.n = brokers
        self.extra = ["--config", f"zookeeper.session.timeout.ms={session_ms}",
                      "--config", f"replica.lag.time.max.ms={lag_ms}",
                      "--config", "group.initial.rebalance.delay.ms=0",
                      "--config", "offsets.topic.num.partitions=3",
                      "--config", "transaction.state.log.num.partitions=3", *extra]
        self.brokers: dict[int, ProxiedBroker] = {}
        self.kazoo: Any = None

    def start(self) -> PartitionCluster:
        from kazoo.client import KazooClient
        self.zk.start()
        host, port = self.zk.connect.rsplit(":", 1)
        # the brokers' ports stay bound while every proxy takes its port 0: a proxy once got a
        # port just handed to a broker, which then could not listen (and the proxy answered the
        # check that it did)
        held = reserve_ports(self.n)
        try:
            self.brokers = {i: ProxiedBroker(self.base, i, host, int(port), self.extra, s.getsockname()[1])
                            for i, s in zip(range(1, self.n + 1), held, strict=True)}
        finally:
            for s in held:
                s.close()
        with ThreadPoolExecutor(self.n) as pool:
            for f in [pool.submit(b.start) for b in self.brokers.values()]:
                f.result()
        self.kazoo = KazooClient(self.zk.connect, timeout=20)
        self.kazoo.start(60)
        wait_until(lambda: len(self.registered()) == self.n, 60, "every broker registered")
        return self

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    # -- ZooKeeper's view --------------------------------------------------------------------
    def state(self, topic: str, p: int = 0) -> dict:
        return json.loads(self.kazoo.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])

    def state_stat(self, topic: str, p: int = 0) -> tuple[dict, float]:
        """The partition state and its znode's mtime (ZooKeeper's wall clock, seconds)."""
        data, stat = self.kazoo.get(f"/brokers/topics/{topic}/partitions/{p}/state")
        return json.loads(data), stat.mtime / 1000.0

    def controller(self) -> int:
        from kazoo.exceptions import NoNodeError
        try:
            return int(json.loads(self.kazoo.get("/controller")[0])["brokerid"])
        except NoNodeError:
            return -1

    def controller_epoch(self) -> tuple[int, float]:
        """(/controller_epoch, its mtime in seconds)."""
        data, stat = self.kazoo.get("/controller_epoch")
        return int(data), stat.mtime / 1000.0

    def registered(self) -> set[int]:
        """The broker ids registered in ZooKeeper (none before the first registration)."""
        from kazoo.exceptions import NoNodeError
        try:
            return {int(i) for i in self.kazoo.get_children("/brokers/ids")}
        except NoNodeError:
            return set()

    def views(self) -> dict[int, set[int] | str]:
        """Each broker's live brokers as its Metadata names them (a broker whose process is
        stopped, or that does not answer: why, as a string)."""
        from ..client.wire import WireClient
        out: dict[int, set[int] | str] = {}
        for i, b in self.brokers.items():
            try:
                with WireClient(b.address, request_timeout_ms=3000) as w:
                    out[i] = w.alive_brokers()
            except Exception as e:     # noqa: BLE001 - (stopped, cut, restarting: reported)
                out[i] = f"{type(e).__name__}: {e}"
        return out

    def wait_whole(self, timeout: float = 30.0) -> None:
        """Every broker registered in ZooKeeper and named alive by every broker's Metadata (the
        controller's view among them: CreateTopics places replicas on the brokers it sees);
        AssertionError naming the views otherwise."""
        everyone = set(self.brokers)
        seen: dict = {}

        def whole() -> bool:
            nonlocal seen
            if self.registered() != everyone:
                seen = {"registered in ZooKeeper": sorted(self.registered())}
                return False
            seen = self.views()
            return all(v == everyone for v in seen.values())
        try:
            wait_until(whole, timeout, "the cluster whole")
        except AssertionError:
            raise AssertionError(f"the cluster not whole {timeout:.0f}s on: {seen}") from None

    def create_topic(self, name: str, partitions: int = 1, rf: int = 3, min_isr: int = 2,
                     config: dict[str, str] | None = None) -> None:
        """`config`: more topic configs (they win over `min_isr`).  On a whole cluster (each
        scenario begins as one)."""
        from confluent_kafka.admin import AdminClient, NewTopic
        self.wait_whole()
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "broker.address.family": "v4"})
        conf = {"min.insync.replicas": str(min_isr), **(config or {})}
        admin.create_topics([NewTopic(name, partitions, rf, config=conf)], operation_timeout=20)[name].result(30)
        self.wait_full_isr(name, partitions, rf)

    def wait_full_isr(self, topic: str, partitions: int = 1, rf: int = 3, timeout: float = 60.0) -> None:
        def full() -> bool:
            try:
                return all(len(self.state(topic, p)["isr"]) == rf for p in range(partitions))
            except Exception:     # noqa: BLE001 - (not created yet)
                return False
        wait_until(full, timeout, f"a full ISR on every partition of {topic}")

    # -- cutting links -----------------------------------------------------------------------
    def zk_cut(self, n: int, mode: str = "blackhole") -> None:
        """Broker `n`'s ZooKeeper link to `mode` (``pass`` heals it)."""
        self.brokers[n].zk_proxy.set(mode)

    def cut_peers(self, n: int, mode: str = "blackhole", peers: list[int] | None = None) -> None:
        """Broker `n` and `peers` (default: every other broker) cannot talk, both ways: their
        fetches from `n` and their inter-broker requests to it (rules on `n`'s proxy), `n`'s
        fetches and requests to them (rules on theirs).  Clients are not cut."""
        for m in peers if peers is not None else [i for i in self.brokers if i != n]:
            for pre in (f"replica-{m}", f"broker-{m}-"):
                self.brokers[n].proxy.rule(pre, mode)
            for pre in (f"replica-{n}", f"broker-{n}-"):
                self.brokers[m].proxy.rule(pre, mode)

    def cut_client(self, client_id: str, mode: str = "blackhole") -> None:
        """Every connection of client id `client_id` (a prefix) to any broker to `mode`."""
        for b in self.brokers.values():
            b.proxy.rule(client_id, mode)

    def isolate(self, n: int, mode: str = "blackhole") -> None:
        """Broker `n` alone on its side: no ZooKeeper, no peers, no clients."""
        self.zk_cut(n, mode)
        self.cut_peers(n, mode)
        self.brokers[n].proxy.set(mode)

    def heal(self) -> None:
        for b in self.brokers.values():
            b.proxy.clear_rules()
            b.proxy.set("pass")
            b.zk_proxy.set("pass")

    # -- replicas ----------------------------------------------------------------------------
    def replicas_identical(self, topic: str, p: int, hw: int, timeout: float = 30.0) -> str:
        """:func:`replicas_identical` over every broker's replica of `topic`-`p`."""
        return replicas_identical({i: os.path.join(b.data, f"{topic}-{p}") for i, b in self.brokers.items()},
                                  hw, timeout)

    def stop(self) -> dict[int, str]:
        if self.kazoo is not None:
            self.kazoo.stop()
            self.kazoo.close()
        with ThreadPoolExecutor(max(1, len(self.brokers))) as pool:
            logs = dict(zip(self.brokers, pool.map(lambda b: b.stop(), self.brokers.values()), strict=True))
        self.zk.stop()
        return logs
