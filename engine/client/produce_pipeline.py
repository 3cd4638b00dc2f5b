"""Produce as Kafka's Sender does it: per broker, one Produce request carrying the next
ready batch of every partition that broker leads, up to
``max.in.flight.requests.per.connection`` requests in flight on its connection.

Contract (:class:`ProducePipeline`): :meth:`~ProducePipeline.add` queues a built record
batch (producer id, epoch and sequence already in it) of one topic-partition;
:meth:`~ProducePipeline.pump` sends what may be sent and, when asked to, reads one
answer.  Every queued :class:`Entry` ends done -- with its base offset (-1 with acks=0
or when the broker reports DUPLICATE_SEQUENCE_NUMBER: an earlier attempt landed) or
with ``error`` set -- and then its ``on_done`` is called.

Ordering and idempotence: the batches of one partition are sent in the order they were
added, and Kafka answers the requests of a connection in order.  A retriable error or a
lost connection puts the failed batch and the partition's later ones (those in flight
come back as errors or OUT_OF_ORDER_SEQUENCE_NUMBER) back at the head of its queue in
order; the partition sends nothing more until its in-flight requests have all
answered, then resends them after ``retry.backoff.ms`` with the same bytes and
sequence numbers, so the broker drops what it already has and keeps the order.  Other
partitions in the same requests are not held back.  A batch is failed after
``retries`` attempts or when ``delivery.timeout.ms`` since it was added has passed; a
non-retriable error fails it and every batch of its partition queued after it.

A partition's first batch goes alone: no later batch of the partition is sent until one of
its batches has been acknowledged (:attr:`~ProducePipeline.established`).  A broker that has
no state for the producer id on a partition takes the batch at any sequence (Kafka's
ProducerAppendInfo.checkSequence: so it can go on after its state expired), so were batch 2
in flight while batch 1 was refused with a retriable error -- Kafka 4.0 answers
NOT_LEADER_OR_FOLLOWER to a Produce that comes just after CreateTopics, before the new
partition is open on the broker -- batch 2 would land first and batch 1's retry would be
OUT_OF_ORDER_SEQUENCE_NUMBER for good.  Once the broker holds the producer's sequence, a
batch that overtakes an unanswered one is refused with OUT_OF_ORDER_SEQUENCE_NUMBER and sent
again behind it (retriable while an earlier batch is unacknowledged, as the Java producer).
:meth:`~ProducePipeline.new_producer_id` starts that over after a new producer id or epoch.

The request is written with the batches as separate buffers (``sendmsg``): the record
batches are never copied into a request.  Not thread-safe: the owner serialises calls.
"""

from __future__ import annotations

import select
import time
from collections import deque
from collections.abc import Callable

from ..errors import EngineError, ErrorCode, KafkaApiError, api_error
from ..protocol.messages import ApiKey
from ..protocol.produce import encode_produce
from .connection import KafkaConnectionError, read_response
from .wire import WireClient

__all__ = ["Entry", "ProducePipeline"]

MAX_REQUEST_BYTES = 32 << 20      # a request takes more partitions' batches up to this size


class Entry:
    """One record batch of one partition on its way to the broker."""

    __slots__ = ("topic", "partition", "batch", "count", "order", "deadline", "attempts",
                 "done", "base", "error", "on_done", "last_error", "index")

    def __init__(self, topic: str, partition: int, batch, count: int,
                 on_done: Callable[[Entry], None] | None = None):
        self.topic, self.partition, self.batch, self.count = topic, partition, batch, count
        self.on_done = on_done
        self.order = 0
        self.deadline = 0.0
        self.attempts = 0
        self.done = False
        self.base = -1
        self.error: BaseException | None = None
        self.last_error: BaseException | None = None
        self.index = 0                       # the owner's (e.g. the batch's place in its window)


