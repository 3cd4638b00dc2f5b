"""The embedded API end to end: topics, producer, consumer, read_arrow, read-only opens."""

import os
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pytest

import engine
from engine import errors


def test_topics_create_list_describe_delete(eng):
    eng.create_topic("events", 3, {"retention.ms": 3600000, "segment.bytes": 1 << 20})
    eng.create_topic("other")
    assert eng.list_topics() == ["events", "other"]
    d = eng.describe_topic("events")
    assert [p.partition for p in d.partitions] == [0, 1, 2]
    assert d.config["retention.ms"] == 3600000
    assert d.config["segment.bytes"] == 1 << 20
    assert d.config["max.message.bytes"] == 1048588  # Kafka's default
    assert d.overrides == {"retention.ms": 3600000, "segment.bytes": 1 << 20}
    assert len(d.topic_id) == 22
    assert os.path.isdir(os.path.join(eng.path, "events-2"))
    with open(os.path.join(eng.path, "events-0", "partition.metadata")) as f:
        assert f.read() == f"version: 0\ntopic_id: {d.topic_id}\n"
    eng.delete_topic("other")
    assert eng.list_topics() == ["events"]
    assert not os.path.exists(os.path.join(eng.path, "other-0"))


def test_admin_errors(eng):
    eng.create_topic("t", 1)
    with pytest.raises(errors.TopicAlreadyExistsError):
        eng.create_topic("t", 1)
    with pytest.raises(errors.InvalidConfigError, match="no.such.key"):
        eng.create_topic("u", 1, {"no.such.key": 1})
    with pytest.raises(errors.InvalidConfigError):
        eng.create_topic("u", 1, {"retention.ms": "soon"})
    with pytest.raises(errors.InvalidTopicError):
        eng.create_topic("bad/name", 1)
    with pytest.raises(errors.InvalidPartitionsError):
        eng.create_topic("u", 0)
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        eng.describe_topic("nope")
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        eng.log("t", 5)
    assert eng.list_topics() == ["t"]


def test_unknown_engine_config_key(data_dir):
    with pytest.raises(errors.InvalidConfigError, match="log.segmnet.bytes"):
        engine.open(data_dir, {"log.segmnet.bytes": 100})


def test_create_partitions_and_alter_config(eng):
    eng.create_topic("t", 1)
    eng.create_partitions("t", 3)
    assert len(eng.describe_topic("t").partitions) == 3
    with pytest.raises(errors.InvalidPartitionsError):
        eng.create_partitions("t", 2)
    eng.alter_topic_config("t", {"retention.bytes": 1000})
    assert eng.describe_topic("t").config["retention.bytes"] == 1000
    eng.alter_topic_config("t", delete=["retention.bytes"])
    assert eng.describe_topic("t").config["retention.bytes"] == -1


def test_produce_consume_round_trip(eng):
    eng.create_topic("t", 2)
    with eng.producer(linger_ms=0) as p:
        futs = [p.send("t", b"v%d" % i, key=b"k%d" % (i % 5), headers=[("h", b"x"), ("n", None)],
                       timestamp=1_700_000_000_000 + i) for i in range(100)]
        futs.append(p.send("t", None, key=b"tomb", partition=1))
        p.flush()
    metas = [f.result() for f in futs]
    assert all(m.topic == "t" for m in metas)
    c = eng.consumer(auto_offset_reset="earliest")
    c.assign([("t", 0), ("t", 1)])
    got = []
    while True:
        batch = c.poll(timeout_ms=50)
        if not batch:
            break
        got.extend(batch)
    assert len(got) == 101
    by_value = {r.value: r for r in got}
    for i, m in enumerate(metas[:100]):
        r = by_value[b"v%d" % i]
        assert (r.partition, r.offset) == (m.partition, m.offset)
        assert r.key == b"k%d" % (i % 5)
        assert r.headers == [("h", b"x"), ("n", None)]
        assert r.timestamp == 1_700_000_000_000 + i
    assert by_value[None].key == b"tomb" and by_value[None].partition == 1
    # the same key always lands on the same partition
    parts = {}
    for i, m in enumerate(metas[:100]):
        parts.setdefault(i % 5, set()).add(m.partition)
    assert all(len(s) == 1 for s in parts.values())


