"""Bad input to the kafka-engine source: clear errors (on the driver where possible),
failOnDataLoss=false clamping/skipping, corrupt batches named by file and position."""

import logging
import struct

import pytest

import engine
from engine.errors import CorruptRecordError, InvalidConfigError, OffsetOutOfRangeError
from spark_udfs.options import parse_options
from spark_udfs.reader import plan_ranges, read_range

N = 600


@pytest.fixture(scope="module")
def good(spark_tmp):
    path = str(spark_tmp / "bad-input-good")
    with engine.open(path, background=False) as eng:
        eng.create_topic("t", partitions=2)
        with eng.producer(linger_ms=0) as p:
            for part in range(2):
                p.send_batch("t", [b"v%d" % i for i in range(N)], partition=part)
    return path


def load(spark, path, **opts):
    r = spark.read.format("kafka-engine")
    if path is not None:
        r = r.option("path", path)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


# -- options, checked when the DataFrame is created (driver) ------------------

def test_unknown_option_is_named(spark, good):
    with pytest.raises(Exception, match="unknown option 'startingoffset' .*did you mean 'startingOffsets'"):
        load(spark, good, subscribe="t", startingOffset="earliest")


def test_consumer_options_that_do_not_apply_are_refused(spark, good):
    with pytest.raises(Exception, match="'kafka.group.id' is not supported"):
        load(spark, good, subscribe="t", **{"kafka.group.id": "g"})
    # path beside kafka.bootstrap.servers: the local brokers' data directories (spark_udfs.locality)
    with pytest.raises(Exception, match="data directory '/nonexistent' does not exist"):
        load(spark, "/nonexistent", subscribe="t", **{"kafka.bootstrap.servers": "127.0.0.1:9"})


def test_missing_path(spark):
    with pytest.raises(Exception, match="option 'path' .* is required"):
        load(spark, None, subscribe="t")


def test_path_that_does_not_exist(spark, spark_tmp):
    with pytest.raises(Exception, match="data directory .*nowhere.* does not exist"):
        load(spark, str(spark_tmp / "nowhere"), subscribe="t").count()


def test_exactly_one_subscription(spark, good):
    with pytest.raises(Exception, match="exactly one of .*got none"):
        load(spark, good)
    with pytest.raises(Exception, match="exactly one of .*'subscribe', 'assign'"):
        load(spark, good, subscribe="t", assign='{"t":[0]}')


def test_bad_values(spark, good):
    with pytest.raises(Exception, match="'failOnDataLoss' must be 'true' or 'false'"):
        load(spark, good, subscribe="t", failOnDataLoss="maybe")
    with pytest.raises(Exception, match="'minPartitions' must be a positive integer"):
        load(spark, good, subscribe="t", minPartitions="0")
    with pytest.raises(Exception, match="'startingOffsets' must be 'earliest', 'latest' or a JSON"):
        load(spark, good, subscribe="t", startingOffsets="first")


