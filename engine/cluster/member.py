"""A broker's part in a ZooKeeper cluster: registration, the metadata cache, leader/follower changes.

::

    member = ClusterMember(node, broker_id=1, zookeeper="127.0.0.1:2181", host="127.0.0.1",
                           port=9092, config=node.config, inter_broker_listener="INTERNAL")
    member.set_endpoints([("CLIENT", "PLAINTEXT", "127.0.0.1", 9092),   # every advertised listener
                          ("INTERNAL", "SASL_SSL", "127.0.0.1", 9093)])
    member.start()                      # registers /brokers/ids/1 (ClusterError if taken)
    member.attach(replica_manager, loop)  # from now on state changes drive the replica manager
    member.view                         # the cluster view (engine/replica/view.py's interface)
    member.controlled_shutdown(30)      # before stopping: the controller moves leaderships away
    member.stop()
    member.abort()                      # instead: leave now (data directory failed)

Propagation: every broker watches the znodes (ZooKeeper watches) -- ``/brokers/ids``,
``/controller``, ``/brokers/topics`` and each topic's assignment and partition states -- and keeps
the latest of each in a cache (the view).  A change of a partition state this broker replicates
becomes ``become_leader`` / ``become_follower`` on the replica manager (the partition's local log
created first: a broker holds logs only for the partitions it replicates); a partition whose
replica set no longer names this broker (a reassignment) and a topic that disappears become
``stop_replica(delete=True)`` and the local log is removed.  Changes are applied in order
by one worker thread, on the broker's event loop.

Fencing: when the ZooKeeper connection is suspended (kazoo notices after about 2/3 of the
session timeout without an answer, i.e. before the server expires the session and the
controller can elect anyone else) this broker stops acting as leader: the view reports no
leader for the partitions it led (Produce and Fetch answer NOT_LEADER_OR_FOLLOWER) and the
replica manager is told it follows nobody.  On reconnection within the session it resumes from
the znodes; after an expiry it registers again (a new session) and re-reads everything.

Listeners: the registration holds every advertised listener (engine/cluster/registration.py).
The view's ``brokers()`` gives each broker's inter-broker listener address (what fetchers, the
coordinators' link and the liveness watcher connect to); ``listener_brokers(name)`` the
addresses on listener ``name`` (what a client that came in on that listener is answered).
"""

from __future__ import annotations

import asyncio
import errno
import inspect
import json
import logging
import queue
import threading
import time

from kazoo.client import KazooState
from kazoo.exceptions import KazooException
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from ..errors import ClusterError, KafkaStorageError
from .controller import Controller
from .liveness import PeerLiveness
from .registration import BrokerRegistration
from .view import ZkClusterView
from .zk import (
    BROKER_IDS,
    CONFIG_TOPICS,
    CONTROLLED_SHUTDOWN,
    CONTROLLER,
    TOPICS,
    PartitionState,
    TopicAssignment,
    ZkStore,
    state_path,
)

__all__ = ["ClusterMember", "ZkClusterView"]      # (the view: engine/cluster/view.py)

log = logging.getLogger("engine.cluster")

_DISK_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EIO, errno.EDQUOT}
RESUME_RETRY_S = 0.5       # between tries to register again in a new session (ZooKeeper answering)


