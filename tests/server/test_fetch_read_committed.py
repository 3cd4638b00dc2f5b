"""Fetch and ListOffsets under read_committed (isolation_level 1) at the wire level, every
served version from 4: reads stop at the last stable offset, the answer carries the LSO and
the aborted transactions of the range; read_uncommitted answers carry the real LSO and a
null aborted list.  Transactional data is written with the storage API (transactional
batches + append_control), as the transaction coordinator does."""

from __future__ import annotations

import time

import pytest

from engine.protocol import messages as m
from engine.records import build_batch, decode

from .test_versions import call

kio_serial = pytest.importorskip("kio.serial")


def _txn(pid, seq, tag):
    ts = int(time.time() * 1000)
    return bytearray(build_batch([(tag + b"0", None, [], ts), (tag + b"1", None, [], ts)], producer_id=pid,
                                 producer_epoch=0, base_sequence=seq, is_transactional=True))


@pytest.fixture(scope="module")
def txbroker(tmp_path_factory):
    from .conftest import BrokerThread
    b = BrokerThread(str(tmp_path_factory.mktemp("rc")))

    def fill():
        b.engine.create_topic("rc", 1)
        log = b.engine.log("rc", 0)
        log.append(bytearray(build_batch([b"plain"])))          # 0
        log.append(_txn(100, 0, b"aborted"))                    # 1-2   producer 100
        log.append(_txn(200, 0, b"committed"))                  # 3-4   producer 200
        log.append_control(100, 0, False, 1)                    # 5     ABORT 100
        log.append_control(200, 0, True, 1)                     # 6     COMMIT 200
        log.append(_txn(300, 0, b"open"))                       # 7-8   producer 300, open
        log.append(bytearray(build_batch([b"after"])))          # 9
    b.call(fill)
    yield b
    b.stop()


def fetch(port, version, isolation, offset=0):
    return call(port, 1, version, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": "rc", "partitions": [
            {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
             "current_leader_epoch": -1}]}]})


@pytest.mark.parametrize("version", range(4, m.SUPPORTED[1][1] + 1))
def test_fetch_read_committed_stops_at_the_lso_with_aborted_list(txbroker, version):
    (p,) = fetch(txbroker.port, version, 1).responses[0].partitions
    assert (int(p.error_code), p.high_watermark, p.last_stable_offset) == (0, 10, 7)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(100, 1)]
    recs = decode(bytes(p.records))
    # the client filters: the records up to the LSO, control batches skipped by the decoder
    assert [r.offset for r in recs] == [0, 1, 2, 3, 4]
    assert max(r.offset for r in recs) < 7


@pytest.mark.parametrize("version", [4, 11, m.SUPPORTED[1][1]])
def test_fetch_read_uncommitted_carries_the_lso_and_no_aborted_list(txbroker, version):
    (p,) = fetch(txbroker.port, version, 0).responses[0].partitions
    assert (p.high_watermark, p.last_stable_offset, p.aborted_transactions) == (10, 7, None)
    assert [r.offset for r in decode(bytes(p.records))][-1] == 9


def test_fetch_read_committed_at_the_lso_is_empty_with_an_empty_list(txbroker):
    (p,) = fetch(txbroker.port, 12, 1, offset=7).responses[0].partitions
    assert (int(p.error_code), p.last_stable_offset, p.aborted_transactions, bytes(p.records or b"")) == \
        (0, 7, (), b"")
    (p,) = fetch(txbroker.port, 12, 1, offset=3).responses[0].partitions   # from 3: the abort of [1, 5] overlaps
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(100, 1)]


@pytest.mark.parametrize("version", range(2, m.SUPPORTED[2][1] + 1))
def test_list_offsets_latest_under_read_committed_is_the_lso(txbroker, version):
    got = []
    for isolation in (0, 1):
        resp = call(txbroker.port, 2, version, {"replica_id": -1, "isolation_level": isolation, "topics": [
            {"name": "rc", "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1,
                                           "max_num_offsets": 1}]}]})
        got.append(resp.topics[0].partitions[0].offset)
    assert got == [10, 7]


def test_after_the_open_transaction_commits_everything_is_visible(tmp_path):
    from .conftest import BrokerThread
    b = BrokerThread(str(tmp_path / "d"))
    try:
        def fill():
            b.engine.create_topic("rc", 1)
            log = b.engine.log("rc", 0)
            log.append(_txn(7, 0, b"x"))
            return log
        log = b.call(fill)
        (p,) = fetch(b.port, 12, 1).responses[0].partitions
        assert (p.last_stable_offset, bytes(p.records or b"")) == (0, b"")
        b.call(lambda: log.append_control(7, 0, True, 0))
        (p,) = fetch(b.port, 12, 1).responses[0].partitions
        assert (p.last_stable_offset, p.aborted_transactions) == (3, ())
        assert [r.value for r in decode(bytes(p.records))] == [b"x0", b"x1"]
    finally:
        b.stop()
