"""A network partition (issue 20): the partition's leader cut off from ZooKeeper but not from its
clients nor its followers.  Each broker reaches the one ZooKeeper through its own
:class:`~engine.chaos.netproxy.LinkProxy`; the leader's link is blackholed (silence, not a
reset) under an idempotent acks=all producer (RF 3, ``min.insync.replicas=2``), for the session
timeout and a few seconds more, then healed.

What must hold (engine/cluster/member.py's fencing): the cut-off leader stops acting as leader
when its ZooKeeper connection is *suspended* (kazoo: no answer for 2/3 of the session), i.e.
before ZooKeeper expires its session and the controller elects another -- so no acknowledgement
can come from it once the new leader epoch is written; nothing acknowledged is lost or doubled;
a new leader is elected; after the heal the old leader comes back as a follower (full ISR).

Prints acked / lost / dup / max unavailability, the fence and election times relative to the
cut, and the time to heal (link restored -> full ISR again).

While it is cut off, the old leader leaves itself out of the brokers its Metadata lists
(engine/server/common.py ``broker_entries``, engine/cluster/view.py ``ZkClusterView.fenced``):
librdkafka, whose only open connection is to that broker, then asks the others and finds the new
leader soon after the election instead of after the heal (the second test; before, 16 s of silence for a 15 s cut).
"""

from __future__ import annotations

import math
import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest

from engine.chaos.netproxy import LinkProxy
from tests.cluster.conftest import wait_for
from tests.cluster.test_replication import Load, _check, _consume_all, _create, _state
from tests.serving import ServeProcess

SESSION_MS = 5000          # short: kazoo suspends after ~3.3 s of silence, ZooKeeper expires at ~5 s
_FENCE = re.compile(r"^(\S+ \S+) WARNING engine\.cluster: broker (\d+): ZooKeeper connection (\w+).*"
                    r"no longer acting as leader", re.M)


class WallLoad(Load):
    """Load that also records each acknowledgement's wall-clock time (to compare with the
    broker's log and ZooKeeper's mtime)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.ack_walls: list[float] = []

    def _report(self, err, msg):
        if err is None:
            self.ack_walls.append(time.time())
        super()._report(err, msg)


def _log_time(stamp: str) -> float:
    """The wall time of a log line's asctime (``%Y-%m-%d %H:%M:%S,mmm``, local time)."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


class _ElectionWatch(threading.Thread):
    """Polls the partition state in ZooKeeper: the first state with a leader epoch past
    `epoch` (its znode mtime, ZooKeeper's wall clock in ms, is when the new epoch took effect)."""

    def __init__(self, zk_client, topic: str, epoch: int):
        super().__init__(daemon=True)
        self.zk, self.path, self.epoch = zk_client, f"/brokers/topics/{topic}/partitions/0/state", epoch
        self.found: tuple[float, dict] | None = None
        self.stop = threading.Event()

    def run(self):
        import json
        deadline = time.monotonic() + 120
        while not self.stop.is_set() and self.found is None and time.monotonic() < deadline:
            data, stat = self.zk.get(self.path)
            st = json.loads(data)
            if st["leader_epoch"] > self.epoch:
                self.found = (stat.mtime / 1000.0, st)
            time.sleep(0.02)


class ZkCutCluster:
    """3 brokers, each reaching ZooKeeper through its own LinkProxy; a topic with one partition,
    RF 3, ``min.insync.replicas=2``, its ISR full."""

    def __init__(self, tmp_path, zk, zk_client):
        host, port = zk.connect.rsplit(":", 1)
        self.proxies = {i: LinkProxy(host, int(port)).start() for i in (1, 2, 3)}
        self.brokers = {i: ServeProcess(tmp_path / f"broker-{i}", "--broker-id", str(i),
                                        "--zookeeper", f"127.0.0.1:{self.proxies[i].port}",
                                        "--config", f"zookeeper.session.timeout.ms={SESSION_MS}",
                                        "--config", "replica.lag.time.max.ms=3000",
                                        "--config", "group.initial.rebalance.delay.ms=0")
                        for i in (1, 2, 3)}
        self.bootstrap = ",".join(b.bootstrap for b in self.brokers.values())
        self.topic = f"zkcut-{uuid.uuid4().hex[:6]}"
        self.zk_client = zk_client
        self.loads: list[Load] = []

    def start(self) -> ZkCutCluster:
        with ThreadPoolExecutor(3) as pool:
            for f in [pool.submit(b.start) for b in self.brokers.values()]:
                f.result()
        _create(self.brokers[1].bootstrap, self.topic, 1, 3, {"min.insync.replicas": "2"})
        wait_for(lambda: self.zk_client.exists(f"/brokers/topics/{self.topic}/partitions/0/state")
                 and len(_state(self.zk_client, self.topic)["isr"]) == 3, what="the partition with a full ISR")
        return self

    def stop(self) -> dict[int, str]:
        logs = {i: (b.stop()[1] if b.proc is not None else "") for i, b in self.brokers.items()}
        for p in self.proxies.values():
            p.close()
        return logs


@pytest.fixture
def zk_cut_cluster(tmp_path, zk, zk_client):
    c = ZkCutCluster(tmp_path, zk, zk_client)
    try:
        yield c.start()
    finally:
        for load in c.loads:
            load.stop()
        logs = c.stop()
    for i, log in logs.items():
        assert "Traceback" not in log, f"broker {i} logged a traceback:\n{log[-4000:]}"


