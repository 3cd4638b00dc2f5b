"""engine.connect when the broker misbehaves: a typed error naming broker, topic-partition
and offset, or a retry where Kafka's clients retry -- never a hang past the configured
timeouts, never a wrong or duplicated row.  Our broker advertises a MisbehavingProxy."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

import engine
from engine.client.wire import KafkaConnectionError
from engine.errors import CorruptRecordError, EngineError

FETCH, PRODUCE = 1, 0


def _fill(bootstrap: str, topic: str, n: int = 300) -> None:
    with engine.connect(bootstrap) as eng:
        eng.create_topic(topic, 1)
        with eng.producer(**{"compression.type": "lz4"}) as p:
            p.send_batch(topic, values=[b"v%d" % i for i in range(n)], partitions=0)


def _consume(eng, topic, n, **cfg):
    c = eng.consumer(**{"auto.offset.reset": "earliest", "request.timeout.ms": 3000, **cfg})
    c.assign([(topic, 0)])
    got, deadline = [], time.monotonic() + 30
    try:
        while sum(b.num_rows for b in got) < n and time.monotonic() < deadline:
            got += c.poll_arrow(timeout_ms=300)
    finally:
        c.close()
    return pa.Table.from_batches(got, schema=engine.KAFKA_SCHEMA) if got else None


@pytest.mark.parametrize("mode", ["close", "garbage", "stall"])
def test_a_broken_fetch_answer_is_retried_without_a_wrong_row(proxied, mode):
    srv, proxy = proxied
    _fill(proxy.address, "t")
    proxy.arm(FETCH, mode, times=1)
    with engine.connect(proxy.address, **{"request.timeout.ms": 3000}) as eng:
        t0 = time.monotonic()
        table = _consume(eng, "t", 300)
    assert proxy.fired == 1
    assert table.column("offset").to_pylist() == list(range(300))          # no gap, no duplicate
    assert table.column("value").to_pylist() == [b"v%d" % i for i in range(300)]
    assert time.monotonic() - t0 < 25


def test_a_fetcher_thread_hit_by_an_unexpected_error_raises_it_once_and_reading_goes_on(proxied, monkeypatch):
    """A fetcher thread that meets an error no handler expected (a bug, here injected) does not
    die silently leaving its partitions unread: poll_arrow raises it once, a new thread takes the
    partition, and the rows come without gap or duplicate."""
    from engine.client.wire import WireClient
    srv, proxy = proxied
    _fill(proxy.address, "t")
    real, fired = WireClient.fetch_many, []

    def once(self, *a, **kw):
        if not fired:
            fired.append(1)
            raise RuntimeError("injected")
        return real(self, *a, **kw)

    monkeypatch.setattr(WireClient, "fetch_many", once)
    with engine.connect(proxy.address) as eng:
        c = eng.consumer(**{"auto.offset.reset": "earliest"})
        c.assign([("t", 0)])
        with pytest.raises(RuntimeError, match="injected"):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                assert c.poll_arrow(timeout_ms=200) == []
        got, deadline = [], time.monotonic() + 20
        while sum(b.num_rows for b in got) < 300 and time.monotonic() < deadline:
            got += c.poll_arrow(timeout_ms=200)
        c.close()
    assert pa.Table.from_batches(got).column("offset").to_pylist() == list(range(300))


@pytest.mark.parametrize("mode", ["garbage", "stall", "close"])
def test_a_broker_that_keeps_failing_fetches_is_a_typed_error_in_time(proxied, mode):
    srv, proxy = proxied
    _fill(proxy.address, "t")
    proxy.arm(FETCH, mode, times=1000)
    with engine.connect(proxy.address) as eng:
        c = eng.consumer(**{"auto.offset.reset": "earliest", "request.timeout.ms": 2000})
        c.assign([("t", 0)])
        t0 = time.monotonic()
        rows = 0
        with pytest.raises(KafkaConnectionError) as ei:
            while time.monotonic() - t0 < 20:
                rows += sum(b.num_rows for b in c.poll_arrow(timeout_ms=200))   # returns in time
        assert time.monotonic() - t0 < 12
        assert rows == 0
        msg = str(ei.value)
        assert proxy.address in msg and "t-0" in msg
        c.close()


def test_a_corrupt_batch_is_an_error_naming_broker_partition_and_offset(proxied):
    srv, proxy = proxied
    _fill(proxy.address, "t")
    proxy.arm(FETCH, "corrupt", times=1)
    with engine.connect(proxy.address) as eng:
        c = eng.consumer(**{"auto.offset.reset": "earliest"})
        c.assign([("t", 0)])
        t0 = time.monotonic()
        with pytest.raises(CorruptRecordError) as ei:
            while time.monotonic() - t0 < 20:
                assert not c.poll_arrow(timeout_ms=200)                  # no row of the bad answer
        msg = str(ei.value)
        assert proxy.address in msg and "t-0" in msg and "offset 0" in msg
        # the next poll fetches again from the same position and gets the intact records
        c.seek(("t", 0), 0)
        got = []
        while sum(b.num_rows for b in got) < 300 and time.monotonic() - t0 < 30:
            got += c.poll_arrow(timeout_ms=300)
        assert pa.Table.from_batches(got).column("offset").to_pylist() == list(range(300))
        c.close()


def test_a_lost_produce_answer_is_retried_and_the_broker_drops_the_duplicate(proxied):
    srv, proxy = proxied
    with engine.connect(proxy.address) as eng:
        eng.create_topic("t", 1)
        with eng.producer(**{"request.timeout.ms": 3000}) as p:
            p.send_batch("t", values=[b"a%d" % i for i in range(10)])
            proxy.arm(PRODUCE, "drop", times=1)                           # written, answer lost
            p.send_batch("t", values=[b"b%d" % i for i in range(10)])
            p.send_batch("t", values=[b"c%d" % i for i in range(10)])
        assert proxy.fired == 1
        vals = eng.read_arrow("t", 0).column("value").to_pylist()
    assert vals == [b"%s%d" % (x, i) for x in (b"a", b"b", b"c") for i in range(10)]


def test_idempotent_produce_across_a_broker_sigkill_has_no_duplicate(proxied):
    srv, proxy = proxied
    restarted = threading.Event()

    def kill_and_restart(mode):      # on the proxy's thread, before the client hears anything
        srv.kill9()

        def run():
            time.sleep(0.5)
            srv.start()
            restarted.set()
        threading.Thread(target=run, daemon=True).start()

    with engine.connect(proxy.address) as eng:
        eng.create_topic("t", 1)
        with eng.producer(**{"request.timeout.ms": 3000, "delivery.timeout.ms": 90000}) as p:
            p.send_batch("t", values=[b"a%d" % i for i in range(10)])
            proxy.on_fire = kill_and_restart
            proxy.arm(PRODUCE, "drop", times=1)     # the broker has the batch, the producer not the answer
            p.send_batch("t", values=[b"b%d" % i for i in range(10)])   # retried after the restart
            assert restarted.is_set()
            p.send_batch("t", values=[b"c%d" % i for i in range(10)])
        vals = eng.read_arrow("t", 0).column("value").to_pylist()
    assert vals == [b"%s%d" % (x, i) for x in (b"a", b"b", b"c") for i in range(10)]


def test_delivery_timeout_bounds_a_dead_broker(proxied):
    srv, proxy = proxied
    with engine.connect(proxy.address) as eng:
        eng.create_topic("t", 1)
        p = eng.producer(**{"request.timeout.ms": 1000, "delivery.timeout.ms": 4000, "linger.ms": 0})
        p.send_batch("t", values=[b"x"])
        srv.kill9()
        t0 = time.monotonic()
        with pytest.raises(EngineError, match="t-0"):
            p.send_batch("t", values=[b"y"])
        assert time.monotonic() - t0 < 10


def test_consumer_rides_out_a_broker_restart_without_gap_or_duplicate(proxied):
    srv, proxy = proxied
    _fill(proxy.address, "t", 300)
    with engine.connect(proxy.address) as eng:
        c = eng.consumer(**{"auto.offset.reset": "earliest", "request.timeout.ms": 20000})
        c.assign([("t", 0)])
        got, deadline = [], time.monotonic() + 30
        while sum(b.num_rows for b in got) < 300 and time.monotonic() < deadline:
            got += c.poll_arrow(timeout_ms=300)
        srv.kill9()
        assert c.poll_arrow(timeout_ms=500) == []        # no data, no error while it is down
        srv.start()
        with eng.producer() as p:
            p.send_batch("t", values=[b"w%d" % i for i in range(300)], partitions=0)
        while sum(b.num_rows for b in got) < 600 and time.monotonic() < deadline + 30:
            got += c.poll_arrow(timeout_ms=300)
        c.close()
    table = pa.Table.from_batches(got)
    assert table.column("offset").to_pylist() == list(range(600))
    assert table.column("value").to_pylist()[300:] == [b"w%d" % i for i in range(300)]