def test_batch_rules_of_sparks_kafka_source():
    with pytest.raises(InvalidConfigError, match="'latest' .* not allowed for batch"):
        parse_options({"path": "/x", "subscribe": "t", "startingOffsets": "latest"})
    with pytest.raises(InvalidConfigError, match="'earliest' .* not allowed for batch"):
        parse_options({"path": "/x", "subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'})
    assert parse_options({"path": "/x", "subscribe": "t", "kafka.isolation.level": "read_committed"}).read_committed
    with pytest.raises(InvalidConfigError, match="'read_uncommitted' or 'read_committed'"):
        parse_options({"path": "/x", "subscribe": "t", "kafka.isolation.level": "committed"})


def test_unknown_topic(spark, good):
    with pytest.raises(Exception, match="topic\\(s\\) 'nope' do not exist"):
        load(spark, good, subscribe="t,nope").count()
    with pytest.raises(Exception, match="t-5 do not exist"):
        load(spark, good, assign='{"t":[0,5]}').count()
    assert load(spark, good, subscribePattern="no-such-.*").count() == 0


def test_json_offsets_must_cover_the_selection(spark, good):
    with pytest.raises(Exception, match="must give every selected partition; missing t-1"):
        load(spark, good, subscribe="t", startingOffsets='{"t":{"0":5}}').count()


# -- offsets out of range, failOnDataLoss --------------------------------------

def test_offsets_out_of_range_fail_by_default(spark, good):
    with pytest.raises(Exception, match=r"ending offset 9999 of t-0 outside the available range \[0, 600\]"):
        load(spark, good, subscribe="t", endingOffsets='{"t":{"0":9999,"1":-1}}').count()


def test_offsets_out_of_range_clamped_without_fail_on_data_loss(spark, good):
    df = load(spark, good, subscribe="t", failOnDataLoss="false",
              startingOffsets='{"t":{"0":590,"1":700}}', endingOffsets='{"t":{"0":9999,"1":-1}}')
    rows = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert rows == [(0, o) for o in range(590, N)]  # t-1 starts past the end: clamped to empty


# -- corrupt batches -------------------------------------------------------------

@pytest.fixture(scope="module")
def corrupt(spark_tmp):
    """Topic 'c', one partition, 3+ segments of 20-record batches; one batch in the
    middle of the second segment gets a flipped payload byte (its CRC no longer matches)."""
    path = str(spark_tmp / "corrupt")
    with engine.open(path, background=False) as eng:
        eng.create_topic("c", partitions=1, config={"segment.bytes": 8 * 1024})
        with eng.producer(linger_ms=0) as p:
            for s in range(0, 1000, 20):
                p.send_batch("c", [b"value-%04d" % i for i in range(s, s + 20)], partition=0)
        segs = eng.log("c", 0).segments
        assert len(segs) >= 3
        seg = segs[1]
        seg_path, nxt = seg.log_path, segs[2].base_offset
    with open(seg_path, "r+b") as f:
        data = f.read()
        pos, n = 0, 0
        while n < 3:  # the 4th batch of the segment
            pos += 12 + struct.unpack(">i", data[pos + 8:pos + 12])[0]
            n += 1
        bad_base = struct.unpack(">q", data[pos:pos + 8])[0]
        f.seek(pos + 70)
        f.write(bytes([data[pos + 70] ^ 0xFF]))
    return path, seg_path, pos, bad_base, nxt


def test_corrupt_batch_fails_naming_file_and_position(spark, corrupt):
    path, seg_path, pos, _, _ = corrupt
    with pytest.raises(Exception, match=f"corrupt record batch in {seg_path} at byte {pos}:"):
        load(spark, path, subscribe="c").count()


def test_corrupt_batch_skipped_without_fail_on_data_loss(spark, corrupt):
    path, _, _, bad_base, nxt = corrupt
    df = load(spark, path, subscribe="c", failOnDataLoss="false")
    offsets = sorted(r.offset for r in df.select("offset").collect())
    assert offsets == list(range(0, bad_base)) + list(range(nxt, 1000))


def test_corrupt_batch_reported_in_the_log(corrupt, caplog):
    path, seg_path, pos, bad_base, nxt = corrupt
    opts = parse_options({"path": path, "subscribe": "c", "failOnDataLoss": "false"})
    with caplog.at_level(logging.ERROR, logger="spark_udfs"):
        n = sum(b.num_rows for part in plan_ranges(opts) for b in read_range(part, opts))
    assert n == 1000 - (nxt - bad_base)
    msg = caplog.text
    assert f"{seg_path} at byte {pos}" in msg and f"skipping offsets [{bad_base}, {nxt}) of c-0" in msg
    strict = parse_options({"path": path, "subscribe": "c"})
    with pytest.raises(CorruptRecordError) as ei:
        for part in plan_ranges(strict):
            list(read_range(part, strict))
    assert (ei.value.path, ei.value.position) == (seg_path, pos)


def test_range_deleted_after_planning(good, spark_tmp):
    """Retention moved the log start offset between planning and the task."""
    import shutil
    path = str(spark_tmp / "retention")
    shutil.copytree(good, path)
    opts = parse_options({"path": path, "subscribe": "t"})
    plan = plan_ranges(opts)
    with engine.open(path, background=False) as eng:
        eng.log("t", 0).delete_records_before(100)
    part0 = next(p for p in plan if p.partition == 0)
    with pytest.raises(OffsetOutOfRangeError, match=r"offsets \[0, 100\) of t-0 are gone"):
        list(read_range(part0, opts))
    lax = parse_options({"path": path, "subscribe": "t", "failOnDataLoss": "false"})
    got = [o for b in read_range(part0, lax) for o in b.column("offset").to_pylist()]
    assert got == list(range(100, N))


def test_hole_between_segments_is_data_loss(spark_tmp, caplog):
    """A sealed segment cut short (its last batches gone): never a silent short read."""
    path = str(spark_tmp / "hole")
    with engine.open(path, background=False) as eng:
        eng.create_topic("h", partitions=1, config={"segment.bytes": 8 * 1024})
        with eng.producer(linger_ms=0) as p:
            for s in range(0, 1000, 20):
                p.send_batch("h", [b"value-%04d" % i for i in range(s, s + 20)], partition=0)
        segs = eng.log("h", 0).segments
        seg_path, nxt = segs[1].log_path, segs[2].base_offset
    with open(seg_path, "r+b") as f:
        data = f.read()
        pos = 0
        ends = []
        while pos < len(data):
            pos += 12 + struct.unpack(">i", data[pos + 8:pos + 12])[0]
            ends.append(pos)
        f.truncate(ends[-3])  # drop the last two batches (40 records)
    opts = parse_options({"path": path, "subscribe": "h"})
    with pytest.raises(OffsetOutOfRangeError, match=rf"offsets \[{nxt - 40}, {nxt}\) of h-0 are missing"):
        for part in plan_ranges(opts):
            list(read_range(part, opts))
    lax = parse_options({"path": path, "subscribe": "h", "failOnDataLoss": "false"})
    with caplog.at_level(logging.WARNING, logger="spark_udfs"):
        got = [o for part in plan_ranges(lax) for b in read_range(part, lax)
               for o in b.column("offset").to_pylist()]
    assert got == list(range(nxt - 40)) + list(range(nxt, 1000))
    assert "are missing" in caplog.text


def test_per_partition_timestamps_must_cover_the_selection(good):
    opts = parse_options({"path": good, "subscribe": "t",
                          "startingOffsetsByTimestamp": '{"t":{"0":0}}'})
    with pytest.raises(InvalidConfigError, match="'startingOffsetsByTimestamp' must give every "
                                                 "selected partition; missing t-1"):
        plan_ranges(opts)
