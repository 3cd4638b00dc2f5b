"""Batch reads through the kafka-engine Spark source against engine.read_arrow, row for row.

One data directory (written once per module) holds: ``orders`` (3 partitions,
small batches, several segments, dense index), ``clicks`` (2 partitions,
explicit timestamps 1000 ms apart) and one single-partition topic per codec.
"""

import itertools

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import engine

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
TS0 = 1_700_000_000_000
N_ORDERS = 3000
N_CLICKS = 400
N_CODEC = 700


@pytest.fixture(scope="module")
def data(spark_tmp):
    path = str(spark_tmp / "batch-data")
    small = {"segment.bytes": 64 * 1024, "index.interval.bytes": 1024}
    with engine.open(path, background=False) as eng:
        eng.create_topic("orders", partitions=3, config=small)
        eng.create_topic("clicks", partitions=2, config=small)
        for c in CODECS:
            eng.create_topic(f"codec-{c}", partitions=1, config={"compression.type": "producer"})
        with eng.producer(batch_size=2048, linger_ms=0) as p:
            for i in range(N_ORDERS):
                key = None if i % 5 == 0 else b"customer-%d" % (i % 17)
                hdrs = [("src", b"web"), ("n", str(i).encode())] if i % 3 == 0 else []
                p.send("orders", b"order-%06d-" % i + b"x" * (i % 50), key=key, headers=hdrs)
        with eng.producer(batch_size=1024, linger_ms=0) as p:
            for part in range(2):
                vals = [b"click-%d-%d" % (part, i) for i in range(N_CLICKS)]
                tss = [TS0 + i * 1000 for i in range(N_CLICKS)]
                for s in range(0, N_CLICKS, 40):
                    p.send_batch("clicks", vals[s:s + 40], timestamps=tss[s:s + 40], partition=part)
        for c in CODECS:
            with eng.producer(compression_type=c, batch_size=8192, linger_ms=0) as p:
                for s in range(0, N_CODEC, 50):  # batches of 50 records
                    idx = range(s, min(s + 50, N_CODEC))
                    p.send_batch(f"codec-{c}", [(b"payload %d " % i) * 8 for i in idx],
                                 keys=[b"k%d" % i for i in idx], partition=0,
                                 headers=[[("codec", c.encode())] for _ in idx])
    return path


def load(spark, path, **opts):
    r = spark.read.format("kafka-engine").option("path", path)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def spark_rows(df) -> pa.Table:
    t = df.toArrow()
    t = t.set_column(t.schema.get_field_index("timestamp"), "timestamp",
                     pc.cast(t["timestamp"], pa.timestamp("us", tz="UTC")))
    return t.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])


def expected(path, tps, start=None, end=None, headers=True) -> pa.Table:
    with engine.open(path, read_only=True, background=False) as ro:
        parts = []
        for t, p in sorted(tps):
            s = start.get((t, p)) if isinstance(start, dict) else start
            e = end.get((t, p)) if isinstance(end, dict) else end
            parts.append(ro.read_arrow(t, p, s, e))
    t = pa.concat_tables(parts)
    return t if headers else t.drop_columns(["headers"])


def assert_same(got: pa.Table, want: pa.Table):
    assert got.num_rows == want.num_rows
    assert got.column_names == want.column_names
    for name in want.column_names:
        g, w = got[name], want[name]
        if name == "timestamp":
            g, w = pc.cast(g, pa.int64()), pc.cast(w, pa.int64())
        assert g.to_pylist() == w.to_pylist(), name


def test_schema_is_sparks_kafka_schema(spark, data):
    df = load(spark, data, subscribe="orders")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
        "timestamp:timestamp,timestampType:int>")
    df = load(spark, data, subscribe="orders", includeHeaders="true")
    assert df.schema.simpleString().endswith(",headers:array<struct<key:string,value:binary>>>")


