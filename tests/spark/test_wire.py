"""The network fallback: the kafka-engine source with kafka.bootstrap.servers reads
through a broker (Metadata, ListOffsets, Fetch by engine.client.wire) and gives the
same rows as reading the files in place; the wire client on its own."""

import itertools

import pyarrow as pa
import pytest
from server.conftest import BrokerThread  # tests/server/conftest.py

import engine
from engine.client.wire import EARLIEST, LATEST, KafkaConnectionError, WireClient
from engine.errors import (
    KafkaApiError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    api_error,
)
from engine.records import build_batches

TS0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def broker(spark_tmp):
    b = BrokerThread(str(spark_tmp / "wire-data"), {"log.segment.bytes": 64 * 1024})

    def fill():
        eng = b.engine
        eng.create_topic("w", partitions=3)
        eng.create_topic("wz", partitions=1)
        with eng.producer(batch_size=4096, linger_ms=0) as p:
            for i in range(3000):
                key = None if i % 5 == 0 else b"k%d" % (i % 13)
                hdrs = [("n", b"%d" % i)] if i % 3 == 0 else []
                p.send("w", b"value-%d-" % i + b"y" * (i % 40), key=key, headers=hdrs, timestamp=TS0 + i)
        with eng.producer(batch_size=8192, linger_ms=0, compression_type="zstd") as p:
            p.send_batch("wz", [b"z%d" % i * 5 for i in range(1000)], partition=0)
    b.call(fill)
    yield b
    b.stop()


def _load(spark, broker, via_wire, **opts):
    r = spark.read.format("kafka-engine")
    r = r.option("kafka.bootstrap.servers", broker.bootstrap) if via_wire else \
        r.option("path", broker.engine.path)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def _rows(df) -> pa.Table:
    return df.toArrow().sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])


@pytest.mark.parametrize("opts", [
    {"subscribe": "w,wz", "includeHeaders": "true"},
    {"subscribePattern": "w.*", "minPartitions": "7", "maxRecordsPerBatch": "100"},
    {"assign": '{"w":[0,2]}', "startingOffsets": '{"w":{"0":10,"2":-2}}', "endingOffsets": '{"w":{"0":500,"2":-1}}'},
    {"subscribe": "w", "startingTimestamp": str(TS0 + 1000), "endingTimestamp": str(TS0 + 2000)},
])
def test_wire_reads_the_same_rows_as_the_files(spark, broker, opts):
    local = _rows(_load(spark, broker, False, **opts))
    wire = _rows(_load(spark, broker, True, **opts))
    assert local.num_rows > 0
    assert wire.schema == local.schema
    for c in local.column_names:
        assert wire[c].to_pylist() == local[c].to_pylist(), c


def test_wire_plan_splits_and_errors(spark, broker):
    from spark_udfs.options import parse_options
    from spark_udfs.reader import plan_ranges
    plan = plan_ranges(parse_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "w",
                                      "minPartitions": "9"}))
    assert len(plan) >= 9 and all(p.path is None for p in plan)
    with engine.open(broker.engine.path, read_only=True, background=False) as ro:
        for p in range(3):
            mine = sorted((r.start, r.end) for r in plan if r.partition == p)
            assert mine[0][0] == 0 and mine[-1][1] == ro.log("w", p).high_watermark
            assert all(a[1] == b[0] for a, b in itertools.pairwise(mine))
    with pytest.raises(Exception, match="do not exist"):
        _load(spark, broker, True, subscribe="nope").collect()
    with pytest.raises(Exception, match="outside the available range"):
        _load(spark, broker, True, subscribe="wz", startingOffsets='{"wz":{"0":5000}}').collect()
    clamped = _load(spark, broker, True, subscribe="wz", startingOffsets='{"wz":{"0":5000}}',
                    failOnDataLoss="false").count()
    assert clamped == 0
    with pytest.raises(Exception, match="data directory '/x' does not exist"):
        _load(spark, broker, True, path="/x", subscribe="w").collect()
    import socket
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(KafkaConnectionError, match="cannot connect"):
        plan_ranges(parse_options({"kafka.bootstrap.servers": dead, "subscribe": "w"}))


def test_wire_streaming_matches_the_files(spark, broker, spark_tmp):
    def run(via_wire, name):
        df = (spark.readStream.format("kafka-engine")
              .option(*(("kafka.bootstrap.servers", broker.bootstrap) if via_wire else ("path", broker.engine.path)))
              .option("subscribe", "w").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "1000").load())
        q = (df.select("partition", "offset", "key", "value").writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(spark_tmp / f"ckpt-{name}")).start())
        try:
            q.processAllAvailable()
            batches = len([p for p in q.recentProgress if p["numInputRows"]])
        finally:
            q.stop()
        return spark.table(name).toArrow().sort_by([("partition", "ascending"), ("offset", "ascending")]), batches
    wire, nb = run(True, "wire_stream")
    local, _ = run(False, "local_stream")
    assert wire.num_rows == 3000 and nb >= 3
    assert wire.to_pylist() == local.to_pylist()


