"""Network-partition scenarios (issue 20), each on a :class:`~engine.chaos.cluster.
PartitionCluster` under an idempotent acks=all producer and a consumer group
(engine/chaos/workload.py), on a fresh topic with RF 3 and ``min.insync.replicas=2``:

* ``leader-isolated`` (a): the partition's leader cut from its followers (their fetches and
  inter-broker requests blackholed or reset, both ways) but not from ZooKeeper nor its clients: the ISR
  shrinks to the leader alone, acks=all writes are refused (NOT_ENOUGH_REPLICAS, seen by a
  no-retry probe producer), nothing acknowledged is lost; after the heal the ISR is full again.
* ``leader-split`` (a'): the leader cut from its followers and ZooKeeper, not from its clients:
  it appends but cannot commit, fences itself, a follower is elected, and at the heal its
  uncommitted tail is truncated (the replicas' byte identity checks it).
* ``controller-isolated`` (b): the controller cut from ZooKeeper: another broker becomes the
  controller with a higher controller epoch; no partition state is written after that with a
  leader change under the old epoch.
* ``follower-isolated`` (c): one follower (not the controller when avoidable) cut from everything:
  the ISR shrinks, the producer goes on (its longest pause bounded by the replica lag time), the
  follower rejoins after the heal.
* ``flapping`` (d): the leader's ZooKeeper link or its followers' link (chosen at random each
  time) blackholed and healed every ~1 s for the duration.
* ``flapping-session`` (d'): the leader's ZooKeeper link cut for 0.6-1.5 session timeouts at a
  time, healed 1-2 s, over and over (whoever leads is cut next): around the fencing and expiry
  thresholds, so leaders are fenced and resume, or lose their session and are replaced.
* ``txn-cut`` (e): a transactional producer's connections (client id ``scenario-txn``) reset or
  blackholed between its produces and its commit; each transaction is then committed (commit
  retried) or aborted after the heal, and a read_committed consumer sees every transaction whole
  or not at all, as decided.
* ``lost-acks``: the producer's connections to the partition's leader drop every answer
  (netproxy's ``drop-responses``, by its client id) for the hold, at least two of its request
  timeouts (librdkafka's client-side one is ``socket.timeout.ms``, 1500 ms here; its
  ``request.timeout.ms`` is the broker's ack timeout): the leader appends and replicates what it
  is sent, the producer never hears, times out, drops the connection, reconnects (its ApiVersions
  answer dropped too) and, after the heal, sends the same batches again with the same
  sequence numbers; the leader answers those from its idempotence state rather than appending
  them twice.  Counts the Produce answers
  the proxy dropped; no acknowledgement may come during the hold.
* ``power-loss`` and the other scenarios where a broker process dies: engine/chaos/crash_scenarios.py.

Every scenario ends with the same checks: nothing acknowledged lost or doubled, the group member
received every acknowledged value, and every replica of every partition byte-identical below the
high watermark (:meth:`PartitionCluster.replicas_identical`).  ``run_scenario`` returns a
:class:`~engine.chaos.observe.Result` (its ``line()`` is what ``python -m engine chaos --scenario NAME`` prints) whose
``problems`` lists what failed.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import time
import uuid

from .cluster import PartitionCluster, log_batches, wait_until
from .crash_scenarios import BOUNCE_MISSED, TOPIC_CONFIGS, power_loss, unclean_election, unclean_election_off
from .observe import Result, StateWatch, isr_history, sleep_until
from .workload import PRODUCER_ID, Workload, read_all

__all__ = ["BOUNCE_MISSED", "SCENARIOS", "WEAKER", "Result", "run_scenario", "run_scenarios"]

TXN_CLIENT_ID = "scenario-txn"
CUTS = ("blackhole", "reset")      # a cut is silence (a dropped route) or refusal (RST), per seed


def _log_lines_after(text: str, t: float) -> list[str]:
    """The broker log's lines stamped (``%Y-%m-%d %H:%M:%S,mmm``, local time) after wall time `t`."""
    from datetime import datetime
    out = []
    for line in text.splitlines():
        try:
            when = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            continue
        if when > t:
            out.append(line)
    return out


