"""Spark beside the engine: the ``kafka-engine`` PySpark data source and Arrow UDFs.

Modules (datasource, reader and stream import pyspark, so nothing is imported here):
``datasource`` (``KafkaEngineDataSource``: the format name, Spark's Kafka schema),
``options`` (option parsing and checks), ``reader`` (driver planning and the
task reader, over the files or, with ``kafka.bootstrap.servers``, a broker),
``stream`` (micro-batch reader), ``sink`` (batch and streaming writes),
``udfs`` (``header_value``, ``kafka_partition``, ``json_struct``).  Register with
``spark.dataSource.register(spark_udfs.datasource.KafkaEngineDataSource)``.
"""
