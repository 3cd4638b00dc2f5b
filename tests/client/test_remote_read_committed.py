"""The remote Arrow consumer (engine.connect) under transactions, against our broker: with
``isolation.level=read_committed`` it sends isolation_level 1, stops at the last stable
offset and the native scanner drops aborted records from each Fetch answer's list; with the
default read_uncommitted it sees every data record; markers are never rows."""

from __future__ import annotations

import time

import pytest

import engine
from tests.server.conftest import BrokerThread
from tests.txn_data import fill


@pytest.fixture(scope="module")
def txbroker(tmp_path_factory):
    b = BrokerThread(str(tmp_path_factory.mktemp("remote-rc")))

    def setup():
        b.engine.create_topic("tx", partitions=1, config={"segment.bytes": 2048})
        return fill(b.engine.log("tx", 0)), b.engine.log("tx", 0)
    (b.committed, b.uncommitted), b.log = b.call(setup)
    yield b
    b.stop()


def _drain(c, end: int, timeout_s: float = 30.0) -> list[bytes]:
    tp = engine.TopicPartition("tx", 0)
    out, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for b in c.poll_arrow(max_records=50, timeout_ms=200):
            out += b.column("value").to_pylist()
        if c.position(tp) >= end:
            break
    return out


@pytest.mark.parametrize("small", [False, True], ids=["one-fetch", "many-fetches"])
def test_remote_consumer_read_committed(txbroker, small):
    lso = txbroker.call(lambda: txbroker.log.last_stable_offset)
    settings = {"isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    if small:
        settings["max.partition.fetch.bytes"] = 300     # answers end inside transactions
    with engine.connect(txbroker.bootstrap, **settings) as eng:
        c = eng.consumer()
        c.assign([("tx", 0)])
        tp = engine.TopicPartition("tx", 0)
        assert c.end_offsets([tp])[tp] == lso
        assert _drain(c, lso) == txbroker.committed
        c.close()


def test_remote_consumer_read_uncommitted_sees_every_data_record(txbroker):
    hw = txbroker.call(lambda: txbroker.log.high_watermark)
    with engine.connect(txbroker.bootstrap, **{"auto.offset.reset": "earliest"}) as eng:
        c = eng.consumer()
        c.assign([("tx", 0)])
        assert _drain(c, hw) == txbroker.uncommitted
        c.close()


def test_remote_read_arrow_isolation_levels(txbroker):
    with engine.connect(txbroker.bootstrap, **{"max.partition.fetch.bytes": 400}) as eng:
        assert eng.read_arrow("tx", 0)["value"].to_pylist() == txbroker.uncommitted
        t = eng.read_arrow("tx", 0, isolation_level="read_committed")
        assert t["value"].to_pylist() == txbroker.committed
