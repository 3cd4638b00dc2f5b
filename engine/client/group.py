"""Group membership for the embedded consumer: Kafka's classic consumer
protocol driven from the client side.

A :class:`GroupMember` talks to a group coordinator through a *transport*
(:class:`GroupTransport`): the in-process coordinator of the Engine that holds
the data directory, or — for a read-only open in another process — the broker
that owns the directory, over the wire.  Either way the coordinator is the
same code; the member only runs the client half of the protocol:

1. JoinGroup with the subscription (``engine.client.assignors`` bytes, so a
   group may mix embedded members with confluent-kafka / kafka-python /
   aiokafka ones); a first join answered MEMBER_ID_REQUIRED is retried with
   the given member id.
2. The leader runs the assignor over every member's subscription and sends the
   assignment in SyncGroup; every member reads its own partitions from the
   SyncGroup answer.
3. Committed offsets of the new assignment are fetched (OffsetFetch); a
   partition without one starts at ``auto_offset_reset``.
4. A heartbeat thread sends Heartbeat every ``heartbeat_interval_ms``; an
   answer of REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID
   marks the member for rejoining, which happens on the consumer's thread at
   its next ``poll`` (eager protocol: commit if auto-commit is on, revoke
   everything, join again).  A consumer that does not poll within
   ``max_poll_interval_ms`` leaves the group, as Kafka's does.

Thread-safety: ``ensure_active``/``commit``/``close`` run on the consumer's
thread; the heartbeat thread only sends heartbeats and sets flags.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol

from ..errors import ClosedError, CommitFailedError, EngineError, ErrorCode, KafkaApiError, api_error
from ..storage.manager import broker_address
from .assignors import ASSIGNORS, decode_assignment, decode_subscription, encode_assignment, encode_subscription

__all__ = ["GroupMember", "GroupTransport", "InProcessTransport", "JoinResult", "WireTransport",
           "group_transport"]

_REJOIN = {ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS}
# the coordinator is loading, unavailable or moved: ask again (as Kafka's clients do)
_MOVED = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
          ErrorCode.NOT_COORDINATOR}


class JoinResult(NamedTuple):
    error_code: int
    generation_id: int
    protocol_name: str | None
    leader: str
    member_id: str
    members: list[tuple[str, str | None, bytes]]   # (member_id, group_instance_id, metadata)


class GroupTransport(Protocol):
    """How a member reaches its coordinator; field names are Kafka's."""

    def join(self, group_id: str, member_id: str, group_instance_id: str | None,
             session_timeout_ms: int, rebalance_timeout_ms: int,
             protocols: list[tuple[str, bytes]]) -> JoinResult: ...

    def sync(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
             protocol_name: str | None, assignments: list[tuple[str, bytes]]) -> tuple[int, bytes]: ...

    def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None) -> int: ...

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None) -> int: ...

    def commit(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
               offsets: dict[tuple[str, int], tuple[int, str | None]]) -> dict[tuple[str, int], int]: ...

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]: ...


