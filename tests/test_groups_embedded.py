"""Embedded consumers in consumer groups: the Engine's own coordinator (the code the
broker serves to wire clients), reached in-process."""

from __future__ import annotations

import threading
import time

import pytest

import engine
from engine.errors import CommitFailedError, InvalidConfigError

FAST = {"group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 1000}
MEMBER = dict(auto_offset_reset="earliest", session_timeout_ms=3000, heartbeat_interval_ms=200,
              enable_auto_commit=False)


def _fill(eng, topic: str, partitions: int, per_partition: int) -> None:
    eng.create_topic(topic, partitions)
    with eng.producer() as p:
        for part in range(partitions):
            for i in range(per_partition):
                p.send(topic, b"%d-%d" % (part, i), partition=part)
        p.flush()


def _poll_until(c, pred, timeout: float = 20.0) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got += c.poll(100)
        if pred(got):
            return got
    raise AssertionError(f"condition not reached; got {len(got)} records, assignment {c.assignment()}")


class Member(threading.Thread):
    """A consumer polling in its own thread (consumers are single-threaded, as Kafka's)."""

    def __init__(self, eng, group: str, topic: str, **settings):
        super().__init__(daemon=True)
        self.c = eng.consumer(group_id=group, **{**MEMBER, **settings})
        self.c.subscribe([topic])
        self.records: list = []
        self.stop_flag = threading.Event()
        self.commit_each_poll = False
        self.error: BaseException | None = None
        self.lock = threading.Lock()

    def run(self):
        try:
            while not self.stop_flag.is_set():
                recs = self.c.poll(50)
                with self.lock:
                    self.records += recs
                    if recs and self.commit_each_poll:
                        self.c.commit()
        except BaseException as e:     # surfaced by the test
            self.error = e

    def assignment(self):
        return set(self.c.assignment())

    def finish(self, close: bool = True):
        self.stop_flag.set()
        self.join(10)
        if close:
            self.c.close()
        if self.error:
            raise self.error


def _wait(pred, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what} not reached in {timeout}s")


def test_one_member_gets_every_partition_and_commits(tmp_path):
    with engine.open(tmp_path / "d", FAST) as eng:
        _fill(eng, "t", 4, 10)
        c = eng.consumer(group_id="g", **MEMBER)
        c.subscribe("t")
        got = _poll_until(c, lambda g: len(g) == 40)
        assert sorted(tp.partition for tp in c.assignment()) == [0, 1, 2, 3]
        assert sorted(r.value for r in got) == sorted(b"%d-%d" % (p, i) for p in range(4) for i in range(10))
        c.commit()
        assert c.committed([("t", p) for p in range(4)]) == {engine.TopicPartition("t", p): 10
                                                              for p in range(4)}
        c.close()


def test_two_members_split_the_topic_disjointly(tmp_path):
    with engine.open(tmp_path / "d", FAST) as eng:
        _fill(eng, "t", 6, 20)
        a, b = Member(eng, "g", "t"), Member(eng, "g", "t")
        a.start()
        b.start()
        want = {b"%d-%d" % (p, i) for p in range(6) for i in range(20)}
        # No commits here: a partition `a` read before `b` joined is read again by its new owner
        # from the reset position (at-least-once), so the wait is on the set of values, not a count.
        _wait(lambda: len(a.assignment()) + len(b.assignment()) == 6 and a.assignment() and b.assignment()
              and {r.value for r in a.records + b.records} == want, what="a split")
        assert not (a.assignment() & b.assignment())
        assert {tp.partition for tp in a.assignment() | b.assignment()} == set(range(6))
        a.finish()
        b.finish()
        values = [r.value for r in a.records + b.records]
        assert set(values) == want


def test_leaving_member_hands_over_at_the_committed_offsets(tmp_path):
    with engine.open(tmp_path / "d", FAST) as eng:
        _fill(eng, "t", 4, 25)
        a, b = Member(eng, "g", "t"), Member(eng, "g", "t")
        a.commit_each_poll = b.commit_each_poll = True
        a.start()
        b.start()
        _wait(lambda: len(a.records) + len(b.records) == 100 and a.assignment() and b.assignment(),
              what="both members consuming")
        a_parts = a.assignment()
        a.finish()                                   # commits its positions and leaves
        _wait(lambda: b.assignment() == a_parts | b.assignment() and len(b.assignment()) == 4,
              what="survivor takes over")
        with eng.producer() as p:                    # new records after the handover
            for part in range(4):
                p.send("t", b"late-%d" % part, partition=part)
            p.flush()
        _wait(lambda: sum(1 for r in b.records if r.value.startswith(b"late")) == 4, what="late records")
        b.finish()
        all_values = [r.value for r in a.records + b.records]
        assert len(all_values) == len(set(all_values)) == 104      # nothing re-read, nothing skipped


def test_committed_offsets_survive_reopen(tmp_path):
    path = tmp_path / "d"
    with engine.open(path, FAST) as eng:
        _fill(eng, "t", 2, 10)
        c = eng.consumer(group_id="g", **MEMBER)
        c.subscribe(["t"])
        _poll_until(c, lambda g: len(g) == 20)
        c.commit({("t", 0): 7, ("t", 1): 3})
        c.close()
    with engine.open(path, FAST) as eng:
        c = eng.consumer(group_id="g", **MEMBER)
        c.subscribe(["t"])
        got = _poll_until(c, lambda g: len(g) == 10)
        assert sorted((r.partition, r.offset) for r in got) == \
            [(0, o) for o in range(7, 10)] + [(1, o) for o in range(3, 10)]
        c.close()


def test_a_silent_member_is_removed_after_the_session_timeout(tmp_path):
    with engine.open(tmp_path / "d", FAST) as eng:
        _fill(eng, "t", 4, 5)
        a, b = Member(eng, "g", "t"), Member(eng, "g", "t")
        a.start()
        b.start()
        _wait(lambda: a.assignment() and b.assignment(), what="a split")
        a.stop_flag.set()
        a.join(10)
        a.c._group.close(leave=False)               # heartbeats stop, no LeaveGroup: a crash
        t0 = time.monotonic()
        _wait(lambda: len(b.assignment()) == 4, timeout=20, what="reassignment after session timeout")
        assert time.monotonic() - t0 < 3.0 + 5.0     # session timeout 3 s + one rebalance
        b.finish()


def test_commit_after_losing_the_generation_fails_and_changes_nothing(tmp_path):
    with engine.open(tmp_path / "d", FAST) as eng:
        _fill(eng, "t", 2, 5)
        a = eng.consumer(group_id="g", **{**MEMBER, "max_poll_interval_ms": 1500})
        a.subscribe(["t"])
        _poll_until(a, lambda g: len(g) == 10)
        a.commit({("t", 0): 2})
        # b joins; a stops polling, so it is dropped after its rebalance timeout and b gets everything
        b = Member(eng, "g", "t")
        b.start()
        _wait(lambda: len(b.assignment()) == 2, what="b owns the topic")
        with pytest.raises(CommitFailedError):
            a.commit({("t", 0): 5})
        assert a.committed([("t", 0)])[engine.TopicPartition("t", 0)] == 2
        b.finish()
        a.close()


def test_embedded_member_settings_are_checked(tmp_path):
    with engine.open(tmp_path / "d", FAST) as eng:
        eng.create_topic("t", 1)
        with pytest.raises(InvalidConfigError, match="assignment strategy"):
            eng.consumer(group_id="g", partition_assignment_strategy="sticky")
        with pytest.raises(InvalidConfigError, match="group_id"):
            eng.consumer().subscribe(["t"])
        c = eng.consumer(group_id="g")
        c.assign([("t", 0)])
        c.close()


def test_read_only_open_without_a_broker_says_how_to_join(tmp_path):
    path = tmp_path / "d"
    with engine.open(path) as eng:
        eng.create_topic("t", 1)
    with engine.open(path, read_only=True) as ro:
        with pytest.raises(InvalidConfigError, match="read-only"):
            ro.consumer(group_id="g")


def test_compacted_offsets_topic_keeps_the_latest_commits(tmp_path):
    """__consumer_offsets is a compacted topic: after the cleaner rewrites it, a restart
    still gives back the latest commit of every partition (and the log shrank)."""
    path = tmp_path / "d"
    with engine.open(path, {**FAST, "offsets.topic.num.partitions": 1}) as eng:
        _fill(eng, "t", 2, 1)
        c = eng.consumer(group_id="g", **MEMBER)
        c.subscribe(["t"])
        _poll_until(c, lambda g: len(g) == 2)
        for i in range(300):
            c.commit({("t", 0): i, ("t", 1): 1000 + i})
        c.close()
        log = eng.log("__consumer_offsets", 0)
        before = log.size
        log.roll()
        stats = log.clean(force=True)
        assert stats.records_removed > 0 and log.size < before / 4
    with engine.open(path, FAST) as eng:
        c = eng.consumer(group_id="g", **MEMBER)
        assert c.committed([("t", 0), ("t", 1)]) == {engine.TopicPartition("t", 0): 299,
                                                      engine.TopicPartition("t", 1): 1299}
        c.close()


def test_members_survive_the_hosting_broker_stopping(tmp_path):
    """While a broker serves the engine it hosts the coordinator; when it stops, the engine's
    own coordinator takes over from __consumer_offsets and in-process members rejoin."""
    with engine.open(tmp_path / "d", FAST) as eng:
        _fill(eng, "t", 2, 5)
        srv = eng.serve("127.0.0.1:0")
        hosted = eng.group_coordinator
        c = eng.consumer(group_id="g", **MEMBER)
        c.subscribe(["t"])
        _poll_until(c, lambda g: len(g) == 10)
        c.commit()
        srv.stop()
        assert eng.group_coordinator is not hosted and eng.group_coordinator.running
        with eng.producer() as p:
            p.send("t", b"after", partition=0)
        got = _poll_until(c, lambda g: len(g) == 1)
        assert [r.value for r in got] == [b"after"]          # resumed at the commit: no re-read
        assert len(c.assignment()) == 2
        c.close()


def test_static_member_restarts_without_a_rebalance(tmp_path):
    """group_instance_id (KIP-345): a static member that closes does not leave; its
    replacement with the same instance id takes the same partitions in the same generation."""
    with engine.open(tmp_path / "d", FAST) as eng:
        _fill(eng, "t", 3, 4)
        a = eng.consumer(group_id="g", group_instance_id="host-1", **MEMBER)
        a.subscribe(["t"])
        _poll_until(a, lambda g: len(g) == 12)
        a.commit()
        gen = a._group.generation_id
        a.close()                                     # static: no LeaveGroup
        desc = eng.group_coordinator.call(eng.group_coordinator.describe_groups, ["g"], timeout=10)
        assert desc[0].state == "Stable" and len(desc[0].members) == 1
        b = eng.consumer(group_id="g", group_instance_id="host-1", **MEMBER)
        b.subscribe(["t"])
        assert b.poll(500) == []                      # resumes at the commits: nothing re-read
        assert sorted(tp.partition for tp in b.assignment()) == [0, 1, 2]
        assert b._group.generation_id == gen
        b.close()


def test_a_deleted_topics_committed_offsets_go_with_it(tmp_path):
    """Kafka drops a group's committed offsets of a deleted topic's partitions (tombstones): a
    topic created again under the name is read from its start, not from the old topic's
    offsets (which would skip the new one's first records, as a Kafka Streams application
    reset -- its internal topics deleted and made again -- showed).  Offsets of other topics
    stay, and the removal survives a restart (replay)."""
    path = tmp_path / "d"
    t, keep = engine.TopicPartition, engine.TopicPartition("keep", 0)
    with engine.open(path, FAST) as eng:
        _fill(eng, "t", 2, 10)
        _fill(eng, "keep", 1, 10)
        c = eng.consumer(group_id="g", **MEMBER)
        c.subscribe(["t", "keep"])
        _poll_until(c, lambda g: len(g) == 30)
        c.commit({("t", 0): 7, ("t", 1): 3, ("keep", 0): 5})
        c.close()
        eng.delete_topic("t")
        c = eng.consumer(group_id="g", **MEMBER)
        deadline = time.monotonic() + 10
        while c.committed([("t", 0), ("t", 1)]) != {t("t", 0): None, t("t", 1): None}:
            assert time.monotonic() < deadline, f"still committed: {c.committed([('t', 0), ('t', 1)])}"
            time.sleep(0.05)
        assert c.committed([keep]) == {keep: 5}
        c.close()
        _fill(eng, "t", 2, 2)                       # the name again: a new topic
        c = eng.consumer(group_id="g", **MEMBER)
        c.subscribe(["t"])
        got = _poll_until(c, lambda g: len(g) == 4)
        assert sorted((r.partition, r.offset) for r in got) == [(0, 0), (0, 1), (1, 0), (1, 1)]
        c.close()
    with engine.open(path, FAST) as eng:
        c = eng.consumer(group_id="g", **MEMBER)
        assert c.committed([("t", 0), ("t", 1), keep]) == {t("t", 0): None, t("t", 1): None, keep: 5}
        c.close()
