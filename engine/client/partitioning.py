"""Kafka's default partitioning over columns, shared by the embedded and the remote producer.

``key_partitions`` is the Java client's DefaultPartitioner for a whole column of keys —
``(murmur2(key) & 0x7fffffff) % n``, the sticky partition for a null key — computed in the
native core straight from an Arrow array's buffers (``engine._native.partition_keys``), no
Python object per key.  ``split`` cuts parallel columns (lists or Arrow arrays) into one group
per target partition, keeping each group's rows in order.
"""

from __future__ import annotations

from typing import Any

from .. import _native

__all__ = ["key_partitions", "split"]


def key_partitions(keys: Any, num_partitions: int, sticky: int):
    """numpy int64 array: the partition of each key (a list or an Arrow array)."""
    import numpy as np

    column = keys if hasattr(keys, "buffers") or hasattr(keys, "combine_chunks") else list(keys)
    return np.frombuffer(_native.partition_keys(column, num_partitions, sticky),
                         dtype=np.int32).astype(np.int64)


def split(parts, *columns) -> list[tuple]:
    """[(partition, column0[rows], column1[rows], ...)] for each distinct partition in `parts`
    (None columns stay None)."""
    import numpy as np

    out = []
    for p in np.unique(parts):
        idx = np.nonzero(parts == p)[0]
        out.append((int(p), *(None if col is None else col.take(idx) if hasattr(col, "take")
                              else [col[i] for i in idx] for col in columns)))
    return out