def _probe_acks_all(c: PartitionCluster, topic: str) -> str:
    """One record through a producer that does not retry, acks=all: the error name (or "NONE")."""
    from confluent_kafka import Producer
    got: list[str] = []
    p = Producer({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4", "client.id": "scenario-probe",
                  "acks": "all", "retries": 0, "enable.idempotence": False, "message.timeout.ms": 10000})
    p.produce(topic, b"-1", partition=0,
              on_delivery=lambda err, msg: got.append("NONE" if err is None else err.name()))
    p.flush(15)
    with contextlib.suppress(Exception):
        p.close()
    return got[0] if got else "no report"


# -- (a) ------------------------------------------------------------------------------------
def leader_isolated(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
                    r: Result) -> float:
    leader = c.state(topic)["leader"]
    watch = StateWatch(c, topic, 1)
    watch.start()
    mode = rnd.choice(CUTS)
    t_cut = time.time()
    c.cut_peers(leader, mode)
    wait_until(lambda: c.state(topic)["isr"] == [leader], 30, f"the ISR shrunk to the leader {leader}")
    _, t_alone = c.state_stat(topic)                       # (ZooKeeper's time of that write)
    probe = _probe_acks_all(c, topic)
    r.notes.append(f"leader {leader} cut from its followers ({mode}); acks=all probe with ISR [{leader}]: {probe}")
    if probe not in ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"):
        r.problems.append(f"an acks=all write with the ISR [{leader}] got {probe}, not NOT_ENOUGH_REPLICAS")
    sleep_until(t_cut + hold_s)
    t_heal = time.time()
    # Acknowledgements may still come while the ISR shrinks one follower at a time: dropping the
    # follower that was further behind lets the HW rise to what the other had fetched before the
    # cut (on two replicas: acks=all kept).  None once the ISR is the leader alone (0.5 s:
    # callbacks in flight, the leader applying its own ISR write).
    during = [t for t in w.ack_walls if t_cut < t < t_heal]
    alone = [t for t in during if t > t_alone + 0.5]
    if alone:
        r.problems.append(f"{len(alone)} acknowledgements with the ISR [{leader}], at "
                          f"{', '.join(f'{t - t_cut:.2f}' for t in alone[:5])}s after the cut "
                          f"(ISR [{leader}] at {t_alone - t_cut:.2f}s)")
    t = time.monotonic()
    c.heal()
    watch.stop.set()
    r.notes.append(f"ISR {isr_history(watch, t_cut)} (cut at 0, healed at {t_heal - t_cut:.2f}s); "
                   f"{len(during)} acks during the cut, the last at "
                   f"{(max(during) - t_cut) if during else 0:.2f}s, {len(alone)} with the ISR [{leader}]")
    return t


def leader_split(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
                 r: Result) -> float:
    """(a') The leader cut from its followers *and* ZooKeeper, its clients still reaching it: it
    appends what the producer sends but cannot commit it (its followers do not fetch, its ISR
    cannot shrink); it fences itself when its ZooKeeper connection is suspended; a follower is
    elected once its session expires; the producer moves there.  At the heal the old leader's
    log has diverged (its uncommitted tail) and must be truncated to the new leader's."""
    st0 = c.state(topic)
    old = st0["leader"]
    mode = rnd.choice(CUTS)
    t_cut = time.time()
    c.zk_cut(old, mode)
    c.cut_peers(old, mode)
    st1 = wait_until(lambda: (s := c.state(topic))["leader"] not in (old, -1) and s,
                     c.session_ms / 1000 + 20, "a new leader")
    t_elect = time.time()
    sleep_until(t_cut + max(hold_s, c.session_ms / 1000 + 2))
    old_log = log_batches(os.path.join(c.brokers[old].data, f"{topic}-0"))
    new_log = {b: x for b, *_, x in log_batches(os.path.join(c.brokers[st1["leader"]].data, f"{topic}-0"))}
    diverged = [b for b, _, x in old_log if b in new_log and new_log[b] != x] + \
        [b for b, _, _ in old_log if b not in new_log and b > max(new_log, default=-1)]
    first_new = min((t for t in w.ack_walls if t > t_elect), default=float("nan"))
    late = [t for t in w.ack_walls if t_cut + 0.5 < t < t_elect]
    r.notes.append(f"leader {old} cut from followers and ZooKeeper ({mode}); leader {st1['leader']} (epoch "
                   f"{st1['leader_epoch']}) after {t_elect - t_cut:.2f}s, first ack after it at "
                   f"{first_new - t_cut:.2f}s; {len(late)} acks between cut and election; the old "
                   f"leader's log held {len(diverged)} batches the new one does not"
                   + (f" (from offset {min(diverged)})" if diverged else ""))
    if late and w.acks == "all":
        r.problems.append(f"{len(late)} acknowledgements from the cut-off leader {old} before the election")
    t = time.monotonic()
    c.heal()
    return t


