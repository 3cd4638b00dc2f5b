"""Arrow UDFs to use beside the ``kafka-engine`` source (Spark's ``arrow_udf``:
``pyarrow.Array`` in, ``pyarrow.Array`` out, one call per Arrow batch).

Contract:

* :func:`header_value` ``(headers_col, name)`` -> binary column: the value of
  the *last* header called `name` in each row (Kafka's
  ``Headers.lastHeader``), null when the row has none.  Computed with
  pyarrow.compute / numpy over the flattened header arrays, no Python object
  per row.
* :func:`kafka_partition` ``(key_col, num_partitions)`` -> int column: the
  partition Kafka's Java producer picks for a non-null key,
  ``(murmur2(key) & 0x7fffffff) % num_partitions`` (``engine._native.murmur2``);
  null for a null key (Kafka's sticky partitioner does not hash those).
  One native hash call per key.

The plain-array functions (``header_value_array``, ``kafka_partition_array``)
are what the UDFs run, usable without Spark.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidConfigError

__all__ = ["header_value", "header_value_array", "kafka_partition", "kafka_partition_array"]


def header_value_array(headers: pa.Array, name: str) -> pa.Array:
    """Per row, the value of the last header named `name` (null if none)."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    n = len(headers)
    flat = pc.list_flatten(headers)
    if len(flat) == 0:
        return pa.nulls(n, pa.binary())
    parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
    hit = pc.fill_null(pc.equal(flat.field("key"), name), False).to_numpy(zero_copy_only=False)
    idx = np.flatnonzero(hit)
    out = np.full(n, -1, dtype=np.int64)
    out[parents[idx]] = idx  # ascending idx: the last header of a row wins
    take = pa.array(out, mask=out < 0)
    return pc.take(flat.field("value"), take)


def kafka_partition_array(keys: pa.Array, num_partitions: int) -> pa.Array:
    """Kafka's default partition of each non-null key (int32; null keys -> null)."""
    from engine._native import murmur2

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    n = len(keys)
    out = np.zeros(n, dtype=np.int32)
    valid = np.ones(n, dtype=bool)
    if n:
        if keys.type != pa.binary():
            keys = keys.cast(pa.binary())
        bufs = keys.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=keys.offset * 4)
        data = memoryview(bufs[2]).cast("B") if bufs[2] is not None else memoryview(b"")
        if keys.null_count:
            valid = ~keys.is_null().to_numpy(zero_copy_only=False)
        for i in range(n):
            if valid[i]:
                out[i] = (murmur2(data[offs[i]:offs[i + 1]]) & 0x7FFFFFFF) % num_partitions
    return pa.array(out, mask=~valid)


def header_value(headers_col, name: str):
    """Column: the value of the last header `name` (binary, null if absent)."""
    from pyspark.sql.functions import arrow_udf

    if not isinstance(name, str):
        raise InvalidConfigError(f"header name must be a string, got {name!r}")

    @arrow_udf("binary")
    def _header_value(h: pa.Array) -> pa.Array:
        return header_value_array(h, name)

    return _header_value(headers_col)


def kafka_partition(key_col, num_partitions: int):
    """Column: Kafka's default partition of the key (int, null for a null key)."""
    from pyspark.sql.functions import arrow_udf

    if not isinstance(num_partitions, int) or isinstance(num_partitions, bool) or num_partitions < 1:
        raise InvalidConfigError(f"num_partitions must be a positive integer, got {num_partitions!r}")

    @arrow_udf("int")
    def _kafka_partition(k: pa.Array) -> pa.Array:
        return kafka_partition_array(k, num_partitions)

    return _kafka_partition(key_col)
