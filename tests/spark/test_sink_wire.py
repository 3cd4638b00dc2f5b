"""The kafka-engine sink through a broker: when a broker owns the data directory
(engine.broker_address) or with kafka.bootstrap.servers, tasks Produce over the wire."""

import collections

import pytest
from server.conftest import BrokerThread  # tests/server/conftest.py

import engine
from engine._native import murmur2

from .test_sink import N, _df, _norm_headers, _rows, _save


@pytest.fixture
def owned(tmp_path):
    b = BrokerThread(str(tmp_path / "sink-owned"))
    b.call(lambda: b.engine.create_topic("rt", partitions=3))
    yield b
    b.stop()


def _read(b, topic):
    def get():
        import pyarrow as pa
        return pa.concat_tables([b.engine.read_arrow(topic, p) for p in range(b.engine.partitions_for(topic))])
    return b.call(get)


def test_write_with_path_goes_through_the_owning_broker(spark, owned):
    assert engine.broker_address(owned.engine.path) == owned.bootstrap
    rows = _rows()
    # Without the broker path this would wait for the writer lock and fail after 200 ms.
    _save(_df(spark, rows), owned.engine.path, topic="rt", dataDirLockTimeoutMs="200",
          **{"kafka.compression.type": "zstd"})
    t = _read(owned, "rt")
    assert t.num_rows == N
    got = collections.Counter((k, v, _norm_headers(h), p) for k, v, h, p in zip(
        t["key"].to_pylist(), t["value"].to_pylist(), t["headers"].to_pylist(), t["partition"].to_pylist(),
        strict=True))
    for k, v, h, p in rows:
        want_p = p if p is not None else (murmur2(k) & 0x7FFFFFFF) % 3 if k is not None else None
        if want_p is None:
            hit = next(x for x in got if got[x] and x[:3] == (k, v, _norm_headers(h)))
        else:
            hit = (k, v, _norm_headers(h), want_p)
        assert got[hit] == 1, hit
        got[hit] -= 1
    assert not +got
    back = (spark.read.format("kafka-engine").option("path", owned.engine.path).option("subscribe", "rt")
            .load().count())
    assert back == N


def test_bootstrap_servers_auto_creates_and_acks(spark, owned):
    df = spark.createDataFrame([(f"t{i % 2}", f"v{i}") for i in range(200)], "topic string, value string")
    for acks in ("all", "1"):
        (df.write.format("kafka-engine").mode("append").option("kafka.bootstrap.servers", owned.bootstrap)
         .option("kafka.acks", acks).save())
    assert sorted(_read(owned, "t0")["value"].to_pylist()) == sorted(
        [f"v{i}".encode() for i in range(0, 200, 2)] * 2)
    assert owned.call(lambda: owned.engine.partitions_for("t1")) == 1  # the broker's num.partitions
    with pytest.raises(Exception, match="partition 7 of topic 'rt' does not exist"):
        (spark.createDataFrame([(b"v", 7)], "value binary, partition int").write.format("kafka-engine")
         .mode("append").option("kafka.bootstrap.servers", owned.bootstrap).option("topic", "rt").save())
    with pytest.raises(Exception, match="not both"):
        (df.write.format("kafka-engine").mode("append").option("kafka.bootstrap.servers", owned.bootstrap)
         .option("path", owned.engine.path).save())


def test_streaming_write_through_the_broker(spark, owned, tmp_path):
    src = str(tmp_path / "src")
    with engine.open(src, background=False) as eng:
        eng.create_topic("in", partitions=2)
        with eng.producer(linger_ms=0) as p:
            p.send_batch("in", [b"s%d" % i for i in range(300)], keys=[b"%d" % i for i in range(300)])
    df = (spark.readStream.format("kafka-engine").option("path", src).option("subscribe", "in")
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100").load())
    q = (df.select("key", "value").writeStream.format("kafka-engine").option("path", owned.engine.path)
         .option("topic", "rt").option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    t = _read(owned, "rt")
    assert sorted(t["value"].to_pylist()) == sorted(b"s%d" % i for i in range(300))
    assert all(p == (murmur2(k) & 0x7FFFFFFF) % 3
               for k, p in zip(t["key"].to_pylist(), t["partition"].to_pylist(), strict=True))
