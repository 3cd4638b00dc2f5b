"""Helpers shared by the request handler modules (handlers, admin_handlers, group_handlers):
error codes into answers, topic ids, the cluster view's brokers and partitions as Metadata /
DescribeTopicPartitions entries, and :func:`bounded`, the one way a handler waits on something
outside its own loop.  No handler imports another handler module for these.

Bounded waits: a request that waits on another broker, another loop or thread (a coordinator's,
the controller's, a worker thread doing ZooKeeper round trips) or ZooKeeper waits through
:func:`bounded`, with the request's own timeout where it carries one (Produce, CreateTopics,
DeleteTopics, CreatePartitions, ElectLeaders, the reassignments; JoinGroup's rebalance timeout)
or a Kafka config bound (:func:`coordinator_bound_s`, :func:`zookeeper_bound_s`); on expiry the
handler answers the retriable code Kafka's broker answers there.  Blocking work (ZooKeeper round
trips, fsyncs) runs in a worker thread through :func:`off_loop`, which starts nothing once the
request's time has run out.  A request it cannot serve at all is answered at once.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..errors import ErrorCode, KafkaApiError, RequestTimedOutError
from ..metadata import topic_uuid

T = TypeVar("T")

log = logging.getLogger("engine.server")

_ZERO_UUID = uuid.UUID(int=0)

# DescribeConfigs / IncrementalAlterConfigs constants (Kafka's ConfigResource.Type,
# DescribeConfigsResponse.ConfigSource and ConfigEntry.ConfigType).
_RESOURCE_TOPIC = 2
_RESOURCE_BROKER = 4


def _code(e: BaseException) -> int:
    if isinstance(e, KafkaApiError):
        return e.code
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _record_error(res: dict, e: BaseException, what: str, *args, message: bool = True) -> None:
    """Put an exception into a per-item response: Kafka's code (and message); log the unexpected."""
    if not isinstance(e, KafkaApiError):
        log.exception(what, *args)
    res["error_code"] = _code(e)
    if message:
        res["error_message"] = str(e)[:300]


def client_listener(conn) -> str | None:
    """The name of the listener the connection came in on (None: a connection without one)."""
    listener = getattr(conn, "listener", None)
    return listener.name if listener is not None else None


def client_brokers(view, conn) -> dict[int, tuple[str | None, int | None, str | None]]:
    """The live brokers as a client on `conn` reaches them: at the addresses of the listener its
    request came in on, brokers without that listener left out (Kafka's
    ``getAliveBrokerNodes(request.context.listenerName)``)."""
    listener = client_listener(conn)
    return view.brokers() if listener is None else view.listener_brokers(listener)


def partition_entry(view, topic: str, p: int, *, describe: bool = False, conn=None,
                    listener_not_found: bool = True) -> dict:
    """A partition of a Metadata (or, `describe`, DescribeTopicPartitions) answer, from the view.
    A live leader without an endpoint on `conn`'s listener: LISTENER_NOT_FOUND, or, when not
    `listener_not_found` (Metadata before v6), LEADER_NOT_AVAILABLE -- Kafka's MetadataCache."""
    try:
        leader, epoch, replicas, isr = view.partition_state(topic, p)
        live = view.brokers()
        if leader not in live:
            error = ErrorCode.LEADER_NOT_AVAILABLE
        elif conn is not None and leader not in client_brokers(view, conn):
            error = ErrorCode.LISTENER_NOT_FOUND if listener_not_found else ErrorCode.LEADER_NOT_AVAILABLE
        else:
            error = ErrorCode.NONE
        res = {"error_code": error, "partition_index": p, "leader_id": leader if error == 0 else -1,
               "leader_epoch": epoch, "replica_nodes": replicas, "isr_nodes": isr,
               "offline_replicas": [r for r in replicas if r not in live]}
    except KafkaApiError as e:
        res = {"error_code": _code(e), "partition_index": p, "leader_id": -1, "leader_epoch": -1,
               "replica_nodes": [], "isr_nodes": [], "offline_replicas": []}
    if describe:
        res["eligible_leader_replicas"] = []
        res["last_known_elr"] = []
    return res


def broker_entries(view, conn, id_key: str = "node_id") -> list[dict]:
    """The live brokers of the view as Metadata lists them, at the addresses of the listener the
    request came in on (:func:`client_brokers`); this node's address is the one the client
    connected to (the advertised one) when the view has none for it."""
    host, port = conn.advertised_address()
    out = []
    # cut off from ZooKeeper (a cluster view's ``fenced``), this broker leaves itself out: its
    # view is stale, and a client connected only here then asks the others for the new leader
    fenced = getattr(view, "fenced", False)
    for node, (h, p, rack) in sorted(client_brokers(view, conn).items()):
        if fenced and node == view.node_id:
            continue
        if node == view.node_id and h is None:
            h, p = host, port
        if h is None:                 # (alive, but no address to give)
            continue
        out.append({id_key: node, "host": h, "port": p, "rack": rack})
    return out


def leader_hints(view, conn, tps) -> tuple[dict[tuple[str, int], tuple[int, int] | None], list[tuple]]:
    """KIP-951, for the partitions `tps` ([(topic, partition)]) a Produce v10+ answered
    NOT_LEADER_OR_FOLLOWER or a Fetch v16+ NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH: the
    current leader and epoch from the view ({(topic, p): (leader_id, leader_epoch)}, None where
    both are unknown -- the tagged field's default, not written) and the endpoints of those
    leaders a client on `conn` reaches, [(node_id, host, port, rack)] at the addresses of the
    request's listener, as Metadata lists them (Kafka's ``getCurrentLeader``: a leader not alive
    on that listener is named without an endpoint)."""
    hints: dict[tuple[str, int], tuple[int, int] | None] = {}
    wanted = set()
    for topic, p in tps:
        try:
            leader, epoch, _replicas, _isr = view.partition_state(topic, p)
        except KafkaApiError:
            leader, epoch = -1, -1
        leader = -1 if leader is None else leader
        hints[(topic, p)] = None if (leader, epoch) == (-1, -1) else (leader, epoch)
        if leader >= 0:
            wanted.add(leader)
    nodes = [(e["node_id"], e["host"], e["port"], e["rack"])
             for e in broker_entries(view, conn) if e["node_id"] in wanted] if wanted else []
    return hints, nodes


