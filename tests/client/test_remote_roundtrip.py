"""engine.connect against our broker and Apache Kafka 4.0: what goes in through the remote
producer comes back identical through the Arrow consumer and read_arrow."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

import engine
from engine.errors import InvalidConfigError


def _drain(consumer, want: int, timeout_s: float = 30.0) -> pa.Table:
    got, deadline = [], time.monotonic() + timeout_s
    while sum(b.num_rows for b in got) < want and time.monotonic() < deadline:
        got += consumer.poll_arrow(max_records=1000, timeout_ms=500)
    return pa.Table.from_batches(got, schema=engine.KAFKA_SCHEMA) if got else engine.KAFKA_SCHEMA.empty_table()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_send_batch_round_trip_every_codec(cluster, topic_name, codec):
    n = 2000
    values = pa.array([None if i % 97 == 0 else b"v-%d" % i * (i % 5 + 1) for i in range(n)], pa.binary())
    keys = pa.array([None if i % 3 == 0 else b"k%d" % i for i in range(n)], pa.binary())
    ts = pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64())
    headers = [[("h", b"%d" % i), ("n", None)] if i % 7 == 0 else [] for i in range(n)]
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 1)
        with eng.producer(**{"compression.type": codec, "batch.size": 16384}) as p:
            assert p.producer_id[0] >= 0            # idempotent by default (InitProducerId)
            res = p.send_batch(topic_name, values=values, keys=keys, headers=headers, timestamps=ts)
        assert [r[1] for r in res] == sorted(r[1] for r in res) and res[0][1] == 0
        assert sum(r[2] for r in res) == n and len(res) > 1
        table = eng.read_arrow(topic_name, 0)
        assert table.schema == engine.KAFKA_SCHEMA
        assert table.column("offset").to_pylist() == list(range(n))
        assert table.column("value").to_pylist() == values.to_pylist()
        assert table.column("key").to_pylist() == keys.to_pylist()
        assert table.column("timestamp").cast(pa.int64()).to_pylist() == [t * 1000 for t in ts.to_pylist()]
        assert table.column("headers").to_pylist() == [[{"key": k, "value": v} for k, v in h] for h in headers]
        c = eng.consumer(**{"auto.offset.reset": "earliest"})
        c.assign([(topic_name, 0)])
        consumed = _drain(c, n)
        assert consumed.equals(table)
        assert c.position((topic_name, 0)) == n
        c.close()


def test_send_records_futures_and_table_input(cluster, topic_name):
    with engine.connect(cluster, **{"client.id": "arrow-test"}) as eng:
        eng.create_topic(topic_name, 3)
        with eng.producer(linger_ms=20) as p:                  # underscore keys too
            fs = [p.send(topic_name, b"x%d" % i, key=b"key-%d" % (i % 4), headers=[("i", b"%d" % i)],
                         timestamp=1000 + i) for i in range(60)]
            tbl = pa.table({"value": pa.array([b"t1", b"t2"]), "key": pa.array([None, b"kk"]),
                            "partition": pa.array([2, 2], pa.int32())})
            res = p.send_batch(topic_name, tbl)
        metas = [f.result(10) for f in fs]
        assert res[0][0] == 2
        by_part: dict[int, list] = {}
        for i, m in enumerate(metas):
            assert m.partition == engine._native.default_partition(b"key-%d" % (i % 4), 3)
            by_part.setdefault(m.partition, []).append(m.offset)
        for _part, offs in by_part.items():
            assert offs == list(range(len(offs)))            # per-record offsets, in send order
        tables = {p_: eng.read_arrow(topic_name, p_) for p_ in range(3)}
        assert sum(t.num_rows for t in tables.values()) == 62
        last2 = tables[2].slice(tables[2].num_rows - 2)
        assert last2.column("value").to_pylist() == [b"t1", b"t2"]
        assert last2.column("key").to_pylist() == [None, b"kk"]
        for m, f in zip(metas, fs, strict=True):
            row = tables[m.partition].slice(m.offset, 1)
            assert row.column("timestamp").cast(pa.int64())[0].as_py() == f.timestamp * 1000
            assert row.column("headers")[0].as_py()[0]["key"] == "i"


def test_consumer_seek_max_records_and_offsets_for_times(cluster, topic_name):
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 1)
        with eng.producer() as p:
            p.send_batch(topic_name, values=[b"%d" % i for i in range(500)],
                         timestamps=[10_000 + i * 10 for i in range(500)])
        c = eng.consumer()
        c.assign([(topic_name, 0)])
        c.seek((topic_name, 0), 123)
        first = c.poll_arrow(max_records=7, timeout_ms=10_000)
        assert sum(b.num_rows for b in first) == 7
        assert pa.concat_batches(first).column("offset").to_pylist() == list(range(123, 130))
        assert c.position((topic_name, 0)) == 130
        rest = _drain(c, 370)
        assert rest.column("offset").to_pylist() == list(range(130, 500))
        c.seek((topic_name, 0), 5)                           # a seek drops what was read ahead
        again = c.poll_arrow(max_records=3, timeout_ms=10_000)
        assert pa.concat_batches(again).column("value").to_pylist() == [b"5", b"6", b"7"]
        got = eng.offsets_for_times({(topic_name, 0): 10_000 + 250 * 10 - 5})
        assert got[(topic_name, 0)].offset == 250
        assert eng.offsets_for_times({(topic_name, 0): 99_999_999})[(topic_name, 0)] is None
        assert eng.read_arrow(topic_name, 0, 490, 495).column("offset").to_pylist() == list(range(490, 495))
        c.close()


def test_consumer_group_of_arrow_consumers_splits_a_topic(cluster, topic_name):
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 4)
        with eng.producer() as p:
            for part in range(4):
                p.send_batch(topic_name, values=[b"p%d-%d" % (part, i) for i in range(50)], partitions=part)
        group = f"g-{topic_name}"
        seen: list = []
        assignments: dict[int, set] = {}
        stop = threading.Event()
        errors: list = []

        def member(i: int) -> None:
            try:
                c = eng.consumer(**{"group.id": group, "auto.offset.reset": "earliest",
                                    "enable.auto.commit": False})
                c.subscribe([topic_name])
                while not stop.is_set():
                    for b in c.poll_arrow(timeout_ms=200):
                        seen.extend(b.column("value").to_pylist())
                    assignments[i] = set(c.assignment())
                c.commit()
                assert c.committed(sorted(assignments[i])) == {tp: 50 for tp in assignments[i]}
                c.close()
            except BaseException as e:  # reported by the test thread
                errors.append(e)

        threads = [threading.Thread(target=member, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not errors and not (
                len(seen) >= 200 and all(assignments.get(i) for i in range(2))
                and len(assignments[0] | assignments[1]) == 4):
            time.sleep(0.1)
        time.sleep(1.0)          # let both members poll once more in the final generation
        stop.set()
        for t in threads:
            t.join(60)
        assert not errors, errors
        a0, a1 = assignments[0], assignments[1]
        assert a0 and a1 and not (a0 & a1) and len(a0 | a1) == 4
        # every record at least once (a rebalance may hand a partition over before a commit)
        assert set(seen) == {b"p%d-%d" % (p_, i) for p_ in range(4) for i in range(50)}


def test_config_errors_are_kafkas():
    with pytest.raises(InvalidConfigError, match="unknown configuration"):
        engine.connect("127.0.0.1:1", **{"no.such.key": 1})
    with pytest.raises(InvalidConfigError, match="must be an integer"):
        engine.connect("127.0.0.1:1", **{"linger.ms": "soon"})


def test_isolation_level_is_checked_and_other_settings_refused_clearly(ours):
    with engine.connect(ours.bootstrap) as eng:
        with pytest.raises(InvalidConfigError, match="read_uncommitted or read_committed"):
            eng.consumer(**{"isolation.level": "committed"})
        eng.consumer(**{"isolation.level": "read_committed"}).close()
        with pytest.raises(InvalidConfigError, match="acks=all"):
            eng.producer(acks=1, enable_idempotence=True)


def test_a_drain_window_of_many_batches_goes_one_batch_per_request(cluster, topic_name):
    # batch.size far below what accumulates between two sender wake-ups: one drain holds many
    # batches, and Kafka takes exactly one batch per partition per Produce request (v3+)
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 1)
        with eng.producer(**{"batch.size": 300, "linger.ms": 200}) as p:
            fs = [p.send(topic_name, b"r%03d" % i + b"." * 40, partition=0) for i in range(400)]
        assert [f.result(10).offset for f in fs] == list(range(400))
        table = eng.read_arrow(topic_name, 0)
        assert table.column("value").to_pylist() == [b"r%03d" % i + b"." * 40 for i in range(400)]


def test_producer_sees_added_partitions_after_metadata_max_age(cluster, topic_name):
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 1)
        with eng.producer(**{"metadata.max.age.ms": 0}) as p:
            assert p.partitions_for(topic_name) == [0]
            p.send_batch(topic_name, values=[b"a"])
            eng.create_partitions(topic_name, 3)
            deadline = time.monotonic() + 30
            while p.partitions_for(topic_name) != [0, 1, 2] and time.monotonic() < deadline:
                p.send_batch(topic_name, values=[b"wait"], partitions=0)
                time.sleep(0.2)
            assert p.send_batch(topic_name, values=[b"z"], partitions=2)[0][:2] == (2, 0)
        assert eng.read_arrow(topic_name, 2).column("value").to_pylist() == [b"z"]
