"""The read-ahead of the remote consumer (engine/client/arrow_consumer.py): one fetcher
thread per broker, each with its own ``WireClient`` (its own connection and fetch session,
engine/client/fetch_session.py) fetching the assigned partitions that broker leads.

:class:`Fetchers` holds what the threads share: the positions to fetch from (``next``),
the generation (a seek or a rebalance starts a new one), the leader of each partition
(``leaders``) and the queue of results ``(gen, tp, fetched_at, batch_or_error, next_offset)``.
A partition whose leader is unknown or moved is looked up again by any fetcher thread; a
thread is started for a leader that has none yet.
"""

from __future__ import annotations

import queue
import threading
import time

from .. import _native
from ..errors import CorruptRecordError, ErrorCode, KafkaApiError, OffsetOutOfRangeError
from ._types import TopicPartition
from .wire import KafkaConnectionError, WireClient

__all__ = ["Fetchers"]

_READ_AHEAD = 4      # fetch answers scanned ahead of the caller, per broker


class Fetchers:
    def __init__(self, make_client, cfg: dict):
        self.make_client = make_client
        self.cfg = cfg
        self.out: queue.Queue = queue.Queue()
        self.cond = threading.Condition()
        self.gen = 0
        self.next: dict[TopicPartition, int] = {}     # where the fetchers read next
        self.leaders: dict[TopicPartition, int] = {}  # tp -> node id of its leader
        self.epochs: dict[TopicPartition, int] = {}   # tp -> its leader epoch (-1: unknown)
        self.threads: dict[int, _Fetcher] = {}
        self.stopped = False

    def restart(self, positions: dict[TopicPartition, int], client: WireClient) -> int:
        """Fetch `positions` from now on (a new generation); leaders found with `client`."""
        found = {}
        for tp in positions:
            try:
                found[tp] = client.leader(tp.topic, tp.partition, retry=False)
            except (KafkaApiError, KafkaConnectionError):
                pass                                   # no leader now: a fetcher thread asks again
        with self.cond:
            self.gen += 1
            self.next = dict(positions)
            self.leaders.update(found)
            self.epochs.update({tp: client.leader_epoch(tp.topic, tp.partition) for tp in found})
            while not self.out.empty():
                try:
                    self.out.get_nowait()
                except queue.Empty:
                    break
            for node in set(found.values()):
                self._ensure(node)
            if not self.threads and positions:
                self._ensure(-1)                        # someone to look the leaders up
            self.cond.notify_all()
            return self.gen

    def _ensure(self, node: int) -> None:
        """A fetcher thread for broker `node` (caller holds cond)."""
        if node not in self.threads and not self.stopped:
            t = self.threads[node] = _Fetcher(self, node)
            t.start()

    def stop(self, timeout: float) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
            threads = list(self.threads.values())
        for t in threads:
            t.join(timeout=timeout)

    def sessions(self) -> list:
        """The fetch sessions of every fetcher thread (engine/client/fetch_session.py)."""
        return [fs for t in list(self.threads.values()) for fs in t.client._fetch_sessions.values()]


