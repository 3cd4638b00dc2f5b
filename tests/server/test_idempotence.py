"""Idempotent producers over the wire (reliability contract B12) and with real
clients: InitProducerId hands out ids; a retried batch gets its original offset
and is stored once; a gap is OUT_OF_ORDER_SEQUENCE_NUMBER (45), a negative
sequence INVALID_RECORD (87), an older epoch INVALID_PRODUCER_EPOCH (47)."""

from __future__ import annotations

import struct

from engine.records import build_batch

from .conftest import connect, recv_frame, request_frame
from .test_bad_input import parse_produce_v3, produce_v3


def init_producer_id(port: int) -> tuple[int, int]:
    body = struct.pack(">hi", -1, 60000)  # null transactional id, timeout
    with connect(port) as s:
        s.sendall(request_frame(22, 0, 3, body))
        resp = recv_frame(s)
    corr, _throttle, error, pid, epoch = struct.unpack_from(">iihqh", resp, 0)
    assert (corr, error) == (3, 0)
    return pid, epoch


def produce(port, pid, epoch, seq, n=3):
    records = bytes(build_batch([b"r%d" % i for i in range(n)], producer_id=pid,
                                producer_epoch=epoch, base_sequence=seq))
    with connect(port) as s:
        s.sendall(request_frame(0, 3, 1, produce_v3("t", 0, records)))
        return parse_produce_v3(recv_frame(s))


def test_b12_sequences_over_the_wire(broker):
    broker.call(lambda: broker.engine.create_topic("t", 1))
    pid, epoch = init_producer_id(broker.port)
    pid2, _ = init_producer_id(broker.port)
    assert pid != pid2 and epoch == 0
    assert produce(broker.port, pid, 0, 0) == (0, 0)
    assert produce(broker.port, pid, 0, 0) == (0, 0)      # the retry: same offset, stored once
    assert produce(broker.port, pid, 0, 3) == (0, 3)
    assert produce(broker.port, pid, 0, 9)[0] == 45        # gap
    assert produce(broker.port, pid, 0, -1)[0] == 87       # negative sequence
    assert produce(broker.port, pid, 1, 0) == (0, 6)       # a new epoch restarts at 0
    assert produce(broker.port, pid, 0, 6)[0] == 47        # the old epoch is fenced
    assert broker.call(lambda: broker.engine.log("t", 0).log_end_offset) == 9


def test_kafka_python_default_producer_is_idempotent(broker):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    p = KafkaProducer(bootstrap_servers=broker.bootstrap)  # enable_idempotence defaults on
    futs = [p.send("idem", b"m%d" % i, key=b"k") for i in range(200)]
    p.flush()
    metas = [f.get(10) for f in futs]
    p.close()
    assert sorted(m.offset for m in metas) == list(range(200))
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                      consumer_timeout_ms=3000)
    tp = TopicPartition("idem", metas[0].partition)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = [r.value for r in c]
    c.close()
    assert got == [b"m%d" % i for i in range(200)]
    from engine import _native
    plog = broker.engine.log("idem", tp.partition)
    data = broker.call(lambda: plog.read(0, 1 << 20).slices[0].read())
    headers, _ = _native.list_batches(data)
    assert headers and all(h.producer_id >= 0 for h in headers)  # it really ran idempotently


def test_confluent_idempotent_producer(broker):
    from confluent_kafka import Producer

    delivered = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(1000):
        p.produce("idem2", b"v%d" % i, partition=0,
                  on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p.flush(20) == 0
    assert all(err is None for err, _ in delivered)
    assert sorted(o for _, o in delivered) == list(range(1000))
    from engine import _native
    plog = broker.engine.log("idem2", 0)
    data = broker.call(lambda: plog.read(0, 1 << 20).slices[0].read())
    headers, _ = _native.list_batches(data)
    assert headers and all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)
