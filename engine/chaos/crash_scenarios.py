"""Scenarios in which a broker process dies (SIGKILL), on a :class:`~engine.chaos.cluster.
PartitionCluster` under the workload of engine/chaos/workload.py (run by
engine/chaos/scenarios.py's ``run_scenario``, which checks loss, duplicates and byte identity after):

* ``power-loss``: a follower, then the leader, SIGKILLed and its log cut to what its recovery
  point says was synced, plus a torn tail (engine/chaos/power_loss.py), started again after
  0.2 s..hold: it comes back as a follower, is not elected before it is back in the ISR, rejoins.
* ``unclean-election``: a topic with ``unclean.leader.election.enable=true`` and
  ``min.insync.replicas=1`` (:data:`TOPIC_CONFIGS`: the settings that give acknowledged records
  up).  The leader is cut from its followers until the ISR is the leader alone; the producer goes
  on (acks=all acknowledged by the leader alone); the leader is SIGKILLed, so only out-of-sync
  replicas are alive; the links are healed; the controller elects one of them *uncleanly*; what
  only the dead leader had is lost.  The old leader is started again after the hold and truncates
  to the new leader.  Its loss is reported, not a failure (scenarios.py's ``WEAKER``).
* ``unclean-election-off``: the same steps with ``unclean.leader.election.enable=false``: no
  leader (the partition offline, leader -1) until the old leader returns and is elected again;
  nothing acknowledged is lost; the unavailability is reported.
"""

from __future__ import annotations

import os
import random
import time

from .cluster import PartitionCluster, log_batches, wait_until
from .observe import Result, StateWatch, isr_history, sleep_until
from .workload import Workload

__all__ = ["BOUNCE_MISSED", "TOPIC_CONFIGS", "power_loss", "unclean_election", "unclean_election_off"]

# the topic configs of the scenarios that need other than RF 3, min.insync.replicas=2
TOPIC_CONFIGS = {
    "unclean-election": {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"},
    "unclean-election-off": {"unclean.leader.election.enable": "false", "min.insync.replicas": "1"},
}

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


def _unclean(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float, r: Result,
             unclean: bool) -> float:
    """The steps of ``unclean-election`` (`unclean`) and ``unclean-election-off`` (see the module's
    text); returns when the old leader has been started again."""
    from .power_loss import kill
    old = c.state(topic)["leader"]
    watch = StateWatch(c, topic, 1)
    watch.start()
    mode = rnd.choice(("blackhole", "reset"))
    t_cut = time.time()
    c.cut_peers(old, mode)
    wait_until(lambda: c.state(topic)["isr"] == [old], 30, f"the ISR shrunk to the leader {old}")
    _, t_alone = c.state_stat(topic)
    sleep_until(t_alone + max(1.0, hold_s / 2))          # acks=all acknowledged by the leader alone
    t_kill = time.time()
    kill(c.brokers[old])
    during = [t for t in w.ack_walls if t_cut < t < t_kill]   # (on the leader alone: at risk)
    old_log = log_batches(os.path.join(c.brokers[old].data, f"{topic}-0"))
    c.heal()                                             # (the followers' links to the dead leader)
    r.notes.append(f"leader {old} cut from its followers ({mode}), ISR [{old}] {t_alone - t_cut:.2f}s after; "
                   f"{len(during)} acks after the cut; SIGKILLed {t_kill - t_cut:.2f}s after the cut")
    if unclean:
        st = wait_until(lambda: (s := c.state(topic))["leader"] not in (old, -1) and s,
                        c.session_ms / 1000 + 20, "an unclean election")
        new = st["leader"]
        new_log = {b: x for b, *_, x in log_batches(os.path.join(c.brokers[new].data, f"{topic}-0"))}
        gone = [b for b, _, x in old_log if new_log.get(b) != x]
        r.notes.append(f"UNCLEAN election: leader {new} (epoch {st['leader_epoch']}, ISR {st['isr']}) "
                       f"{time.time() - t_kill:.2f}s after the kill; the dead leader's log held {len(gone)} "
                       f"batches the new leader lacks" + (f" (from offset {min(gone)})" if gone else ""))
        t_elect = time.time()       # the producer after it: acknowledged again, or failed for good
        wait_until(lambda: any(e.startswith("fatal") for e in w.errors) or any(a > t_elect for a in w.ack_walls),
                   30, "an acknowledgement or a fatal producer error after the election")
        fatal = [e for e in w.errors if e.startswith("fatal")]
        r.notes.append(f"the producer {time.time() - t_elect:.2f}s after the election: "
                       + ("a fatal error (no acknowledgement after it: max_unavailability counts up to it) "
                          f"{fatal[0][:120]}" if fatal else "acknowledged again"))
        if st["isr"] != [new]:
            r.problems.append(f"the unclean election wrote the ISR {st['isr']}, not [{new}]")
    else:
        wait_until(lambda: c.state(topic)["leader"] == -1, c.session_ms / 1000 + 20, "the partition offline")
        r.notes.append(f"no ISR member alive: offline (leader -1) {time.time() - t_kill:.2f}s after the kill")
    sleep_until(t_kill + hold_s)
    t_start = time.time()
    c.brokers[old].start()
    t = time.monotonic()
    if not unclean:
        t_up = time.time()                                   # (it listens once it has joined)
        wait_until(lambda: any(m > t_kill and q["leader"] != -1 for _, q, m in watch.seen), c.session_ms / 1000 + 30,
                   f"a leader once broker {old} is back")
        st, t_led = next((q, m) for _, q, m in watch.seen if m > t_kill and q["leader"] != -1)
        first = wait_until(lambda: min((a for a in w.ack_walls if a > t_start), default=0), 60,
                           "an acknowledgement after the old leader's return")
        r.notes.append(f"broker {old} started again {t_start - t_kill:.2f}s after the kill (listening "
                       f"{t_up - t_start:.2f}s later), leader {st['leader']} (epoch {st['leader_epoch']}) "
                       f"{t_led - t_start:.2f}s after the start; first ack "
                       f"{first - t_kill:.2f}s after the kill")
        led = [q for _, q, m in watch.seen if m > t_kill and q["leader"] not in (old, -1)]
        if led:
            r.problems.append(f"with unclean.leader.election.enable=false, an out-of-sync replica was elected: "
                              f"{led[0]}")
    watch.stop.set()
    r.notes.append("leader:ISR " + " -> ".join(f"{q['leader']}:{q['isr']}@{m - t_cut:.2f}s" for _, q, m in watch.seen)
                   + " (cut at 0)")
    return t


def unclean_election(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
                     r: Result) -> float:
    return _unclean(c, w, topic, rnd, hold_s, r, True)


def unclean_election_off(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
                         r: Result) -> float:
    return _unclean(c, w, topic, rnd, hold_s, r, False)