def test_key_partitioning_matches_java_client(eng):
    from kafka.partitioner.default import murmur2

    eng.create_topic("t", 7)
    with eng.producer() as p:
        futs = {k: p.send("t", b"x", key=k) for k in (b"a", b"user-42", b"\x00\xff", b"" , b"long" * 50)}
        p.flush()
    for key, f in futs.items():
        assert f.result().partition == (murmur2(key) & 0x7FFFFFFF) % 7


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compressed_round_trip(eng, codec):
    eng.create_topic("t", 1)
    with eng.producer(compression_type=codec, linger_ms=0) as p:
        for i in range(1000):
            p.send("t", b"value-%d" % i * 3, key=b"k")
    c = eng.consumer(auto_offset_reset="earliest")
    c.assign([("t", 0)])
    got = []
    while len(got) < 1000:
        batch = c.poll(timeout_ms=100)
        assert batch
        got.extend(batch)
    assert [r.offset for r in got] == list(range(1000))
    assert got[7].value == b"value-7" * 3
    table = eng.read_arrow("t", 0)
    assert table.num_rows == 1000
    assert table.column("value")[999].as_py() == b"value-999" * 3


def test_send_batch_lists_and_arrow(eng):
    eng.create_topic("t", 1)
    with eng.producer() as p:
        p.send_batch("t", [b"a", b"b", None], keys=[b"1", None, b"3"])
        p.send_batch("t", pa.array([b"x" * 100] * 5000, pa.binary()))
        p.flush()
    t = eng.read_arrow("t", 0)
    assert t.num_rows == 5003
    assert t.column("value").to_pylist()[:3] == [b"a", b"b", None]
    assert t.column("key").to_pylist()[:3] == [b"1", None, b"3"]
    assert t.column("offset").to_pylist() == list(range(5003))


def test_read_arrow_schema_and_bounds(eng):
    eng.create_topic("t", 1)
    with eng.producer() as p:
        for i in range(50):
            p.send("t", b"%d" % i, headers=[("a", b"1")], timestamp=1_000_000 + i)
    t = eng.read_arrow("t", 0, 10, 20)
    assert t.schema == engine.KAFKA_SCHEMA
    assert t.column("offset").to_pylist() == list(range(10, 20))
    assert t.column("topic").to_pylist() == ["t"] * 10
    assert t.column("partition").to_pylist() == [0] * 10
    assert t.column("timestamp")[0].as_py().timestamp() == pytest.approx(1_000_010 / 1000)
    assert t.column("timestampType").to_pylist() == [0] * 10
    assert t.column("headers")[0].as_py() == [{"key": "a", "value": b"1"}]


def test_seek_and_offsets_for_times(eng):
    eng.create_topic("t", 1)
    with eng.producer(linger_ms=0) as p:
        for i in range(100):
            p.send("t", b"%d" % i, timestamp=10_000 + 10 * i)
            if i % 10 == 9:
                p.flush()
    c = eng.consumer()
    c.assign([("t", 0)])
    found = c.offsets_for_times({("t", 0): 10_000 + 10 * 42 - 5})
    assert found[engine.TopicPartition("t", 0)].offset == 42
    assert c.offsets_for_times({("t", 0): 10_000_000})[("t", 0)] is None
    c.seek(("t", 0), 42)
    assert c.poll(timeout_ms=50, max_records=1)[0].value == b"42"
    c.seek_to_end()
    assert c.poll(timeout_ms=10) == []
    c.seek_to_beginning()
    assert c.poll(timeout_ms=50, max_records=1)[0].offset == 0
    assert c.end_offsets([("t", 0)]) == {("t", 0): 100}


def test_poll_waits_for_new_data(eng):
    eng.create_topic("t", 1)
    c = eng.consumer()
    c.assign([("t", 0)])
    assert c.poll(timeout_ms=10) == []

    def later():
        time.sleep(0.1)
        with eng.producer(linger_ms=0) as p:
            p.send("t", b"late")

    th = threading.Thread(target=later)
    th.start()
    got = c.poll(timeout_ms=5000)
    th.join()
    assert [r.value for r in got] == [b"late"]