class _Fetcher(threading.Thread):
    """Fetches the partitions broker `node` leads (node -1: only looks leaders up)."""

    def __init__(self, shared: Fetchers, node: int):
        super().__init__(name=f"remote-consumer-fetcher-{node}", daemon=True)
        self.shared = shared
        self.node = node
        self.cfg = shared.cfg
        self.client: WireClient = shared.make_client()
        self.failing_since: float | None = None

    def run(self) -> None:
        try:
            self._loop()
        except Exception as e:  # noqa: BLE001 - a fetcher never dies silently, leaving its partitions unread
            sh = self.shared
            with sh.cond:
                if sh.threads.get(self.node) is self:
                    del sh.threads[self.node]
                for tp in [tp for tp, n in sh.leaders.items() if n == self.node]:
                    del sh.leaders[tp]              # looked up again, and a new thread started for them
                if sh.next and not sh.threads:
                    sh._ensure(-1)
                gen = sh.gen
            sh.out.put((gen, None, None, e, None))  # raised from poll_arrow
        finally:
            self.client.close()

    def _loop(self) -> None:
        sh, cfg = self.shared, self.cfg
        timeout_s = cfg["request.timeout.ms"] / 1000.0
        backoff = cfg["retry.backoff.ms"] / 1000.0
        while True:
            with sh.cond:
                while not sh.stopped and (
                        not sh.next or sh.out.qsize() >= _READ_AHEAD * max(len(sh.threads), 1)):
                    sh.cond.wait(0.05)
                if sh.stopped:
                    return
                gen = sh.gen
                unknown = [tp for tp in sh.next if tp not in sh.leaders]
                mine = {tp: o for tp, o in sh.next.items() if sh.leaders.get(tp) == self.node}
                epochs = {(tp.topic, tp.partition): sh.epochs.get(tp, -1) for tp in mine}
            if unknown:
                # one Metadata request per topic (the first lookup fills its partitions); a
                # partition without a leader (an election under way) does not hold up the others
                for tp in unknown:
                    self.client.forget_leader(tp.topic, tp.partition)
                found, failed, err = {}, [], None
                for tp in unknown:
                    try:
                        found[tp] = self.client.leader(tp.topic, tp.partition, retry=False)
                    except (KafkaApiError, KafkaConnectionError) as e:
                        failed.append(tp)
                        err = e
                if failed:
                    self._failed(gen, err, failed, timeout_s, backoff)
                    if not found:
                        continue
                with sh.cond:
                    sh.leaders.update(found)
                    sh.epochs.update({tp: self.client.leader_epoch(tp.topic, tp.partition) for tp in found})
                    for node in set(found.values()):
                        sh._ensure(node)
                    for tp, n in found.items():
                        if n == self.node and tp in sh.next:
                            mine[tp] = sh.next[tp]
                            epochs[(tp.topic, tp.partition)] = sh.epochs[tp]
            if not mine:
                with sh.cond:
                    sh.cond.wait(0.05)
                continue
            try:
                res = self.client.fetch_many(
                    self.node, {(tp.topic, tp.partition): o for tp, o in mine.items()},
                    max_wait_ms=cfg["fetch.max.wait.ms"], min_bytes=cfg["fetch.min.bytes"],
                    max_bytes=cfg["fetch.max.bytes"], partition_max_bytes=cfg["max.partition.fetch.bytes"],
                    session=True, isolation_level=1 if str(cfg["isolation.level"]) == "read_committed" else 0,
                    epochs=epochs, reuse_buffer=True)   # scanned (copied out) before the next Fetch
            except (KafkaApiError, KafkaConnectionError) as e:
                self._failed(gen, e, list(mine), timeout_s, backoff,
                             broker=self.client.node_address(self.node))
                continue
            self.failing_since = None
            moved = self._scan(gen, mine, res)
            del res                     # no view of the receive buffer outlives the scan
            if moved:
                time.sleep(backoff)     # a leader moved (or an epoch is not there yet): not in a tight loop

    def _forget_leader(self, tp: TopicPartition) -> None:
        self.client.forget_leader(tp.topic, tp.partition)
        with self.shared.cond:
            self.shared.leaders.pop(tp, None)
            self.shared.epochs.pop(tp, None)

    def _failed(self, gen, e, tps, timeout_s, backoff, broker=None) -> None:
        now = time.monotonic()
        if self.failing_since is None:
            self.failing_since = now
        for tp in tps:
            self._forget_leader(tp)
        if now - self.failing_since >= timeout_s or (isinstance(e, KafkaApiError) and not e.retriable):
            where = ", ".join(f"{tp.topic}-{tp.partition}" for tp in tps)
            err = KafkaConnectionError(f"fetch of {where} from {broker or 'the cluster'} failed for "
                                       f"{now - self.failing_since:.1f}s (request.timeout.ms): {e}") \
                if isinstance(e, KafkaConnectionError) else e
            self.shared.out.put((gen, None, None, err, None))
            self.failing_since = None
        time.sleep(backoff)

    def _scan(self, gen: int, offsets: dict, res: dict) -> bool:
        """Hand the answer's record batches out; True if a partition's leader is to be looked
        up again (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, ...)."""
        sh = self.shared
        moved = False
        check = self.cfg["check.crcs"]
        for tp, off in offsets.items():
            r = res.get((tp.topic, tp.partition))
            if r is None:
                continue        # incremental fetch session: nothing new for this partition
            if r.error_code:
                if r.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    sh.out.put((gen, tp, off, OffsetOutOfRangeError(
                        f"offset {off} is out of range for {tp.topic}-{tp.partition} "
                        f"(log start {r.log_start_offset}, high watermark {r.high_watermark})"), None))
                    with sh.cond:
                        if sh.gen == gen:
                            sh.next.pop(tp, None)
                else:
                    self._forget_leader(tp)             # leader moved: ask again
                    moved = True
                continue
            if not len(r.records):
                continue
            sc = _native.ColumnScanner(check_crc=check)
            if r.aborted_transactions is not None:      # read_committed: drop aborted records natively
                sc.set_aborted(r.aborted_transactions)
            try:
                nxt, _ = sc.feed(r.records, 0, -1, off)
            except CorruptRecordError as e:
                err = CorruptRecordError(
                    f"corrupt record batch from broker {self.client.node_address(self.node)} for "
                    f"{tp.topic}-{tp.partition} fetched at offset {off}: {e}")
                sh.out.put((gen, tp, off, err, None))
                with sh.cond:
                    if sh.gen == gen:
                        sh.next.pop(tp, None)
                continue
            if nxt <= off:
                continue        # only a partial batch: max.partition.fetch.bytes too small, fetch again
            batch = sc.finish(tp.topic, tp.partition, as_table=False)
            with sh.cond:
                if sh.gen != gen:
                    return moved
                if sh.next.get(tp) != off:
                    continue    # another fetcher (a leader that moved) got there first: one chain of positions
                sh.next[tp] = nxt
            sh.out.put((gen, tp, off, batch, nxt))
        return moved