def topic_ids(node) -> dict[uuid.UUID, str]:
    """{topic id: name} of the node's topics (Fetch v13+ names topics by id)."""
    out = {}
    for name in node.list_topics():
        try:
            out[_topic_uuid(node.topic_metadata(name).topic_id)] = name
        except KafkaApiError:            # deleted meanwhile
            continue
    return out


def _replica_id(req) -> int:
    """The fetching replica: ``replica_id`` before Fetch v15, ``replica_state`` from v15 (KIP-903)."""
    rid = getattr(req, "replica_id", None)
    if rid is None:
        state = getattr(req, "replica_state", None)
        rid = state.replica_id if state is not None else -1
    return rid


def _topic_uuid(topic_id: str) -> uuid.UUID:
    return topic_uuid(topic_id) or _ZERO_UUID


def broker_config_change(resource_name: str, set_names: list[str], node_id: int) -> tuple[int, str | None]:
    """(error code, message) of setting `set_names` on broker `resource_name` ("" = any broker).

    Every broker config here is static (read at start), so any key set gets Kafka's answer for a
    static config; with none set (AlterConfigs' empty set, IncrementalAlterConfigs deletes) there
    is no dynamic value to remove and the answer is success, as Kafka's."""
    if resource_name not in ("", str(node_id)):
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node_id}, but received {resource_name}"
    if set_names:
        return ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({', '.join(set_names)})"
    return 0, None


# -- bounded waits -----------------------------------------------------------------------------
async def bounded(awaitable: Awaitable[T], timeout_s: float, what: str) -> T:
    """`awaitable`'s result, waiting at most `timeout_s` seconds; past that RequestTimedOutError
    (REQUEST_TIMED_OUT, retriable) naming `what`, which the caller answers as it is or as the
    code Kafka answers there (COORDINATOR_NOT_AVAILABLE for a coordinator, ...).

    The work itself is not cancelled: it may be a write already under way (on a coordinator's
    loop, in ZooKeeper) that has to finish or fail on its own, as a timed-out request in Kafka
    may still take effect.  It goes on in the background; a late failure is logged."""
    fut: asyncio.Future = asyncio.ensure_future(awaitable)
    try:
        return await asyncio.wait_for(asyncio.shield(fut), max(timeout_s, 0.0))
    except TimeoutError:
        log.warning("%s: no answer within %.1f s; answered with a retriable error (the work goes on)",
                    what, timeout_s)
        raise RequestTimedOutError(f"{what}: no answer within {timeout_s:.1f} s") from None
    finally:
        if not fut.done():
            fut.add_done_callback(lambda f: _finished_late(f, what))


async def off_loop(deadline: float, what: str, fn: Callable[..., T], *args) -> T:
    """``fn(*args)`` in the loop's worker threads (it blocks: ZooKeeper round trips, fsyncs),
    awaited through :func:`bounded` until `deadline` (the running loop's clock).  Once the
    deadline has passed nothing more is started: RequestTimedOutError at once."""
    loop = asyncio.get_running_loop()
    left = deadline - loop.time()
    if left <= 0:
        raise RequestTimedOutError(f"{what}: the request's time ran out before it began")
    return await bounded(loop.run_in_executor(None, fn, *args), left, what)


def _finished_late(fut: asyncio.Future, what: str) -> None:
    if fut.cancelled():
        return
    e = fut.exception()
    if e is None:
        log.info("%s: finished after its request was answered", what)
    else:
        log.warning("%s: failed after its request was answered: %s: %s", what, type(e).__name__, e)


def _config(node, key: str, default: Any) -> Any:
    try:
        return node.config[key]
    except Exception:  # noqa: BLE001 - a node stand-in without the key
        return default


def coordinator_bound_s(node) -> float:
    """How long a handler waits for a coordinator's answer (not a rebalance):
    ``offsets.commit.timeout.ms``, Kafka's bound of a coordinator operation (its group coordinator
    schedules each write with it; ours bounds each replicated write of the internal topics with
    it), twice over -- a TxnOffsetCommit verifies at the transaction coordinator, maybe another
    broker, and then writes, each bounded by it.  On expiry: COORDINATOR_NOT_AVAILABLE, Kafka's
    answer for a coordinator write that timed out."""
    return 2 * _config(node, "offsets.commit.timeout.ms", 5000) / 1000.0


def zookeeper_bound_s(node) -> float:
    """``zookeeper.session.timeout.ms``: how long one ZooKeeper round trip may take (each is
    bounded by it, engine/cluster/zk.py; past it ZooKeeper has expired the session anyway)."""
    return _config(node, "zookeeper.session.timeout.ms", 18000) / 1000.0


def admin_bound_s(node, timeout_s: float) -> float:
    """The bound of an admin request that carries a timeout (CreateTopics, DeleteTopics,
    CreatePartitions, ElectLeaders, the reassignments): that timeout, but never less than one
    ZooKeeper round trip, which even a request with timeout 0 (do not wait for the outcome) makes.
    On expiry: REQUEST_TIMED_OUT."""
    return max(timeout_s, zookeeper_bound_s(node))