class InProcessTransport:
    """The coordinator of the Engine in this process, called through its sync facade."""

    def __init__(self, engine, client_id: str = "embedded"):
        self.engine = engine
        self.client_id = client_id
        self.coord.wait_loaded()        # a fresh open replays __consumer_offsets first

    @property
    def coord(self):
        # looked up per call: a coordinator hosted by a broker that stopped is replaced by
        # the engine's own, which reloads the state (members rejoin, as after a failover)
        return self.engine.group_coordinator

    def _call(self, method: str, *args, code=lambda r: r, timeout: float = 30.0, **kwargs):
        """Call a coordinator method; while it answers that it is loading or was replaced
        (a hosting broker stopped), wait and ask the engine's current coordinator again."""
        deadline = time.monotonic() + 30.0
        while True:
            c = self.coord
            try:
                r = c.call(getattr(c, method), *args, timeout=timeout, **kwargs)
            except ClosedError:
                if self.engine.closed or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)             # stopped between lookup and call: take the next one
                continue
            codes = code(r)
            if not (codes & _MOVED) or time.monotonic() > deadline:
                return r
            time.sleep(0.05)

    def join(self, group_id, member_id, group_instance_id, session_timeout_ms, rebalance_timeout_ms,
             protocols):
        r = self._call("join_group", group_id, member_id, protocol_type="consumer", protocols=protocols,
                       session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
                       group_instance_id=group_instance_id, client_id=self.client_id,
                       client_host="in-process", timeout=rebalance_timeout_ms / 1000.0 + 30,
                       code=lambda r: {r.error_code})
        return JoinResult(r.error_code, r.generation_id, r.protocol_name, r.leader_id, r.member_id,
                          list(r.members))

    def sync(self, group_id, generation_id, member_id, group_instance_id, protocol_name, assignments):
        r = self._call("sync_group", group_id, generation_id, member_id, dict(assignments),
                       group_instance_id=group_instance_id, protocol_type="consumer",
                       protocol_name=protocol_name, timeout=330, code=lambda r: {r.error_code})
        return r.error_code, r.assignment

    def heartbeat(self, group_id, generation_id, member_id, group_instance_id):
        return self._call("heartbeat", group_id, generation_id, member_id, group_instance_id,
                          code=lambda r: {r})

    def leave(self, group_id, member_id, group_instance_id):
        r = self._call("leave_group", group_id, [(member_id, group_instance_id)],
                       code=lambda r: {r.error_code})
        return r.error_code or next((code for _m, _i, code in r.members if code), 0)

    def commit(self, group_id, generation_id, member_id, group_instance_id, offsets):
        return self._call("commit_offsets", group_id,
                          {tp: (off, -1, meta or "") for tp, (off, meta) in offsets.items()},
                          generation_id=generation_id, member_id=member_id,
                          group_instance_id=group_instance_id, code=lambda r: set(r.values()))

    def fetch_offsets(self, group_id, partitions):
        err, got = self._call("fetch_offsets", group_id, list(partitions), code=lambda r: {r[0]})
        if err:
            raise api_error(err, f"OffsetFetch {group_id}")
        return {tp: om.offset for tp, om in got.items()}


