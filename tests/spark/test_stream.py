"""A streaming query over a growing topic: micro-batches bounded by
maxOffsetsPerTrigger, a Parquet file sink, and a restart from the checkpoint
that neither loses nor repeats a record."""

import pyarrow.parquet as pq

import engine


def _sink_rows(out):
    import glob
    files = glob.glob(f"{out}/*.parquet")
    if not files:
        return []
    t = pq.ParquetDataset(files).read()
    return list(zip(t["partition"].to_pylist(), t["offset"].to_pylist(), t["value"].to_pylist(), strict=True))


def _append(path, counts, n):
    with engine.open(path, background=False) as eng:
        if "s" not in eng.list_topics():
            eng.create_topic("s", partitions=2)
        with eng.producer(linger_ms=0) as p:
            for part in range(2):
                c = counts[part]
                p.send_batch("s", [b"s%d-%d" % (part, o) for o in range(c, c + n)], partition=part)
                counts[part] = c + n


def _start(spark, path, out, ckpt):
    df = (spark.readStream.format("kafka-engine").option("path", path).option("subscribe", "s")
          .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "250").load())
    return (df.select("partition", "offset", "value").writeStream.format("parquet")
            .option("path", out).option("checkpointLocation", ckpt)
            .trigger(processingTime="200 milliseconds").start())


def test_streaming_query_with_restart(spark, spark_tmp):
    path, out, ckpt = (str(spark_tmp / n) for n in ("stream-data", "stream-out", "stream-ckpt"))
    counts = [0, 0]
    _append(path, counts, 300)
    q = _start(spark, path, out, ckpt)
    try:
        q.processAllAvailable()
        assert len(_sink_rows(out)) == 600
        sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        assert sizes and max(sizes) <= 250 and len(sizes) >= 3
        _append(path, counts, 100)  # the topic grows under the running query
        q.processAllAvailable()
        assert len(_sink_rows(out)) == 800
    finally:
        q.stop()
    _append(path, counts, 50)  # written while no query runs
    q = _start(spark, path, out, ckpt)
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    rows = _sink_rows(out)
    assert len(rows) == 900 and len(set((p, o) for p, o, _ in rows)) == 900  # no loss, no duplicate
    assert sorted((p, o) for p, o, _ in rows) == [(p, o) for p in range(2) for o in range(450)]
    assert all(v == b"s%d-%d" % (p, o) for p, o, v in rows)


def test_latest_offset_shares_the_limit_by_backlog(spark_tmp):
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    from spark_udfs.options import parse_options
    from spark_udfs.stream import KafkaEngineStreamReader
    path = str(spark_tmp / "stream-limit")
    with engine.open(path, background=False) as eng:
        eng.create_topic("s", partitions=2)
        with eng.producer(linger_ms=0) as p:
            p.send_batch("s", [b"a"] * 300, partition=0)
            p.send_batch("s", [b"b"] * 100, partition=1)
    r = KafkaEngineStreamReader(parse_options(
        {"path": path, "subscribe": "s", "maxOffsetsPerTrigger": "200"}, streaming=True))
    assert r.initialOffset() == {"s": {"0": 300, "1": 100}}  # streaming default: latest
    start = {"s": {"0": 0, "1": 0}}
    assert r.getDefaultReadLimit() == ReadMaxRows(200)
    assert r.latestOffset(start, ReadMaxRows(200)) == {"s": {"0": 150, "1": 50}}
    assert r.latestOffset(start, ReadAllAvailable()) == {"s": {"0": 300, "1": 100}}
    parts = r.partitions(start, {"s": {"0": 150, "1": 50}})
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 0, 150), (1, 0, 50)]
    assert sum(b.num_rows for p in parts for b in r.read(p)) == 200