# -- (b) ------------------------------------------------------------------------------------
def controller_isolated(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
                        r: Result) -> float:
    old = c.controller()
    e0, _ = c.controller_epoch()
    watch = StateWatch(c, topic, w.partitions)
    watch.start()
    mode = rnd.choice(CUTS)
    t_cut = time.time()
    c.zk_cut(old, mode)
    new = wait_until(lambda: c.controller() not in (old, -1) and c.controller(), c.session_ms / 1000 + 20,
                     "a new controller")
    e1, t_e1 = c.controller_epoch()
    r.notes.append(f"controller {old} (epoch {e0}) cut from ZooKeeper ({mode}); controller {new} (epoch {e1}) "
                   f"after {time.time() - t_cut:.2f}s")
    sleep_until(t_cut + max(hold_s, c.session_ms / 1000 + 1))
    t = time.monotonic()
    c.heal()
    wait_until(lambda: old in c.registered(), 30, f"broker {old} registered again")
    c.wait_full_isr(topic, w.partitions)
    watch.stop.set()
    watch.join(5)
    if e1 <= e0:
        r.problems.append(f"the controller epoch went {e0} -> {e1}")
    # a leader change (an election: the controller's write) after the new epoch, under an older one
    prev: dict[int, int] = {}
    stale = []
    for p, st, mtime in watch.seen:
        if p in prev and st["leader_epoch"] != prev[p] and mtime >= t_e1 and st["controller_epoch"] < e1:
            stale.append((p, st))
        prev[p] = st["leader_epoch"]
    if stale:
        r.problems.append(f"elections written under an old controller epoch after epoch {e1}: {stale[:3]}")
    # and the old controller's own account: no partition state written by it after the cut
    wrote = [line for line in _log_lines_after(c.brokers[old].log_text(), t_cut)
             if f"engine.cluster.controller: controller {old}: " in line
             and "pass failed" not in line and "resigning" not in line]
    if wrote:
        r.problems.append(f"the old controller {old} wrote after it was cut off: {wrote[:2]}")
    elections = sum(1 for p, st, m in watch.seen if m >= t_e1 and st["controller_epoch"] >= e1)
    r.notes.append(f"{elections} partition states written under epoch {e1}, none under an older one"
                   if not stale else f"{len(stale)} stale elections")
    return t


# -- (c) ------------------------------------------------------------------------------------
def follower_isolated(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
                      r: Result) -> float:
    st = c.state(topic)
    followers = [b for b in st["isr"] if b != st["leader"]]
    f = rnd.choice([b for b in followers if b != c.controller()] or followers)
    mode = rnd.choice(CUTS)
    t_cut = time.time()
    c.isolate(f, mode)
    wait_until(lambda: f not in c.state(topic)["isr"], 30, f"follower {f} out of the ISR")
    r.notes.append(f"follower {f} isolated ({mode}); out of the ISR after {time.time() - t_cut:.2f}s")
    sleep_until(t_cut + hold_s)
    gap, _ = w.max_gap(t_cut - 1.0)
    lag_s = c.lag_ms / 1000
    r.notes.append(f"longest pause during the cut {gap:.2f}s")
    if gap > lag_s + 3.0:
        r.problems.append(f"the producer stopped {gap:.2f}s with a minority follower cut off")
    t = time.monotonic()
    c.heal()
    return t


# -- (d) ------------------------------------------------------------------------------------
def flapping(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
             r: Result) -> float:
    leader = c.state(topic)["leader"]
    e0 = c.state(topic)["leader_epoch"]
    t_end = time.time() + hold_s
    flips: list[str] = []
    while time.time() < t_end:
        link = rnd.choice(["zk", "followers"])
        if link == "zk":
            c.zk_cut(leader)
        else:
            c.cut_peers(leader)
        flips.append(link)
        time.sleep(rnd.uniform(0.7, 1.3))
        c.heal()
        time.sleep(rnd.uniform(0.7, 1.3))
    t = time.monotonic()
    c.heal()
    st = c.state(topic)
    r.notes.append(f"leader {leader}'s links flapped {len(flips)} times ({flips.count('zk')} ZooKeeper, "
                   f"{flips.count('followers')} followers); leader now {st['leader']} epoch "
                   f"{st['leader_epoch']} (was {e0})")
    return t


