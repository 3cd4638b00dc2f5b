"""Consume-transform-produce: outputs and the group's offsets move together or not at all.

A confluent-kafka consumer in group G reads an input topic (2 partitions); each round the
transactional producer writes every input value upper-cased to the same partition of the output
topic and ``send_offsets_to_transaction``s the consumer's positions for G, then commits or
aborts:

1. abort: the output has no committed record and G has no committed offset; the consumer
   rewinds to G's committed offsets (none: the beginning), as an exactly-once loop does;
2. commit: the outputs are visible to read_committed and G's offsets are the positions;
3. after more input, abort again: outputs and offsets stay as round 2 left them.

With the confluent-kafka producer the consumer ``subscribe()``s (its group metadata carries a
generation and member id, which the coordinator checks); aiokafka and kafka-python pass the
group id alone (their APIs), with a consumer that ``assign()``s.
"""

from __future__ import annotations

import time

import pytest

from tests.secure_clients import confluent

from .clients import CLIENTS, T, create_topic, producer, read_all

OFFSET_INVALID = -1001     # confluent-kafka: no committed offset


def _fill(bootstrap, topic, per_partition, start):
    from confluent_kafka import Producer
    p = Producer(confluent(bootstrap))
    for part in (0, 1):
        for i in range(start, start + per_partition):
            p.produce(topic, b"in-%d-%d" % (part, i), partition=part)
    assert p.flush(T) == 0


def _consume(c, n):
    """n records from the consumer: {partition: [values]} and positions after them."""
    out, got = {0: [], 1: []}, 0
    deadline = time.monotonic() + T
    while got < n:
        assert time.monotonic() < deadline, f"only {got} of {n} input records in {T}s"
        m = c.poll(0.5)
        if m is None:
            continue
        assert not m.error(), m.error()
        out[m.partition()].append(m.value())
        got += 1
    return out


def _committed(c, topic):
    from confluent_kafka import TopicPartition
    return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in (0, 1)],
                                                          timeout=T)}


def _rewind(c, topic):
    """Back to G's committed offsets (the beginning where there are none)."""
    from confluent_kafka import TopicPartition
    for p, o in _committed(c, topic).items():
        c.seek(TopicPartition(topic, p, 0 if o == OFFSET_INVALID else o))


def _round(prod, c, group, topic_in, topic_out, n, outcome):
    from confluent_kafka import TopicPartition
    records = _consume(c, n)
    prod.begin()
    for part, values in records.items():
        for v in values:
            prod.send(topic_out, v.upper(), part)
    positions = {tp.partition: tp.offset for tp in c.position([TopicPartition(topic_in, p) for p in (0, 1)])}
    prod.send_offsets({(topic_in, p): o for p, o in positions.items()}, _GroupView(c, group))
    prod.flush()
    prod.commit() if outcome == "commit" else prod.abort()
    return records, positions


class _GroupView:
    """What each client's send_offsets takes from the consumer: metadata or group id."""

    def __init__(self, c, group_id):
        self.c = c
        self.group_id = group_id

    def group_metadata(self):
        return self.c.consumer_group_metadata()


@pytest.mark.parametrize("client", CLIENTS)
def test_aborted_round_moves_nothing_committed_round_moves_both(broker, unique, client):
    from confluent_kafka import Consumer, TopicPartition
    topic_in, topic_out, group = f"{unique}-in", f"{unique}-out", f"{unique}-g"
    create_topic(broker.bootstrap, topic_in, 2)
    create_topic(broker.bootstrap, topic_out, 2)
    _fill(broker.bootstrap, topic_in, 5, 0)

    c = Consumer({**confluent(broker.bootstrap), "group.id": group,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "session.timeout.ms": 10000})
    if client == "confluent":
        c.subscribe([topic_in])
    else:
        c.assign([TopicPartition(topic_in, p, 0) for p in (0, 1)])
    prod = producer(client, broker.bootstrap, f"{unique}-txid")
    try:
        prod.init()
        # 1. aborted: nothing visible, nothing committed
        _round(prod, c, group, topic_in, topic_out, 10, "abort")
        out, _ = read_all("confluent", broker.bootstrap, topic_out, [0, 1], "read_committed")
        assert out == {0: [], 1: []}
        assert _committed(c, topic_in) == {0: OFFSET_INVALID, 1: OFFSET_INVALID}
        _rewind(c, topic_in)

        # 2. committed: outputs and offsets together
        records, positions = _round(prod, c, group, topic_in, topic_out, 10, "commit")
        assert positions == {0: 5, 1: 5}
        assert records == {p: [b"in-%d-%d" % (p, i) for i in range(5)] for p in (0, 1)}
        out, _ = read_all("confluent", broker.bootstrap, topic_out, [0, 1], "read_committed")
        assert {p: [v for _o, v in recs] for p, recs in out.items()} == \
            {p: [b"IN-%d-%d" % (p, i) for i in range(5)] for p in (0, 1)}
        assert _committed(c, topic_in) == {0: 5, 1: 5}

        # 3. more input, aborted again: round 2's outputs and offsets stay
        _fill(broker.bootstrap, topic_in, 2, 5)
        records, positions = _round(prod, c, group, topic_in, topic_out, 4, "abort")
        assert positions == {0: 7, 1: 7}
        out2, _ = read_all("confluent", broker.bootstrap, topic_out, [0, 1], "read_committed")
        assert out2 == out
        assert _committed(c, topic_in) == {0: 5, 1: 5}
        # read_uncommitted does see both aborted rounds' outputs
        raw, _ = read_all("confluent", broker.bootstrap, topic_out, [0, 1], "read_uncommitted")
        assert [len(raw[p]) for p in (0, 1)] == [5 + 5 + 2, 5 + 5 + 2]
    finally:
        prod.close()
        c.close()
