"""Pipelined produce (max.in.flight.requests.per.connection): several Produce requests in
flight on one connection, answers matched by correlation id, and -- with idempotence -- no
duplicate and no reordering when an answer is lost in the middle of the pipeline (the
batches from the lost one on are sent again in order; the broker drops what it has)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import engine
from engine.client.wire import WireClient
from engine.errors import InvalidConfigError

PRODUCE = 0


def _values(tag: bytes, n: int) -> pa.Array:
    return pa.array([tag + b"-%05d" % i + b"x" * 200 for i in range(n)], pa.binary())


def test_several_produce_requests_in_flight_are_answered_in_order(cluster, topic_name):
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 1)
        with WireClient(cluster) as w:
            pid, epoch = w.init_producer_id()
            from engine.client.arrow_producer import stamp_batch
            batches = list(engine._native.build_batches(_values(b"w", 500), None, None, None, 0, 16384))
            seq = 0
            for b in batches:
                seq += stamp_batch(b, pid, epoch, seq)
            assert len(batches) >= 5
            sent = [w.produce_send(topic_name, 0, [b]) for b in batches[:5]]   # all before any answer
            assert len({s[0] for s in sent}) == 1                                # one connection
            assert [s[2] for s in sent] == list(range(sent[0][2], sent[0][2] + 5))
            bases = [w.produce_receive(s) for s in sent]
        counts = [engine._native.list_batches(b)[0][0].records_count for b in batches[:5]]
        assert bases == [sum(counts[:i]) for i in range(5)]


def test_send_batch_pipelines_and_keeps_order(cluster, topic_name):
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 1)
        with eng.producer(**{"batch.size": 4096, "max.in.flight.requests.per.connection": 5}) as p:
            res = p.send_batch(topic_name, values=_values(b"a", 2000), partitions=0)
        assert len(res) > 10
        assert [r[1] for r in res] == [sum(r[2] for r in res[:i]) for i in range(len(res))]
        t = eng.read_arrow(topic_name, 0)
        assert t.column("value").to_pylist() == _values(b"a", 2000).to_pylist()


@pytest.mark.parametrize("mode,after", [("drop", 2), ("close", 3), ("garbage", 1)])
def test_a_lost_answer_mid_pipeline_leaves_no_duplicate_and_no_gap(proxied, mode, after):
    srv, proxy = proxied
    with engine.connect(proxy.address) as eng:
        eng.create_topic("t", 1)
        with eng.producer(**{"batch.size": 4096, "request.timeout.ms": 5000, "retry.backoff.ms": 50}) as p:
            p.send_batch("t", values=_values(b"a", 10), partitions=0)
            proxy.arm(PRODUCE, mode, times=1, after=after)   # a response in the middle of a window
            res = p.send_batch("t", values=_values(b"b", 1000), partitions=0)
            p.send_batch("t", values=_values(b"c", 10), partitions=0)
        assert proxy.fired == 1
        assert len(res) > after + 2
        vals = eng.read_arrow("t", 0).column("value").to_pylist()
    want = _values(b"a", 10).to_pylist() + _values(b"b", 1000).to_pylist() + _values(b"c", 10).to_pylist()
    assert len(vals) == len(want)
    assert vals == want


def test_futures_path_pipelines_a_window_of_many_batches(proxied):
    srv, proxy = proxied
    with engine.connect(proxy.address) as eng:
        eng.create_topic("f", 1)
        with eng.producer(**{"batch.size": 2048, "linger.ms": 60000, "request.timeout.ms": 5000}) as p:
            fs = [p.send("f", b"f-%05d" % i + b"y" * 100, partition=0) for i in range(400)]
            proxy.arm(PRODUCE, "drop", times=1, after=2)
            p.flush()
            offs = [f.result(10).offset for f in fs]
        assert proxy.fired == 1
        vals = eng.read_arrow("f", 0).column("value").to_pylist()
    assert vals == [b"f-%05d" % i + b"y" * 100 for i in range(400)]
    assert offs == list(range(400))


def test_in_flight_settings_as_kafka(ours):
    with engine.connect(ours.bootstrap) as eng:
        with pytest.raises(InvalidConfigError, match="at most 5"):
            eng.producer(**{"enable.idempotence": True, "max.in.flight.requests.per.connection": 6})
        with pytest.raises(InvalidConfigError):
            eng.producer(**{"max.in.flight.requests.per.connection": 0})
        with eng.producer(**{"max.in.flight.requests.per.connection": 6}) as p:   # idempotence off
            assert p.producer_id == (-1, -1)


def _produce_requests(frames: list[bytes]) -> list[list[tuple[str, int, int]]]:
    """[(topic, partition, records_count)] per recorded Produce request, read with the broker's parser."""
    from engine.protocol.frames import parse_request_header
    from engine.protocol.messages import FLEXIBLE_FROM, parse_produce_request

    out = []
    for f in frames:
        version = int.from_bytes(f[2:4], "big")
        _, r = parse_request_header(memoryview(f), version >= FLEXIBLE_FROM[PRODUCE])
        req = parse_produce_request(r, version)
        out.append([(t, p.index, sum(h.records_count for h in engine._native.list_batches(p.records)[0]))
                    for t, parts in req.topics for p in parts])
    return out


