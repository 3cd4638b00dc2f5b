"""The ``kafka-engine`` PySpark data source: Spark reads our topics in place.

Contract: ``spark.dataSource.register(KafkaEngineDataSource)`` makes
``spark.read.format("kafka-engine")`` available.  The schema is Spark's Kafka
source schema (``key binary, value binary, topic string, partition int,
offset long, timestamp timestamp, timestampType int``, plus
``headers array<struct<key: string, value: binary>>`` with
``includeHeaders=true``).  Options are checked when the source is created on
the driver (:mod:`spark_udfs.options`); offsets are resolved when the read is
planned and records are decoded in the tasks (:mod:`spark_udfs.reader`),
straight from the segment files under ``path``, as Arrow batches.
``spark.readStream.format("kafka-engine")`` uses :mod:`spark_udfs.stream`;
``df.write`` / ``df.writeStream`` use :mod:`spark_udfs.sink` (Spark's Kafka sink).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .options import parse_options

__all__ = ["FORMAT_NAME", "KafkaEngineDataSource", "kafka_schema", "register"]

FORMAT_NAME = "kafka-engine"


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema (headers only with include_headers)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


class KafkaEngineDataSource(DataSource):
    """Reads topics of a kafka-engine data directory (format name ``kafka-engine``)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        # Parsing here makes a bad option fail at load(), on the driver.
        opts = parse_options(self.options, streaming=None)
        if opts.local_dirs:            # each one a broker's data directory, one per broker
            from .locality import local_brokers
            local_brokers(opts.local_dirs)
        return kafka_schema(opts.include_headers)

    def reader(self, schema: StructType):
        from .reader import KafkaEngineBatchReader
        return KafkaEngineBatchReader(parse_options(self.options))

    def streamReader(self, schema: StructType):
        from .stream import KafkaEngineStreamReader
        return KafkaEngineStreamReader(parse_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool):
        from .sink import make_writer
        return make_writer(self.options, schema, overwrite, streaming=False)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from .sink import make_writer
        return make_writer(self.options, schema, overwrite, streaming=True)


def register(spark) -> None:
    """``spark.dataSource.register(KafkaEngineDataSource)``."""
    spark.dataSource.register(KafkaEngineDataSource)
