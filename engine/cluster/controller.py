"""The controller: one broker of the cluster, the one whose ephemeral ``/controller`` znode exists.

Every broker runs a :class:`Controller`; all but one are candidates waiting for ``/controller``
to disappear (a ZooKeeper watch).  The winner bumps ``/controller_epoch`` and from then on owns
the partition states (engine/cluster/zk.py): each of its writes is a transaction that checks
``/controller_epoch`` is still at the version it set, so a controller that lost its seat writes
nothing.

What the controller does, always by bringing every partition to the rules below (``reconcile``:
idempotent, run after any watched change and every ``reconcile_interval`` seconds as a backstop):

- a partition with an assignment and no state gets one: leader = the first live replica of the
  assignment, ISR = the live replicas, leader epoch 0;
- a partition whose leader is not alive (its ``/brokers/ids/<id>`` is gone: its session expired,
  or a peer saw its process gone and removed it, engine/cluster/liveness.py) or is shutting down
  gets a new leader: the first replica (assignment order) that is alive, in the ISR and not
  shutting down; the leader epoch is bumped and the ISR becomes the live members.  With none:
  ``unclean.leader.election.enable`` (the topic's, else the broker default) elects the first live
  replica with ISR = [it] (data may be lost); otherwise leader = -1 with the ISR kept as it was,
  so the partition is offline until an ISR member returns (then elected cleanly);
- a live leader's ISR loses the members that are dead or shutting down (no leader epoch bump:
  the leadership did not change; the znode version, the partition epoch, moves on);
- a broker whose registration is newer than a partition state's last write (its czxid, Kafka's
  broker epoch of KIP-380, above the state's mzxid) has restarted since -- even if it did so
  between two passes and its id never left ``/brokers/ids`` -- and may have lost its unsynced
  tail: it is treated as failed for that state (out of the ISR; as leader, replaced from the
  ISR, or, when no other ISR member is alive, re-elected under a new epoch).  The broker itself
  does not take up a leadership written before its registration (engine/cluster/member.py);
- controlled shutdown: a broker about to stop creates ``/admin/controlled_shutdown/<id>``; the
  controller treats it as shutting down (above) and writes ``{"remaining": N}`` into that node,
  N = partitions it still leads (those with no other ISR member alive);
- preferred-leader election: ``/admin/preferred_replica_election`` (ElectLeaders, kafka's old
  path) and, with ``auto.leader.rebalance.enable``, every ``leader.imbalance.check.interval.seconds``
  for brokers whose share of not-preferred leaderships exceeds
  ``leader.imbalance.per.broker.percentage``: the first replica of the assignment becomes leader
  when it is alive and in the ISR (epoch bumped);
- topic deletion: ``/admin/delete_topics/<t>`` -> the topic's znodes are removed (brokers watching
  ``/brokers/topics`` drop their replicas and delete the logs);
- partition reassignment (KIP-455, engine/cluster/reassign.py): AlterPartitionReassignments runs
  on this thread (:meth:`Controller.call`) and writes the full replica set with
  ``adding_replicas`` / ``removing_replicas``; a pass finishes a partition once every target
  replica is in its ISR (a new leader from target ∩ ISR if needed, then the target alone).

Concurrency: watches only set flags and wake the controller's one thread, which does all reads
and writes in order.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time

from ..errors import NotControllerError, RequestTimedOutError
from . import reassign
from .zk import CONTROLLED_SHUTDOWN, CONTROLLER, PREFERRED_ELECTION, NoNodeError, PartitionState, ZkStore, state_path

__all__ = ["Controller"]

log = logging.getLogger("engine.cluster.controller")


class Controller:
    def __init__(self, store: ZkStore, broker_id: int, *, unclean_default: bool = False,
                 auto_rebalance: bool = True, rebalance_interval_s: float = 300.0,
                 imbalance_pct: int = 10, reconcile_interval_s: float = 10.0):
        self.store = store
        self.zk = store.client
        self.broker_id = broker_id
        self.unclean_default = unclean_default
        self.auto_rebalance = auto_rebalance
        self.rebalance_interval_s = rebalance_interval_s
        self.imbalance_pct = imbalance_pct
        self.reconcile_interval_s = reconcile_interval_s
        self.epoch = 0                 # our controller epoch while active
        self._epoch_version = -1
        self.active = False
        self._cv = threading.Condition()
        self._flags: set[str] = set()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._next_rebalance = 0.0
        self.elections = 0             # leader elections written (for tests and logs)
        self._registered: dict[int, int] = {}   # live broker -> its registration's czxid (this pass)
        self._calls: list = []         # [(fn, args, Future)] for the controller thread

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> Controller:
        self._thread = threading.Thread(target=self._run, name=f"controller-{self.broker_id}", daemon=True)
        self._thread.start()
        self._wake("elect")
        return self

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(10)
        self.resign()

    def resign(self) -> None:
        """Give up the seat (delete /controller if it is ours).  Without a connection to
        ZooKeeper nothing is tried: the seat goes with our session."""
        was = self.active
        self.active = False
        if was and self.zk.connected:
            try:
                data, stat = self.store.bounded("get", CONTROLLER)
                if json.loads(data)["brokerid"] == self.broker_id and \
                        stat.ephemeralOwner == self.zk.client_id[0]:
                    self.store.bounded("delete", CONTROLLER, version=stat.version)
            except Exception:
                pass

    def session_lost(self) -> None:
        """The ZooKeeper session expired: our /controller node is gone with it."""
        self.active = False

    def session_renewed(self) -> None:
        self._wake("elect")

    def call(self, fn, *args, timeout_s: float = 30.0):
        """``fn(self, *args)`` on the controller thread (the one writer of partition states and
        reassignments) and its result; NotControllerError when this broker is not (or stops
        being) the active controller.  Blocks: call it from a worker thread.

        Bounded: the controller thread may be busy with a pass (ZooKeeper round trips, each
        bounded by the session timeout).  With no result after `timeout_s`, RequestTimedOutError
        (Kafka's REQUEST_TIMED_OUT); a call that has not started by then never runs."""
        if not self.active or self._stopping:
            raise NotControllerError(f"broker {self.broker_id} is not the controller")
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._cv:
            self._calls.append((fn, args, fut))
            self._flags.add("call")
            self._cv.notify_all()
        try:
            return fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            if not fut.cancel() and fut.done():
                return fut.result()             # (finished just now)
            raise RequestTimedOutError(
                f"the controller (broker {self.broker_id}) gave no answer in {timeout_s:.1f} s"
                + ("" if fut.cancelled() else " (it is still at it: the change may yet be made)")) from None

    def _run_calls(self) -> None:
        with self._cv:
            calls, self._calls = self._calls, []
        for fn, args, fut in calls:
            if not fut.set_running_or_notify_cancel():
                continue
            if not self.active or self._stopping:
                fut.set_exception(NotControllerError(f"broker {self.broker_id} is not the controller"))
                continue
            try:
                fut.set_result(fn(self, *args))
            except BaseException as e:      # noqa: BLE001 - handed to the caller
                fut.set_exception(e)

    def _wake(self, flag: str, *_args):
        with self._cv:
            self._flags.add(flag)
            self._cv.notify_all()

    # -- watches (kazoo's thread: only flag and wake) ------------------------------------
    def _on_controller(self, event=None):
        self._wake("elect")

    def _on_change(self, event=None):
        self._wake("reconcile")

    # -- the controller thread ---------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cv:
                timeout = self.reconcile_interval_s if self.active else 5.0
                if not self._flags and not self._stopping:
                    self._cv.wait(timeout)
                if self._stopping:
                    self._run_calls()           # (answered NOT_CONTROLLER)
                    return
                flags, self._flags = self._flags or {"reconcile" if self.active else "elect"}, set()
            try:
                if "elect" in flags:
                    self._elect()
                self._run_calls()
                if self.active:
                    self._reconcile()
            except Exception as e:
                if self._stopping:
                    return
                if self.zk.connected:
                    log.exception("controller %d: pass failed", self.broker_id)
                else:
                    log.warning("controller %d: pass failed, ZooKeeper not connected (%s)", self.broker_id, e)
                time.sleep(0.5)
                self._wake("elect" if not self.active else "reconcile")

    def _elect(self) -> None:
        if self.active:
            # still ours?  (a watch fired on /controller: maybe its data changed or we lost it)
            try:
                data, stat = self.zk.get(CONTROLLER, watch=self._on_controller)
                if json.loads(data)["brokerid"] == self.broker_id and stat.ephemeralOwner == self.zk.client_id[0]:
                    return
            except NoNodeError:
                pass
            log.warning("broker %d is no longer the controller", self.broker_id)
            self.active = False
        epoch = self.store.try_become_controller(self.broker_id)
        if epoch is None:
            holder = self.store.controller_id(watch=self._on_controller)
            if holder == -1:              # gone between create and get: try again
                self._wake("elect")
            return
        self.epoch = epoch
        self._epoch_version = self.store.controller_epoch()[1]
        self.zk.exists(CONTROLLER, watch=self._on_controller)
        self.active = True
        self._next_rebalance = time.monotonic() + self.rebalance_interval_s
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)

    def _still_controller(self) -> bool:
        epoch, version = self.store.controller_epoch()
        if epoch != self.epoch or version != self._epoch_version:
            log.warning("controller %d: controller epoch moved to %d; resigning", self.broker_id, epoch)
            self.active = False
            return False
        return True

    # -- one pass ----------------------------------------------------------------------
    def _reconcile(self) -> None:
        zk = self.zk
        live = set(int(b) for b in zk.get_children("/brokers/ids", watch=self._on_change))
        # each live broker's registration zxid (Kafka's broker epoch, KIP-380): a registration
        # newer than a partition state's last write is a broker restarted (or re-registered)
        # since -- possibly between two passes, so that its id never left the children above
        self._registered.clear()
        for b in live:
            stat = zk.exists(f"/brokers/ids/{b}")
            if stat is not None:
                self._registered[b] = stat.czxid
        live = set(self._registered)
        shutting = set(int(b) for b in zk.get_children(CONTROLLED_SHUTDOWN, watch=self._on_change))
        for topic in self.store.topics_to_delete(watch=self._on_change):
            log.info("controller %d: deleting topic %s", self.broker_id, topic)
            self.store.delete_topic_nodes(topic)
        preferred: set[tuple[str, int]] | None = set()
        try:
            data, _ = zk.get(PREFERRED_ELECTION, watch=self._on_change)
            preferred = {(e["topic"], int(e["partition"])) for e in json.loads(data)["partitions"]}
        except NoNodeError:
            zk.exists(PREFERRED_ELECTION, watch=self._on_change)
            preferred = None
        rebalance = self.auto_rebalance and time.monotonic() >= self._next_rebalance
        if rebalance:
            self._next_rebalance = time.monotonic() + self.rebalance_interval_s
        states: dict[tuple[str, int], tuple[list[int], PartitionState | None]] = {}
        for topic in self.store.topics(watch=self._on_change):
            a = self.store.assignment(topic, watch=self._on_change)
            if a is None:
                continue
            unclean = self._unclean(topic)
            for p, replicas in sorted(a.partitions.items()):
                st = self._partition(topic, p, replicas, live, shutting, unclean,
                                     preferred is not None and (topic, p) in preferred)
                if not self.active:
                    return
                if a.reassigning(p):
                    # wait for the target replicas to join the ISR (watched), then finish
                    zk.exists(state_path(topic, p), watch=self._on_change)
                    done = reassign.progress(self, topic, p, live, shutting)
                    if done is not None:
                        replicas, st = done
                states[(topic, p)] = (replicas, st)
        if preferred is not None:
            try:
                zk.delete(PREFERRED_ELECTION)
            except NoNodeError:
                pass
        if rebalance:
            self._rebalance(states, live, shutting)
        for b in shutting:
            led = sum(1 for _r, st in states.values() if st is not None and st.leader == b)
            try:
                zk.set(f"{CONTROLLED_SHUTDOWN}/{b}", json.dumps({"remaining": led}).encode())
            except NoNodeError:
                pass

    def _unclean(self, topic: str) -> bool:
        v = self.store.topic_config(topic).get("unclean.leader.election.enable")
        if v is None:
            return self.unclean_default
        return str(v).strip().lower() == "true"

    def _write(self, topic: str, p: int, st: PartitionState, why: str) -> PartitionState | None:
        new_version = self.store.update_partition_state(topic, p, st, self._epoch_version)
        if new_version is None:
            self._still_controller()
            return None
        log.info("controller %d: %s-%d leader=%d epoch=%d isr=%s (%s)", self.broker_id, topic, p,
                 st.leader, st.leader_epoch, st.isr, why)
        st.version = new_version
        return st

    def _partition(self, topic, p, replicas, live, shutting, unclean, prefer) -> PartitionState | None:
        for _attempt in range(5):
            st = self.store.partition_state(topic, p)
            available = [b for b in replicas if b in live and b not in shutting]
            if st is None:
                if not available:
                    available = [b for b in replicas if b in live]
                if not available:
                    return None            # no replica alive yet: created at a later pass
                new = PartitionState(available[0], 0, available, self.epoch)
                if self.store.create_partition_state(topic, p, new, self._epoch_version):
                    log.info("controller %d: %s-%d created, leader=%d isr=%s", self.broker_id,
                             topic, p, new.leader, new.isr)
                    new.version = 0
                    return new
                if not self._still_controller():
                    return None
                continue
            # restarted since this state was written: its log may have lost its unsynced tail
            # (a power loss), so it leaves the ISR and gives up the leadership like a failed
            # broker (the leader's ISR expansion takes it back once it has caught up)
            bounced = {b for b in {*st.isr, st.leader} if self._registered.get(b, 0) > st.mzxid}
            isr_up = [b for b in replicas if b in st.isr and b in live and b not in shutting]
            isr_up += [b for b in st.isr if b not in replicas and b in live and b not in shutting]
            isr_live = [b for b in isr_up if b not in bounced]
            leader_ok = st.leader in live and st.leader not in shutting and st.leader not in bounced
            if prefer and replicas and st.leader != replicas[0] and replicas[0] in isr_live:
                new = PartitionState(replicas[0], st.leader_epoch + 1, isr_live, self.epoch, st.version)
                why = "preferred leader election"
            elif leader_ok:
                if isr_live == [] or set(isr_live) == set(st.isr):
                    return st
                if st.leader not in isr_live:
                    isr_live.insert(0, st.leader)
                if set(isr_live) == set(st.isr):
                    return st
                new = PartitionState(st.leader, st.leader_epoch, isr_live, self.epoch, st.version)
                why = "dead, restarted or shutting-down replicas leave the ISR"
            elif isr_live:
                new = PartitionState(isr_live[0], st.leader_epoch + 1, isr_live, self.epoch, st.version)
                why = f"leader {st.leader} " + ("shutting down" if st.leader in shutting else
                                                "restarted" if st.leader in bounced else "gone")
            elif isr_up:
                # the only ISR members alive restarted since (the leader, or the last ISR member
                # of an offline partition coming back): the first leads, under a new epoch written
                # after its registration (what it lost, if anything, no other replica had)
                new = PartitionState(isr_up[0], st.leader_epoch + 1, [isr_up[0]], self.epoch, st.version)
                why = f"ISR member {isr_up[0]} restarted, no other alive"
            elif st.leader in live:
                return st                  # shutting down, but no other ISR member to take over
            elif unclean and available:
                new = PartitionState(available[0], st.leader_epoch + 1, [available[0]], self.epoch, st.version)
                why = "UNCLEAN election: no ISR member alive"
            elif st.leader != -1:
                new = PartitionState(-1, st.leader_epoch + 1, st.isr, self.epoch, st.version)
                why = "no ISR member alive: offline"
            else:
                return st
            written = self._write(topic, p, new, why)
            if written is not None:
                self.elections += new.leader_epoch != st.leader_epoch
                return written
            if not self.active:
                return None
        return self.store.partition_state(topic, p)

    def _rebalance(self, states, live, shutting) -> None:
        """auto.leader.rebalance.enable: per preferred broker, the share of its partitions led
        elsewhere; above the threshold, elect it where it is alive and in the ISR."""
        per_broker: dict[int, list[tuple[str, int]]] = {}
        totals: dict[int, int] = {}
        for (t, p), (replicas, st) in states.items():
            if not replicas or st is None:
                continue
            pref = replicas[0]
            totals[pref] = totals.get(pref, 0) + 1
            if st.leader != pref:
                per_broker.setdefault(pref, []).append((t, p))
        for b, parts in per_broker.items():
            if b not in live or b in shutting or 100 * len(parts) <= self.imbalance_pct * totals[b]:
                continue
            for t, p in parts:
                replicas, _st = states[(t, p)]
                self._partition(t, p, replicas, live, shutting, self._unclean(t), True)
