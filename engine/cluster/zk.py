"""Cluster metadata in ZooKeeper: Kafka's ZooKeeper-era znode layout, read and written with kazoo.

::

    /cluster/id                                   {"version":"1","id":"<22-char base64>"}
    /brokers/ids/<id>                   ephemeral {"version":5,"host":..,"port":..,"endpoints":
                                                   ["CLIENT://h:p","INTERNAL://h:p"],
                                                   "listener_security_protocol_map":{..},"rack":..,
                                                   "jmx_port":-1,"timestamp":"<ms>",..}
                                                  (one endpoint per advertised listener:
                                                   engine/cluster/registration.py)
    /brokers/topics/<t>                           {"version":3,"topic_id":"..","partitions":{"0":[1,2,3]},
                                                   "adding_replicas":{},"removing_replicas":{}}
                                                  (while partition 0 moves from [1,2] to [2,3]:
                                                   "partitions":{"0":[2,3,1]},"adding_replicas":
                                                   {"0":[3]},"removing_replicas":{"0":[1]})
    /brokers/topics/<t>/partitions/<p>/state      {"controller_epoch":..,"leader":..,"version":1,
                                                   "leader_epoch":..,"isr":[..]}
    /controller                         ephemeral {"version":1,"brokerid":..,"timestamp":"<ms>"}
    /controller_epoch                             "<int>"
    /config/topics/<t>                            {"version":1,"config":{"retention.ms":"..",..}}
    /admin/delete_topics/<t>                      (empty: a deletion the controller carries out)
    /admin/preferred_replica_election             {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /admin/controlled_shutdown/<id>     ephemeral (ours: a broker asking the controller to move its
                                                   leaderships away; the controller writes
                                                   {"remaining":N} when done)
    /latest_producer_id_block                     {"version":1,"broker":..,"block_start":..,"block_end":..}

The partition state's znode version is the *partition epoch*: every change to a state is a
conditional write on it (``set(path, data, version)``), so two writers never overwrite each
other's change unseen.  The controller's writes also check ``/controller_epoch`` in the same
transaction, so a controller that lost its seat (a newer epoch exists) cannot write at all.

Bounds: kazoo queues a request made while it has no connection until one comes back -- with
ZooKeeper gone, for ever.  Every call of :class:`ZkStore` is bounded by the session timeout
(``zookeeper.session.timeout.ms``: past it ZooKeeper has expired the session that the request
needs anyway) and raises :class:`ZooKeeperTimeoutError` then; ``store.client`` itself (watches,
listeners) is kazoo's, unbounded.

Security (engine/cluster/zk_auth.py): the client logs in with SASL DIGEST-MD5 when the broker's
JAAS file has a ``Client`` section, proving the login at :meth:`ZkStore.start` (a refused one is
:class:`~engine.errors.ZooKeeperAuthError` at once); with ``zookeeper.set.acl=true``
every znode created without an explicit ACL gets Kafka's ACL for its path; with
``zookeeper.ssl.client.enable=true`` every session is TLS (engine/cluster/zk_tls.py; a failed
handshake is :class:`~engine.errors.SslAuthenticationError` at :meth:`ZkStore.start`).

Thread-safety: kazoo's client is thread-safe; this module keeps no state besides the client.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from ..errors import ClusterError, RequestTimedOutError, SslAuthenticationError, ZooKeeperAuthError
from .registration import BrokerRegistration
from .zk_auth import SecuredKazooClient, ZkClientSecurity, start_client

__all__ = ["PartitionState", "TopicAssignment", "ZkStore", "BadVersionError", "NodeExistsError",
           "NoNodeError", "ZooKeeperTimeoutError", "answered_as_timeout"]

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
CLUSTER_ID = "/cluster/id"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"


class ZooKeeperTimeoutError(KazooTimeoutError, KazooException):
    """ZooKeeper gave no answer within the bound (:meth:`ZkStore.bounded`).  A KazooException,
    so code that defers on ZooKeeper trouble (the member's worker, the ISR change) defers on this
    too; the request paths answer it as REQUEST_TIMED_OUT (engine/cluster/local.py).  The
    request itself stays queued in kazoo and may still be carried out once ZooKeeper is back,
    as a timed-out request to Kafka may."""


@contextlib.contextmanager
def answered_as_timeout(what: str) -> Iterator[None]:
    """For a request path: ZooKeeper that does not answer in time (:class:`ZooKeeperTimeoutError`)
    or cannot be reached (connection lost or closed, session expired) becomes Kafka's retriable
    REQUEST_TIMED_OUT naming `what`; the client asks again."""
    try:
        yield
    except (ZooKeeperTimeoutError, ConnectionLoss, SessionExpiredError) as e:
        raise RequestTimedOutError(f"{what}: ZooKeeper did not answer ({type(e).__name__}"
                                   f"{': ' + str(e) if str(e) else ''})") from None


def _now_ms() -> str:
    return str(int(time.time() * 1000))


def _dumps(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    version: int = -1          # the znode version: the partition epoch
    mzxid: int = 0             # the zxid of the znode's last write (as read; not written)

    def to_json(self) -> bytes:
        return _dumps({"controller_epoch": self.controller_epoch, "leader": self.leader,
                       "version": 1, "leader_epoch": self.leader_epoch, "isr": list(self.isr)})

    @classmethod
    def from_json(cls, data: bytes, version: int, mzxid: int = 0) -> PartitionState:
        d = json.loads(data)
        return cls(int(d["leader"]), int(d["leader_epoch"]), [int(x) for x in d["isr"]],
                   int(d.get("controller_epoch", 0)), version, mzxid)


@dataclass
class TopicAssignment:
    """A topic's replica assignment.  While a partition is being reassigned (KIP-455) its
    ``partitions[p]`` is the full replica set (target first, then the original replicas not in
    the target), ``adding[p]`` the target's replicas not in the original set and ``removing[p]``
    the original's not in the target, as Kafka's ``adding_replicas`` / ``removing_replicas``."""

    topic_id: str
    partitions: dict[int, list[int]]
    version: int = -1
    config: dict[str, str] = field(default_factory=dict)
    adding: dict[int, list[int]] = field(default_factory=dict)
    removing: dict[int, list[int]] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return _dumps({"version": 3, "topic_id": self.topic_id,
                       "partitions": {str(p): r for p, r in sorted(self.partitions.items())},
                       "adding_replicas": {str(p): r for p, r in sorted(self.adding.items()) if r},
                       "removing_replicas": {str(p): r for p, r in sorted(self.removing.items()) if r}})

    @classmethod
    def from_json(cls, data: bytes, version: int) -> TopicAssignment:
        d = json.loads(data)

        def ids(m):
            return {int(p): [int(x) for x in r] for p, r in (m or {}).items() if r}
        return cls(d.get("topic_id", ""), ids(d["partitions"]), version,
                   adding=ids(d.get("adding_replicas")), removing=ids(d.get("removing_replicas")))

    def reassigning(self, p: int) -> bool:
        return bool(self.adding.get(p) or self.removing.get(p))


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


class WatchClient:
    """A session's kazoo client as kazoo's watch recipes (ChildrenWatch, DataWatch) get it: the
    same client, but its ``retry`` never gives up.  With the session's ``command_retry`` (3 tries,
    bounded for the request path) a recipe's thread raised RetryFailedError while ZooKeeper was
    unreachable and printed its traceback (kazoo re-arms the watch at the next CONNECTED anyway);
    a watch is on no request path, so it waits for ZooKeeper instead.  A closed client still
    ends it (ConnectionClosedError, which the recipes ignore)."""

    def __init__(self, client) -> None:
        self._client = client
        self._forever = KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0,
                                   sleep_func=client.handler.sleep_func)

    def retry(self, func, *args, **kwargs):
        return self._forever.copy()(func, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._client, name)


class ZkStore:
    """Reads and conditional writes of the layout above over one kazoo session."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_s: float = 15.0,
                 security: ZkClientSecurity | None = None):
        self.connect = connect
        self.session_timeout_s = session_timeout_ms / 1000.0      # the one we ask ZooKeeper for
        self.security = security or ZkClientSecurity()          # SASL login, znode ACLs (zk_auth.py)
        self.client = self._kazoo(connect, connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 1.0},
                                  command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1.0})
        self._connection_timeout_s = connection_timeout_s
        self.watch_client = WatchClient(self.client)     # for ChildrenWatch / DataWatch

    @classmethod
    def from_config(cls, connect: str, cfg) -> ZkStore:
        """With the broker's ``zookeeper.*`` keys, its JAAS file and ``zookeeper.set.acl``."""
        return cls(connect, cfg["zookeeper.session.timeout.ms"], cfg["zookeeper.connection.timeout.ms"] / 1000.0,
                   ZkClientSecurity.from_config(cfg))

    def _kazoo(self, hosts: str, **kw) -> SecuredKazooClient:
        return SecuredKazooClient(hosts=hosts, timeout=self.session_timeout_s, secure=self.security.set_acl,
                                  **self.security.kazoo_kwargs(), **kw)

    def _start_client(self, client: SecuredKazooClient, where: str) -> None:
        """Connected and logged in, or ZooKeeperAuthError (the login refused) /
        SslAuthenticationError (the TLS handshake failed) / ClusterError."""
        try:
            start_client(client, self.security, where, self._connection_timeout_s)
        except (ZooKeeperAuthError, SslAuthenticationError):
            raise
        except Exception as e:
            raise ClusterError(f"cannot connect to ZooKeeper at {where}: {e}") from None

    def start(self) -> ZkStore:
        hosts, slash, chroot = self.connect.partition("/")
        if slash and chroot.strip("/"):       # HOST:PORT/chroot: made when absent, as Kafka does
            boot = self._kazoo(hosts)
            self._start_client(boot, hosts)
            try:
                boot.ensure_path("/" + chroot.strip("/"))
            except Exception as e:
                raise ClusterError(f"cannot create the chroot /{chroot.strip('/')} in ZooKeeper at {hosts}: "
                                   f"{type(e).__name__} {e}") from None
            finally:
                boot.stop()
                boot.close()
        self._start_client(self.client, self.connect)
        for path in (BROKER_IDS, TOPICS, CONFIG_TOPICS, DELETE_TOPICS, CONTROLLED_SHUTDOWN):
            self.client.ensure_path(path)
        return self

    def bounded(self, op: str, *args, timeout_s: float | None = None, **kw):
        """``client.<op>(*args, **kw)`` that gives up after `timeout_s` (default: the session
        timeout, past which ZooKeeper has expired our session and its ephemeral nodes anyway),
        raising :class:`ZooKeeperTimeoutError`.  kazoo queues a request made while it has no
        connection until one comes back: with ZooKeeper gone, never."""
        wait = self.session_timeout_s if timeout_s is None else max(0.0, timeout_s)
        return self._get(getattr(self.client, op + "_async")(*args, **kw), wait,
                         f"{op} {args[0] if args else ''}")

    def commit(self, tx, timeout_s: float | None = None) -> list:
        """A kazoo transaction's ``commit()``, bounded as :meth:`bounded`."""
        wait = self.session_timeout_s if timeout_s is None else max(0.0, timeout_s)
        return self._get(tx.commit_async(), wait, "transaction")

    def exists(self, path: str, watch=None):
        """``client.exists``, bounded."""
        return self.bounded("exists", path, watch=watch)

    def _get(self, result, wait: float, what: str):
        try:
            return result.get(timeout=wait)
        except self.client.handler.timeout_exception:
            raise ZooKeeperTimeoutError(f"ZooKeeper gave no answer to {what} in {wait:.1f} s") from None

    def close(self) -> None:
        try:
            self.client.stop()
        finally:
            self.client.close()

    # -- cluster id ----------------------------------------------------------------
    def cluster_id(self, proposal: str) -> str:
        """The cluster's id (the first broker's `proposal` when none is stored yet)."""
        try:
            self.bounded("create", CLUSTER_ID, _dumps({"version": "1", "id": proposal}), makepath=True)
            return proposal
        except NodeExistsError:
            data, _ = self.bounded("get", CLUSTER_ID)
            return json.loads(data)["id"]

    # -- brokers -------------------------------------------------------------------
    def register_broker(self, broker_id: int, reg: BrokerRegistration) -> int:
        """Create the ephemeral ``/brokers/ids/<id>`` (ClusterError when another broker holds
        the id; our own previous incarnation's, same endpoints, is waited out).  Returns the
        registration's creation zxid: Kafka's broker epoch (KIP-380), which tells this
        incarnation from the one before."""
        path = f"{BROKER_IDS}/{broker_id}"
        deadline = time.monotonic() + self.session_timeout_s + 5.0
        while True:
            try:
                self.bounded("create", path, reg.to_json(), ephemeral=True)
            except NodeExistsError:
                pass
            try:
                data, stat = self.bounded("get", path)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == self.client.client_id[0]:
                return stat.czxid   # ours (just created, or a retried create after a lost answer)
            try:
                other = BrokerRegistration.from_json(data)
            except ValueError:
                other = BrokerRegistration({})
            if other.endpoints == reg.endpoints and time.monotonic() < deadline:
                # our own previous incarnation (killed, restarted at once): its session is
                # about to expire; wait for that rather than refuse to start
                time.sleep(0.2)
                continue
            raise ClusterError(
                f"broker id {broker_id} is already registered in ZooKeeper at {self.connect} by "
                f"{other.describe() or data[:200]!r} (session 0x{stat.ephemeralOwner:x}); "
                "give each broker its own broker.id") from None

    def broker_ids(self, watch=None) -> list[int]:
        return sorted(int(x) for x in self.bounded("get_children", BROKER_IDS, watch=watch))

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        """The broker's registration (None when it is not registered); RegistrationError
        (a ValueError) for one that is not Kafka's layout."""
        try:
            data, _ = self.bounded("get", f"{BROKER_IDS}/{broker_id}")
        except NoNodeError:
            return None
        return BrokerRegistration.from_json(data)

    def brokers(self) -> dict[int, BrokerRegistration]:
        out = {}
        for b in self.broker_ids():
            info = self.broker(b)
            if info is not None:
                out[b] = info
        return out

    # -- controller ------------------------------------------------------------------
    def controller_id(self, watch=None) -> int:
        try:
            data, _ = self.bounded("get", CONTROLLER, watch=watch)
        except NoNodeError:
            return -1
        return int(json.loads(data)["brokerid"])

    def try_become_controller(self, broker_id: int) -> int | None:
        """Create /controller and bump /controller_epoch in one transaction (as Kafka's
        registerControllerAndIncrementControllerEpoch): nobody ever sees the new controller with
        the old epoch.  Returns the new epoch, or None when another broker holds the seat."""
        while True:
            try:
                data, stat = self.bounded("get", CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self.bounded("create", CONTROLLER_EPOCH, b"0")      # the first controller makes 1
                except NodeExistsError:
                    pass
                continue
            epoch = int(data) + 1
            tx = self.client.transaction()
            tx.create(CONTROLLER, _dumps({"version": 1, "brokerid": broker_id, "timestamp": _now_ms()}),
                      ephemeral=True)
            tx.set_data(CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
            created, bumped = tx.commit()
            if not isinstance(created, Exception) and not isinstance(bumped, Exception):
                return epoch
            if isinstance(created, NodeExistsError):
                return None
            if isinstance(bumped, BadVersionError):
                continue                              # another broker bumped the epoch meanwhile
            raise next(r for r in (created, bumped) if not isinstance(r, RolledBackError))

    def controller_epoch(self) -> tuple[int, int]:
        """(epoch, znode version) of /controller_epoch ((0, -1) when absent)."""
        try:
            data, stat = self.bounded("get", CONTROLLER_EPOCH)
        except NoNodeError:
            return 0, -1
        return int(data), stat.version

    # -- topics ------------------------------------------------------------------------
    def topics(self, watch=None) -> list[str]:
        return sorted(self.bounded("get_children", TOPICS, watch=watch))

    def assignment(self, topic: str, watch=None) -> TopicAssignment | None:
        try:
            data, stat = self.bounded("get", f"{TOPICS}/{topic}", watch=watch)
        except NoNodeError:
            return None
        return TopicAssignment.from_json(data, stat.version)

    def topic_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = self.bounded("get", f"{CONFIG_TOPICS}/{topic}")
        except NoNodeError:
            return {}
        return dict(json.loads(data).get("config", {}))

    def set_topic_config(self, topic: str, config: dict[str, str]) -> None:
        """Replace a topic's config overrides (every broker's watch applies them)."""
        body = _dumps({"version": 1, "config": config})
        try:
            self.bounded("set", f"{CONFIG_TOPICS}/{topic}", body)
        except NoNodeError:
            self.bounded("create", f"{CONFIG_TOPICS}/{topic}", body, makepath=True)

    def create_topic(self, topic: str, assignment: TopicAssignment, config: dict[str, str]) -> None:
        """Config first, then the assignment (what the controller watches), in one transaction."""
        tx = self.client.transaction()
        tx.create(f"{CONFIG_TOPICS}/{topic}", _dumps({"version": 1, "config": config}))
        tx.create(f"{TOPICS}/{topic}", assignment.to_json())
        results = self.commit(tx)
        for r in results:
            if isinstance(r, NodeExistsError):
                raise NodeExistsError(f"topic {topic!r} exists")
            if isinstance(r, Exception):
                raise r

    def set_assignment(self, topic: str, assignment: TopicAssignment) -> None:
        """Conditional on the version the assignment was read at (BadVersionError otherwise)."""
        self.bounded("set", f"{TOPICS}/{topic}", assignment.to_json(), version=assignment.version)

    def mark_for_deletion(self, topic: str) -> None:
        try:
            self.bounded("create", f"{DELETE_TOPICS}/{topic}")
        except NodeExistsError:
            pass

    def topics_to_delete(self, watch=None) -> list[str]:
        return sorted(self.bounded("get_children", DELETE_TOPICS, watch=watch))

    def delete_topic_nodes(self, topic: str) -> None:
        for path in (f"{TOPICS}/{topic}", f"{CONFIG_TOPICS}/{topic}", f"{DELETE_TOPICS}/{topic}"):
            try:
                self.client.delete(path, recursive=True)
            except NoNodeError:
                pass

    # -- partition states -----------------------------------------------------------------
    def partition_state(self, topic: str, partition: int, watch=None) -> PartitionState | None:
        try:
            data, stat = self.bounded("get", state_path(topic, partition), watch=watch)
        except NoNodeError:
            return None
        return PartitionState.from_json(data, stat.version, stat.mzxid)

    def create_partition_state(self, topic: str, partition: int, state: PartitionState,
                               controller_epoch_version: int) -> bool:
        """Create a new partition's state (False if it already exists or the controller is stale)."""
        tx = self.client.transaction()
        tx.check(CONTROLLER_EPOCH, controller_epoch_version)
        path = state_path(topic, partition)
        parent = path.rsplit("/", 1)[0]
        if self.bounded("exists", parent) is None:
            self.bounded("ensure_path", parent)
        tx.create(path, state.to_json())
        results = self.commit(tx)
        return not any(isinstance(r, Exception) for r in results)

    def update_partition_state(self, topic: str, partition: int, state: PartitionState,
                               controller_epoch_version: int | None = None) -> int | None:
        """Write `state` if its znode is still at ``state.version``; the new version, or None
        when someone else changed it first (or the controller epoch moved on)."""
        path = state_path(topic, partition)
        if controller_epoch_version is None:
            try:
                return self.bounded("set", path, state.to_json(), version=state.version).version
            except (BadVersionError, NoNodeError):
                return None
        tx = self.client.transaction()
        tx.check(CONTROLLER_EPOCH, controller_epoch_version)
        tx.set_data(path, state.to_json(), version=state.version)
        results = self.commit(tx)
        if any(isinstance(r, Exception) for r in results):
            return None
        return results[1].version

    def write_assignment_and_state(self, topic: str, assignment: TopicAssignment, partition: int,
                                   state: PartitionState | None, controller_epoch_version: int) -> bool:
        """The controller's reassignment step: the topic's assignment (conditional on its
        version) and, when given, one partition's state (conditional on ``state.version``), in
        one transaction that also checks ``/controller_epoch``.  False when anything moved on."""
        tx = self.client.transaction()
        tx.check(CONTROLLER_EPOCH, controller_epoch_version)
        tx.set_data(f"{TOPICS}/{topic}", assignment.to_json(), version=assignment.version)
        if state is not None:
            tx.set_data(state_path(topic, partition), state.to_json(), version=state.version)
        results = self.commit(tx)
        return not any(isinstance(r, Exception) for r in results)

    # -- admin requests -------------------------------------------------------------------
    def request_preferred_election(self, partitions: list[tuple[str, int]]) -> bool:
        """Queue a preferred-leader election; False if one is already pending (as Kafka)."""
        body = _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})
        try:
            self.bounded("create", PREFERRED_ELECTION, body, makepath=True)
            return True
        except NodeExistsError:
            return False

    # -- producer ids ---------------------------------------------------------------------
    def allocate_producer_ids(self, broker_id: int, count: int) -> int:
        """Reserve a block of `count` producer ids cluster-wide; returns its first id."""
        while True:
            try:
                data, stat = self.bounded("get", PRODUCER_ID_BLOCK)
                start = int(json.loads(data)["block_end"]) + 1
                version = stat.version
            except NoNodeError:
                start, version = 0, None
            body = _dumps({"version": 1, "broker": broker_id, "block_start": start,
                           "block_end": start + count - 1})
            try:
                if version is None:
                    self.bounded("create", PRODUCER_ID_BLOCK, body)
                else:
                    self.bounded("set", PRODUCER_ID_BLOCK, body, version=version)
                return start
            except (NodeExistsError, BadVersionError):
                continue
