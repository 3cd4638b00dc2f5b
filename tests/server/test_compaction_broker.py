"""A compacted topic through the broker with unmodified clients: a null key is refused
with INVALID_RECORD, and a consumer reads a cleaned log (offset gaps) to the end."""

from __future__ import annotations

import time

import pytest

kafka = pytest.importorskip("kafka")
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import NewTopic  # noqa: E402
from kafka.errors import InvalidRecordError  # noqa: E402

PRODUCER = {"enable_idempotence": False, "linger_ms": 5, "request_timeout_ms": 10000, "retries": 0}


def test_compacted_topic_through_the_broker(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("cmp", num_partitions=1, replication_factor=1,
                                      topic_configs={"cleanup.policy": "compact",
                                                     "segment.bytes": "4096"})])
    finally:
        admin.close()
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, **PRODUCER)
    try:
        with pytest.raises(InvalidRecordError):
            p.send("cmp", value=b"no key", partition=0).get(timeout=10)
        latest = {}
        for i in range(300):
            k = b"k%d" % (i % 10)
            v = b"v%d-" % i + b"x" * 40
            latest[k] = v
            p.send("cmp", key=k, value=v, partition=0)
        p.flush()
    finally:
        p.close()

    def clean():
        log = broker.engine.log("cmp", 0)
        log.roll()
        return log.clean()

    st = broker.call(clean)
    assert st.cleaned and st.records_removed >= 290
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        tp = TopicPartition("cmp", 0)
        c.assign([tp])
        got = {}
        deadline = time.monotonic() + 15
        while len(got) < 10 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=200).values():
                for r in recs:
                    got[r.key] = r.value
        assert got == latest
        assert c.position(tp) == 300
    finally:
        c.close()