def test_one_request_per_broker_carries_every_partitions_next_batch(proxied):
    # Kafka's Sender drains per node: a request holds one batch of each ready partition the
    # broker leads, several requests in flight; each partition's rows stay in order
    srv, proxy = proxied
    n = 3000
    with engine.connect(proxy.address) as eng:
        eng.create_topic("m", 3)
        proxy.record(PRODUCE)
        with eng.producer(**{"batch.size": 4096}) as p:
            res = p.send_batch("m", values=_values(b"m", n), partitions=pa.array([i % 3 for i in range(n)]))
        reqs = _produce_requests(proxy.recorded)
        tables = [eng.read_arrow("m", q) for q in range(3)]
    assert sum(c for _, _, c in res) == n
    for q in range(3):                                          # base offsets contiguous per partition
        mine = [(base, c) for part, base, c in res if part == q]
        assert [b for b, _ in mine] == [sum(c for _, c in mine[:i]) for i in range(len(mine))]
        assert tables[q].column("value").to_pylist() == [v for i, v in enumerate(_values(b"m", n).to_pylist())
                                                         if i % 3 == q]
    assert all(len({tp[:2] for tp in r}) == len(r) for r in reqs)   # at most one batch per partition
    assert max(len(r) for r in reqs) == 3                           # all three partitions in one request
    assert len(reqs) < len(res)                                     # fewer requests than batches
    assert sum(c for r in reqs for _, _, c in r) == n               # nothing sent twice


