"""The embedded producer: futures, batching by batch_size / linger_ms, partitioners, threads."""

import itertools
import threading
import time

import pyarrow as pa
import pytest

import engine
from engine import errors


def test_future_resolves_by_flushing_its_partition(eng):
    eng.create_topic("t", 1)
    p = eng.producer(linger_ms=60_000)  # would linger for a minute
    f = p.send("t", b"x")
    assert not f.done()
    meta = f.result()  # forces the append now
    assert (meta.topic, meta.partition, meta.offset) == ("t", 0, 0)
    assert f.done() and eng.log("t", 0).log_end_offset == 1
    p.close()


def test_linger_delivers_without_flush(eng):
    eng.create_topic("t", 1)
    p = eng.producer(linger_ms=20)
    f = p.send("t", b"x")
    deadline = time.monotonic() + 5
    while not f.done() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert f.done(), "the linger thread never appended the batch"
    assert eng.log("t", 0).log_end_offset == 1
    p.close()


def test_batch_size_closes_batches(eng):
    eng.create_topic("t", 1)
    with eng.producer(linger_ms=60_000, batch_size=16 * 1024) as p:
        for _i in range(1000):
            p.send("t", b"v" * 100)
        # ~100 KB of records in 16 KiB batches: most are appended before any flush
        assert eng.log("t", 0).log_end_offset >= 800
    hs, _ = engine._native.list_batches(eng.log("t", 0).read(0, 1 << 20).slices[0].read())
    assert len(hs) >= 6 and all(h.size <= 16 * 1024 + 200 for h in hs)


def test_sticky_partitioner_spreads_keyless_records(eng):
    eng.create_topic("t", 4)
    with eng.producer(linger_ms=60_000, batch_size=4096) as p:
        futs = [p.send("t", b"v" * 100) for _ in range(2000)]
    parts = [f.result().partition for f in futs]
    assert len(set(parts)) > 1
    # sticky: consecutive records share a partition in long runs
    switches = sum(1 for a, b in itertools.pairwise(parts) if a != b)
    assert switches < len(parts) / 10


def test_threads_send_concurrently_in_order(eng):
    eng.create_topic("t", 3)
    threads, per_thread = 4, 5000
    results = {}

    def worker(tid):
        with eng.producer(linger_ms=1, batch_size=8192) as p:
            futs = [p.send("t", b"%d:%d" % (tid, i), key=b"k%d" % tid) for i in range(per_thread)]
        results[tid] = [f.result() for f in futs]

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    seen = set()
    for metas in results.values():
        offs = [m.offset for m in metas]
        assert offs == sorted(offs), "a thread's records must keep their order"
        assert len({m.partition for m in metas}) == 1
        seen.update((m.partition, m.offset) for m in metas)
    assert len(seen) == threads * per_thread
    total = sum(eng.log("t", p).log_end_offset for p in range(3))
    assert total == threads * per_thread
    # and every record is where its future said
    for tid, metas in results.items():
        m = metas[1234]
        t = eng.read_arrow("t", m.partition, m.offset, m.offset + 1)
        assert t.column("value")[0].as_py() == b"%d:%d" % (tid, 1234)


def test_one_shared_producer_many_threads(eng):
    eng.create_topic("t", 2)
    p = eng.producer(linger_ms=1)
    futs = []
    lock = threading.Lock()

    def worker(tid):
        mine = [p.send("t", b"%d" % i, partition=tid % 2) for i in range(3000)]
        with lock:
            futs.extend(mine)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    p.close()
    offsets = {(f.result().partition, f.result().offset) for f in futs}
    assert len(offsets) == 12000
    assert max(o for part, o in offsets if part == 0) == 5999


def test_send_batch_with_keys_partitions_like_send(eng):
    from kafka.partitioner.default import murmur2

    eng.create_topic("t", 5)
    keys = [b"key-%d" % i for i in range(200)]
    with eng.producer() as p:
        res = p.send_batch("t", [b"v%d" % i for i in range(200)], keys=keys)
    assert sum(r.last_offset - r.first_offset + 1 for r in res) == 200
    for part in range(5):
        t = eng.read_arrow("t", part)
        for k in t.column("key").to_pylist():
            assert (murmur2(k) & 0x7FFFFFFF) % 5 == part


def test_send_batch_arrow_timestamps_and_headers(eng):
    eng.create_topic("t", 1)
    n = 100
    with eng.producer() as p:
        p.send_batch("t", pa.array([b"x"] * n, pa.binary()),
                     keys=pa.array([f"k{i}" for i in range(n)]),
                     timestamps=pa.array(range(1000, 1000 + n), pa.int64()),
                     headers=[[("i", b"%d" % i)] for i in range(n)], partition=0)
    t = eng.read_arrow("t", 0)
    assert t.column("key").to_pylist()[5] == b"k5"
    assert t.column("timestamp").cast(pa.int64()).to_pylist()[:3] == [1_000_000, 1_001_000, 1_002_000]  # us
    assert t.column("headers")[7].as_py() == [{"key": "i", "value": b"7"}]


def test_producer_argument_errors(eng):
    eng.create_topic("t", 2)
    with pytest.raises(errors.InvalidConfigError):
        eng.producer(lingerms=5)
    with pytest.raises(errors.InvalidConfigError):
        eng.producer(compression_type="brotli")
    with eng.producer() as p:
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            p.send("t", b"x", partition=2)
        with pytest.raises(TypeError):
            p.send("t", 12345)
        with pytest.raises(ValueError):
            p.send_batch("t", [b"a", b"b"], keys=[b"k"])
    with pytest.raises(errors.ClosedError):
        p.send("t", b"x")


def test_log_append_time_topic(eng):
    eng.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with eng.producer() as p:
        f = p.send("t", b"x", timestamp=5)
    meta = f.result()
    assert meta.timestamp >= before
    t = eng.read_arrow("t", 0)
    assert t.column("timestampType").to_pylist() == [1]
    assert t.column("timestamp")[0].as_py().timestamp() * 1000 >= before
