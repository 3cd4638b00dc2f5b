"""KIP-320: Fetch v12's LastFetchedEpoch / DivergingEpoch.  The leader checks a reader's last
fetched epoch against its leader-epoch cache (Kafka's Partition.readRecords) and answers
DivergingEpoch (epoch, end offset) instead of records when the reader's log is not a prefix of
its own; a follower truncates by KIP-279's rules and fetches on, with no OffsetForLeaderEpoch
round trip (Kafka 4.0's fetcher)."""

from __future__ import annotations

import time

import pytest

from engine._native import BatchBuilder
from engine.client.connection import Connection
from engine.protocol.fetch import parse_fetch_response
from engine.protocol.messages import ApiKey, _entity, encode, read_struct

from .conftest import produce, wait_until
from .test_replication import values_of

T = "t"


def _batch(*values: bytes) -> bytes:
    b = BatchBuilder()
    for v in values:
        b.append(v)
    return bytes(b.build())


def _craft(plog, runs) -> None:
    """Append [(epoch, [values])] to a log as a leader of each epoch would have."""
    for epoch, values in runs:
        for v in values:
            plog.append(_batch(v), leader_epoch=epoch)


def _fetch_v(address, version: int, offset: int, last_fetched_epoch: int, *, replica_id: int = -1,
             max_wait_ms: int = 0, current_leader_epoch: int = -1):
    """One Fetch of partition 0 of T: its FetchResult (engine/protocol/fetch.py's parse)."""
    part = {"partition": 0, "current_leader_epoch": current_leader_epoch, "fetch_offset": offset,
            "last_fetched_epoch": last_fetched_epoch, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    body = {"replica_id": replica_id, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": T, "partitions": [part]}], "forgotten_topics_data": [], "rack_id": ""}
    conn = Connection(*address, b"diverging-test", 30.0)
    try:
        r = conn.request(ApiKey.FETCH, version, [encode(ApiKey.FETCH, version, body, response=False)])
        err, _sid, found = parse_fetch_response(r, version)
        assert err == 0
        return found[(T, 0)]
    finally:
        conn.close()


@pytest.fixture
def single(tmp_path):
    """A single-node broker (the embedded default) over a crafted log: epochs 0 (offsets 0-1),
    2 (2-4), 5 (5-6); LEO 7."""
    import engine
    from engine.server import BackgroundBroker

    eng = engine.open(str(tmp_path / "d"), background=False)
    eng.create_topic(T, 1)
    _craft(eng.log(T, 0), [(0, [b"a", b"b"]), (2, [b"c", b"d", b"e"]), (5, [b"f", b"g"])])
    bg = BackgroundBroker(eng.node, "127.0.0.1", 0)
    yield ("127.0.0.1", bg.port), eng
    bg.stop()
    eng.close()


def test_fetch_v12_diverging_epoch_on_the_wire(single):
    address, eng = single
    assert eng.log(T, 0).leader_epoch_cache.entries == [(0, 0), (2, 2), (5, 5)]
    # consistent: epoch 2 ends at 5 >= 4 -> records, no DivergingEpoch
    res = _fetch_v(address, 12, 4, 2)
    assert res.error_code == 0 and res.diverging_epoch is None and len(res.records) > 0
    # epoch 3 is not ours: the largest below it is 2, ending at 5 -> diverging (2, 5)
    res = _fetch_v(address, 12, 6, 3)
    assert (res.error_code, res.diverging_epoch, len(res.records)) == (0, (2, 5), 0)
    assert (res.high_watermark, res.log_start_offset) == (7, 0)
    # the reader is ahead of our end of its epoch: epoch 0 ends at 2 < 3 -> diverging (0, 2)
    res = _fetch_v(address, 12, 3, 0)
    assert res.diverging_epoch == (0, 2)
    # our latest epoch ends at the log end: offset 7 in epoch 5 is fine (empty), 8 diverges
    res = _fetch_v(address, 12, 7, 5)
    assert res.error_code == 0 and res.diverging_epoch is None
    res = _fetch_v(address, 12, 8, 5)
    assert res.diverging_epoch == (5, 7)
    # an epoch newer than every one here: its end is unknown -> OFFSET_OUT_OF_RANGE (Kafka)
    res = _fetch_v(address, 12, 7, 6)
    assert res.error_code == 1
    # -1 = no last fetched epoch: not checked; v11 has no such field
    res = _fetch_v(address, 12, 3, -1)
    assert res.error_code == 0 and res.diverging_epoch is None and len(res.records) > 0
    res = _fetch_v(address, 11, 3, 0)
    assert res.error_code == 0 and res.diverging_epoch is None and len(res.records) > 0
    # a diverging answer is sent at once, not after max_wait (Kafka answers it immediately)
    t0 = time.monotonic()
    res = _fetch_v(address, 12, 8, 5, max_wait_ms=20_000)
    assert res.diverging_epoch == (5, 7) and time.monotonic() - t0 < 10


def test_diverging_epoch_field_is_kafkas_encoding(single):
    """The tagged field decodes with Kafka's own schema (kio's FetchResponse v12-v13 entity)."""
    address, _eng = single
    conn = Connection(*address, b"diverging-test", 30.0)
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": T, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 6, "last_fetched_epoch": 3,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    try:
        r = conn.request(ApiKey.FETCH, 12, [encode(ApiKey.FETCH, 12, body, response=False)])
        resp = read_struct(_entity(ApiKey.FETCH, 12, True), r)
    finally:
        conn.close()
    p = resp["responses"][0]["partitions"][0]
    assert (p["error_code"], p["high_watermark"]) == (0, 7)
    assert (p["diverging_epoch"]["epoch"], p["diverging_epoch"]["end_offset"]) == (2, 5)


def test_follower_truncates_by_diverging_epoch_in_two_rounds(cluster):
    """A follower with epochs the leader never had (KIP-279's case): each DivergingEpoch answer
    cuts it back one step until it is a prefix of the leader's log, then it catches up."""
    c = cluster(2, {"replica.lag.time.max.ms": 30000})
    for n in c.nodes.values():
        n.engine.create_topic(T, 1)
    n0, n1 = c.nodes[0], c.nodes[1]
    _craft(n0.log(T), [(1, [b"a", b"b", b"c", b"d"]), (3, [b"z"])])       # epochs (1,0) (3,4)
    _craft(n1.log(T), [(1, [b"a", b"b"]), (2, [b"p"]), (4, [b"q"])])       # epochs (1,0) (2,2) (4,3)
    cuts = []
    real = n1.log(T).truncate_to
    n1.log(T).truncate_to = lambda offset: (cuts.append(offset), real(offset))[1]
    c.elect(T, 0, 5, [0, 1], isr=[0, 1])
    wait_until(lambda: values_of(n1, T) == [b"a", b"b", b"c", b"d", b"z"], what="follower = leader")
    # leader's answers: (3, 5) for epoch 4 -> our end of epoch 2 is 3; then (1, 4) for epoch 2
    # -> both logs' epoch 1 ends at 2 (ours) -> 2; then epoch 1 is consistent and it fetches
    assert cuts == [3, 2]
    assert n1.rm._fetchers[0].truncations_on_fetch == 2
    assert n1.log(T).leader_epoch_cache.entries == [(1, 0), (3, 4)]
    wait_until(lambda: n0.log(T).high_watermark == 5, what="leader HW 5")
    assert values_of(n0, T) == [b"a", b"b", b"c", b"d", b"z"]


def test_old_leader_with_an_uncommitted_tail_truncates_via_diverging_epoch(cluster):
    """The classic failover: the old leader's acks=1 tail (epoch 1) was never replicated; the new
    leader (epoch 2) appended its own records there.  The old leader, now a follower, learns
    of the divergence from its first fetch and loses no committed record."""
    c = cluster(2, {"replica.lag.time.max.ms": 30000})
    c.create(T, [0, 1], epoch=1)
    n0, n1 = c.nodes[0], c.nodes[1]
    assert produce(n0.address, T, [b"c1", b"c2", b"c3"], acks=-1) == (0, 0)
    wait_until(lambda: n1.log(T).high_watermark == 3, what="follower HW 3")
    c.stop(1)
    assert produce(n0.address, T, [b"x1", b"x2"], acks=1) == (0, 3)     # never replicated
    n1 = c.start(1)
    c.view.set_partition(T, 0, 1, 2, [0, 1], [1], 1)
    n1.rm.become_leader(T, 0, 2, [0, 1], [1], 1)
    assert produce(n1.address, T, [b"y1"], acks=-1) == (0, 3)
    n0.rm.become_follower(T, 0, 1, 2, [0, 1], 1)
    wait_until(lambda: values_of(n0, T) == [b"c1", b"c2", b"c3", b"y1"], what="old leader truncated")
    assert n0.rm._fetchers[1].truncations_on_fetch == 1
    assert n0.log(T).leader_epoch_cache.entries == [(1, 0), (2, 3)]
    assert values_of(n1, T) == [b"c1", b"c2", b"c3", b"y1"]              # 0 committed records lost


def test_an_epoch_led_without_appends_is_dropped_by_a_follower(cluster):
    """A replica that led an epoch and appended nothing in it keeps that epoch in its cache
    (assigned at becoming leader); following the next leader, which never had it, the
    DivergingEpoch answer ends at our log end -- Kafka still cuts the cache there, else every
    fetch would diverge again (seen as a hot loop in a preferred-leader election)."""
    c = cluster(2, {"replica.lag.time.max.ms": 30000})
    c.create(T, [0, 1], epoch=0)
    n0, n1 = c.nodes[0], c.nodes[1]
    assert produce(n0.address, T, [b"a", b"b", b"c"], acks=-1) == (0, 0)
    wait_until(lambda: n1.log(T).high_watermark == 3, what="follower HW 3")
    c.elect(T, 1, 1, [0, 1], isr=[0, 1], partition_epoch=1)          # broker 1 leads epoch 1 ...
    assert n1.log(T).leader_epoch_cache.entries == [(0, 0), (1, 3)]
    c.elect(T, 0, 2, [0, 1], isr=[0, 1], partition_epoch=2)          # ... appending nothing
    assert n0.log(T).leader_epoch_cache.entries == [(0, 0), (2, 3)]
    assert produce(n0.address, T, [b"d"], acks=-1) == (0, 3)
    wait_until(lambda: values_of(n1, T) == [b"a", b"b", b"c", b"d"], what="follower caught up")
    assert n1.log(T).leader_epoch_cache.entries == [(0, 0), (2, 3)]
    assert n1.rm._fetchers[0].truncations_on_fetch == 1
