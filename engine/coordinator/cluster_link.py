"""ClusterLink: how the coordinators reach the partitions of their internal topic.

A cluster broker's link is made by engine/cli_cluster.py; a node alone, a cluster of one, gets
:meth:`ClusterLink.alone`.  Either way the group and transaction coordinators
(engine/coordinator/runtime.py) create their internal topic through it (ZooKeeper, or the data
directory), load a partition when this node becomes its leader, write with acks=all through the
ReplicaManager, and send transaction markers to the leaders of other brokers' partitions
(WriteTxnMarkers).  The replica layer never imports the coordinators: the link registers them as
a role listener of the ReplicaManager.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

from ..client.connection import Connection, read_response
from ..errors import (
    ErrorCode,
    NotLeaderOrFollowerError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    api_error,
)
from ..protocol.messages import encode
from .host import CoordinatorHost

__all__ = ["ClusterLink"]


class ClusterLink:
    """What a coordinator needs in cluster mode, given by the broker wiring (the replica layer
    never imports the coordinators):

    * ``replicas``: the broker's ReplicaManager (role listener, replicated appends);
    * ``view``: the cluster view (partition leaders; ``assignment(topic)`` with ``partitions``);
    * ``create_topic(topic, partitions, config)``: blocking, creates the internal topic through
      ZooKeeper (replication factor chosen by the wiring); TOPIC_ALREADY_EXISTS is fine;
    * ``timeout_ms``: how long an acks=all append waits for the ISR (offsets.commit.timeout.ms);
    * ``security``: how the link connects to other brokers (WriteTxnMarkers): the inter-broker
      listener's TLS / SASL (engine.client.security.ClientSecurity; None: PLAINTEXT).
    """

    def __init__(self, replicas, view, create_topic: Callable[[str, int, dict], None], timeout_ms: int = 5000,
                 security=None):
        self.security = security
        self.replicas = replicas
        self.view = view
        self._create_topic = create_topic
        self.timeout_ms = timeout_ms
        self._senders: dict[int, tuple] = {}        # broker -> (address, WireClient | None, lock)
        self._senders_lock = threading.Lock()

    @classmethod
    def alone(cls, node: CoordinatorHost) -> ClusterLink:
        """The link of a node alone (a cluster of one): its internal topics are made in its data
        directory, and its replica manager leads every partition of them."""
        def create_topic(topic: str, partitions: int, config: dict) -> None:
            try:
                node.create_topic(topic, partitions, config)
            except TopicAlreadyExistsError:
                pass
        replicas = node.replicas
        return cls(replicas, replicas.view, create_topic, node.config["offsets.commit.timeout.ms"])

    def create_topic(self, topic: str, partitions: int, config: dict) -> None:
        """Create an internal topic (blocking; TOPIC_ALREADY_EXISTS is fine)."""
        self._create_topic(topic, partitions, config)
        self.led_partitions(topic)

    def partition_count(self, topic: str) -> int | None:
        return self.view.partition_count(topic)

    def led_partitions(self, topic: str) -> list[int]:
        """The partitions of `topic` this node leads now; those it leads without being told
        (a node alone) are made leader first, which tells the role listeners as well."""
        for p in range(self.partition_count(topic) or 0):
            try:
                if self.view.self_led(topic, p) is not None:
                    self.replicas.partition(topic, p)
            except UnknownTopicOrPartitionError:
                break                   # deleted meanwhile
        return sorted(part.partition for part in self.replicas.partitions()
                      if part.topic == topic and part.is_leader)

    def leader(self, topic: str, partition: int) -> int:
        try:
            leader = self.view.partition_state(topic, partition)[0]
        except UnknownTopicOrPartitionError:
            return -1
        return leader if leader in self.view.brokers() else -1

    async def append_control(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                             commit: bool, coordinator_epoch: int) -> None:
        """A transaction marker on a partition this broker leads, with acks=all."""
        _offset, waiter = await self.replicas.append_control(topic, partition, producer_id, producer_epoch,
                                                             commit, coordinator_epoch)
        if waiter is not None:
            err = (await self.replicas.wait_for_acks([waiter], self.timeout_ms))[0]
            if err is not None:
                raise err

    async def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                           commit: bool, coordinator_epoch: int) -> None:
        """A marker for any partition of the cluster: appended here when this broker leads it,
        else sent to its leader as WriteTxnMarkers (a sync WireClient per broker, in a worker
        thread).  Raises a retriable error when there is no leader or the leader refused."""
        leader = self.leader(topic, partition)
        if leader < 0:
            raise NotLeaderOrFollowerError(f"{topic}-{partition} has no leader")
        if leader == self.view.node_id:
            if topic == "__consumer_offsets":
                raise NotLeaderOrFollowerError("the group coordinator writes its own markers")
            await self.append_control(topic, partition, producer_id, producer_epoch, commit, coordinator_epoch)
            return
        addr = self.view.brokers().get(leader)
        if addr is None or addr[0] is None:
            raise NotLeaderOrFollowerError(f"the leader {leader} of {topic}-{partition} is not reachable")
        code = await asyncio.get_running_loop().run_in_executor(
            None, self._send_marker, leader, f"{addr[0]}:{addr[1]}", topic, partition, producer_id,
            producer_epoch, commit, coordinator_epoch)
        if code:
            raise api_error(code, f"WriteTxnMarkers to broker {leader} for {topic}-{partition}")

    def _send_marker(self, node: int, address: str, topic, partition, producer_id, producer_epoch, commit,
                     coordinator_epoch) -> int:
        r = self._request(node, address, 27, {"markers": [{
            "producer_id": producer_id, "producer_epoch": producer_epoch,
            "transaction_result": bool(commit), "coordinator_epoch": coordinator_epoch,
            "topics": [{"name": topic, "partition_indexes": [partition]}]}]}, 1)
        return r["markers"][0]["topics"][0]["partitions"][0]["error_code"]

    def verify_remote(self, node: int, transactional_id: str, producer_id: int, producer_epoch: int,
                      tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """KIP-890 for a partition leader whose transaction coordinator is broker `node`:
        AddPartitionsToTxn v4 with verify_only (the broker-to-broker form), blocking; {tp: code}
        as that coordinator answers (a top-level error applies to every partition)."""
        addr = self.view.brokers().get(node)
        if addr is None or addr[0] is None:
            return {tp: ErrorCode.COORDINATOR_NOT_AVAILABLE for tp in tps}
        topics: dict[str, list[int]] = {}
        for t, p in tps:
            topics.setdefault(t, []).append(p)
        r = self._request(node, f"{addr[0]}:{addr[1]}", 24, {"transactions": [{
            "transactional_id": transactional_id, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "verify_only": True,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}]}, 4)
        if r["error_code"]:
            return {tp: r["error_code"] for tp in tps}
        out = {tp: 0 for tp in tps}
        for tr in r["results_by_transaction"]:
            for t in tr["topic_results"]:
                for p in t["results_by_partition"]:
                    out[(t["name"], p["partition_index"])] = p["partition_error_code"]
        return out

    def _request(self, node: int, address: str, api_key: int, body: dict, version: int) -> dict:
        """One request to another broker on a cached connection per broker (one at a time per
        broker, bounded by ``timeout_ms``); a failed connection is dropped and the error raised.

        ``timeout_ms`` bounds the whole request, the wait for the connection included: while a
        request to a broker that does not answer holds it, the next ones give up when their own
        time is over (TimeoutError) instead of queueing behind it one timeout after another."""
        deadline = time.monotonic() + self.timeout_ms / 1000.0
        with self._senders_lock:
            entry = self._senders.get(node)
            if entry is None or entry[0] != address:
                entry = self._senders[node] = (address, None, threading.Lock())
        if not entry[2].acquire(timeout=self.timeout_ms / 1000.0):
            raise TimeoutError(f"broker {node}: the connection to it was busy with an earlier request "
                               f"for all of {self.timeout_ms} ms")
        try:
            left = deadline - time.monotonic()
            if left < 0.05:
                raise TimeoutError(f"broker {node}: no time left after waiting for the connection to it")
            client = self._senders[node][1]
            try:
                if client is None:
                    host, _, port = address.rpartition(":")
                    client_id = f"broker-{self.view.node_id}-inter-broker".encode()
                    client = Connection(host.strip("[]"), int(port), client_id, left, self.security)
                    self._senders[node] = (address, client, entry[2])
                else:
                    client.sock.settimeout(left)
                corr = client.send(api_key, version, [encode(api_key, version, body, response=False)])
                return read_response(client, api_key, version, corr)
            except Exception:
                if client is not None:
                    client.close()
                self._senders[node] = (address, None, entry[2])
                raise
        finally:
            entry[2].release()

    async def append(self, topic: str, partition: int, buf) -> None:
        """A replicated append with acks=all: returns once the high watermark covers it."""
        _info, _start, waiter = await self.replicas.append(topic, partition, buf, -1)
        if waiter is not None:
            err = (await self.replicas.wait_for_acks([waiter], self.timeout_ms))[0]
            if err is not None:
                raise err
