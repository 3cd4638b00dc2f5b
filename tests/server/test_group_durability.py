"""Committed offsets and groups are durable in ``__consumer_offsets``.

- A broker process killed with SIGKILL and restarted: every acknowledged
  commit is there (confluent-kafka commits, AdminClient reads them back, a new
  member of the group resumes exactly at them).
- A corrupt batch in a ``__consumer_offsets`` segment: the restart loads every
  other group's offsets, reports the bad batch (file and byte position, in
  ``GroupCoordinator.load_errors`` and the log) and skips it.
- Offsets retention (``offsets.retention.minutes``, Kafka 2.1+ rules) with an
  injected clock: offsets of Empty groups expire, tombstones make it stick
  across a restart, Empty groups without offsets are deleted.
"""

from __future__ import annotations

import logging
import os

import pytest
from confluent_kafka import Consumer, TopicPartition

import engine
from engine import _native
from engine.coordinator import GroupCoordinator, OffsetAndMetadata, partition_for
from engine.coordinator import records as rec

from .conftest import BrokerThread
from .groups_util import committed_offsets, produce, wait_until
from .test_serve_process import ServeProcess

GROUP_PROPS = ("group.initial.rebalance.delay.ms=100\n"
               "group.min.session.timeout.ms=500\n"
               "offsets.topic.num.partitions=3\n")


def test_commits_survive_broker_sigkill(tmp_path):
    srv = ServeProcess(tmp_path, extra=GROUP_PROPS).start()
    try:
        produce(srv.bootstrap, "events", 3, 20)
        c = Consumer({"bootstrap.servers": srv.bootstrap, "group.id": "durable",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "session.timeout.ms": 2000, "heartbeat.interval.ms": 300})
        c.subscribe(["events"])
        seen = []
        wait_until(lambda: (seen.extend(m for m in c.consume(100, 0.2) if m.error() is None), len(seen) >= 60)[1],
                   what="records")
        # commit a position in the middle of each partition, synchronously
        c.commit(offsets=[TopicPartition("events", p, 7 + p) for p in range(3)], asynchronous=False)
        c.close()
        before = committed_offsets(srv.bootstrap, "durable", "events", 3)
        assert before == {0: 7, 1: 8, 2: 9}
    finally:
        srv.kill9()
    srv.start()
    try:
        assert committed_offsets(srv.bootstrap, "durable", "events", 3) == {0: 7, 1: 8, 2: 9}
        c = Consumer({"bootstrap.servers": srv.bootstrap, "group.id": "durable",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "session.timeout.ms": 2000, "heartbeat.interval.ms": 300})
        c.subscribe(["events"])
        first: dict[int, int] = {}

        def all_started():
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    first.setdefault(m.partition(), m.offset())
            return len(first) == 3
        wait_until(all_started, what="the group member to resume")
        c.close()
        assert first == {0: 7, 1: 8, 2: 9}
    finally:
        code, err = srv.stop()
    assert code == 0, err


def _commit_simple(coord, group, offsets):
    res = coord.call(coord.commit_offsets, group, offsets, timeout=10)
    assert set(res.values()) == {0}, res


def test_corrupt_batch_is_reported_and_skipped(tmp_path, caplog):
    data = str(tmp_path / "data")
    cfg = {"offsets.topic.num.partitions": 1}
    with engine.open(data, cfg, background=False) as eng:
        eng.create_topic("t", 2)
        coord = eng.group_coordinator
        for i in range(5):
            _commit_simple(coord, f"g{i}", {("t", 0): 100 + i, ("t", 1): 200 + i})
        _commit_simple(coord, "g2", {("t", 1): 300})          # a second, later commit of g2
    # flip one byte inside the batch of g2's first commit (a record value: only the CRC notices)
    seg = os.path.join(data, "__consumer_offsets-0", "00000000000000000000.log")
    raw = bytearray(open(seg, "rb").read())
    headers, _ = _native.list_batches(raw, 0, -1, True)
    hits = [h for h in headers if any(rec.decode_key(k)[1] == "g2"
                                      for _o, _t, k, _v, _h in _native.decode_batch(raw, h.position))]
    assert len(hits) == 2
    bad = hits[0]
    raw[bad.position + bad.size - 3] ^= 0xFF
    with open(seg, "r+b") as f:
        f.write(raw)

    b = BrokerThread(data, cfg)
    try:
        with caplog.at_level(logging.ERROR, logger="engine.coordinator"):
            coord = b.engine.group_coordinator
            coord.wait_loaded()
        assert [(os.path.basename(e.path), e.position) for e in coord.load_errors] == \
            [("00000000000000000000.log", bad.position)]
        assert "CRC" in coord.load_errors[0].reason
        assert any(seg in r.getMessage() and f"at byte {bad.position}" in r.getMessage()
                   for r in caplog.records)
        for i in (0, 1, 3, 4):
            assert committed_offsets(b.bootstrap, f"g{i}", "t", 2) == {0: 100 + i, 1: 200 + i}
        # g2 lost only what the bad batch held; its later commit is intact
        assert committed_offsets(b.bootstrap, "g2", "t", 2) == {0: -1001, 1: 300}
    finally:
        b.stop()


class _Clock:
    def __init__(self):
        self.now = 1_700_000_000_000

    def __call__(self):
        return self.now


