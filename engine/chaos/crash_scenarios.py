"""Scenarios in which a broker process dies (SIGKILL), on a :class:`~engine.chaos.cluster.
PartitionCluster` under the workload of engine/chaos/workload.py (run by
engine/chaos/scenarios.py's ``run_scenario``, which checks loss, duplicates and byte identity after):

* ``power-loss``: a follower, then the leader, SIGKILLed and its log cut to what its recovery
  point says was synced, plus a torn tail (engine/chaos/power_loss.py), started again after
  0.2 s..hold: it comes back as a follower, is not elected before it is back in the ISR, rejoins.
"""

from __future__ import annotations

import random
import time

from .cluster import PartitionCluster, wait_until
from .observe import Result, StateWatch, isr_history
from .workload import Workload

__all__ = ["BOUNCE_MISSED", "power_loss"]

# power-loss: the controller did not see the leader's restart (its registration deleted and made
# again between two of its passes), so no leader was elected and the restarted broker led again
# (fixed: the controller compares each registration's czxid, Kafka's broker epoch, with the
# partition state's last write; this names the regression)
BOUNCE_MISSED = "restart not seen by the controller"


def power_loss(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
               r: Result) -> float:
    """A follower, then the leader: SIGKILL, its unsynced tail dropped (engine/chaos/power_loss.py),
    down 0.2 s..`hold_s`, started again; it must come back as a follower (not elected while out
    of the ISR) and rejoin the ISR; the other ISR members hold everything acknowledged."""
    from .power_loss import power_loss as cut_power
    t = time.monotonic()
    for role in ("follower", "leader"):
        st = c.state(topic)
        victim = st["leader"] if role == "leader" else \
            rnd.choice([b for b in st["isr"] if b != st["leader"]])
        watch = StateWatch(c, topic, 1)
        watch.start()
        t_kill = time.time()
        dropped = cut_power(c.brokers[victim], rnd)
        down = rnd.uniform(0.2, hold_s)
        time.sleep(down)
        c.brokers[victim].start()
        t = time.monotonic()
        try:       # (it must leave the ISR: its log lost what the ISR promised it holds)
            wait_until(lambda v=victim, seen=watch.seen: any(v not in q["isr"] for _, q, _ in seen),
                       (c.session_ms + c.lag_ms) / 1000 + 8, f"broker {victim} out of the ISR")
        except AssertionError as e:
            r.problems.append(f"{role} {victim} stayed in the ISR through its power loss ({e})")
        c.wait_full_isr(topic)
        watch.stop.set()
        watch.join(5)
        # leading after the kill before it is back in the ISR (its log short): elected outside
        # the ISR, or kept as the leader through its restart
        states = [q for _, q, m in watch.seen if m > t_kill]       # (written after the kill)
        back = next((i for i, q in enumerate(states) if victim in q["isr"]
                     and any(victim not in x["isr"] for x in states[:i])), len(states))
        led = [q for q in states[:back] if q["leader"] == victim]
        if role == "leader" and all(q["leader"] == victim for _, q, _ in watch.seen):
            led = led or [c.state(topic)]                     # (never replaced at all)
        before, after = dropped.get(f"{topic}-0", (0, 0))
        r.notes.append(f"{role} {victim} powered off (dropped {before - after} of {before} log bytes, down "
                       f"{down:.1f}s); ISR {isr_history(watch, t_kill)}")
        if led and led[0]["leader_epoch"] == st["leader_epoch"]:
            r.problems.append(f"{BOUNCE_MISSED}: broker {victim} restarted and led {topic}-0 again at leader epoch "
                              f"{st['leader_epoch']} with its truncated log: {led[0]}")
        elif led:
            r.problems.append(f"broker {victim} led {topic}-0 after its power loss before it rejoined the ISR: "
                              f"{led[0]}")
        if role == "follower":
            w.wait_acked(200)
    return t
