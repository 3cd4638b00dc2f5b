"""Spark reads a topic while a producer thread of the same process appends to it.

Every append is one batch of 100 records whose values are the offsets they get,
so a read must return, per partition, offsets 0..n-1 with n a multiple of 100
(only complete batches), each value equal to its offset (no torn or shifted
record), no duplicate, and n no larger than the high watermark after the read.
"""

import threading

import engine

BATCH = 100


def test_read_while_a_producer_appends(spark, spark_tmp):
    path = str(spark_tmp / "live")
    eng = engine.open(path, background=False)
    stop = threading.Event()
    errors = []
    try:
        eng.create_topic("live", partitions=2, config={"segment.bytes": 256 * 1024})
        prod = eng.producer(linger_ms=0)
        written = [0, 0]

        def run():
            try:
                while not stop.is_set() and written[0] < 200_000:
                    for p in range(2):
                        n = written[p]
                        prod.send_batch("live", [b"%d" % o for o in range(n, n + BATCH)], partition=p)
                        written[p] = n + BATCH
            except BaseException as e:  # reported by the test below
                errors.append(e)

        for p in range(2):  # something to read from the start
            prod.send_batch("live", [b"%d" % o for o in range(BATCH)], partition=p)
            written[p] = BATCH
        t = threading.Thread(target=run, daemon=True)
        t.start()
        seen = []
        for _ in range(3):
            df = (spark.read.format("kafka-engine").option("path", path).option("subscribe", "live")
                  .option("maxRecordsPerBatch", "1000").load())
            rows = df.select("partition", "offset", "value").toArrow()
            hws = [eng.log("live", p).high_watermark for p in range(2)]
            for p in range(2):
                mask = [x == p for x in rows["partition"].to_pylist()]
                sub = rows.filter(mask)
                offs = sorted(sub["offset"].to_pylist())
                n = len(offs)
                assert offs == list(range(n)), f"gap or duplicate in live-{p}"
                assert n % BATCH == 0 and 0 < n <= hws[p]
                vals = dict(zip(sub["offset"].to_pylist(), sub["value"].to_pylist(), strict=True))
                assert all(vals[o] == b"%d" % o for o in offs)
                seen.append(n)
        stop.set()
        t.join(30)
        assert not errors, errors
        assert max(seen) > BATCH  # the reads really overlapped the appends
        prod.close()
    finally:
        stop.set()
        eng.close()
