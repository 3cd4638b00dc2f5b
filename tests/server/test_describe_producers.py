"""DescribeProducers (61) v0: a real idempotent producer's state per partition, Kafka's error
code for unknown topics and partitions, the state after a kill -9 restart, and Kafka's own
``kafka-transactions.sh describe-producers`` against our broker (skipped without Kafka)."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from engine.protocol.primitives import Reader, Writer
from tests.serving import ServeProcess, kafka_home

from .conftest import connect, recv_frame, request_frame

confluent_kafka = pytest.importorskip("confluent_kafka")


def describe_producers(port: int, topics: dict[str, list[int]]) -> dict:
    """{(topic, partition): (error_code, [(pid, epoch, last_seq, last_ts, coord_epoch, txn_start)])}."""
    w = Writer()
    w.array_length(len(topics), True)
    for name, parts in topics.items():
        w.string(name, True)
        w.array_length(len(parts), True)
        for p in parts:
            w.int32(p)
        w.tagged_fields()
    w.tagged_fields()
    with connect(port) as s:
        s.sendall(request_frame(61, 0, 11, bytes(w.buf), flexible=True))
        resp = recv_frame(s)
    r = Reader(resp)
    assert r.int32() == 11
    r.tagged_fields()
    assert r.int32() == 0                               # throttle
    out = {}
    for _ in range(r.array_length(True)):
        name = r.compact_string()
        for _ in range(r.array_length(True)):
            index, error = r.int32(), r.int16()
            r.compact_nullable_string()
            producers = []
            for _ in range(r.array_length(True)):
                producers.append((r.int64(), r.int32(), r.int32(), r.int64(), r.int32(), r.int64()))
                r.tagged_fields()
            r.tagged_fields()
            out[(name, index)] = (error, producers)
        r.tagged_fields()
    r.tagged_fields()
    assert r.remaining == 0
    return out


def produce_idempotent(bootstrap: str, topic: str, n: int) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "acks": "all", "linger.ms": 0})
    errors = []
    for i in range(n):
        p.produce(topic, b"v%d" % i, partition=0,
                  on_delivery=lambda err, msg: err is not None and errors.append(err))
        p.flush(10)                                      # one batch per record: sequences 0..n-1
    assert errors == [] and p.flush(10) == 0


def test_describe_producers_of_a_real_idempotent_producer(broker):
    broker.call(lambda: broker.engine.create_topic("dp", 2))
    before = int(time.time() * 1000)
    produce_idempotent(broker.bootstrap, "dp", 10)
    after = int(time.time() * 1000)
    res = describe_producers(broker.port, {"dp": [0, 1, 7], "nope": [0]})
    err, producers = res[("dp", 0)]
    assert err == 0 and len(producers) == 1
    pid, epoch, last_seq, last_ts, coord_epoch, txn_start = producers[0]
    assert pid >= 0 and epoch == 0 and last_seq == 9
    assert before - 1000 <= last_ts <= after + 1000     # the last batch's max timestamp
    assert (coord_epoch, txn_start) == (-1, -1)          # no transactions
    assert res[("dp", 1)] == (0, [])                     # a partition nobody wrote to
    assert res[("dp", 7)][0] == 3                        # UNKNOWN_TOPIC_OR_PARTITION
    assert res[("nope", 0)][0] == 3


ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_state_after_kill9_and_kafka_transactions_tool(tmp_path):
    srv = ServeProcess(tmp_path, "--config", "num.partitions=1").start()
    try:
        produce_idempotent(srv.bootstrap, "kt", 6)
        before = describe_producers(srv.port, {"kt": [0]})[("kt", 0)]
        assert before[0] == 0 and len(before[1]) == 1 and before[1][0][2] == 5
        srv.kill9()
        srv.start()
        after = describe_producers(srv.port, {"kt": [0]})[("kt", 0)]
        assert after == before                            # rebuilt from the log after kill -9
        home = kafka_home()
        if home is None:
            pytest.skip("Kafka not found (set KAFKA_HOME to a Kafka 4.0 install)")
        out = subprocess.run(
            [os.path.join(home, "bin", "kafka-transactions.sh"), "--bootstrap-server", srv.bootstrap,
             "describe-producers", "--topic", "kt", "--partition", "0"],
            capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        lines = [ln.split() for ln in out.stdout.strip().splitlines()]
        assert lines[0][:4] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence"], out.stdout
        pid, epoch, last_seq, last_ts, coord, _txn = before[1][0]
        assert lines[1][:5] == [str(pid), str(epoch), str(coord), str(last_seq), str(last_ts)], out.stdout
        assert lines[1][5] == "None"                      # no open transaction
    finally:
        srv.stop()