def test_offsets_retention(tmp_path):
    data = str(tmp_path / "data")
    cfg = {"offsets.topic.num.partitions": 2, "offsets.retention.minutes": 1,
           "group.initial.rebalance.delay.ms": 0, "group.min.session.timeout.ms": 100}
    clock = _Clock()
    minute = 60_000
    with engine.open(data, cfg, background=False) as eng:
        eng.create_topic("t", 1)
        eng.create_topic("u", 1)
        coord = GroupCoordinator(eng.node, clock=clock).start()
        try:
            # "simple": manual commits, never a member; "left": a member that commits then leaves;
            # "live": a Stable consumer group subscribed to t only, with an old commit on u
            _commit_simple(coord, "simple", {("t", 0): 1})
            sub_t = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"
            members = {}
            for g in ("left", "live"):
                j = coord.call(coord.join_group, g, "", protocol_type="consumer",
                               protocols=[("range", sub_t)], session_timeout_ms=60_000,
                               require_known_member_id=False, timeout=10)
                assert j.error_code == 0
                s = coord.call(coord.sync_group, g, j.generation_id, j.member_id, {j.member_id: b""}, timeout=10)
                assert s.error_code == 0
                res = coord.call(coord.commit_offsets, g, {("t", 0): 5, ("u", 0): 6},
                                 generation_id=j.generation_id, member_id=j.member_id, timeout=10)
                assert set(res.values()) == {0}
                members[g] = j
            clock.now += minute // 2
            assert coord.call(coord.leave_group, "left", [(members["left"].member_id, None)]).members[0][2] == 0
            # the live member keeps heartbeating (the loop clock is real; the wall clock is ours)
            clock.now += minute // 2 + 1          # simple: 1 min after its commit; left: 30 s after Empty
            assert coord.call(coord.expire_offsets) == 2            # simple t-0, live u-0
            assert coord.call(coord.fetch_offsets, "simple", None)[1] == {}
            assert coord.call(coord.fetch_offsets, "left", None)[1].keys() == {("t", 0), ("u", 0)}
            assert coord.call(coord.fetch_offsets, "live", None)[1].keys() == {("t", 0)}
            assert [g.group_id for g in coord.call(coord.list_groups)[1]] == ["left", "live"]  # simple deleted
            clock.now += minute // 2
            assert coord.call(coord.expire_offsets) == 2            # left: a minute after it became Empty
            assert sorted(g.group_id for g in coord.call(coord.list_groups)[1]) == ["live"]
            assert coord.call(coord.heartbeat, "live", members["live"].generation_id,
                              members["live"].member_id) == 0
        finally:
            coord.stop()
        # the tombstones replay: nothing comes back
        coord = GroupCoordinator(eng.node, clock=clock).start()
        try:
            coord.wait_loaded()
            assert coord.call(coord.fetch_offsets, "simple", None)[1] == {}
            assert coord.call(coord.fetch_offsets, "left", None)[1] == {}
            assert coord.call(coord.fetch_offsets, "live", None)[1] == {("t", 0): OffsetAndMetadata(
                5, -1, "", clock.now - minute - minute // 2 - 1, -1)}
            assert coord.load_errors == []
        finally:
            coord.stop()


def test_group_partition_is_kafkas(tmp_path):
    """Groups land on the partition Kafka would pick (abs(Java hashCode) % partitions)."""
    data = str(tmp_path / "data")
    with engine.open(data, {"offsets.topic.num.partitions": 7}, background=False) as eng:
        eng.create_topic("t", 1)
        coord = eng.group_coordinator
        for g in ("alpha", "beta", "gruppe-ü", "😀"):
            _commit_simple(coord, g, {("t", 0): 1})
        where = {}
        for p in range(7):
            log = eng.log("__consumer_offsets", p)
            fs = log.read(0, 1 << 20)
            blob = b"".join(s.read() for s in fs.slices)
            if blob:
                for _o, _t, key, _v, _h in _native.decode_batches(blob)[0]:
                    where[rec.decode_key(key)[1]] = p
    assert where == {g: partition_for(g, 7) for g in ("alpha", "beta", "gruppe-ü", "😀")}


@pytest.mark.parametrize("name,expected", [("hello", 99162322), ("", 0), ("😀", 1772899),
                                           ("polygenelubricants", -2147483648)])
def test_java_string_hash(name, expected):
    assert rec.java_string_hash(name) == expected
    if expected == -2147483648:
        assert partition_for(name, 7) == 0        # Kafka's Utils.abs maps MIN_VALUE to 0


def test_record_layouts_are_kafkas():
    key = rec.encode_offset_commit_key("g", "t", 3)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    val = rec.encode_offset_commit(OffsetAndMetadata(42, 5, "m", 1000))
    assert val == (b"\x00\x03" + (42).to_bytes(8, "big") + (5).to_bytes(4, "big") + b"\x00\x01m"
                   + (1000).to_bytes(8, "big"))
    assert rec.decode_offset_commit(val) == OffsetAndMetadata(42, 5, "m", 1000, -1)
    # v1 (a commit with a retention time) and v4 (flexible, what newer Kafka may write) both read
    v1 = b"\x00\x01" + (7).to_bytes(8, "big") + b"\x00\x00" + (1).to_bytes(8, "big") + (9).to_bytes(8, "big")
    assert rec.decode_offset_commit(v1) == OffsetAndMetadata(7, -1, "", 1, 9)
    v4 = b"\x00\x04" + (7).to_bytes(8, "big") + (2).to_bytes(4, "big") + b"\x02x" + (1).to_bytes(8, "big") + b"\x00"
    assert rec.decode_offset_commit(v4) == OffsetAndMetadata(7, 2, "x", 1, -1)
    assert rec.encode_group_metadata_key("g") == b"\x00\x02\x00\x01g"
    assert rec.decode_key(b"\x00\x02\x00\x01g") == ("group", "g")
    assert rec.decode_key(b"\x00\x00\x00\x01g\x00\x01t\x00\x00\x00\x01") == ("offset", "g", "t", 1)
    assert rec.decode_key(b"\x00\x05whatever") == ("other", 5)
    with pytest.raises(engine.CorruptRecordError):
        rec.decode_key(b"\x00\x01\x00\x09g")
