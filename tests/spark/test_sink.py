"""The kafka-engine sink in process: df.write / df.writeStream into a data directory
(tasks take turns on the writer lock), read back with the source and engine.read_arrow."""

import collections
import glob
import os

import pyarrow as pa
import pytest

import engine
from engine._native import list_batches, murmur2

N = 600


def _rows():
    out = []
    for i in range(N):
        key = None if i % 7 == 0 else b"key-%d" % (i % 23)
        headers = [("h", b"%d" % i), ("src", None)] if i % 4 == 0 else ([] if i % 4 == 1 else None)
        part = (i % 3) if i % 5 == 0 else None
        out.append((key, b"value-%05d" % i, headers, part))
    return out


def _df(spark, rows, parts=4):
    return spark.createDataFrame(
        rows, "key binary, value binary, headers array<struct<key: string, value: binary>>, partition int"
    ).repartition(parts)


def _norm_headers(h):
    return tuple((x["key"], x["value"]) if isinstance(x, dict) else tuple(x) for x in (h or ()))


def _written(path, topic):
    with engine.open(path, read_only=True, background=False) as ro:
        t = pa.concat_tables([ro.read_arrow(topic, p) for p in range(ro.partitions_for(topic))])
    return t


def _save(df, path, **opts):
    w = df.write.format("kafka-engine").mode("append").option("path", path)
    for k, v in opts.items():
        w = w.option(k, v)
    w.save()


def test_round_trip_keys_values_headers_partitions(spark, spark_tmp):
    path = str(spark_tmp / "sink-rt")
    with engine.open(path, background=False) as eng:
        eng.create_topic("rt", partitions=3)
    rows = _rows()
    _save(_df(spark, rows), path, topic="rt")  # 4 tasks on local[2]: they take turns on the lock
    t = _written(path, "rt")
    assert t.num_rows == N
    got = collections.Counter(
        (k, v, _norm_headers(h), p) for k, v, h, p in zip(
            t["key"].to_pylist(), t["value"].to_pylist(), t["headers"].to_pylist(), t["partition"].to_pylist(),
            strict=True))
    for k, v, h, p in rows:
        want_p = p if p is not None else (murmur2(k) & 0x7FFFFFFF) % 3 if k is not None else None
        if want_p is None:  # sticky: any partition
            hits = [x for x in got if x[:3] == (k, v, _norm_headers(h))]
            assert len(hits) == 1
            got[hits[0]] -= 1
        else:
            assert got[(k, v, _norm_headers(h), want_p)] == 1, (k, v, h, want_p)
            got[(k, v, _norm_headers(h), want_p)] -= 1
    assert not +got
    # Offsets are dense per partition, and the source reads the same rows back.
    for p in range(3):
        offs = sorted(o for o, q in zip(t["offset"].to_pylist(), t["partition"].to_pylist(), strict=True) if q == p)
        assert offs == list(range(len(offs)))
    back = (spark.read.format("kafka-engine").option("path", path).option("subscribe", "rt")
            .option("includeHeaders", "true").load().toArrow())
    key = ["partition", "offset"]
    a, b = back.sort_by([(c, "ascending") for c in key]), t.sort_by([(c, "ascending") for c in key])
    for c in ("key", "value", "partition", "offset", "headers"):
        assert a[c].to_pylist() == b[c].to_pylist(), c


def test_string_columns_topic_column_and_auto_create(spark, spark_tmp):
    path = str(spark_tmp / "sink-topics")
    df = spark.createDataFrame([("a" if i % 3 else "b", f"k{i}", f"v{i}") for i in range(90)],
                               "topic string, key string, value string")
    _save(df, path)
    with engine.open(path, read_only=True, background=False) as ro:
        assert sorted(ro.list_topics()) == ["a", "b"]
        assert ro.partitions_for("a") == 1  # auto-created with num.partitions=1
    assert sorted(_written(path, "a")["value"].to_pylist()) == sorted(
        f"v{i}".encode() for i in range(90) if i % 3)
    assert _written(path, "b").num_rows == 30
    # The topic option overrides the column, as in Spark's Kafka sink.
    _save(df, path, topic="c")
    assert _written(path, "c").num_rows == 90 and _written(path, "a").num_rows == 60


