"""The load a network-partition scenario runs under (engine/chaos/scenarios.py): an
idempotent acks=all confluent-kafka producer (client id ``scenario-producer``) sending 0, 1, 2, ...
round-robin over a topic's partitions, and a consumer group member (``scenario-group``,
read_committed) reading them; then the verdict: what was acknowledged, lost (acknowledged but not
in the topic), duplicated (in the topic twice), and the longest pause between acknowledgements.

::

    w = Workload(bootstrap, topic, partitions=3).start()
    ...                                  # cut and heal links
    v = w.finish()                       # {"acked", "lost", "dup", "errors", "group_missing", "hw"}
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
import uuid

__all__ = ["PRODUCER_ID", "Workload", "read_all"]

PRODUCER_ID = "scenario-producer"
GROUP_CLIENT_ID = "scenario-group"


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
             ) -> tuple[list[bytes], dict[int, int]]:
    """Every value of `topic` up to its partitions' high watermarks, read_committed, by a fresh
    consumer; and those high watermarks.  Waits (up to `timeout`) for the last stable offset to
    reach the high watermark first -- no transaction left open, its markers written -- so what
    read_committed returns is final; AssertionError if it does not."""
    from confluent_kafka import Consumer, TopicPartition

    def consumer(isolation: str):
        return Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "group.id": f"check-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                         "isolation.level": isolation, "auto.offset.reset": "earliest"})
    deadline = time.monotonic() + timeout
    raw, c = consumer("read_uncommitted"), consumer("read_committed")
    try:
        while True:     # (ListOffsets answers the HW to read_uncommitted, the LSO to read_committed)
            hw = {p: raw.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
            lso = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
            if lso == hw:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: the last stable offsets {lso} stay below the high watermarks "
                                     f"{hw} for {timeout:.0f}s: a transaction left open")
            time.sleep(0.2)
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[bytes] = []
        while time.monotonic() < deadline:
            for msg in c.consume(1000, 0.5):
                if msg.error() is None and (v := msg.value()) is not None:
                    got.append(v)
            pos = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic, p) for p in hw])}
            if all(hw[p] == 0 or pos[p] >= hw[p] for p in hw):
                break
        return got, hw
    finally:
        raw.close()
        c.close()


class Workload:
    """The producer and the group consumer of one scenario (see the module's text)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 1, window: int = 200, acks: str = "all",
                 debug_path: str | None = None, producer_conf: dict | None = None):
        """`acks` other than "all" (a setting that gives durability up) also turns idempotence off.
        `debug_path`: the producer's librdkafka debug log (``broker,topic,msg,eos``) goes there.
        `producer_conf`: more producer settings (a scenario's ``request.timeout.ms``)."""
        from confluent_kafka import Producer
        self.bootstrap, self.topic, self.partitions, self.window = bootstrap, topic, partitions, window
        self.acks = acks
        conf: dict = {"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                      "client.id": PRODUCER_ID, "enable.idempotence": acks == "all", "acks": acks,
                      "linger.ms": 2, "delivery.timeout.ms": 120000, "retry.backoff.ms": 50,
                      "retry.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 2000,
                      **(producer_conf or {})}
        self._debug_handler: logging.Handler | None = None
        if debug_path is not None:
            logger = logging.getLogger(f"{__name__}.{topic}")
            logger.propagate = False
            logger.setLevel(logging.DEBUG)
            self._debug_handler = logging.FileHandler(debug_path)
            self._debug_handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            logger.addHandler(self._debug_handler)
            conf.update({"debug": "broker,topic,msg,eos", "logger": logger})
        self.p = Producer(conf)
        self.acked: list[int] = []
        self.ack_walls: list[float] = []
        self.errors: list[str] = []
        self.group_seen: set[int] = set()
        self.sent = 0
        self._stop = threading.Event()
        self._stop_group = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._consume, daemon=True)]

    def start(self) -> Workload:
        for t in self._threads:
            t.start()
        return self

    def _report(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.append(int(msg.value()))
            self.ack_walls.append(time.time())

    def _produce(self) -> None:
        try:
            while not self._stop.is_set():
                if self.sent - len(self.acked) - len(self.errors) < self.window:
                    try:
                        self.p.produce(self.topic, str(self.sent).encode(), partition=self.sent % self.partitions,
                                       on_delivery=self._report)
                        self.sent += 1
                    except BufferError:
                        pass
                self.p.poll(0.001 if self.sent % 50 else 0)
            self.p.flush(120)
        except Exception as e:      # noqa: BLE001 - a fatal producer error is a result, not a crash
            self.errors.append(f"fatal: {e!r}")

    def _consume(self) -> None:
        from confluent_kafka import Consumer
        c = Consumer({"bootstrap.servers": self.bootstrap, "broker.address.family": "v4",
                      "client.id": GROUP_CLIENT_ID, "group.id": f"scenario-{self.topic}",
                      "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        c.subscribe([self.topic])
        try:
            while not self._stop_group.is_set():
                for msg in c.consume(500, 0.2):
                    if msg.error() is None and (v := msg.value()) is not None:
                        self.group_seen.add(int(v))
        finally:
            with contextlib.suppress(Exception):
                c.close()

    def wait_acked(self, n: int, timeout: float = 60.0) -> None:
        """Until `n` more acknowledgements than now."""
        target = len(self.acked) + n
        deadline = time.monotonic() + timeout
        while len(self.acked) < target:
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {n} acknowledgements "
                                     f"({len(self.acked) - target + n} came; errors: {self.errors[:3]})")
            time.sleep(0.05)

    def max_gap(self, since: float = 0.0) -> tuple[float, float]:
        """(longest pause between acknowledgements after wall time `since`, when it began); the
        pause running at `since` counts from the acknowledgement before it."""
        before = [t for t in self.ack_walls if t < since]
        walls = before[-1:] + [t for t in self.ack_walls if t >= since]
        return max(((b - a, a) for a, b in itertools.pairwise(walls)), default=(0.0, since))

    def finish(self, group_timeout: float = 30.0) -> dict:
        """Stop producing (everything in flight delivered), read the topic afresh, let the group
        member catch up; the verdict."""
        self._stop.set()
        self._threads[0].join(180)
        with contextlib.suppress(Exception):     # (closed: a producer left alive retries forever)
            self.p.purge()
            self.p.poll(0)
            self.p.close()
        if self._debug_handler is not None:
            self._debug_handler.close()
        values, hw = read_all(self.bootstrap, self.topic, self.partitions)
        seen: dict[int, int] = {}
        for v in values:
            if int(v) >= 0:                                    # (-1: a scenario's probe record)
                seen[int(v)] = seen.get(int(v), 0) + 1
        acked = set(self.acked)
        deadline = time.monotonic() + group_timeout
        while not acked <= self.group_seen and time.monotonic() < deadline:
            time.sleep(0.1)
        self._stop_group.set()
        self._threads[1].join(30)
        return {"acked": len(acked), "lost": len(acked - set(seen)),
                "dup": sum(1 for n in seen.values() if n > 1), "errors": list(self.errors),
                "group_missing": len(acked - self.group_seen), "hw": hw}
