"""Full-scan speed of the kafka-engine Spark source against Spark reading Parquet.

For each case (N records of S-byte values, codec), writes the topic with the
embedded producer (one partition per core, 2 here), then times in one
SparkSession (local[2]): ``count()`` and ``sum(length(value))`` through
``format("kafka-engine")`` reading the files (``path``), the same through the
network fallback (``kafka.bootstrap.servers`` of a broker serving that
directory from this process, on the same two cores), the same two queries
over a Parquet file that Spark wrote from those rows in the same run, and over
``kafka-engine-ceiling`` (bench/_spark_ceiling.py: the same plan, but each
task yields batches its Python worker already holds, i.e. the fastest any
Python data source can be).  Each query runs once per source to warm up, then
`--runs` rounds run the sources in turn (interleaved, so a busy machine
disturbs them alike) and the best of each is reported as rows/s and MB/s of
value bytes.

    python bench/spark_scan.py [--quick] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_topic(path, n, size, codec, partitions=2):
    import engine
    chunk = 10_000
    with engine.open(path, background=False) as eng:
        eng.create_topic("bench", partitions=partitions)
        with eng.producer(compression_type=codec, linger_ms=0, batch_size=256 * 1024) as p:
            base = os.urandom(size // 2).hex().encode()[:size]
            for part in range(partitions):
                vals = [base] * chunk
                for _ in range(0, n // partitions, chunk):
                    p.send_batch("bench", vals, partition=part)


class _Broker:
    """``python -m engine serve`` in a thread of this process, on a free port."""

    def __init__(self, path):
        import asyncio
        import threading

        import engine
        from engine.server import Broker

        self.engine = engine.open(path, background=False)
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(self.engine.node, "127.0.0.1", 0)
        started = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(self.broker.start())
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        if not started.wait(10):
            raise RuntimeError("broker did not start")
        self.bootstrap = f"127.0.0.1:{self.broker.port}"

    def stop(self):
        import asyncio
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
        self.engine.close()


def best(fns, runs):
    """Best time of each function: one warm-up each, then `runs` interleaved rounds."""
    for fn in fns:
        fn()
    times = [float("inf")] * len(fns)
    for _ in range(runs):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[i] = min(times[i], time.perf_counter() - t0)
    return times


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1 M x 100 B and 200 k x 1 KiB")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ["PYTHONPATH"] = ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")
    sys.path.insert(0, ROOT)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"        # loopback only
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from bench._spark_ceiling import CeilingDataSource
    from spark_udfs.datasource import KafkaEngineDataSource

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KafkaEngineDataSource)
    spark.dataSource.register(CeilingDataSource)
    scale = 10 if args.quick else 1
    cases = [(10_000_000 // scale, 100, "none"), (10_000_000 // scale, 100, "lz4"),
             (2_000_000 // scale, 1024, "none"), (2_000_000 // scale, 1024, "lz4")]
    print("| records | value | codec | query | kafka-engine rows/s | MB/s | network rows/s | MB/s | "
          "Parquet rows/s | MB/s | local / Parquet | network / local | network / Parquet | "
          "ceiling rows/s | ceiling / Parquet | local / ceiling |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, size, codec in cases:
        tmp = tempfile.mkdtemp(prefix="spark-scan-")
        try:
            data = os.path.join(tmp, "data")
            write_topic(data, n, size, codec)
            src = spark.read.format("kafka-engine").option("path", data).option("subscribe", "bench").load()
            pq_path = os.path.join(tmp, "parquet")
            src.write.parquet(pq_path)
            pq = spark.read.parquet(pq_path)
            ceil = (spark.read.format("kafka-engine-ceiling").option("path", data)
                    .option("subscribe", "bench").load())
            broker = _Broker(data)
            try:
                net = (spark.read.format("kafka-engine").option("kafka.bootstrap.servers", broker.bootstrap)
                       .option("subscribe", "bench").load())
                for qname, q in (("count", lambda d: d.count()),
                                 ("sum(length(value))",
                                  lambda d: d.agg(F.sum(F.length("value"))).collect())):
                    tk, tn, tp, tc = best([lambda d=d, q=q: q(d) for d in (src, net, pq, ceil)], args.runs)
                    mb = n * size / 1e6
                    print(f"| {n:,} | {size} B | {codec} | {qname} | {n / tk:,.0f} | {mb / tk:,.0f} | "
                          f"{n / tn:,.0f} | {mb / tn:,.0f} | {n / tp:,.0f} | {mb / tp:,.0f} | "
                          f"{tp / tk:.2f}x | {tk / tn:.2f}x | {tp / tn:.2f}x | "
                          f"{n / tc:,.0f} | {tp / tc:.2f}x | {tc / tk:.2f}x |", flush=True)
            finally:
                broker.stop()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    main()