class ProducePipeline:
    """See the module docstring."""

    def __init__(self, client: WireClient, *, acks: int, request_timeout_ms: int, max_in_flight: int,
                 retries: int, retry_backoff_ms: int, delivery_timeout_ms: int):
        self.client = client
        self.acks = acks
        self.timeout_ms = request_timeout_ms
        self.max_in_flight = max(1, max_in_flight)
        self.retries = retries
        self.backoff_s = retry_backoff_ms / 1000.0
        self.delivery_s = delivery_timeout_ms / 1000.0
        self.queues: dict[tuple[str, int], deque] = {}
        self.in_flight: dict[tuple[str, int], int] = {}
        self.blocked_until: dict[tuple[str, int], float] = {}
        self.retrying: set = set()          # partitions waiting for their in-flight answers
        self.requests: dict[int, deque] = {}   # node -> deque[(conn, version, corr, entries, sent_at)]
        self.unacked: dict[tuple[str, int], set] = {}   # orders of each partition's unfinished batches
        self.established: set[tuple[str, int]] = set()  # partitions with an acknowledged batch
        self._order = 0
        self.unfinished = 0

    # -- queueing ---------------------------------------------------------------------------
    def add(self, entry: Entry) -> Entry:
        self._order += 1
        entry.order = self._order
        entry.deadline = time.monotonic() + self.delivery_s
        tp = (entry.topic, entry.partition)
        q = self.queues.get(tp)
        if q is None:
            q = self.queues[tp] = deque()
        q.append(entry)
        self.unacked.setdefault(tp, set()).add(entry.order)
        self.unfinished += 1
        return entry

    def new_producer_id(self) -> None:
        """The producer id or epoch changed (the caller has let every batch finish): each
        partition's first batch under it goes alone again (see the module docstring)."""
        self.established.clear()

    def queued(self, topic: str, partition: int) -> int:
        q = self.queues.get((topic, partition))
        return len(q) if q else 0

    def in_flight_requests(self) -> int:
        return sum(len(r) for r in self.requests.values())

    # -- the work ----------------------------------------------------------------------------
    def pump(self, block: bool) -> None:
        """Send every request the windows allow; then, with `block`, read one answer (or,
        with nothing in flight, wait out the shortest retry backoff)."""
        self._send_ready()
        if not block:
            return
        node = self._oldest_node()
        if node is not None:
            self._receive(node)
            self._send_ready()
        elif self.unfinished:
            now = time.monotonic()
            waits = [u - now for tp, u in self.blocked_until.items() if self.queues.get(tp)]
            if waits and min(waits) > 0:
                time.sleep(min(waits))

    def wait_readable(self, timeout: float) -> bool:
        """Wait (no lock needed) until a connection with requests in flight has an answer."""
        socks = []
        for reqs in list(self.requests.values()):
            try:
                conn = reqs[0][0]
            except IndexError:               # none in flight (or just answered on another thread)
                continue
            if conn.buffered():
                return True                  # TLS: already decrypted, select() would not see it
            socks.append(conn.sock)
        if not socks:
            return False
        try:
            r, _, _ = select.select(socks, [], [], timeout)
        except (OSError, ValueError):
            return True                      # a socket closed under us: let pump() see it
        return bool(r)

    def receive_ready(self) -> None:
        """Read the answers already waiting (no blocking), then send what they freed."""
        for node, reqs in list(self.requests.items()):
            while reqs:
                try:
                    r = [True] if reqs[0][0].buffered() else select.select([reqs[0][0].sock], [], [], 0)[0]
                except (OSError, ValueError):
                    r = [True]
                if not r:
                    break
                self._receive(node)
        self._send_ready()

    def _oldest_node(self) -> int | None:
        best, at = None, None
        for node, reqs in self.requests.items():
            if reqs and (at is None or reqs[0][4] < at):
                best, at = node, reqs[0][4]
        return best

    def _sendable(self, now: float) -> dict[int, list]:
        """{node: [queue, ...]} of partitions with a batch that may go now."""
        by_node: dict[int, list] = {}
        for tp, q in list(self.queues.items()):
            if not q:
                continue
            if tp in self.retrying:
                if self.in_flight.get(tp, 0):
                    continue                 # resend only after the answers of those in flight
                self.retrying.discard(tp)
            if tp not in self.established and self.in_flight.get(tp, 0):
                continue                     # its first batch goes alone (module docstring)
            if self.blocked_until.get(tp, 0.0) > now:
                continue
            try:
                node = self.client._leader(*tp)
            except (KafkaApiError, KafkaConnectionError) as e:
                if isinstance(e, KafkaApiError) and not e.retriable:
                    self._fail_partition(tp, e)
                else:
                    self._retry([q.popleft()], e)
                continue
            by_node.setdefault(node, []).append(q)
        return by_node

    def _send_ready(self) -> None:
        while True:
            sent_any = False
            for node, queues in self._sendable(time.monotonic()).items():
                reqs = self.requests.setdefault(node, deque())
                if len(reqs) >= self.max_in_flight and self.acks != 0:
                    continue
                entries: list[Entry] = []
                size = 0
                for q in queues:
                    e = q[0]
                    if entries and size + len(e.batch) > MAX_REQUEST_BYTES:
                        break
                    entries.append(q.popleft())
                    size += len(e.batch)
                self._send(node, entries)
                sent_any = True
            if not sent_any:
                return

    def _send(self, node: int, entries: list) -> None:
        for e in entries:
            e.attempts += 1
        try:
            conn = self.client._conn_for(node)
            v = self.client._version(ApiKey.PRODUCE)
            body = encode_produce(v, self.acks, self.timeout_ms,
                                  [(e.topic, e.partition, [e.batch]) for e in entries],
                                  self.client.transactional_id)
            corr = conn.send(ApiKey.PRODUCE, v, body)
        except (KafkaConnectionError, KafkaApiError) as err:
            self._lost(node)
            self._retry(entries, err)
            return
        if self.acks == 0:
            for e in entries:
                self._finish(e, -1)
            return
        for e in entries:
            tp = (e.topic, e.partition)
            self.in_flight[tp] = self.in_flight.get(tp, 0) + 1
        self.requests[node].append((conn, v, corr, entries, time.monotonic()))

    def _lost(self, node: int) -> None:
        """The connection to `node` is gone: every request in flight on it is retried."""
        reqs = self.requests.get(node)
        while reqs:
            _, _, _, entries, _ = reqs.popleft()
            self._landed(entries)
            self._retry(entries, KafkaConnectionError(f"connection to broker {node} lost"))

    def _landed(self, entries: list) -> None:
        for e in entries:
            tp = (e.topic, e.partition)
            self.in_flight[tp] -= 1

    def _receive(self, node: int) -> None:
        conn, v, corr, entries, _ = self.requests[node].popleft()
        try:
            resp = read_response(conn, ApiKey.PRODUCE, v, corr)
        except KafkaConnectionError as err:
            self._landed(entries)
            self._retry(entries, err)
            self._lost(node)
            return
        self._landed(entries)
        results = {}
        for t in resp["responses"]:
            for p in t["partition_responses"]:
                results[(t["name"], p["index"])] = p
        retry: list[tuple[Entry, Exception]] = []
        for e in entries:
            p = results.get((e.topic, e.partition))
            if p is None:
                retry.append((e, KafkaConnectionError(f"the produce response from {conn.address} has no "
                                                      f"result for {e.topic}-{e.partition}")))
                continue
            code = p["error_code"]
            if code == 0:
                self.established.add((e.topic, e.partition))
                self._finish(e, p["base_offset"])
            elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
                self.established.add((e.topic, e.partition))
                self._finish(e, -1)          # an earlier attempt landed: not written twice
            else:
                msg = p.get("error_message") or ""
                refused = api_error(code, f"produce to {e.topic}-{e.partition}" + (f" ({msg})" if msg else ""))
                tp = (e.topic, e.partition)
                if refused.retriable or (code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                                         and self._earlier_unacked(e)):
                    retry.append((e, refused))
                else:
                    self._fail_partition(tp, refused, e)
        for e, reason in retry:
            self._retry([e], reason)

    def _earlier_unacked(self, e: Entry) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER is retriable while an earlier batch of the partition is
        unanswered or being retried (its sequence has not landed yet), as the Java producer
        decides (TransactionManager.canRetry: not the next sequence after the last acked)."""
        tp = (e.topic, e.partition)
        return tp in self.retrying or any(o < e.order for o in self.unacked.get(tp, ()))

    # -- outcomes ----------------------------------------------------------------------------
    def _finish(self, e: Entry, base: int) -> None:
        if e.done:
            return
        self.unacked.get((e.topic, e.partition), set()).discard(e.order)
        e.done, e.base = True, base
        e.batch = None
        self.unfinished -= 1
        if e.on_done is not None:
            e.on_done(e)

    def _fail(self, e: Entry, err: BaseException) -> None:
        if e.done:
            return
        e.error = err
        self._finish(e, -1)

    def _fail_partition(self, tp: tuple, err: BaseException, first: Entry | None = None) -> None:
        if first is not None:
            self._fail(first, err)
        for e in self.queues.pop(tp, ()):
            self._fail(e, EngineError(f"an earlier batch of {tp[0]}-{tp[1]} failed: {err}"))

    def _retry(self, entries: list, err: BaseException) -> None:
        now = time.monotonic()
        for e in entries:
            if e.done:
                continue
            tp = (e.topic, e.partition)
            e.last_error = err
            if e.attempts > self.retries or now + self.backoff_s > e.deadline:
                failure = EngineError(
                    f"delivery of {e.count} record(s) to {e.topic}-{e.partition} failed after "
                    f"{e.attempts} attempt(s) within delivery.timeout.ms: {err}")
                failure.__cause__ = err
                self._fail_partition(tp, failure, e)   # its sequence never landed: nor can later ones
                continue
            q = self.queues.get(tp)
            if q is None:
                q = self.queues[tp] = deque()
            i = 0
            while i < len(q) and q[i].order < e.order:
                i += 1
            q.insert(i, e)                   # back in sequence order
            self.retrying.add(tp)
            self.blocked_until[tp] = now + self.backoff_s
            self.client.forget_leader(*tp)   # NOT_LEADER / moved / lost: ask Metadata again
