"""The ceiling of Spark's Python-data-source path, for bench/spark_scan.py.

``format("kafka-engine-ceiling")`` plans exactly like ``kafka-engine`` (same
options, same ranges, same tasks) but each task yields Arrow batches that its
Python worker already holds in memory: the first time a worker process meets a
range it reads it with :func:`spark_udfs.reader.read_range` and keeps the
batches; after that ``read()`` only hands the same ``pyarrow.RecordBatch``
objects to Spark.  What a query over it costs is therefore what Spark itself
spends on a Python data source (planning in a Python worker, the Arrow stream
from the worker to the JVM, batches turned into rows), with no decoding at
all: no Python data source reading these rows can be faster.  Benchmark only:
the cache is never invalidated, only dropped when a range of another
directory is read (a worker holds up to one directory's ranges in memory).
"""

from __future__ import annotations

from spark_udfs.datasource import KafkaEngineDataSource
from spark_udfs.options import parse_options
from spark_udfs.reader import KafkaEngineBatchReader, OffsetRangePartition, read_range

_CACHE: dict = {}


class _CeilingReader(KafkaEngineBatchReader):
    def read(self, partition):
        if not isinstance(partition, OffsetRangePartition):
            return iter(())
        key = (partition, self.opts.max_records_per_batch, self.opts.include_headers)
        batches = _CACHE.get(key)
        if batches is None:
            for old in [k for k in _CACHE if k[0].path != partition.path]:
                del _CACHE[old]  # an earlier case's directory: free its memory
            batches = _CACHE[key] = list(read_range(partition, self.opts))
        return iter(batches)


class CeilingDataSource(KafkaEngineDataSource):
    """``kafka-engine`` with every range pre-read into its worker's memory."""

    @classmethod
    def name(cls) -> str:
        return "kafka-engine-ceiling"

    def reader(self, schema):
        return _CeilingReader(parse_options(self.options))
