"""The kafka-engine Spark source over transactional data (tests/txn_data.py), from the files
and through a broker: markers never become rows; ``kafka.isolation.level=read_committed``
(Spark's Kafka-source option) reads up to the last stable offset without aborted records,
the default read_uncommitted reads every data record up to the high watermark."""

import pytest
from server.conftest import BrokerThread  # tests/server/conftest.py

from tests.txn_data import fill


@pytest.fixture(scope="module")
def txbroker(spark_tmp):
    b = BrokerThread(str(spark_tmp / "txn-data"))

    def setup():
        b.engine.create_topic("tx", partitions=2, config={"segment.bytes": 2048})
        out = []
        for p in range(2):
            out.append(fill(b.engine.log("tx", p), rounds=4 + p))
        return out
    b.expected = b.call(setup)
    yield b
    b.stop()


def _values(spark, b, via_wire, **opts):
    r = spark.read.format("kafka-engine").option("subscribe", "tx")
    r = r.option("kafka.bootstrap.servers", b.bootstrap) if via_wire else r.option("path", b.engine.path)
    for k, v in opts.items():
        r = r.option(k, v)
    rows = r.load().select("partition", "offset", "value").orderBy("partition", "offset").collect()
    return [[bytes(x.value) for x in rows if x.partition == p] for p in range(2)]


@pytest.mark.parametrize("via_wire", [False, True], ids=["files", "wire"])
def test_read_committed_and_uncommitted(spark, txbroker, via_wire):
    committed = [c for c, _u in txbroker.expected]
    uncommitted = [u for _c, u in txbroker.expected]
    assert _values(spark, txbroker, via_wire) == uncommitted
    assert _values(spark, txbroker, via_wire, **{"kafka.isolation.level": "read_committed"}) == committed
    # small batches and split tasks: the aborted list applies across task and batch boundaries
    assert _values(spark, txbroker, via_wire, **{"kafka.isolation.level": "read_committed",
                                                 "minPartitions": "5", "maxRecordsPerBatch": "7"}) == committed


def test_read_committed_latest_is_the_lso(spark, txbroker):
    import json
    lsos = txbroker.call(lambda: [txbroker.engine.log("tx", p).last_stable_offset for p in range(2)])
    df = (spark.read.format("kafka-engine").option("path", txbroker.engine.path).option("subscribe", "tx")
          .option("kafka.isolation.level", "read_committed")
          .option("endingOffsets", json.dumps({"tx": {"0": -1, "1": -1}})).load())
    got = {r["partition"]: r["m"] for r in df.groupBy("partition").agg({"offset": "max"})
           .withColumnRenamed("max(offset)", "m").collect()}
    assert all(got[p] < lsos[p] for p in range(2))
    with pytest.raises(Exception, match="outside the available range .*last stable offset"):
        (spark.read.format("kafka-engine").option("path", txbroker.engine.path).option("subscribe", "tx")
         .option("kafka.isolation.level", "read_committed")
         .option("endingOffsets", json.dumps({"tx": {"0": lsos[0] + 3, "1": -1}})).load().count())


def test_streaming_offsets_are_the_lso_under_read_committed(txbroker):
    from spark_udfs.options import parse_options
    from spark_udfs.stream import KafkaEngineStreamReader
    lsos, hws = txbroker.call(lambda: ([txbroker.engine.log("tx", p).last_stable_offset for p in range(2)],
                                       [txbroker.engine.log("tx", p).high_watermark for p in range(2)]))
    assert all(lso < hw for lso, hw in zip(lsos, hws, strict=True))
    for level, want in (("read_committed", lsos), ("read_uncommitted", hws)):
        r = KafkaEngineStreamReader(parse_options(
            {"path": txbroker.engine.path, "subscribe": "tx", "kafka.isolation.level": level}, streaming=True))
        expect = {"tx": {str(p): want[p] for p in range(2)}}
        assert r.initialOffset() == expect                     # streaming default: latest
        assert r.latestOffset({"tx": {"0": 0, "1": 0}}) == expect