class ClusterMember:
    def __init__(self, node, broker_id: int, zookeeper: str, host: str, port: int, config=None,
                 rack: str | None = None, inter_broker_listener: str = "PLAINTEXT"):
        cfg = config if config is not None else node.config
        self.node = node
        self.broker_id = broker_id
        self.inter_broker_listener = inter_broker_listener.upper()
        self.host, self.port, self.rack = _routable(host), port, rack
        # every advertised listener: [(name, protocol, host, port)] (set_endpoints; until then
        # the one inter-broker listener at host:port)
        self._endpoints: list[tuple[str, str, str, int]] | None = None
        self.store = ZkStore.from_config(zookeeper, cfg)
        self.controller = Controller(
            self.store, broker_id, unclean_default=cfg["unclean.leader.election.enable"],
            auto_rebalance=cfg["auto.leader.rebalance.enable"],
            rebalance_interval_s=cfg["leader.imbalance.check.interval.seconds"],
            imbalance_pct=cfg["leader.imbalance.per.broker.percentage"])
        self.cluster_id: str | None = None
        self.view = ZkClusterView(self)
        self.liveness = PeerLiveness(self.store, broker_id, self._registered, self._reregister,
                                     listener=self.inter_broker_listener)
        self.fenced = False
        self.registration_zxid = 0     # our registration's creation zxid (Kafka's broker epoch)
        self._lock = threading.RLock()
        self._brokers: dict[int, BrokerRegistration] = {}
        self._children: list = []                     # /brokers/ids as the watch last gave it
        self._brokers_lock = threading.Lock()
        self._controller_id = -1
        self._assignments: dict[str, TopicAssignment] = {}
        self._states: dict[tuple[str, int], PartitionState] = {}
        self._applied: dict[tuple[str, int], tuple] = {}
        self._local_done: dict[str, tuple[str, int]] = {}     # topic -> (id, partitions) made locally
        self._watched_topics: set[str] = set()
        self._config_watched: set[str] = set()
        self._watched_parts: set[tuple[str, int]] = set()
        self._rm = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._work: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._stopping = False
        self._session_lost = False
        self._shutting_down = False
        self._strays_checked = False

    # -- lifecycle -------------------------------------------------------------------
    def set_endpoints(self, endpoints: list[tuple[str, str, str, int]]) -> None:
        """Every advertised listener, ``[(name, security protocol, host, port)]``, registered
        once started (a wildcard host registers the host's name, as Kafka's canonical host
        name); ``host`` / ``port`` become the inter-broker listener's (ClusterError when the
        list does not hold it)."""
        eps = [(n.upper(), proto.upper(), _routable(h), int(p)) for n, proto, h, p in endpoints]
        inter = next((e for e in eps if e[0] == self.inter_broker_listener), None)
        if inter is None:
            raise ClusterError(f"inter-broker listener {self.inter_broker_listener} is not among the "
                               f"advertised listeners {', '.join(e[0] for e in eps)}")
        self._endpoints = eps
        self.host, self.port = inter[2], inter[3]

    def registration(self) -> BrokerRegistration:
        """What this broker writes to ``/brokers/ids/<id>``."""
        eps = self._endpoints or [(self.inter_broker_listener, self.inter_broker_listener, self.host, self.port)]
        return BrokerRegistration.of(eps, self.rack)

    def start(self) -> ClusterMember:
        self.store.start()
        try:
            self.cluster_id = self.store.cluster_id(self.node.cluster_id or _new_id())
            self.node.adopt_cluster_id(self.cluster_id, self.broker_id)
            self.registration_zxid = self.store.register_broker(self.broker_id, self.registration())
        except BaseException:
            self.store.close()
            raise
        log.info("broker %d registered in ZooKeeper at %s (cluster %s; %s)", self.broker_id,
                 self.store.connect, self.cluster_id, self.store.security.describe())
        self.store.client.add_listener(self._on_state)
        self._worker = threading.Thread(target=self._work_loop, name=f"cluster-{self.broker_id}", daemon=True)
        self._worker.start()
        ChildrenWatch(self.store.watch_client, BROKER_IDS, self._on_brokers)
        DataWatch(self.store.watch_client, CONTROLLER, self._on_controller)
        ChildrenWatch(self.store.watch_client, TOPICS, self._on_topics)
        self.controller.start()
        self.liveness.start()           # a peer's process gone: its registration removed at once
        return self

    def attach(self, replica_manager, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Drive `replica_manager` from now on (every cached state is applied once at once).
        `loop`: call it on that event loop (None: from the worker thread, as engine/replica's
        ReplicaManager allows)."""
        self._rm = replica_manager
        self._loop = loop
        with self._lock:
            keys = list(self._states)
        for k in keys:
            self._work.put(("part", k))

    def stop(self) -> None:
        self._stopping = True
        self._work.put(("stop", None))
        self.liveness.stop()
        self.controller.stop()
        if self._worker is not None:
            self._worker.join(10)
        try:
            self.store.client.remove_listener(self._on_state)
        except Exception:
            pass
        self.store.close()

    def abort(self) -> None:
        """Leave the cluster at once, without a controlled shutdown: close the ZooKeeper session,
        so ``/brokers/ids/<id>`` (and ``/controller`` if held) disappear now and the controller
        elects new leaders from the rest of the ISR without waiting for a session expiry.  For
        a broker that cannot go on (its data directory failed); the process exits next."""
        self._stopping = True
        self.liveness._stopping.set()
        with self.controller._cv:          # its thread stops at its next wake-up (no join here)
            self.controller._stopping = True
            self.controller._cv.notify_all()
        try:
            self.store.client.remove_listener(self._on_state)
        except Exception:
            pass
        self.store.close()

    def controlled_shutdown(self, timeout_s: float = 30.0) -> int:
        """Ask the controller to move this broker's leaderships away; wait until it says none
        is left (or `timeout_s`).  Returns how many partitions this broker still leads."""
        path = f"{CONTROLLED_SHUTDOWN}/{self.broker_id}"
        # first stop following (a follower that keeps fetching would be taken back into the ISR
        # by its leader right after the controller removed it, as Kafka's StopReplica prevents)
        stopped = threading.Event()
        self._work.put(("shutdown", stopped))
        stopped.wait(10)
        deadline = time.monotonic() + timeout_s
        remaining = -1
        # every ZooKeeper call bounded: with ZooKeeper gone, kazoo would wait for ever (and past
        # the session timeout our session, which the request needs, is gone anyway)
        try:
            self.store.bounded("create", path, ephemeral=True,
                               timeout_s=min(timeout_s, self.store.session_timeout_s))
        except Exception as e:
            log.warning("controlled shutdown: cannot ask the controller (%s)", e)
            return -1
        # the controller's answer comes from a pass that already moved every leadership it
        # could; what remains has no other live in-sync replica (Kafka's controller answers the
        # same "partitions remaining", and its broker then stops anyway after retries)
        changed = threading.Event()
        while (left := deadline - time.monotonic()) > 0:
            changed.clear()
            try:
                data, _ = self.store.bounded("get", path, watch=lambda event: changed.set(), timeout_s=left)
            except Exception as e:
                log.warning("controlled shutdown: no answer from the controller (%s)", e)
                break
            if data:
                remaining = int(json.loads(data).get("remaining", -1))
                break
            changed.wait(deadline - time.monotonic())
        log.info("controlled shutdown of broker %d: %s", self.broker_id,
                 "no leadership left" if remaining == 0 else
                 "no answer from a controller" if remaining < 0 else
                 f"{remaining} partitions still led (no other in-sync replica alive)")
        return remaining

    # -- watches (kazoo's threads) -----------------------------------------------------
    def _on_brokers(self, children):
        if self._stopping:
            return False
        with self._brokers_lock:        # (the watch's thread and the worker's retry, in turn)
            self._children = list(children)
            return self._read_brokers(children)

    def _reread_brokers(self) -> None:
        """The registrations of the brokers the watch last named, read again (worker)."""
        if not self._stopping:
            with self._brokers_lock:
                self._read_brokers(self._children)

    def _read_brokers(self, children) -> bool:
        brokers = {}
        unread = False
        for b in children:
            try:
                info = self.store.broker(int(b))
            except KazooException:
                info = self._brokers.get(int(b))      # keep what we knew, read again below
                unread = True
            except ValueError as e:                  # not Kafka's layout: not a broker we can use
                log.error("broker %d: registration of broker %s unreadable: %s", self.broker_id, b, e)
                info = None
            if info is not None:
                brokers[int(b)] = info
        with self._lock:
            self._brokers = brokers
        if unread and not self._stopping:
            # (a registration that could not be read -- a new broker's above all -- would
            # otherwise wait for the next change of /brokers/ids, which may never come)
            retry = threading.Timer(RESUME_RETRY_S, self._work.put, args=(("brokers", None),))
            retry.daemon = True
            retry.start()
        return True

    def _on_controller(self, data, stat, event=None):
        if self._stopping:
            return False
        self._controller_id = int(json.loads(data)["brokerid"]) if data else -1
        return True

    def _on_topics(self, children):
        if self._stopping:
            return False
        current = set(children)
        if not self._strays_checked:
            self._strays_checked = True
            self._work.put(("strays", current))
        with self._lock:
            gone = [t for t in self._assignments if t not in current]
            new = [t for t in current if t not in self._watched_topics]
            self._watched_topics.update(new)
            self._watched_topics.difference_update(gone)
        for t in gone:
            self._work.put(("delete", t))
        for t in new:
            DataWatch(self.store.watch_client, f"{TOPICS}/{t}", lambda d, s, e=None, t=t: self._on_assignment(t, d, s))
        return True

    def _on_assignment(self, topic, data, stat):
        if self._stopping:
            return False
        if data is None:
            with self._lock:
                self._watched_topics.discard(topic)
                had = topic in self._assignments
            if had:
                self._work.put(("delete", topic))
            return False
        a = TopicAssignment.from_json(data, stat.version)
        with self._lock:
            self._assignments[topic] = a
            new = [p for p in a.partitions if (topic, p) not in self._watched_parts]
            self._watched_parts.update((topic, p) for p in new)
        self._work.put(("topic", topic))
        if topic not in self._config_watched:
            self._config_watched.add(topic)
            DataWatch(self.store.watch_client, f"{CONFIG_TOPICS}/{topic}",
                      lambda d, s, e=None, t=topic: self._on_config(t, d))
        for p in new:
            DataWatch(self.store.watch_client, state_path(topic, p),
                      lambda d, s, e=None, t=topic, p=p: self._on_partition(t, p, d, s))
        return True

    def _on_config(self, topic, data):
        if self._stopping or topic not in self._watched_topics:
            self._config_watched.discard(topic)
            return False
        if data is not None:
            self._work.put(("config", (topic, dict(json.loads(data).get("config", {})))))
        return True

    def _on_partition(self, topic, p, data, stat):
        if self._stopping:
            return False
        with self._lock:
            if topic not in self._watched_topics:
                self._watched_parts.discard((topic, p))
                self._states.pop((topic, p), None)
                return False
            if data is None:
                self._states.pop((topic, p), None)
                return True
            st = PartitionState.from_json(data, stat.version, stat.mzxid)
            self._states[(topic, p)] = st
        self._work.put(("part", (topic, p)))
        return True

    def _on_state(self, state):
        """kazoo connection state listener (must not block)."""
        if state == KazooState.SUSPENDED:
            self._work.put(("fence", None))
        elif state == KazooState.LOST:
            self._session_lost = True
            self.controller.session_lost()
            self._work.put(("fence", None))
        elif state == KazooState.CONNECTED:
            self._work.put(("resume", None))

    # -- the worker: applies changes in order -------------------------------------------------
    def _work_loop(self) -> None:
        while True:
            kind, arg = self._work.get()
            if kind == "stop":
                return
            try:
                if kind == "part":
                    self._apply(*arg)
                elif kind == "strays":
                    strays = [t for t in self.node.list_topics() if t not in arg and not t.startswith("__")]
                    if strays:
                        log.warning("broker %d: local topics unknown to the cluster (deleted while this "
                                    "broker was away, or from before it joined), kept but not served: %s",
                                    self.broker_id, ", ".join(strays))
                elif kind == "config":
                    from .local import apply_topic_config
                    apply_topic_config(self.node, *arg)
                elif kind == "topic":
                    with self._lock:
                        a = self._assignments.get(arg)
                    if a is not None:
                        self._ensure_local(arg, a)
                        for p in sorted(a.partitions):     # replica sets may have changed
                            self._apply(arg, p)
                elif kind == "delete":
                    self._delete_topic(arg)
                elif kind == "shutdown":
                    self._shutting_down = True
                    for k, key in list(self._applied.items()):
                        if key[0] != self.broker_id:
                            self._apply(*k)
                    arg.set()
                elif kind == "fence":
                    self._fence()
                elif kind == "resume":
                    self._resume()
                elif kind == "brokers":
                    self._reread_brokers()
            except KazooException as e:      # ZooKeeper unreachable: the watches re-fire later
                if not self._stopping:
                    log.warning("broker %d: applying %s %s deferred (ZooKeeper: %s)", self.broker_id,
                                kind, arg, type(e).__name__)
            except OSError as e:
                # creating a local log on a full / read-only / failing disk: the data dir failed
                if self._rm is not None and (isinstance(e, KafkaStorageError) or e.errno in _DISK_ERRNOS):
                    self._rm.storage_error(e, f"applying {kind} {arg}")
                if not self._stopping and (self._rm is None or self._rm.offline is None):
                    log.exception("broker %d: applying %s %s failed", self.broker_id, kind, arg)
            except Exception:
                if not self._stopping:
                    log.exception("broker %d: applying %s %s failed", self.broker_id, kind, arg)

    def _call(self, name: str, *args):
        """Call replica_manager.<name>(*args) on the broker's loop (awaiting it if a coroutine)."""
        rm = self._rm
        if rm is None:
            return None
        fn = getattr(rm, name)
        if self._loop is None:
            return fn(*args)

        async def run():
            r = fn(*args)
            if inspect.isawaitable(r):
                r = await r
            return r
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(60)

    def _ensure_local(self, topic: str, a: TopicAssignment) -> None:
        """The topic in the local metadata (its ZooKeeper id, partition count and config) on
        every broker, so the Engine's topic list (which Metadata walks) is the cluster's; logs
        are made only for the partitions this broker replicates (in :meth:`_apply`)."""
        known = self._local_done.get(topic)
        if known == (a.topic_id, len(a.partitions)):
            return
        self.node.mirror_topic(topic, a.topic_id, max(a.partitions) + 1, self.store.topic_config(topic) or {})
        self._local_done[topic] = (a.topic_id, len(a.partitions))

    def _apply(self, topic: str, p: int) -> None:
        with self._lock:
            a = self._assignments.get(topic)
            st = self._states.get((topic, p))
        if a is None or st is None or p not in a.partitions or self._rm is None:
            return          # (before attach(): applied then, from the cache)
        replicas = a.partitions[p]
        if self.broker_id not in replicas:
            # not (or no longer) a replica: Kafka's StopReplica with delete -- stop fetching and
            # remove the local log (also one left from before a restart or a reassignment)
            if (topic, p) in self._applied or self.node.has_log(topic, p):
                log.info("broker %d: not a replica of %s-%d (replicas %s): removing its local log",
                         self.broker_id, topic, p, replicas)
                self._call("stop_replica", topic, p, True)
                self._applied.pop((topic, p), None)
            return
        key = (st.leader, st.leader_epoch, tuple(st.isr), st.version, tuple(replicas), self.fenced,
               self._shutting_down, self.registration_zxid)
        if self._applied.get((topic, p)) == key:
            return
        self._ensure_local(topic, a)
        self.node.ensure_log(topic, p)
        # a state naming us leader that was written before our current registration is a
        # leadership of an earlier incarnation (restarted, maybe with its unsynced tail lost; or a
        # session lost): not taken up -- the controller sees the new registration (KIP-380's
        # broker epoch) and writes a new state, moving the leadership or bumping its epoch
        stale = st.leader == self.broker_id and st.mzxid < self.registration_zxid
        if st.leader == self.broker_id and not self.fenced and not stale:
            self._call("become_leader", topic, p, st.leader_epoch, list(replicas), list(st.isr), st.version)
        elif self._shutting_down:
            self._call("stop_replica", topic, p, False)      # controlled shutdown: no more fetching
        else:
            leader = -1 if self.fenced or stale else st.leader
            self._call("become_follower", topic, p, leader, st.leader_epoch, list(replicas), st.version)
        self._applied[(topic, p)] = key

    def _delete_topic(self, topic: str) -> None:
        with self._lock:
            a = self._assignments.pop(topic, None)
            for k in [k for k in self._states if k[0] == topic]:
                del self._states[k]
            self._watched_parts.difference_update({k for k in self._watched_parts if k[0] == topic})
        self._local_done.pop(topic, None)
        for k in [k for k in self._applied if k[0] == topic]:
            self._call("stop_replica", topic, k[1], True)
            del self._applied[k]
        if a is not None and topic in self.node.list_topics():
            log.info("broker %d: topic %s deleted: removing its local logs", self.broker_id, topic)
            self.node.delete_topic(topic)

    def _fence(self) -> None:
        if self.fenced or self._stopping:
            return
        self.fenced = True
        led = [k for k, key in self._applied.items() if key[0] == self.broker_id]
        log.warning("broker %d: ZooKeeper connection %s: no longer acting as leader of %d partitions",
                    self.broker_id, "lost (session expired)" if self._session_lost else "suspended", len(led))
        for k in led:
            self._apply(*k)

    def _resume(self) -> None:
        if self._stopping:
            return
        if self._session_lost:
            try:
                self.registration_zxid = self.store.register_broker(self.broker_id, self.registration())
            except ClusterError as e:
                log.error("%s", e)
                return
            except KazooException as e:
                # ZooKeeper lost again before the registration was written: still a session
                # without it (the next CONNECTED queues a resume; while connected, so does this)
                log.warning("broker %d: registering again after its ZooKeeper session expired failed "
                            "(%s); trying again", self.broker_id, type(e).__name__)
                if self.store.client.connected and not self._stopping:
                    retry = threading.Timer(RESUME_RETRY_S, self._work.put, args=(("resume", None),))
                    retry.daemon = True
                    retry.start()
                return
            self._session_lost = False
            log.info("broker %d registered again after its ZooKeeper session expired", self.broker_id)
            self.controller.session_renewed()
            self._refresh_all()
        self.fenced = False
        with self._lock:
            keys = list(self._states)
        for k in keys:
            self._apply(*k)

    def _registered(self) -> dict[int, tuple[str | None, int | None, str | None]]:
        """Every registered broker at its inter-broker listener's address."""
        with self._lock:
            regs = dict(self._brokers)
        out: dict[int, tuple[str | None, int | None, str | None]] = {}
        for b, reg in regs.items():
            ep = reg.endpoint(self.inter_broker_listener)
            out[b] = (ep[0], ep[1], reg.rack) if ep is not None else (None, None, reg.rack)
        return out

    def _reregister(self) -> None:
        """Our registration was deleted by another broker while our session lives (engine/cluster/
        liveness.py): register again, unless stopping or between sessions (``_resume`` does it)."""
        if not (self._stopping or self._shutting_down or self._session_lost) and self.store.client.connected:
            self.registration_zxid = self.store.register_broker(self.broker_id, self.registration())
            with self._lock:
                keys = list(self._states)
            for k in keys:          # leaderships of the old registration wait for the controller
                self._work.put(("part", k))

    def _refresh_all(self) -> None:
        """Re-read every topic's assignment and state (after a new session)."""
        for t in self.store.topics():
            a = self.store.assignment(t)
            if a is None:
                continue
            with self._lock:
                self._assignments[t] = a
            for p in a.partitions:
                st = self.store.partition_state(t, p)
                if st is not None:
                    with self._lock:
                        self._states[(t, p)] = st


def _routable(host: str) -> str:
    """A wildcard listener host registers the host's name (Kafka: its canonical host name)."""
    if host in ("", "0.0.0.0", "::"):
        import socket
        return socket.getfqdn()
    return host


def _new_id() -> str:
    from ..metadata import new_topic_id
    return new_topic_id()