def test_compression_and_batch_size(spark, spark_tmp):
    path = str(spark_tmp / "sink-lz4")
    df = spark.createDataFrame([(b"x" * 100,) for _ in range(2000)], "value binary").coalesce(1)
    _save(df, path, topic="z", **{"kafka.compression.type": "lz4", "kafka.batch.size": "16384",
                                  "kafka.linger.ms": "5", "kafka.acks": "all"})
    seg = sorted(glob.glob(os.path.join(path, "z-0", "*.log")))[0]
    with open(seg, "rb") as f:
        headers, _ = list_batches(f.read())
    assert len(headers) > 5 and all(h.codec == 3 for h in headers)  # lz4, ~16 KiB batches
    assert sum(h.records_count for h in headers) == 2000


def test_bad_input_fails_clearly(spark, spark_tmp):
    path = str(spark_tmp / "sink-bad")
    good = spark.createDataFrame([(b"v",)], "value binary")
    cases = [
        (spark.createDataFrame([(1,)], "x int"), {"topic": "t"}, "needs a 'value' column"),
        (spark.createDataFrame([(1,)], "value int"), {"topic": "t"}, "'value' must be binary or string"),
        (spark.createDataFrame([(b"v", 1)], "value binary, key int"), {"topic": "t"}, "'key' must be"),
        (spark.createDataFrame([(b"v", 1)], "value binary, partition long"), {"topic": "t"}, "'partition' must be int"),
        (good, {}, "needs the 'topic' option or a 'topic' column"),
        (good, {"topic": "t", "kafka.linger": "1"}, "did you mean 'kafka.linger.ms'"),
        (good, {"topic": "t", "kafka.compression.type": "brotli"}, "must be one of"),
        (good, {"topic": "t", "kafka.acks": "2"}, "must be 0, 1, -1 or all"),
        (good, {"topic": "bad/name"}, "topic"),
    ]
    for df, opts, msg in cases:
        with pytest.raises(Exception, match=msg):
            _save(df, path, **opts)
    with pytest.raises(Exception, match="only appends"):
        good.write.format("kafka-engine").mode("overwrite").option("path", path).option("topic", "t").save()
    with engine.open(path, background=False) as eng:
        eng.create_topic("two", partitions=2)
    with pytest.raises(Exception, match="partition 5 of topic 'two' does not exist"):
        _save(spark.createDataFrame([(b"v", 5)], "value binary, partition int"), path, topic="two")
    with pytest.raises(Exception, match="null 'topic'"):
        _save(spark.createDataFrame([(b"v", None)], "value binary, topic string"), path)


def test_a_held_lock_fails_after_the_timeout(spark, spark_tmp):
    path = str(spark_tmp / "sink-locked")
    with engine.open(path, background=False):  # an embedded writer with no broker listener
        with pytest.raises(Exception, match="waited 300 ms"):
            _save(spark.createDataFrame([(b"v",)], "value binary"), path, topic="t",
                  dataDirLockTimeoutMs="300")


def _stream_rows(path):
    with engine.open(path, read_only=True, background=False) as ro:
        if "out" not in ro.list_topics():
            return []
        return _written(path, "out")["value"].to_pylist()


def test_streaming_write_with_checkpoint_and_restart(spark, spark_tmp):
    src, dst, ckpt = (str(spark_tmp / n) for n in ("sink-src", "sink-dst", "sink-ckpt"))

    def append(lo, hi):
        with engine.open(src, background=False) as eng:
            if "in" not in eng.list_topics():
                eng.create_topic("in", partitions=2)
            with eng.producer(linger_ms=0) as p:
                p.send_batch("in", [b"m%d" % i for i in range(lo, hi)], keys=[b"%d" % i for i in range(lo, hi)])

    def start():
        df = (spark.readStream.format("kafka-engine").option("path", src).option("subscribe", "in")
              .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "150").load())
        return (df.selectExpr("key", "value", "'out' AS topic").writeStream.format("kafka-engine")
                .option("path", dst).option("checkpointLocation", ckpt)
                .trigger(processingTime="100 milliseconds").start())

    append(0, 400)
    q = start()
    try:
        q.processAllAvailable()
        assert sorted(_stream_rows(dst)) == sorted(b"m%d" % i for i in range(400))
        assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 3  # several micro-batches
    finally:
        q.stop()
    append(400, 500)  # while no query runs
    q = start()
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    got = _stream_rows(dst)
    assert sorted(got) == sorted(b"m%d" % i for i in range(500))  # resumed: nothing lost or repeated