class WireTransport:
    """The group coordinator of a broker, over the Kafka protocol (``engine.client.wire``).

    Two connections: one for the consumer's thread (JoinGroup may wait a whole
    rebalance) and one for the heartbeat thread, so heartbeats never queue
    behind a join.  The coordinator is found with FindCoordinator and asked
    again after NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE.
    """

    def __init__(self, bootstrap: str, client_id: str = "kafka-engine-embedded",
                 request_timeout_ms: int = 30000, security=None):
        from .wire import WireClient
        self._main = WireClient(bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms,
                                security=security)
        self._hb = WireClient(bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms,
                              security=security)
        self._lock = threading.Lock()
        self._coordinator: dict[str, int] = {}

    def _node(self, client, group_id: str) -> int:
        from .wire import ApiKey
        node = self._coordinator.get(group_id)
        if node is not None and node in client._brokers:
            return node
        deadline = time.monotonic() + client.timeout_s
        while True:
            r = client._call(None, ApiKey.FIND_COORDINATOR, {"key": group_id, "key_type": 0})
            code = int(r["error_code"])
            if code == ErrorCode.NONE:
                break
            if code not in _MOVED or time.monotonic() > deadline:
                raise api_error(code, f"FindCoordinator {group_id}: {r.get('error_message')}")
            time.sleep(0.1)
        node = int(r["node_id"])
        for c in (self._main, self._hb):
            c._brokers[node] = (r["host"], int(r["port"]))
        self._coordinator[group_id] = node
        return node

    def _call(self, client, group_id: str, key: int, body: dict, timeout_s: float | None = None) -> dict:
        from .wire import KafkaConnectionError
        deadline = time.monotonic() + client.timeout_s
        while True:
            conn = None
            try:
                node = self._node(client, group_id)       # FindCoordinator: any live broker
                conn = client._conn_for(node)
                if timeout_s is not None:
                    conn.sock.settimeout(max(timeout_s, client.timeout_s))
                r = client._call(node, key, body)
            except KafkaConnectionError:
                # the coordinator's broker went away: find the coordinator again and retry within
                # the request timeout, as Kafka's clients mark it unknown and rediscover it
                if time.monotonic() > deadline:
                    raise
                self._coordinator.pop(group_id, None)
                time.sleep(0.2)
                continue
            finally:
                if timeout_s is not None and conn is not None and conn.sock.fileno() >= 0:
                    conn.sock.settimeout(client.timeout_s)
            codes = {int(r.get("error_code", 0) or 0)} | {
                int(p["error_code"]) for t in (r.get("topics") or []) for p in t.get("partitions", [])}
            if not codes & _MOVED or time.monotonic() > deadline:
                return r
            # the coordinator is loading or moved: find it again and retry, as Kafka's clients do
            self._coordinator.pop(group_id, None)
            time.sleep(0.1)

    def join(self, group_id, member_id, group_instance_id, session_timeout_ms, rebalance_timeout_ms,
             protocols):
        from .wire import ApiKey
        r = self._call(self._main, group_id, ApiKey.JOIN_GROUP, {
            "group_id": group_id, "session_timeout": session_timeout_ms,
            "rebalance_timeout": rebalance_timeout_ms, "member_id": member_id,
            "group_instance_id": group_instance_id, "protocol_type": "consumer",
            "protocols": [{"name": n, "metadata": m} for n, m in protocols]},
            timeout_s=rebalance_timeout_ms / 1000.0 + 30)
        return JoinResult(int(r["error_code"]), r["generation_id"], r["protocol_name"], r["leader"],
                          r["member_id"], [(x["member_id"], x["group_instance_id"], bytes(x["metadata"]))
                                           for x in r["members"]])

    def sync(self, group_id, generation_id, member_id, group_instance_id, protocol_name, assignments):
        from .wire import ApiKey
        r = self._call(self._main, group_id, ApiKey.SYNC_GROUP, {
            "group_id": group_id, "generation_id": generation_id, "member_id": member_id,
            "group_instance_id": group_instance_id, "protocol_type": "consumer",
            "protocol_name": protocol_name,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments]},
            timeout_s=330)
        return int(r["error_code"]), bytes(r["assignment"] or b"")

    def heartbeat(self, group_id, generation_id, member_id, group_instance_id):
        from .wire import ApiKey
        with self._lock:
            r = self._call(self._hb, group_id, ApiKey.HEARTBEAT, {
                "group_id": group_id, "generation_id": generation_id, "member_id": member_id,
                "group_instance_id": group_instance_id})
        return int(r["error_code"])

    def leave(self, group_id, member_id, group_instance_id):
        from .wire import ApiKey
        with self._lock:
            r = self._call(self._hb, group_id, ApiKey.LEAVE_GROUP, {
                "group_id": group_id,
                "members": [{"member_id": member_id, "group_instance_id": group_instance_id}]})
        return int(r["error_code"]) or next((int(x["error_code"]) for x in r["members"]
                                             if int(x["error_code"])), 0)

    def commit(self, group_id, generation_id, member_id, group_instance_id, offsets):
        from .wire import ApiKey
        by_topic: dict[str, list] = {}
        for (t, p), (off, meta) in offsets.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                               "committed_leader_epoch": -1,
                                               "committed_metadata": meta or ""})
        r = self._call(self._main, group_id, ApiKey.OFFSET_COMMIT, {
            "group_id": group_id, "generation_id_or_member_epoch": generation_id,
            "member_id": member_id, "group_instance_id": group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        return {(t["name"], p["partition_index"]): int(p["error_code"])
                for t in r["topics"] for p in t["partitions"]}

    def fetch_offsets(self, group_id, partitions):
        from .wire import ApiKey
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        r = self._call(self._main, group_id, ApiKey.OFFSET_FETCH, {
            "group_id": group_id, "require_stable": False,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]})
        if int(r["error_code"]):
            raise api_error(int(r["error_code"]), f"OffsetFetch {group_id}")
        out = {}
        for t in r["topics"]:
            for p in t["partitions"]:
                if int(p["error_code"]):
                    raise api_error(int(p["error_code"]), f"OffsetFetch {group_id} {t['name']}")
                out[(t["name"], p["partition_index"])] = int(p["committed_offset"])
        return out

    def close(self) -> None:
        self._main.close()
        self._hb.close()


def group_transport(engine) -> GroupTransport:
    """How a consumer of `engine` reaches its group coordinator: the Engine's own when it
    holds the data directory; for a read-only open, the broker that owns the directory
    (found through the directory's lock file, ``engine.broker_address``)."""
    if not engine.read_only:
        return InProcessTransport(engine)
    address = broker_address(engine.path)
    if address is None:
        raise EngineError(
            f"{engine.path} is open read-only and no broker serves it: consumer groups need the "
            "coordinator of the process that holds the directory (open it writable in one process, "
            "or run `python -m engine serve` on it)")
    return WireTransport(address)


class GroupMember:
    """One consumer's membership in one group (see the module docstring)."""

    def __init__(self, transport: GroupTransport, group_id: str, *,
                 partitions_for: Callable[[str], int],
                 group_instance_id: str | None = None,
                 session_timeout_ms: int = 45000, rebalance_timeout_ms: int = 300000,
                 heartbeat_interval_ms: int = 3000, max_poll_interval_ms: int = 300000,
                 assignors: tuple[str, ...] = ("range", "roundrobin")):
        if not group_id:
            raise EngineError("group_id must be a non-empty string")
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if unknown:
            raise EngineError(f"unknown partition assignment strategy {unknown[0]!r}: "
                              f"one of {', '.join(ASSIGNORS)}")
        self.transport = transport
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.member_id = ""
        self.generation_id = -1
        self.protocol_name: str | None = None
        self.assignment: list[tuple[str, int]] = []
        self._partitions_for = partitions_for
        self._session_ms = session_timeout_ms
        self._rebalance_ms = rebalance_timeout_ms
        self._heartbeat_s = heartbeat_interval_ms / 1000.0
        self._max_poll_s = max_poll_interval_ms / 1000.0
        self._assignors = assignors
        self._topics: list[str] = []
        self._rejoin = threading.Event()
        self._stop = threading.Event()
        self._last_poll = time.monotonic()
        self._hb_error: BaseException | None = None
        self._hb_thread: threading.Thread | None = None
        self._lock = threading.Lock()          # generation/member id seen by the heartbeat thread
        self._joining = False

    # -- subscription --------------------------------------------------------
    def subscribe(self, topics: list[str]) -> None:
        self._topics = sorted(set(topics))
        self._rejoin.set()

    @property
    def needs_rejoin(self) -> bool:
        return self._rejoin.is_set()

    def poll_tick(self) -> None:
        """The consumer polled: resets the max.poll.interval clock; raises a heartbeat failure."""
        self._last_poll = time.monotonic()
        err, self._hb_error = self._hb_error, None
        if err is not None:
            raise err

    # -- the join / sync round -------------------------------------------------
    def join(self) -> list[tuple[str, int]]:
        """Join (or rejoin) and return this member's assignment."""
        if not self._topics:
            raise EngineError("subscribe() to at least one topic before polling a group")
        metadata = encode_subscription(self._topics)
        protocols = [(name, metadata) for name in self._assignors]
        deadline = time.monotonic() + self._rebalance_ms / 1000.0 + 30.0
        with self._lock:
            self._joining = True
        try:
            return self._join_rounds(protocols, deadline)
        finally:
            with self._lock:
                self._joining = False

    def _join_rounds(self, protocols, deadline: float) -> list[tuple[str, int]]:
        while True:
            if time.monotonic() > deadline:
                raise api_error(ErrorCode.REBALANCE_IN_PROGRESS, f"group {self.group_id}: no stable generation")
            self._rejoin.clear()
            res = self.transport.join(self.group_id, self.member_id, self.group_instance_id,
                                      self._session_ms, self._rebalance_ms, protocols)
            if res.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = res.member_id
                continue
            if res.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self.member_id = ""
                continue
            if res.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if res.error_code != ErrorCode.NONE:
                raise api_error(res.error_code, f"JoinGroup {self.group_id}")
            with self._lock:
                self.member_id = res.member_id
                self.generation_id = res.generation_id
                self.protocol_name = res.protocol_name
            assignments: list[tuple[str, bytes]] = []
            if res.leader == res.member_id:
                assignments = self._assign(res.protocol_name or "range", res.members)
            err, data = self.transport.sync(self.group_id, res.generation_id, res.member_id,
                                            self.group_instance_id, res.protocol_name, assignments)
            if err in _REJOIN:
                if err != ErrorCode.REBALANCE_IN_PROGRESS:
                    self.member_id = "" if err == ErrorCode.UNKNOWN_MEMBER_ID else self.member_id
                continue
            if err != ErrorCode.NONE:
                raise api_error(err, f"SyncGroup {self.group_id}")
            if self._rejoin.is_set():
                continue
            self.assignment = decode_assignment(data)
            self._start_heartbeats()
            return self.assignment

    def _assign(self, protocol: str, members: list[tuple[str, str | None, bytes]]) -> list[tuple[str, bytes]]:
        subs = {mid: decode_subscription(meta).topics for mid, _iid, meta in members}
        counts = {}
        for t in {t for ts in subs.values() for t in ts}:
            try:
                counts[t] = self._partitions_for(t)
            except KafkaApiError:
                counts[t] = 0          # a subscribed topic that does not exist yet
        plan = ASSIGNORS[protocol](subs, counts)
        return [(mid, encode_assignment(tps)) for mid, tps in plan.items()]

    # -- heartbeats ------------------------------------------------------------
    def _start_heartbeats(self) -> None:
        if self._hb_thread is not None and self._hb_thread.is_alive():
            return
        self._stop.clear()
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                           name=f"heartbeat-{self.group_id}")
        self._hb_thread.start()

    def _heartbeat_loop(self) -> None:
        while not self._stop.wait(self._heartbeat_s):
            if self._rejoin.is_set() or self._joining:
                continue            # as Kafka's heartbeat thread: quiet while not Stable
            if time.monotonic() - self._last_poll > self._max_poll_s:
                # Kafka: a consumer that stops polling leaves so its partitions move on
                self._leave_quietly()
                self._rejoin.set()
                continue
            with self._lock:
                if self._joining:
                    continue
                gen, mid = self.generation_id, self.member_id
            try:
                err = self.transport.heartbeat(self.group_id, gen, mid, self.group_instance_id)
            except Exception as e:              # the coordinator went away: try again next beat
                self._hb_error = None if isinstance(e, OSError) else e
                continue
            with self._lock:
                if self._joining or gen != self.generation_id:
                    continue            # an answer about a generation the consumer already left
            if err in _REJOIN:
                if err == ErrorCode.UNKNOWN_MEMBER_ID:
                    with self._lock:
                        self.member_id = ""
                self._rejoin.set()
            elif err == ErrorCode.FENCED_INSTANCE_ID:
                self._hb_error = api_error(err, f"group {self.group_id}: instance id "
                                                    f"{self.group_instance_id} fenced by a newer member")
                self._stop.set()
            elif err != ErrorCode.NONE:
                self._rejoin.set()

    # -- offsets ---------------------------------------------------------------
    def committed(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self.transport.fetch_offsets(self.group_id, partitions)

    def commit(self, offsets: dict[tuple[str, int], tuple[int, str | None]]) -> None:
        """Commit within the current generation; CommitFailedError when a rebalance took the partitions."""
        if not offsets:
            return
        with self._lock:
            gen, mid = self.generation_id, self.member_id
        errors = self.transport.commit(self.group_id, gen, mid, self.group_instance_id, offsets)
        bad = {tp: code for tp, code in errors.items() if code != ErrorCode.NONE}
        if not bad:
            return
        codes = set(bad.values())
        if codes & _REJOIN:
            self._rejoin.set()
            raise CommitFailedError(
                f"group {self.group_id}: commit of {sorted(bad)} refused (generation {gen}, "
                f"error {min(codes)}): the group rebalanced; rejoin on the next poll")
        code = min(codes)
        raise api_error(code, f"OffsetCommit {self.group_id}: {sorted(bad)}")

    # -- leaving ---------------------------------------------------------------
    def _leave_quietly(self) -> None:
        with self._lock:
            mid = self.member_id
        if mid:
            try:
                self.transport.leave(self.group_id, mid, self.group_instance_id)
            except Exception:
                pass
        with self._lock:
            self.member_id = "" if self.group_instance_id is None else self.member_id
            self.generation_id = -1

    def close(self, leave: bool = True) -> None:
        """Stop heartbeating and (for a dynamic member) leave the group so it rebalances at once.

        A static member (``group_instance_id``) does not send LeaveGroup, as in Kafka:
        its partitions wait for it until the session timeout.
        """
        self._stop.set()
        if self._hb_thread is not None:
            self._hb_thread.join(5)
        if leave and self.group_instance_id is None:
            self._leave_quietly()
        close = getattr(self.transport, "close", None)
        if close is not None:
            close()