def flapping_session(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
                     r: Result) -> float:
    """(d') The leader's ZooKeeper link cut for 0.6-1.5 session timeouts at a time, healed 1-2 s:
    around kazoo's suspension (2/3 session) and ZooKeeper's expiry, so some cuts fence the leader
    and let it resume with its epoch, others cost it its session and the partition a new leader
    -- whoever leads at the next cut is cut next.  At least two cuts."""
    watch = StateWatch(c, topic, 1)
    watch.start()
    e0 = c.state(topic)["leader_epoch"]
    t_end = time.time() + hold_s
    cuts: list[str] = []
    session_s = c.session_ms / 1000
    while time.time() < t_end or len(cuts) < 2:
        leader = wait_until(lambda: max(c.state(topic)["leader"], 0), 60, "a leader")   # (ids from 1)
        held = rnd.uniform(0.6, 1.5) * session_s
        c.zk_cut(leader)
        time.sleep(held)
        c.heal()
        cuts.append(f"{leader}:{held:.1f}s")
        time.sleep(rnd.uniform(1.0, 2.0))
    t = time.monotonic()
    c.heal()
    watch.stop.set()
    st = c.state(topic)
    leaders = [q["leader"] for _, q, _ in watch.seen]
    r.notes.append(f"leader ZooKeeper cuts {', '.join(cuts)}; leader epoch {e0} -> {st['leader_epoch']}, "
                   f"leaders in turn {[k for k, _ in itertools.groupby(leaders)]}")
    return t


# -- (e) ------------------------------------------------------------------------------------
def _txn_producer(c: PartitionCluster, txn_id: str):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4", "client.id": TXN_CLIENT_ID,
                  "transactional.id": txn_id, "transaction.timeout.ms": 30000, "linger.ms": 2,
                  "retry.backoff.max.ms": 500})
    p.init_transactions(30)
    return p


def txn_cut(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
            r: Result) -> float:
    from confluent_kafka import KafkaException
    ttopic = f"{topic}-txn"
    c.create_topic(ttopic, 2)
    txn_id = f"scenario-{uuid.uuid4().hex[:6]}"
    p = _txn_producer(c, txn_id)
    per_txn = 10
    decided: dict[int, str] = {}
    worst = 0.0
    for k in range(max(2, int(hold_s / 2))):
        mode, finish = rnd.choice(["reset", "blackhole"]), rnd.choice(["commit", "commit", "abort"])
        flushed = rnd.random() < 0.5
        p.begin_transaction()
        for j in range(per_txn):
            p.produce(ttopic, f"{k}:{j}".encode(), partition=j % 2)
        if flushed:
            p.flush(30)                            # the records in both logs, the end not yet asked
        else:
            p.poll(0)                              # the records perhaps still on their way
        t0 = time.monotonic()
        c.cut_client(TXN_CLIENT_ID, mode)
        end = p.commit_transaction if finish == "commit" else p.abort_transaction
        done = "committed" if finish == "commit" else "aborted"
        outcome = "unknown"
        try:
            end(1.5)
            outcome = done                                         # (done before the cut took hold)
        except KafkaException as e:
            err = e.args[0]
            time.sleep(rnd.uniform(0.2, 1.0))
            c.heal()
            try:
                if err.fatal():
                    raise
                if err.txn_requires_abort():
                    p.abort_transaction(30)
                    outcome = "aborted"
                else:                              # (timed out: the same call again, librdkafka's rule)
                    end(30)
                    outcome = done
            except KafkaException as e2:
                r.notes.append(f"txn {k}: {e2.args[0].name()} after the heal: new producer")
                with contextlib.suppress(Exception):
                    p.purge()
                    p.close()
                p = _txn_producer(c, txn_id)       # (fences the old one: its open transaction aborted)
        c.heal()
        decided[k] = f"{mode}/{finish}/{outcome}" + ("/flushed" if flushed else "")
        worst = max(worst, time.monotonic() - t0)
    t_last = time.monotonic()
    with contextlib.suppress(Exception):
        p.close()
    values, hw = read_all(c.bootstrap, ttopic, 2)
    got: dict[int, set[int]] = {}
    for v in values:
        k, j = (int(x) for x in v.split(b":"))
        got.setdefault(k, set()).add(j)
    for k, how in decided.items():
        n = len(got.get(k, ()))
        outcome = how.split("/")[2]
        if n not in (0, per_txn):
            r.problems.append(f"transaction {k} ({how}): {n} of {per_txn} records visible to read_committed")
        elif (outcome == "committed" and n == 0) or (outcome == "aborted" and n == per_txn):
            r.problems.append(f"transaction {k} {outcome} but read_committed sees {n} of its records")
    if len(values) != sum(len(s) for s in got.values()):
        r.problems.append(f"{len(values) - sum(len(s) for s in got.values())} transactional records twice")
    kinds = ", ".join(f"{k}:{v}" for k, v in decided.items())
    visible = sum(1 for s in got.values() if s)
    r.notes.append(f"{len(decided)} transactions cut before their end ({kinds}); {visible} visible whole, "
                   f"the rest not at all; longest cut-to-resolution {worst:.2f}s")
    for q in range(2):
        if hw[q] == 0:
            r.problems.append(f"{ttopic}-{q}: high watermark 0 after {len(decided)} transactions")
        r.notes.append(f"{ttopic}-{q} replicas identical below HW {hw[q]} "
                       f"({c.replicas_identical(ttopic, q, hw[q])})")
    return t_last


