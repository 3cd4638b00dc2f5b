"""send_batch with keys: Kafka's DefaultPartitioner (murmur2(key) & 0x7fffffff) % n over a
key column in the native core (engine._native.partition_keys), null keys to the sticky
partition (checked against the murmur2 vectors of Kafka's own UtilsTest)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import engine
from engine import _native

# Kafka's UtilsTest.testMurmur2 vectors
_VECTORS = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
            b"a-little-bit-longer-string": -1486304829, b"abc": 479470107,
            b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971}


def _parts(buf) -> list[int]:
    return list(memoryview(buf).cast("i"))


def test_partition_keys_matches_kafkas_partitioner():
    keys = list(_VECTORS) + [b"", None, b"x" * 1000]
    want = [(h & 0x7FFFFFFF) % 13 for h in _VECTORS.values()] + [(_native.murmur2(b"") & 0x7FFFFFFF) % 13,
                                                                  5, _native.default_partition(b"x" * 1000, 13)]
    for arr in (pa.array(keys, pa.binary()), pa.array(keys, pa.large_binary()),
                pa.array([None if k is None else k.decode() for k in keys], pa.string()),
                pa.array([None if k is None else k.decode() for k in keys], pa.large_string()),
                pa.chunked_array([keys[:3], keys[3:]], pa.binary()), keys,
                [None if k is None else k.decode() for k in keys]):
        assert _parts(_native.partition_keys(arr, 13, 5)) == want
    sliced = pa.array([b"zz", None] + keys, pa.binary()).slice(2)          # offset and validity bit 0
    assert _parts(_native.partition_keys(sliced, 13, 5)) == want
    assert _parts(_native.partition_keys(pa.array([], pa.binary()), 3)) == []
    with pytest.raises(ValueError):
        _native.partition_keys(keys, 0)
    with pytest.raises(TypeError):
        _native.partition_keys(pa.array([1, 2]), 3)


def test_send_batch_with_keys_lands_where_kafka_puts_them(cluster, topic_name):
    n = 3000
    keys = pa.array([None if i % 10 == 0 else b"user-%d" % (i % 577) for i in range(n)], pa.binary())
    values = pa.array([b"v%d" % i for i in range(n)], pa.binary())
    with engine.connect(cluster) as eng:
        eng.create_topic(topic_name, 4)
        with eng.producer() as p:
            res = p.send_batch(topic_name, values=values, keys=keys)
        assert sum(r[2] for r in res) == n
        seen, null_parts = 0, set()
        for part in range(4):
            t = eng.read_arrow(topic_name, part)
            seen += t.num_rows
            for k in t.column("key").to_pylist():
                if k is None:
                    null_parts.add(part)
                else:
                    assert _native.default_partition(k, 4) == part
            # per partition, the records keep the order they were given in
            vals = [int(v[1:]) for v in t.column("value").to_pylist()]
            assert vals == sorted(vals)
        assert seen == n and len(null_parts) == 1      # null keys: the one sticky partition