def test_leader_cut_off_from_zookeeper_stops_acknowledging_before_a_new_leader(zk_cut_cluster, zk_client):
    c = zk_cut_cluster
    load = WallLoad(c.bootstrap, c.topic).start()
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    st0 = _state(zk_client, c.topic)
    old = st0["leader"]
    watch = _ElectionWatch(zk_client, c.topic, st0["leader_epoch"])
    watch.start()
    acked_before = len(load.acked)

    t_cut = time.time()
    c.proxies[old].set("blackhole")          # the leader alone loses ZooKeeper
    wait_for(lambda: watch.found, timeout=SESSION_MS / 1000 + 20, what="a new leader epoch")
    t_elect, st1 = watch.found
    # keep producing: the session timeout and a few seconds more
    time.sleep(max(0.0, t_cut + SESSION_MS / 1000 + 4 - time.time()))
    acked_cut = len(load.acked) - acked_before

    t_heal = time.monotonic()
    c.proxies[old].set("pass")
    wait_for(lambda: len(_state(zk_client, c.topic)["isr"]) == 3, timeout=60,
             what="the old leader back in the ISR")
    heal_s = time.monotonic() - t_heal
    more = len(load.acked)
    wait_for(lambda: len(load.acked) >= more + 300, timeout=60, what="300 more acknowledgements")
    load.stop()
    lost, dup = _check(load, _consume_all(c.bootstrap, c.topic, 1))

    fences = [(_log_time(m.group(1)), m.group(3)) for m in _FENCE.finditer(c.brokers[old].log_text())
              if int(m.group(2)) == old and _log_time(m.group(1)) >= t_cut]
    t_fence, how = fences[0] if fences else (float("inf"), "never fenced")
    walls = load.ack_walls
    gap, g0 = max(((b - a, a) for a, b in zip(walls, walls[1:], strict=False)), default=(0.0, t_cut))
    last_before = max((t for t in walls if t < t_elect), default=t_cut)   # the old leader's last
    first_new = min((t for t in walls if t >= t_elect), default=float("nan"))
    print(f"\nleader {old} cut off from ZooKeeper at t=0: its last ack at {last_before - t_cut:.2f}s, "
          f"fenced ({how}) at {t_fence - t_cut:.2f}s, new leader {st1['leader']} (epoch "
          f"{st1['leader_epoch']}) written at {t_elect - t_cut:.2f}s, first ack after it at "
          f"{first_new - t_cut:.2f}s; longest gap between acks {gap:.2f}s (from {g0 - t_cut:.2f}s); "
          f"{acked_cut} acks between cut and heal; healed (full ISR) {heal_s:.2f}s after the link "
          f"came back")

    assert st1["leader"] not in (old, -1), f"no new leader: {st1}"
    # the key property: the old leader stopped acting as leader while its session still lived
    # (suspended, not expired), before the controller wrote the new epoch ...
    assert how == "suspended", f"broker {old} cut off from ZooKeeper: {how}"
    assert t_fence < t_elect, (f"broker {old} stopped acting as leader {t_fence - t_elect:.2f}s "
                               f"after the new leader epoch was written")
    # ... so its acknowledgements ended with its fence (0.5 s: the last responses in flight
    # and the producer's callbacks), not at the election
    assert last_before < t_fence + 0.5, (f"the old leader acknowledged {last_before - t_fence:.2f}s "
                                         f"after it was fenced")
    assert last_before < t_elect - 0.3, (f"acknowledgements went on until {t_elect - last_before:.2f}s "
                                         f"before the new leader epoch")
    assert math.isfinite(first_new), "nothing acknowledged after the election"
    assert load.errors == []
    assert (lost, dup) == (0, 0)


def test_partition_writable_again_while_the_old_leader_is_still_cut_off(zk_cut_cluster, zk_client):
    """Availability: once the new leader is elected, the producer (whose only connection is to
    the old leader) gets acknowledgements again within a few seconds, the old leader still cut
    off from ZooKeeper.  Then heal; nothing lost or doubled."""
    c = zk_cut_cluster
    load = WallLoad(c.bootstrap, c.topic).start()
    c.loads.append(load)
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    st0 = _state(zk_client, c.topic)
    old = st0["leader"]
    watch = _ElectionWatch(zk_client, c.topic, st0["leader_epoch"])
    watch.start()
    t_cut = time.time()
    c.proxies[old].set("blackhole")
    try:
        wait_for(lambda: watch.found, timeout=SESSION_MS / 1000 + 20, what="a new leader epoch")
        t_elect, st1 = watch.found
        resumed = True
        try:
            wait_for(lambda: load.ack_walls and load.ack_walls[-1] > t_elect, timeout=10,
                     what="an acknowledgement after the election")
        except AssertionError:
            resumed = False
        first = min((t for t in load.ack_walls if t > t_elect), default=float("nan"))
        print(f"\nleader {old} cut off at t=0; new leader {st1['leader']} at {t_elect - t_cut:.2f}s; "
              f"first ack after it at {first - t_cut:.2f}s while the old leader is still cut off")
    finally:
        c.proxies[old].set("pass")
    wait_for(lambda: len(_state(zk_client, c.topic)["isr"]) == 3, timeout=60, what="a full ISR again")
    more = len(load.acked)
    wait_for(lambda: len(load.acked) >= more + 300, timeout=60, what="300 more acknowledgements")
    load.stop()
    assert (_check(load, _consume_all(c.bootstrap, c.topic, 1))) == (0, 0)
    assert resumed, "no acknowledgement within 10 s of the election while the old leader was cut off"