# -- lost acknowledgements -------------------------------------------------------------------
def lost_acks(c: PartitionCluster, w: Workload, topic: str, rnd: random.Random, hold_s: float,
              r: Result) -> float:
    leader = c.state(topic)["leader"]
    proxy = c.brokers[leader].proxy
    before = proxy.dropped.get(0, 0)
    n0 = len(w.acked)
    t_cut = time.time()
    proxy.rule(PRODUCER_ID, "drop-responses")
    timeout_s = PRODUCER_CONF["lost-acks"]["socket.timeout.ms"] / 1000
    sleep_until(t_cut + max(hold_s, 2 * timeout_s + 0.5))
    t_heal = time.time()
    dropped = proxy.dropped.get(0, 0) - before
    during = [t for t in w.ack_walls if t_cut + 0.5 < t < t_heal]
    t = time.monotonic()
    c.heal()                                   # (the producer's dropping connections reset)
    first = wait_until(lambda: min((a for a in w.ack_walls if a > t_heal), default=0), 60,
                       "an acknowledgement after the heal")
    r.notes.append(f"leader {leader} answered {dropped} Produce requests of {PRODUCER_ID} the client never "
                   f"saw ({t_heal - t_cut:.1f}s, socket.timeout.ms {timeout_s * 1000:.0f}); "
                   f"{len(w.acked) - n0} acks since the cut, the first after the heal at {first - t_heal:.2f}s")
    if not dropped:
        r.problems.append("no Produce answer was dropped: the producer's link to the leader was not hit")
    if during:
        r.problems.append(f"{len(during)} acknowledgements while every answer from leader {leader} was dropped")
    return t


SCENARIOS = {"leader-isolated": (leader_isolated, 1), "leader-split": (leader_split, 1),
             "controller-isolated": (controller_isolated, 3),
             "follower-isolated": (follower_isolated, 1), "flapping": (flapping, 1),
             "flapping-session": (flapping_session, 1), "txn-cut": (txn_cut, 1),
             "power-loss": (power_loss, 1), "leader-split-acks1": (leader_split, 1),
             "unclean-election": (unclean_election, 1), "unclean-election-off": (unclean_election_off, 1),
             "lost-acks": (lost_acks, 1)}
# scenarios run with a setting that gives acknowledged records up (name -> that setting): their
# loss, duplicates and producer errors are reported, not a failure (the CLI runs them; the test
# file leaves them out)
WEAKER = {"leader-split-acks1": "acks=1",
          "unclean-election": "unclean.leader.election.enable=true, min.insync.replicas=1"}
ACKS = {"leader-split-acks1": "1"}                     # (the producer's acks, "all" otherwise)
PRODUCER_CONF = {"lost-acks": {"socket.timeout.ms": 1500}}   # (more producer settings)


