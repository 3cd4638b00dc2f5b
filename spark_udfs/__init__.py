"""Spark beside the engine: the ``kafka-engine`` PySpark data source and Arrow UDFs.

Modules (datasource, reader and stream import pyspark, so nothing is imported here):
``datasource`` (``KafkaEngineDataSource``: the format name, Spark's Kafka schema),
``options`` (option parsing and checks), ``reader`` (driver planning and the
task reader), ``stream`` (micro-batch reader), ``udfs`` (``header_value``,
``kafka_partition``).  Register with
``spark.dataSource.register(spark_udfs.datasource.KafkaEngineDataSource)``.
"""
