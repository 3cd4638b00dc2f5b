"""Spark beside the engine: the ``kafka-engine`` PySpark data source and Arrow UDFs.

Modules (all but options and udfs import pyspark, so nothing is imported here), each importing
only those listed before it: ``options`` (option parsing and checks), ``udfs``
(``header_value``, ``kafka_partition``, ``json_struct``), ``planning`` (the driver's
topic-partitions and offset ranges, over the files or, with ``kafka.bootstrap.servers``, a
broker), ``locality`` (on a cluster: which ranges a local in-sync copy serves; ``explain``),
``reader`` (the batch plan and the task reader), ``stream`` (micro-batch reader), ``sink`` (batch
and streaming writes), ``datasource`` (``KafkaEngineDataSource``: the format name, Spark's Kafka
schema).  Register with
``spark.dataSource.register(spark_udfs.datasource.KafkaEngineDataSource)``.
"""