def test_futures_of_several_partitions_share_requests(proxied):
    srv, proxy = proxied
    with engine.connect(proxy.address) as eng:
        eng.create_topic("s", 3)
        proxy.record(PRODUCE)
        with eng.producer(**{"linger.ms": 60000}) as p:
            fs = [p.send("s", b"s-%04d" % i, partition=i % 3) for i in range(300)]
            p.flush()
            meta = [f.result(10) for f in fs]
        reqs = _produce_requests(proxy.recorded)
    assert [(m.partition, m.offset) for m in meta] == [(i % 3, i // 3) for i in range(300)]
    assert reqs == [[("s", 0, 100), ("s", 1, 100), ("s", 2, 100)]]


@pytest.mark.parametrize("path", ["send_batch", "futures_then_table"])
def test_a_refused_first_batch_is_not_overtaken_by_the_next(proxied, path):
    # A broker with no state for a producer id takes any sequence (Kafka 4.0's
    # ProducerAppendInfo.checkSequence).  Were a partition's second batch in flight while its
    # first is unanswered, a retriable refusal of the first (Kafka 4.0 answers
    # NOT_LEADER_OR_FOLLOWER to a Produce that comes just after CreateTopics) lets the second
    # land first, and the first's retry is OUT_OF_ORDER_SEQUENCE_NUMBER -- the flaky
    # test_send_records_futures_and_table_input[kafka].  Here the proxy refuses the first Produce.
    srv, proxy = proxied
    with engine.connect(proxy.address) as eng:
        eng.create_topic("o", 1)
        proxy.arm(PRODUCE, "refuse", times=1)
        proxy.record(PRODUCE)
        with eng.producer(**{"batch.size": 1024, "linger.ms": 60000, "retry.backoff.ms": 10}) as p:
            fs = []
            if path == "futures_then_table":         # a send() window, then a table behind it
                fs = [p.send("o", b"f-%02d" % i, partition=0) for i in range(5)]
            res = p.send_batch("o", pa.table({"value": _values(b"o", 30)}), partitions=0)
            offs = [f.result(10).offset for f in fs]
        assert proxy.fired == 1
        vals = eng.read_arrow("o", 0).column("value").to_pylist()
        reqs = _produce_requests(proxy.recorded)
    first = [b"f-%02d" % i for i in range(len(fs))]
    assert vals == first + _values(b"o", 30).to_pylist()
    assert offs == list(range(len(fs)))
    assert [r[1] for r in res] == [len(fs) + sum(r[2] for r in res[:i]) for i in range(len(res))]
    assert len(res) > 2 and len(reqs) == len(res) + (2 if fs else 1)   # the refused one sent again


def test_a_failed_batch_does_not_leave_its_partition_out_of_sequence(proxied):
    # a batch the broker refused for good used sequence numbers that never landed: the next
    # batch of the partition would be OUT_OF_ORDER_SEQUENCE_NUMBER for the producer's life.
    # Kafka's idempotent producer bumps its epoch (InitProducerId with its id and epoch,
    # KIP-360) and starts the sequences again at 0; so does ours
    from engine.errors import InvalidRecordError
    srv, proxy = proxied
    with engine.connect(proxy.address) as eng:
        eng.create_topic("g", 2)
        with eng.producer(**{"linger.ms": 60000}) as p:
            p.send_batch("g", values=[b"a", b"a2"], partitions=0)
            p.send_batch("g", values=[b"y"], partitions=1)
            pid, epoch = p.producer_id
            proxy.refuse_error = 87                   # INVALID_RECORD: not retriable
            proxy.arm(PRODUCE, "refuse", times=1)
            with pytest.raises(InvalidRecordError):
                p.send_batch("g", values=[b"b"], partitions=0)
            f = p.send("g", b"c", partition=0)        # the futures path after it, then send_batch
            p.flush()
            assert f.result(10).offset == 2
            assert p.send_batch("g", values=[b"d"], partitions=0)[0][1] == 3
            assert p.send_batch("g", values=[b"z"], partitions=1)[0][1] == 1
            assert p.producer_id == (pid, epoch + 1)
        assert eng.read_arrow("g", 0).column("value").to_pylist() == [b"a", b"a2", b"c", b"d"]
        assert eng.read_arrow("g", 1).column("value").to_pylist() == [b"y", b"z"]


def test_after_a_batch_too_large_the_partition_goes_on_with_a_bumped_epoch(cluster, topic_name):
    # the same against Apache Kafka 4.0: a batch over message.max.bytes is refused for good
    # (MESSAGE_TOO_LARGE); the next batch goes under epoch + 1 from sequence 0 and is taken
    from engine.errors import KafkaApiError
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 1)
        with eng.producer(**{"batch.size": 4 << 20}) as p:
            p.send_batch(topic_name, values=[b"a"], partitions=0)
            pid, epoch = p.producer_id
            with pytest.raises(KafkaApiError, match="MESSAGE_TOO_LARGE|RECORD_LIST_TOO_LARGE"):
                p.send_batch(topic_name, values=[b"x" * (2 << 20)], partitions=0)
            assert p.send_batch(topic_name, values=[b"b", b"c"], partitions=0)[0][1] == 1
            assert p.producer_id == (pid, epoch + 1)
        assert eng.read_arrow(topic_name, 0).column("value").to_pylist() == [b"a", b"b", b"c"]
