"""One consumer group mixing an embedded consumer (in the broker's process, on the
Engine's coordinator) with confluent-kafka members over the wire: the same
coordinator and the same consumer-protocol bytes serve both."""

from __future__ import annotations

import threading

from .groups_util import GROUP_BROKER_CONFIG, HEARTBEAT_MS, SESSION_MS, Member, produce, wait_until

PARTS = 6


class EmbeddedMember(threading.Thread):
    def __init__(self, eng, group: str, topic: str):
        super().__init__(daemon=True, name="member-embedded")
        self.c = eng.consumer(group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                              session_timeout_ms=SESSION_MS, heartbeat_interval_ms=HEARTBEAT_MS)
        self.c.subscribe([topic])
        self.consumed: list[tuple[int, int]] = []
        self.assignment: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self._stop_evt = threading.Event()

    def run(self):
        try:
            while not self._stop_evt.is_set():
                recs = self.c.poll(100)
                self.consumed += [(r.partition, r.offset) for r in recs]
                if recs:
                    self.c.commit()
                self.assignment = frozenset(tp.partition for tp in self.c.assignment())
        except BaseException as e:
            self.error = e
        finally:
            self.c.close()

    def stop(self):
        self._stop_evt.set()
        self.join(20)


def test_embedded_and_wire_members_share_a_group(make_broker):
    b = make_broker(GROUP_BROKER_CONFIG)
    b.call(lambda: b.engine.create_topic("t", PARTS))
    produce(b.bootstrap, "t", PARTS, 10)
    emb = EmbeddedMember(b.engine, "mixed", "t")
    wire = Member("confluent", b.bootstrap, "mixed", "t")
    emb.start()
    wire.start()
    try:
        wait_until(lambda: emb.assignment and wire.assignment
                   and emb.assignment | wire.assignment == frozenset(range(PARTS))
                   and not emb.assignment & wire.assignment, what="a split between embedded and wire")
        wait_until(lambda: len(emb.consumed) + len(wire.consumed) >= PARTS * 10, what="everything read")
        emb.stop()                                   # leaves: the wire member takes over at the commits
        wait_until(lambda: wire.assignment == frozenset(range(PARTS)), what="handover to the wire member")
        produce(b.bootstrap, "t", PARTS, 2, tag=b"late")
        wait_until(lambda: len(emb.consumed) + len(wire.consumed) >= PARTS * 12, what="late records")
    finally:
        emb.stop()
        wire.stop()
    assert emb.error is None and wire.error is None
    seen = emb.consumed + wire.consumed
    assert sorted(seen) == sorted({(p, o) for p in range(PARTS) for o in range(12)})   # no gap, no dup
