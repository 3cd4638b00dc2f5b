"""Spark on a cluster (a real ZooKeeper and three `python -m engine serve --broker-id N` processes
on 127.0.0.1): with `path` naming the data directories of brokers on this machine beside
`kafka.bootstrap.servers`, each range is read from a local in-sync copy where there is one and
through the leader otherwise (spark_udfs.locality) — the plan says which, and the rows are the
same as reading everything through the leaders."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.serving import ServeProcess, ZooKeeperProcess, find_zookeeper


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cp, why = find_zookeeper()
    if cp is None:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("spark-cluster")
    zk = ZooKeeperProcess(root / "zookeeper").start()
    brokers = {i: ServeProcess(root / f"broker-{i}", "--broker-id", str(i), "--zookeeper", zk.connect,
                               "--config", "zookeeper.session.timeout.ms=6000")
               for i in (1, 2, 3)}
    try:
        for b in brokers.values():
            b.start()
        boot = ",".join(b.bootstrap for b in brokers.values())
        admin = AdminClient({"bootstrap.servers": boot})
        fs = admin.create_topics([NewTopic("spread", 3, 1), NewTopic("copies", 1, 3)], operation_timeout=30)
        for f in fs.values():
            f.result(60)
        p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5})
        deadline = time.monotonic() + 60
        while True:                      # until every partition has a leader the producer knows
            md = admin.list_topics(timeout=10)
            if all(pm.leader >= 0 and len(pm.isrs) == len(pm.replicas)
                   for t in ("spread", "copies") for pm in md.topics[t].partitions.values()):
                break
            assert time.monotonic() < deadline, "topics never got leaders"
            time.sleep(0.3)
        for i in range(3000):
            p.produce("spread", b"s%d" % i, partition=i % 3)
            p.produce("copies", b"c%d" % i)
        assert p.flush(60) == 0
        md = admin.list_topics(timeout=10)
        leaders = {(t, pid): pm.leader for t in ("spread", "copies") for pid, pm in md.topics[t].partitions.items()}
        isrs = {(t, pid): list(pm.isrs) for t in ("spread", "copies") for pid, pm in md.topics[t].partitions.items()}
        yield {"bootstrap": boot, "dirs": {i: b.data for i, b in brokers.items()}, "leaders": leaders, "isrs": isrs}
    finally:
        for b in brokers.values():
            if b.running:
                b.stop()
        zk.stop()


def _opts(cluster, local: list[int], topics="spread,copies") -> dict:
    o = {"kafka.bootstrap.servers": cluster["bootstrap"], "subscribe": topics}
    if local:
        o["path"] = ",".join(cluster["dirs"][i] for i in local)
    return o


def test_plan_reads_local_in_sync_copies_else_the_leader(cluster):
    from spark_udfs.locality import explain

    here = [1, 2]                            # this "machine" holds brokers 1 and 2
    plan = {(r["topic"], r["partition"]): r["source"] for r in explain(_opts(cluster, here))}
    for (t, p), leader in cluster["leaders"].items():
        if t == "copies":                    # RF 3: broker 1 or 2 has it, the leader's own copy first,
            first = next(r for r in cluster["isrs"][(t, p)] if r in here)    # else the ISR's order
            want = cluster["dirs"][leader] if leader in here else cluster["dirs"][first]
            assert plan[(t, p)] == f"local:{want}"
        elif leader in here:                 # RF 1: only its leader has it
            assert plan[(t, p)] == f"local:{cluster['dirs'][leader]}"
        else:
            assert plan[(t, p)] == f"leader:{leader}"


def test_local_ranges_are_read_from_disk_without_the_network(cluster):
    """A range placed on a local copy reads with the brokers unreachable; one placed on the
    leader needs the network (so the local read really is local)."""
    from engine.client.wire import KafkaConnectionError
    from spark_udfs.options import parse_options
    from spark_udfs.reader import OffsetRangePartition, read_range

    leader = cluster["leaders"][("copies", 0)]
    opts = parse_options({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "copies",
                          "path": cluster["dirs"][leader], "kafka.request.timeout.ms": "2000"})
    part = OffsetRangePartition("copies", 0, 0, 3000, cluster["dirs"][leader])
    rows = sum(b.num_rows for b in read_range(part, opts))
    assert rows == 3000
    with pytest.raises(KafkaConnectionError):
        list(read_range(OffsetRangePartition("copies", 0, 0, 3000, None), opts))


def test_spark_rows_equal_reading_through_the_leaders(spark, cluster):
    def rows(opts):
        r = spark.read.format("kafka-engine")
        for k, v in opts.items():
            r = r.option(k, v)
        t = r.load().toArrow()
        return sorted(zip(t["topic"].to_pylist(), t["partition"].to_pylist(), t["offset"].to_pylist(),
                          t["value"].to_pylist(), strict=True))

    through_leaders = rows(_opts(cluster, []))
    assert len(through_leaders) == 6000
    assert rows(_opts(cluster, [1, 2])) == through_leaders
    assert rows(_opts(cluster, [1, 2, 3])) == through_leaders
    # a micro-batch stream over the same cluster and local copies sees the same rows
    q = (spark.readStream.format("kafka-engine").options(**_opts(cluster, [2]), startingOffsets="earliest")
         .load().writeStream.format("memory").queryName("cluster_local").trigger(availableNow=True).start())
    q.awaitTermination(120)
    got = spark.sql("select topic, partition, offset, value from cluster_local").toArrow()
    assert sorted(zip(got["topic"].to_pylist(), got["partition"].to_pylist(), got["offset"].to_pylist(),
                      got["value"].to_pylist(), strict=True)) == through_leaders
