"""A network partition (issue 20): the partition's leader cut off from ZooKeeper but not from its
clients nor its followers.  Each broker reaches the one ZooKeeper through its own
:class:`~engine.cluster.netproxy.LinkProxy`; the leader's link is blackholed (silence, not a
reset) under an idempotent acks=all producer (RF 3, ``min.insync.replicas=2``), for the session
timeout and a few seconds more, then healed.

What must hold (engine/cluster/member.py's fencing): the cut-off leader stops acting as leader
when its ZooKeeper connection is *suspended* (kazoo: no answer for 2/3 of the session), i.e.
before ZooKeeper expires its session and the controller elects another -- so no acknowledgement
can come from it once the new leader epoch is written; nothing acknowledged is lost or doubled;
a new leader is elected; after the heal the old leader comes back as a follower (full ISR).

Prints acked / lost / dup / max unavailability, the fence and election times relative to the
cut, and the time to heal (link restored -> full ISR again).
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from engine.cluster.netproxy import LinkProxy
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
        while not self.stop.is_set() and self.found is None:
            data, stat = self.zk.get(self.path)
            st = json.loads(data)
            if st["leader_epoch"] > self.epoch:
                self.found = (stat.mtime / 1000.0, st)
            time.sleep(0.02)


def test_leader_cut_off_from_zookeeper_stops_acknowledging_before_a_new_leader(zk, zk_client, tmp_path):
    host, port = zk.connect.rsplit(":", 1)
    proxies = {i: LinkProxy(host, int(port)).start() for i in (1, 2, 3)}
    brokers = {i: ServeProcess(tmp_path / f"broker-{i}", "--broker-id", str(i),
                               "--zookeeper", f"127.0.0.1:{proxies[i].port}",
                               "--config", f"zookeeper.session.timeout.ms={SESSION_MS}",
                               "--config", "replica.lag.time.max.ms=3000",
                               "--config", "group.initial.rebalance.delay.ms=0")
               for i in (1, 2, 3)}
    load = watch = None
    try:
        with ThreadPoolExecutor(3) as pool:
            for f in [pool.submit(b.start) for b in brokers.values()]:
                f.result()
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        topic = f"zkcut-{uuid.uuid4().hex[:6]}"
        _create(brokers[1].bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
        wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state")
                 and len(_state(zk_client, topic)["isr"]) == 3, what="the partition with a full ISR")
        load = WallLoad(bootstrap, topic).start()
        wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
        st0 = _state(zk_client, topic)
        old = st0["leader"]
        watch = _ElectionWatch(zk_client, topic, st0["leader_epoch"])
        watch.start()
        acked_before = len(load.acked)

        t_cut = time.time()
        proxies[old].set("blackhole")          # the leader alone loses ZooKeeper
        wait_for(lambda: watch.found, timeout=SESSION_MS / 1000 + 20, what="a new leader epoch")
        t_elect, st1 = watch.found
        # keep producing: the session timeout and a few seconds more
        time.sleep(max(0.0, t_cut + SESSION_MS / 1000 + 4 - time.time()))
        acked_cut = len(load.acked) - acked_before

        t_heal = time.monotonic()
        proxies[old].set("pass")
        wait_for(lambda: len(_state(zk_client, topic)["isr"]) == 3, timeout=60,
                 what="the old leader back in the ISR")
        heal_s = time.monotonic() - t_heal
        more = len(load.acked)
        wait_for(lambda: len(load.acked) >= more + 300, timeout=60, what="300 more acknowledgements")
        load.stop()
        lost, dup = _check(load, _consume_all(bootstrap, topic, 1))

        fences = [(_log_time(m.group(1)), m.group(3)) for m in _FENCE.finditer(brokers[old].log_text())
                  if int(m.group(2)) == old and _log_time(m.group(1)) >= t_cut]
        assert fences, f"broker {old} (cut off from ZooKeeper) never stopped acting as leader"
        t_fence, how = fences[0]
        in_window = [t for t in load.ack_walls if t_fence + 0.5 < t < t_elect]
        walls = load.ack_walls
        gap, g0 = max(((b - a, a) for a, b in zip(walls, walls[1:], strict=False)), default=(0.0, t_cut))
        last_old = max((t for t in walls if t <= t_fence + 0.5), default=t_cut)
        first_new = min((t for t in walls if t >= t_elect), default=float("nan"))
        print(f"\nleader {old} cut off from ZooKeeper at t=0: last ack before its fence at "
              f"{last_old - t_cut:.2f}s, fenced ({how}) at {t_fence - t_cut:.2f}s, new leader "
              f"{st1['leader']} (epoch {st1['leader_epoch']}) written at {t_elect - t_cut:.2f}s, first ack "
              f"after it at {first_new - t_cut:.2f}s; longest gap between acks {gap:.2f}s (from "
              f"{g0 - t_cut:.2f}s); {acked_cut} acks between cut and heal; healed (full ISR) "
              f"{heal_s:.2f}s after the link came back")

        assert st1["leader"] not in (old, -1), f"no new leader: {st1}"
        # the key property: the old leader stopped while its session still lived (suspended, not
        # expired), before the controller wrote the new epoch ...
        assert how == "suspended", f"broker {old} fenced only when its session was {how}"
        assert t_fence < t_elect, (f"broker {old} stopped acting as leader {t_fence - t_elect:.2f}s "
                                   f"after the new leader epoch was written")
        # ... and nobody acknowledged anything between its fence and the election
        assert in_window == [], f"{len(in_window)} acknowledgements while no broker may have led"
        assert acked_cut > 0, "nothing acknowledged after the election"
        assert load.errors == []
        assert (lost, dup) == (0, 0)
    finally:
        if watch is not None:
            watch.stop.set()
        if load is not None:
            load.stop()
        logs = {}
        for i, b in brokers.items():
            logs[i] = b.stop()[1] if b.proc is not None else ""
        for p in proxies.values():
            p.close()
    for i, log in logs.items():
        assert "Traceback" not in log, f"broker {i} logged a traceback:\n{log[-4000:]}"