def test_several_topics_and_partitions_match_read_arrow(spark, data):
    df = load(spark, data, subscribe="orders,clicks", includeHeaders="true")
    assert df.rdd.getNumPartitions() == 5  # one task per topic-partition
    want = expected(data, [("orders", p) for p in range(3)] + [("clicks", p) for p in range(2)])
    assert want.num_rows == N_ORDERS + 2 * N_CLICKS
    assert_same(spark_rows(df), want)


def test_headers_off_by_default(spark, data):
    got = spark_rows(load(spark, data, subscribe="orders"))
    assert "headers" not in got.column_names
    assert_same(got, expected(data, [("orders", p) for p in range(3)], headers=False))


def test_subscribe_pattern_and_assign(spark, data):
    got = spark_rows(load(spark, data, subscribePattern="codec-(gzip|lz4)"))
    assert set(got["topic"].to_pylist()) == {"codec-gzip", "codec-lz4"}
    assert_same(got, expected(data, [("codec-gzip", 0), ("codec-lz4", 0)], headers=False))
    got = spark_rows(load(spark, data, assign='{"orders":[2,0]}'))
    assert_same(got, expected(data, [("orders", 0), ("orders", 2)], headers=False))


def test_every_codec(spark, data):
    df = load(spark, data, subscribePattern="codec-.*", includeHeaders="true", maxRecordsPerBatch="100")
    got = spark_rows(df)
    for c in CODECS:
        g = got.filter(pc.equal(got["topic"], f"codec-{c}"))
        assert g.num_rows == N_CODEC, c
        assert_same(g, expected(data, [(f"codec-{c}", 0)]))
        assert g["headers"][0].as_py() == [{"key": "codec", "value": c.encode()}]


def test_starting_and_ending_offsets_json(spark, data):
    df = load(spark, data, subscribe="orders",
              startingOffsets='{"orders":{"0":10,"1":-2,"2":100}}',
              endingOffsets='{"orders":{"0":50,"1":7,"2":-1}}')
    got = spark_rows(df)
    with engine.open(data, read_only=True, background=False) as ro:
        hw2 = ro.log("orders", 2).high_watermark
        parts = [ro.read_arrow("orders", 0, 10, 50), ro.read_arrow("orders", 1, 0, 7),
                 ro.read_arrow("orders", 2, 100, hw2)]
    want = pa.concat_tables(parts).drop_columns(["headers"])
    assert_same(got, want)
    assert got.num_rows == 40 + 7 + (hw2 - 100)


def test_earliest_latest_words(spark, data):
    got = spark_rows(load(spark, data, subscribe="clicks", startingOffsets="earliest",
                          endingOffsets="latest"))
    assert got.num_rows == 2 * N_CLICKS


def test_timestamps(spark, data):
    # clicks: offset i has timestamp TS0 + i*1000 in both partitions
    df = load(spark, data, subscribe="clicks", startingTimestamp=str(TS0 + 100_500),
              endingTimestamp=str(TS0 + 200_000))
    got = spark_rows(df)
    for p in range(2):
        offs = got.filter(pc.equal(got["partition"], p))["offset"].to_pylist()
        assert offs == list(range(101, 200))
    first = got["timestamp"][0].as_py()
    assert int(first.timestamp() * 1000) == TS0 + 101_000
    # per-partition timestamps
    df = load(spark, data, subscribe="clicks",
              startingOffsetsByTimestamp=f'{{"clicks":{{"0":{TS0 + 5000},"1":{TS0 + 390_000}}}}}')
    got = spark_rows(df)
    assert got.filter(pc.equal(got["partition"], 0))["offset"].to_pylist() == list(range(5, N_CLICKS))
    assert got.filter(pc.equal(got["partition"], 1))["offset"].to_pylist() == list(range(390, N_CLICKS))