def test_second_writer_is_refused_with_holder(data_dir):
    with engine.open(data_dir, background=False):
        code = ("import engine, sys\n"
                "try:\n engine.open(sys.argv[1])\n"
                "except engine.DataDirLockedError as e:\n print('LOCKED', e.holder); sys.exit(3)\n")
        r = subprocess.run([sys.executable, "-c", code, data_dir], capture_output=True, text=True,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        assert r.returncode == 3, r.stderr
        assert str(os.getpid()) in r.stdout


def test_read_only_open_beside_writer(data_dir):
    with engine.open(data_dir, background=False) as w:
        w.create_topic("t", 1)
        with w.producer(linger_ms=0) as p:
            for i in range(10):
                p.send("t", b"%d" % i)
        with engine.open(data_dir, read_only=True) as r:
            assert r.list_topics() == ["t"]
            assert r.read_arrow("t", 0).num_rows == 10
            with pytest.raises(errors.ReadOnlyError):
                r.create_topic("u", 1)
            with w.producer(linger_ms=0) as p:
                p.send("t", b"more")
            assert r.read_arrow("t", 0).num_rows == 11


def test_reopen_keeps_everything(data_dir):
    with engine.open(data_dir, background=False) as e:
        e.create_topic("t", 2, {"retention.ms": 123456})
        with e.producer() as p:
            for i in range(500):
                p.send("t", b"%d" % i, partition=i % 2)
    with engine.open(data_dir, background=False) as e:
        assert e.recovery_report == []
        assert e.describe_topic("t").config["retention.ms"] == 123456
        assert sum(p.log_end_offset for p in e.describe_topic("t").partitions) == 500
        assert e.read_arrow("t", 1).num_rows == 250


def test_auto_create_on_produce(eng):
    with eng.producer() as p:
        p.send("fresh", b"x")
    assert eng.list_topics() == ["fresh"]
    assert eng.describe_topic("fresh").partitions[0].log_end_offset == 1


def test_oversized_record_rejected(eng):
    eng.create_topic("t", 1, {"max.message.bytes": 10_000})
    with eng.producer(linger_ms=0) as p:
        ok = p.send("t", b"small")
        p.flush()
        f = p.send("t", b"x" * 20_000)
        p.flush()  # like Kafka's flush(), errors land in the futures
        with pytest.raises(errors.RecordTooLargeError):
            f.result()
    assert ok.result().offset == 0
    assert eng.log("t", 0).log_end_offset == 1


def test_closed_engine_raises(data_dir):
    e = engine.open(data_dir, background=False)
    e.create_topic("t", 1)
    e.close()
    with pytest.raises(errors.ClosedError):
        e.create_topic("u", 1)


def test_crc_mismatch_on_read_names_file_and_position(data_dir):
    with engine.open(data_dir, background=False) as e:
        e.create_topic("t", 1)
        with e.producer(linger_ms=0) as p:
            for i in range(20):
                p.send("t", b"record-%d" % i)
    seg = os.path.join(data_dir, "t-0", "00000000000000000000.log")
    size = os.path.getsize(seg) // 20  # equal one-record batches
    bad_batch_pos = 7 * size
    with open(seg, "r+b") as f:  # flip one byte inside batch 7's CRC-covered records
        f.seek(bad_batch_pos + size - 3)
        b = f.read(1)
        f.seek(bad_batch_pos + size - 3)
        f.write(bytes([b[0] ^ 0x55]))
    with engine.open(data_dir, background=False) as e:  # clean shutdown: no scan, as Kafka
        c = e.consumer(auto_offset_reset="earliest")
        c.assign([("t", 0)])
        with pytest.raises(errors.CorruptRecordError) as info:
            for _ in range(5):
                c.poll(timeout_ms=10)
        assert info.value.path == seg and info.value.position == bad_batch_pos
        assert seg in str(info.value) and str(bad_batch_pos) in str(info.value)
        with pytest.raises(errors.CorruptRecordError) as info:
            e.read_arrow("t", 0)
        assert info.value.path == seg and info.value.position == bad_batch_pos
        # the records before the bad batch are still readable
        assert e.read_arrow("t", 0, 0, 7).num_rows == 7