# -- the client alone -----------------------------------------------------------------
def test_client_produce_list_offsets_fetch(broker):
    with WireClient(broker.bootstrap) as c:
        assert c.partition_count("fresh", auto_create=True) == 1  # broker's auto-create, num.partitions=1
        batches = build_batches([b"a%d" % i for i in range(500)], None, [TS0 + i for i in range(500)], None, 3, 2048)
        assert len(batches) > 1
        assert c.produce("fresh", 0, batches, acks=-1) == 0
        assert c.produce("fresh", 0, batches[:1], acks=1) == 500
        c.produce("fresh", 0, batches[:1], acks=0)  # no answer expected
        assert c.list_offsets({("fresh", 0): EARLIEST})[("fresh", 0)][0] == 0
        assert c.list_offsets({("fresh", 0): LATEST})[("fresh", 0)][0] >= 500
        # By timestamp: the exact record inside the (lz4) batch, as Kafka answers
        assert c.list_offsets({("fresh", 0): TS0 + 123})[("fresh", 0)] == (123, TS0 + 123)
        assert c.list_offsets({("fresh", 0): TS0 + 10**9})[("fresh", 0)][0] == -1
        res = c.fetch("fresh", 0, 100, max_bytes=4096)
        assert res.error_code == 0 and res.log_start_offset == 0
        # The records are a view into the response frame, not a copy.
        assert isinstance(res.records, memoryview) and isinstance(res.records.obj, bytearray)
        assert len(res.records.obj) > len(res.records) > 0
        t = engine.arrow.batches_to_table(res.records, "fresh", 0, 100)
        assert t["offset"][0].as_py() == 100 and t["value"][0].as_py() == b"a100"
        assert c.fetch("fresh", 0, 10**6).error_code == OffsetOutOfRangeError.code
        with pytest.raises(UnknownTopicOrPartitionError):
            c.partition_count("absent")
        with pytest.raises(UnknownTopicOrPartitionError):
            c.produce("fresh", 4, batches)
        big = build_batches([b"x" * 2_000_000], None, None, None, 0, 4 << 20)
        with pytest.raises(RecordTooLargeError):
            c.produce("fresh", 0, big)


def test_api_error_keeps_kafkas_code():
    e = api_error(6, "produce")
    assert type(e) is NotLeaderOrFollowerError and e.code == 6 and e.retriable and "NOT_LEADER_OR_FOLLOWER" in str(e)
    e = api_error(9, "fetch")                   # a code without a class of ours: Kafka's facts on the instance
    assert type(e) is KafkaApiError and e.code == 9 and e.retriable and "REPLICA_NOT_AVAILABLE" in str(e)
    assert isinstance(api_error(1, "x"), OffsetOutOfRangeError)


def test_corrupt_batch_over_the_wire(spark_tmp, caplog):
    """A batch whose payload was flipped on disk after a clean close: the broker sends it
    as is; the task fails naming the range, or with failOnDataLoss=false skips that batch only."""
    import logging
    import struct

    from engine.errors import CorruptRecordError
    from spark_udfs.options import parse_options
    from spark_udfs.reader import plan_ranges, read_range

    path = str(spark_tmp / "wire-corrupt")
    with engine.open(path, background=False) as eng:
        eng.create_topic("c", partitions=1)
        with eng.producer(linger_ms=0) as p:
            for s in range(0, 400, 20):
                p.send_batch("c", [b"value-%04d" % i for i in range(s, s + 20)], partition=0)
        seg_path = eng.log("c", 0).segments[0].log_path
    with open(seg_path, "r+b") as f:
        data = f.read()
        pos = 0
        for _ in range(5):  # the 6th batch: offsets 100..119
            pos += 12 + struct.unpack(">i", data[pos + 8:pos + 12])[0]
        assert struct.unpack(">q", data[pos:pos + 8])[0] == 100
        f.seek(pos + 70)
        f.write(bytes([data[pos + 70] ^ 0xFF]))
    b = BrokerThread(path)
    try:
        strict = parse_options({"kafka.bootstrap.servers": b.bootstrap, "subscribe": "c"})
        with pytest.raises(CorruptRecordError, match=r"fetched from the broker .*offsets \[0, 400\) of c-0"):
            for part in plan_ranges(strict):
                list(read_range(part, strict))
        lax = parse_options({"kafka.bootstrap.servers": b.bootstrap, "subscribe": "c",
                             "failOnDataLoss": "false", "maxRecordsPerBatch": "30"})
        with caplog.at_level(logging.ERROR, logger="spark_udfs"):
            offs = [o for part in plan_ranges(lax) for bt in read_range(part, lax)
                    for o in bt.column(4).to_pylist()]
        assert offs == list(range(100)) + list(range(120, 400))
        assert "skipping offsets [100, 120) of c-0" in caplog.text
    finally:
        b.stop()
