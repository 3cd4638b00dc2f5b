"""ReplicaFetcher: a follower's thread that replicates the partitions of one leader broker.

Kafka's ReplicaFetcherThread (Kafka 4.0's, truncation on fetch: KIP-320).  For each partition it
follows from that leader:

1. A log with a leader epoch fetches at once from its log end offset; a log without any (empty,
   or written before epochs) first truncates to its high watermark (Kafka's fallback).  No
   OffsetForLeaderEpoch round trip: the fetch itself detects divergence.
2. *fetch*: Fetch v15 with ``ReplicaState`` = (this node, its broker epoch: the view's
   ``broker_epoch()``, KIP-903), topics named by the ids the view knows (``topic_id``; a view
   that knows none, e.g. the in-memory one of tests, fetches at v12 by name with ``replica_id``),
   ``current_leader_epoch``, the log end offset as fetch offset and ``last_fetched_epoch`` = the
   latest epoch of the log's leader-epoch cache; the batches are appended as they are
   (``assign_offsets=False``, each run of batches with its own leader epoch, so the epoch cache
   matches the leader's), then the high watermark becomes min(leader HW, LEO) and the log start
   follows the leader's.
3. *diverging*: when our log is not a prefix of the leader's, the leader answers no records and
   ``DivergingEpoch`` (epoch, end offset); we truncate by KIP-279's rules (to the end of that
   epoch in both logs, or -- when we do not know the leader's epoch -- to the end of our largest
   epoch below it) and fetch again with the new last epoch, which converges in a few fetches.

Errors: FENCED_LEADER_EPOCH parks the partition until a newer epoch arrives (become_follower);
OFFSET_OUT_OF_RANGE asks the leader's log end and start (ListOffsets, Kafka's
fetchOffsetAndTruncate): a log end above the leader's is cut to it, one below the leader's log
start starts over empty there; NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH and lost
connections back off ``replica.fetch.backoff.ms`` and retry.  An I/O error of the local log
(append, truncation, HW update: ENOSPC, EROFS, EIO) goes to the manager's ``storage_error``: with
its ``on_storage_error`` set the broker goes offline and this thread stops; otherwise the
partition backs off and retries.

The connection to the leader speaks the inter-broker listener's protocol: ``manager.client_security``
(engine.client.security.ClientSecurity, set by the broker's wiring; None: PLAINTEXT) wraps it in
TLS and authenticates with SASL.  A refused login or TLS handshake is logged and retried after the
backoff, as a lost connection is (the broker's credential may not be there yet).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time

from .. import _native
from ..client.connection import Connection, KafkaConnectionError
from ..errors import ErrorCode, KafkaApiError, SslAuthenticationError
from ..metadata import topic_uuid
from ..protocol.fetch import parse_fetch_response
from ..protocol.messages import ApiKey, _entity, encode, read_struct

__all__ = ["ReplicaFetcher"]

log = logging.getLogger("engine.replica")

FETCH_VERSION = 15            # ReplicaState with the broker epoch (KIP-903); topics by id
FETCH_VERSION_BY_NAME = 12    # when the view knows no topic id
LIST_OFFSETS_VERSION = 7


class _LocalStorageError(Exception):
    """An OSError of a local log (not of the connection to the leader)."""


class ReplicaFetcher(threading.Thread):
    """One thread per leader broker (see the module docstring)."""

    def __init__(self, manager, leader_id: int, *, max_wait_ms: int = 500, min_bytes: int = 1,
                 max_bytes: int = 10 * 1024 * 1024, partition_max_bytes: int = 1024 * 1024,
                 backoff_ms: int = 1000, request_timeout_ms: int = 30_000):
        super().__init__(name=f"replica-fetcher-{manager.node_id}-from-{leader_id}", daemon=True)
        self.manager = manager
        self.leader_id = leader_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.backoff_s = backoff_ms / 1000.0
        self.timeout_s = request_timeout_ms / 1000.0
        self._parts: dict[tuple[str, int], object] = {}
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._stopped = threading.Event()
        self._conn: Connection | None = None
        self.truncations_on_fetch = 0            # DivergingEpoch answers acted upon (KIP-320)

    # -- control (any thread) ------------------------------------------------
    def add(self, part) -> None:
        with self._lock:
            self._parts[(part.topic, part.partition)] = part
        self._wakeup.set()

    def remove(self, part) -> None:
        with self._lock:
            if self._parts.get((part.topic, part.partition)) is part:
                del self._parts[(part.topic, part.partition)]

    def stop(self) -> None:
        """Ask the thread to stop (returns at once; may be called from the thread itself)."""
        self._stopped.set()
        self._wakeup.set()
        conn = self._conn
        if conn is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def shutdown(self) -> None:
        self.stop()
        self.join(10)

    @contextlib.contextmanager
    def _local(self, part, what: str):
        """Around local log writes: an OSError becomes the manager's storage error."""
        try:
            yield
        except OSError as e:
            err = self.manager.storage_error(e, f"{what} of {part.topic}-{part.partition} as a follower")
            if self.manager.offline is None:            # no halting hook: retry later
                self._back_off(part, ErrorCode.KAFKA_STORAGE_ERROR, f"{what} ({e})")
                return
            raise _LocalStorageError(err) from e

    # -- the loop ------------------------------------------------------------------
    def run(self) -> None:
        while not self._stopped.is_set():
            with self._lock:
                parts = list(self._parts.values())
            now = time.monotonic()
            ready = [p for p in parts if p.fetch_state != "fenced" and p.fetch_backoff_until <= now]
            if not ready:
                self._wakeup.wait(0.05 if parts else 1.0)
                self._wakeup.clear()
                continue
            try:
                conn = self._connection()
                truncating = [p for p in ready if p.fetch_state == "truncate"]
                if truncating:
                    self._truncate(truncating)
                fetching = [p for p in ready if p.fetch_state == "fetch"]
                if fetching:
                    self._fetch(conn, fetching)
            except _LocalStorageError:
                break                              # the broker is offline (storage_error)
            except (KafkaConnectionError, OSError, KafkaApiError, SslAuthenticationError) as e:
                if self._stopped.is_set():
                    break
                log.info("%s: %s; retrying in %.1f s", self.name, e, self.backoff_s)
                self._close()
                self._stopped.wait(self.backoff_s)
            except Exception:
                if self._stopped.is_set():
                    break
                log.exception("%s failed; retrying", self.name)
                self._close()
                self._stopped.wait(self.backoff_s)
        self._close()

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.sock.fileno() < 0:
            brokers = self.manager.view.brokers()
            if self.leader_id not in brokers or brokers[self.leader_id][0] is None:
                raise KafkaConnectionError(f"no address for broker {self.leader_id}")
            host, port, _rack = brokers[self.leader_id]
            self._conn = Connection(host, port, f"replica-{self.manager.node_id}".encode(), self.timeout_s,
                                    getattr(self.manager, "client_security", None))
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _still_following(self, part, epoch: int) -> bool:
        return (not part.is_leader and part.leader_id == self.leader_id and part.leader_epoch == epoch
                and (part.topic, part.partition) in self._parts)

    def _back_off(self, part, code: int, what: str) -> None:
        log.info("%s: %s of %s-%d: error %d", self.name, what, part.topic, part.partition, code)
        if code == ErrorCode.FENCED_LEADER_EPOCH:
            part.fetch_state = "fenced"          # until become_follower brings a newer epoch
        else:
            part.fetch_backoff_until = time.monotonic() + self.backoff_s

    # -- before the first fetch ------------------------------------------------------
    def _truncate(self, parts: list) -> None:
        """A new follower: a log with an epoch fetches at once (divergence comes back in the
        fetch answer); one without any falls back to its high watermark, as Kafka."""
        for part in parts:
            with part.lock:
                if part.fetch_state != "truncate":
                    continue
                plog = part.log
                if plog.leader_epoch_cache.latest_epoch < 0 and plog.high_watermark < plog.log_end_offset:
                    log.info("%s-%d: no leader epoch in the log: truncating from %d to its high watermark %d",
                             part.topic, part.partition, plog.log_end_offset, plog.high_watermark)
                    with self._local(part, "truncation"):
                        plog.truncate_to(plog.high_watermark)
                part.fetch_state = "fetch"

    def _truncate_diverging(self, part, epoch: int, end: int) -> None:
        """The leader says our log diverges after `end` of its `epoch` (KIP-320): truncate
        (Kafka's getOffsetTruncationState, KIP-279), called with ``part.lock`` held."""
        plog = part.log
        leo = plog.log_end_offset
        ours_epoch, ours_end = plog.end_offset_for_epoch(epoch)
        if ours_end < 0:
            target = min(end, leo)                  # no epoch of ours up to it: the leader's end
        elif ours_epoch != epoch:
            target = min(ours_end, leo)             # the leader's epoch is unknown here: the end of
        else:                                       # our largest one below it, then fetch again
            target = min(ours_end, end, leo)
        self.truncations_on_fetch += 1
        log.info("%s-%d: diverging from leader %d (its epoch %d ends at %d): truncating from %d to %d",
                 part.topic, part.partition, self.leader_id, epoch, end, leo, target)
        before = list(plog.leader_epoch_cache.entries)
        with self._local(part, "truncation"):
            plog.truncate_to(target)         # at the log end it still cuts the epoch cache there
        if plog.log_end_offset == leo and plog.leader_epoch_cache.entries == before:
            # nothing changed: the next fetch would diverge the same way; never spin on it
            log.warning("%s-%d: truncation to %d changed nothing; backing off", part.topic, part.partition, target)
            part.fetch_backoff_until = time.monotonic() + self.backoff_s

    # -- fetching ------------------------------------------------------------------------
    def _fetch(self, conn: Connection, parts: list) -> None:
        asked = {}
        topics: dict[str, list] = {}
        view = self.manager.view
        ids = {t: _topic_uuid(view.topic_id(t)) for t in {p.topic for p in parts}}
        v = FETCH_VERSION if all(ids.values()) else FETCH_VERSION_BY_NAME
        for part in parts:
            plog = part.log
            offset = plog.log_end_offset
            asked[(part.topic if v < 13 else ids[part.topic], part.partition)] = (part, part.leader_epoch, offset)
            topics.setdefault(part.topic, []).append({
                "partition": part.partition, "current_leader_epoch": part.leader_epoch,
                "fetch_offset": offset, "last_fetched_epoch": plog.leader_epoch_cache.latest_epoch,
                "log_start_offset": plog.log_start_offset, "partition_max_bytes": self.partition_max_bytes})
        node_id = self.manager.node_id
        body = {"replica_id": node_id, "max_wait": self.max_wait_ms, "min_bytes": self.min_bytes,
                "max_bytes": self.max_bytes, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                "replica_state": {"replica_id": node_id, "replica_epoch": view.broker_epoch()},
                "topics": [{"topic": t, "topic_id": ids[t], "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [], "rack_id": ""}
        r = conn.request(ApiKey.FETCH, v, [encode(ApiKey.FETCH, v, body, response=False)])
        err, _sid, found = parse_fetch_response(r, v)
        if err:
            raise KafkaConnectionError(f"fetch from broker {self.leader_id}: error {err}")
        appended = False
        out_of_range = []
        for key, res in found.items():
            got = asked.get(key)
            if got is None:
                continue
            part, epoch, offset = got
            with part.lock:
                if not self._still_following(part, epoch) or part.fetch_state != "fetch":
                    continue
                plog = part.log
                if res.error_code:
                    if res.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        out_of_range.append((part, epoch, offset))
                    else:
                        self._back_off(part, res.error_code, "Fetch")
                    continue
                if plog.log_end_offset != offset:
                    continue                       # truncated meanwhile: the next fetch asks again
                with self._local(part, "append"):
                    if res.diverging_epoch is not None:
                        # no records then; the HW and log start are taken from the next answer
                        self._truncate_diverging(part, *res.diverging_epoch)
                        continue
                    if len(res.records):
                        appended |= self._append(plog, res.records)
                    hw = min(res.high_watermark, plog.log_end_offset)
                    if hw > plog.high_watermark:            # forward only, as Kafka's follower
                        plog.update_high_watermark(hw)
                    if res.log_start_offset > plog.log_start_offset:
                        plog.delete_records_before(min(res.log_start_offset, plog.high_watermark))
        if appended:
            self.manager.follower_appended()
        for part, epoch, offset in out_of_range:
            self._out_of_range(conn, part, epoch, offset)

    def _list_offset(self, conn: Connection, part, epoch: int, timestamp: int) -> tuple[int, int]:
        """ListOffsets of the leader as a replica: (error code, offset)."""
        v = LIST_OFFSETS_VERSION
        body = {"replica_id": self.manager.node_id, "isolation_level": 0, "topics": [{
            "name": part.topic, "partitions": [{"partition_index": part.partition,
                                                "current_leader_epoch": epoch, "timestamp": timestamp}]}]}
        r = conn.request(ApiKey.LIST_OFFSETS, v, [encode(ApiKey.LIST_OFFSETS, v, body, response=False)])
        p = read_struct(_entity(ApiKey.LIST_OFFSETS, v, True), r)["topics"][0]["partitions"][0]
        return p["error_code"], p["offset"]

    def _out_of_range(self, conn: Connection, part, epoch: int, offset: int) -> None:
        """Our fetch offset is outside the leader's log (Kafka's fetchOffsetAndTruncate): above its
        log end (an unclean election) -- cut ours to it; below its log start (it deleted what we
        never got) -- start over empty there (truncateFullyAndStartAt); else fetch again."""
        err, leader_end = self._list_offset(conn, part, epoch, -1)
        if not err:
            err, leader_start = self._list_offset(conn, part, epoch, -2)
        with part.lock:
            if not self._still_following(part, epoch) or part.fetch_state != "fetch":
                return
            if err:
                self._back_off(part, err, "ListOffsets")
                return
            plog = part.log
            if leader_end < plog.log_end_offset:
                log.warning("%s-%d: log end %d is above the leader's %d: truncating to it",
                            part.topic, part.partition, plog.log_end_offset, leader_end)
                with self._local(part, "truncation"):
                    plog.truncate_to(leader_end)
            elif plog.log_end_offset < leader_start:
                log.warning("%s-%d: log end %d is below the leader's log start %d: starting over there",
                            part.topic, part.partition, plog.log_end_offset, leader_start)
                with self._local(part, "truncation"):
                    plog.truncate_fully_and_start_at(leader_start)
            else:
                log.info("%s-%d: offset %d was out of range at leader %d; fetching again from %d",
                         part.topic, part.partition, offset, self.leader_id, plog.log_end_offset)
                part.fetch_backoff_until = time.monotonic() + self.backoff_s

    @staticmethod
    def _append(plog, records: memoryview) -> bool:
        """Append the complete batches of a fetch answer, one append per run of one epoch."""
        headers, _end = _native.list_batches(records, 0, -1, False)
        if not headers:
            return False
        first = headers[0]
        if first.base_offset < plog.log_end_offset <= first.last_offset \
                and plog.log_start_offset == plog.log_end_offset:
            # just started over at the leader's log start, which lies inside this batch: the
            # log starts at the batch (Kafka does the same); the log start follows below
            plog.truncate_fully_and_start_at(first.base_offset)
        start = first.position
        epoch = first.partition_leader_epoch
        for h in headers[1:]:
            if h.partition_leader_epoch != epoch:
                plog.append(records[start:h.position], epoch, assign_offsets=False)
                start, epoch = h.position, h.partition_leader_epoch
        last = headers[-1]
        plog.append(records[start:last.position + last.size], epoch, assign_offsets=False)
        return True


def _topic_uuid(topic_id: str | None) -> bytes | None:
    """A topic id as the view gives it as its 16 bytes; None when there is none (or it is the
    zero id, or not an id)."""
    u = topic_uuid(topic_id)
    return u.bytes if u is not None and u.int else None