def run_scenario(c: PartitionCluster, name: str, seed: int = 1, hold_s: float = 6.0,
                 client_debug: bool = False) -> Result:
    """Scenario `name` of :data:`SCENARIOS` on a fresh topic of `c`; every link healed after.
    `client_debug`: the producer's librdkafka debug log in ``<c.base>/producer-<topic>.log``."""
    body, partitions = SCENARIOS[name]
    rnd = random.Random(seed)
    r = Result(name)
    topic = f"{name}-{uuid.uuid4().hex[:6]}"
    c.create_topic(topic, partitions, config=TOPIC_CONFIGS.get(name))
    debug_path = os.path.join(c.base, f"producer-{topic}.log") if client_debug else None
    w = Workload(c.bootstrap, topic, partitions, acks=ACKS.get(name, "all"), debug_path=debug_path,
                 producer_conf=PRODUCER_CONF.get(name)).start()
    try:
        w.wait_acked(500)
        t_start = time.time()
        try:
            t_heal = body(c, w, topic, rnd, hold_s, r)
        finally:
            c.heal()
        c.wait_full_isr(topic, partitions)
        r.heal_s = time.monotonic() - t_heal
        try:                            # (each broker registered, every one named alive by all)
            c.wait_whole(30)
        except AssertionError as e:
            r.problems.append(str(e))
        try:
            if not any(e.startswith("fatal") for e in w.errors):   # (a dead producer acks nothing)
                w.wait_acked(300)
        except AssertionError as e:                 # (the producer failed: the verdict says why)
            r.problems.append(str(e))
            with contextlib.suppress(Exception):    # (what ZooKeeper said while it stalled)
                r.notes.append(f"stalled with controller {c.controller()}, states "
                               f"{[c.state(topic, p) for p in range(partitions)]}")
        r.max_unavailable_s = w.max_gap(t_start)[0]
    finally:
        v = w.finish()
    r.acked, r.lost, r.dup, r.group_missing = v["acked"], v["lost"], v["dup"], v["group_missing"]
    r.errors = len(v["errors"])
    weak = WEAKER.get(name)
    if weak:
        r.notes.append(f"{weak}{' (not idempotent)' if w.acks != 'all' else ''}: {r.lost} acknowledged records "
                       f"lost, {r.dup} duplicated, {r.group_missing} never received by the group"
                       + (f", producer errors {[e[:90] for e in v['errors'][:2]]}" if v["errors"] else "")
                       + " -- reported, the setting gives them up")
    elif r.lost or r.dup:
        r.problems.append(f"{r.lost} acknowledged records lost, {r.dup} duplicated")
    if v["errors"] and not weak:
        r.problems.append(f"producer errors: {v['errors'][:3]}")
    if r.group_missing and not weak:
        r.problems.append(f"the consumer group never received {r.group_missing} acknowledged records")
    for p in range(partitions):
        try:
            c.replicas_identical(topic, p, v["hw"][p])
        except AssertionError as e:
            r.problems.append(str(e))
    r.notes.append(f"replicas identical below the HW {sorted(v['hw'].values())}"
                   if not any("replica" in x for x in r.problems) else "REPLICAS DIFFER")
    return r


def run_scenarios(names: list[str], seed: int, hold_s: float, keep: bool = False,
                  client_debug: bool = False) -> int:
    """``python -m engine chaos --scenario NAME``: a fresh 3-broker cluster in a temporary
    directory, the scenarios one after another, one line each; 0 only without problems.  `keep`:
    the directory (brokers' logs, data, with `client_debug` the producer's debug log) stays."""
    import shutil
    import tempfile
    base = tempfile.mkdtemp(prefix="engine-partition-")
    print(f"partition scenarios: seed {seed}, hold {hold_s:.0f}s, data in {base}", flush=True)
    c = PartitionCluster(base)
    failed = 0
    try:
        c.start()
        for i, name in enumerate(names):
            try:
                r = run_scenario(c, name, seed + i, hold_s, client_debug)
            except AssertionError as e:          # (a wait that timed out: the next one may still run)
                print(f"{name}: FAILED: {e}", flush=True)
                failed += 1
                continue
            print(r.line(), flush=True)
            failed += bool(r.problems)
    finally:
        logs = c.stop()
        for n, text in logs.items():
            if "Traceback" in text:
                print(f"broker {n} logged a traceback (log in {base})", flush=True)
                failed += 1
                keep = True
        if not keep:
            shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0