def test_starting_timestamp_after_last_record(spark, data):
    late = str(TS0 + N_CLICKS * 1000 + 1)
    with pytest.raises(Exception, match="no record of clicks-0 has a timestamp"):
        load(spark, data, subscribe="clicks", startingTimestamp=late).count()
    df = load(spark, data, subscribe="clicks", startingTimestamp=late,
              startingOffsetsByTimestampStrategy="latest")
    assert df.count() == 0


def test_min_partitions_splits_at_index_entries(spark, data):
    df = load(spark, data, subscribe="orders", minPartitions="12", maxRecordsPerBatch="64")
    n = df.rdd.getNumPartitions()
    assert 9 <= n <= 15, n  # about 12, at least one piece per topic-partition
    got = spark_rows(df)
    assert_same(got, expected(data, [("orders", p) for p in range(3)], headers=False))
    # the planned ranges tile each partition exactly and start at cut points
    from spark_udfs.options import parse_options
    from spark_udfs.reader import _cut_points, plan_ranges
    plan = plan_ranges(parse_options({"path": data, "subscribe": "orders", "minPartitions": "12"}))
    assert len(plan) == n
    with engine.open(data, read_only=True, background=False) as ro:
        for p in range(3):
            log = ro.log("orders", p)
            mine = sorted((r.start, r.end) for r in plan if r.partition == p)
            assert mine[0][0] == log.log_start_offset and mine[-1][1] == log.high_watermark
            assert all(a[1] == b[0] for a, b in itertools.pairwise(mine))
            cuts = set(_cut_points(log, 0, log.high_watermark))
            assert all(s in cuts for s, _ in mine[1:])


def test_min_partitions_below_partition_count_keeps_one_task_each(spark, data):
    assert load(spark, data, subscribe="orders", minPartitions="2").rdd.getNumPartitions() == 3


def test_batch_size_option_bounds_arrow_batches(data):
    from spark_udfs.options import parse_options
    from spark_udfs.reader import plan_ranges, read_range
    opts = parse_options({"path": data, "subscribe": "orders", "maxRecordsPerBatch": "77"})
    for part in plan_ranges(opts):
        sizes = [b.num_rows for b in read_range(part, opts)]
        assert sizes and max(sizes) <= 77 and sum(sizes) == part.end - part.start
        assert all(s == 77 for s in sizes[:-1])


def test_udfs_header_value_and_kafka_partition(spark, data):
    from pyspark.sql import functions as F

    from spark_udfs.udfs import header_value, kafka_partition
    df = load(spark, data, subscribe="orders", includeHeaders="true")
    rows = (df.select("partition", "key", "value", kafka_partition("key", 3).alias("kp"),
                      header_value("headers", "n").alias("n"), header_value(F.col("headers"), "none").alias("x"))
            .toArrow().to_pylist())
    assert len(rows) == N_ORDERS
    for r in rows:
        # the embedded producer placed keyed records with Kafka's DefaultPartitioner
        assert r["kp"] == (r["partition"] if r["key"] is not None else None)
        i = int(r["value"][6:12])
        assert r["n"] == (str(i).encode() if i % 3 == 0 else None)
        assert r["x"] is None


def test_header_value_array_last_wins_and_slices():
    from engine._native import murmur2
    from spark_udfs.udfs import header_value_array, kafka_partition_array
    h = pa.array([[{"key": "a", "value": b"1"}, {"key": "a", "value": b"2"}], None, [],
                  [{"key": "b", "value": None}, {"key": "a", "value": b"3"}]],
                 type=engine.arrow.HEADERS_TYPE)
    assert header_value_array(h, "a").to_pylist() == [b"2", None, None, b"3"]
    assert header_value_array(h.slice(2), "b").to_pylist() == [None, None]
    keys = pa.array([b"x", None, b"", b"user-17"]).slice(1)
    want = [None] + [(murmur2(k) & 0x7FFFFFFF) % 5 for k in (b"", b"user-17")]
    assert kafka_partition_array(keys, 5).to_pylist() == want
