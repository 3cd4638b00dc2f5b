"""Writes of the ``kafka-engine`` data source: Spark's Kafka sink, into a data directory.

Contract: ``df.write.format("kafka-engine").option("path", DIR)`` (batch) and
``df.writeStream.format("kafka-engine").option("path", DIR)...`` (streaming)
append the DataFrame's rows as Kafka records.  The input schema is Spark's
Kafka-sink schema: ``value`` (binary or string, required; a null value is a
tombstone), and optionally ``key`` (binary or string), ``headers``
(``array<struct<key: string, value: binary>>``), ``topic`` (string) and
``partition`` (int); other columns are ignored.  The ``topic`` option, when
given, overrides the ``topic`` column (as in Spark); without it every row
needs a non-null topic.  Partitioning is Kafka's: a non-null ``partition``
wins, else murmur2 of a non-null key (as the Java client), else one partition
picked at random per Arrow batch and topic (Kafka's sticky partitioner
changes partition per batch).  An unknown topic is created with
``num.partitions`` = 1, as a broker with Kafka's default
``auto.create.topics.enable=true`` does; a partition beyond the topic's
count fails the task.

Where records go, decided in each task:

* In process (:class:`_LocalTarget`): the task opens ``path`` as its writer
  (``engine.open``) and appends with the embedded producer's ``send_batch``.
  A data directory has one writer at a time (``DataDirLockedError``), so
  tasks writing concurrently to one directory (local mode, or several
  executors on one host) take turns: each retries the lock with jittered
  exponential backoff for up to ``dataDirLockTimeoutMs`` and then fails
  naming the holder.
* Through a broker (:class:`_WireTarget`): with ``kafka.bootstrap.servers``, or
  when ``engine.broker_address(path)`` says a broker owns the directory, the
  task sends Produce requests with batches built by our builder
  (:mod:`engine.client.wire`).

Delivery is at-least-once, like Spark's Kafka sink: records a task appended
stay when the task or the job fails and Spark retries it, and a restarted
streaming query may write its last micro-batch again.  ``commit`` and
``abort`` only report.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from engine.errors import (
    DataDirLockedError,
    InvalidConfigError,
    UnknownTopicOrPartitionError,
)

from .options import int_option, unknown_option

__all__ = ["KafkaEngineStreamWriter", "KafkaEngineWriter", "SINK_OPTIONS", "SinkOptions",
           "check_input_schema", "parse_sink_options", "write_arrow_batches"]

log = logging.getLogger("spark_udfs")

#: lower-cased name -> spelling in messages.
SINK_OPTIONS = {n.lower(): n for n in (
    "path", "topic", "dataDirLockTimeoutMs",
    "checkpointLocation",  # Spark's own, passed along to streaming sinks
    "kafka.bootstrap.servers", "kafka.compression.type", "kafka.linger.ms", "kafka.batch.size",
    "kafka.acks", "kafka.request.timeout.ms", "kafka.client.id",
)}
_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class SinkOptions:
    path: str | None = None
    bootstrap_servers: str | None = None
    topic: str | None = None
    compression_type: str = "none"
    linger_ms: int = 0              # validated; each Arrow batch is sent when it arrives
    batch_size: int = 1048576       # largest record batch built (bytes, uncompressed)
    acks: int = -1                  # -1 (all), 0 or 1; only the broker path uses it
    lock_timeout_ms: int = 120_000
    request_timeout_ms: int = 30_000
    client_id: str = "kafka-engine-spark"


def _nonneg_int(name: str, value) -> int:
    return int_option(name, value, 0)


def parse_sink_options(options) -> SinkOptions:
    """Check the option map of a write (keys case-insensitive); InvalidConfigError names a bad one."""
    opts = {}
    for k, v in dict(options).items():
        lk = str(k).lower()
        if lk not in SINK_OPTIONS:
            raise unknown_option(k, SINK_OPTIONS, "sink")
        opts[lk] = v
    kw: dict = {}
    path, servers = opts.get("path"), opts.get("kafka.bootstrap.servers")
    if path:
        kw["path"] = str(path)
    if servers:
        kw["bootstrap_servers"] = str(servers).strip()
    if not path and not servers:
        raise InvalidConfigError("the kafka-engine sink needs option 'path' (a data directory) or "
                                 "'kafka.bootstrap.servers' (a broker)")
    if path and servers:
        raise InvalidConfigError("give either 'path' or 'kafka.bootstrap.servers', not both")
    if opts.get("topic") is not None:
        topic = str(opts["topic"]).strip()
        if not topic:
            raise InvalidConfigError("option 'topic' must not be empty")
        from engine.metadata import validate_topic_name
        validate_topic_name(topic)
        kw["topic"] = topic
    if "kafka.compression.type" in opts:
        c = str(opts["kafka.compression.type"]).strip().lower()
        if c not in _CODECS:
            raise InvalidConfigError(f"option 'kafka.compression.type' must be one of {', '.join(_CODECS)}, "
                                     f"got {opts['kafka.compression.type']!r}")
        kw["compression_type"] = c
    if "kafka.linger.ms" in opts:
        kw["linger_ms"] = _nonneg_int("kafka.linger.ms", opts["kafka.linger.ms"])
    if "kafka.batch.size" in opts:
        n = _nonneg_int("kafka.batch.size", opts["kafka.batch.size"])
        kw["batch_size"] = max(n, 1)  # Kafka: 0 disables batching, i.e. one record per batch
    if "kafka.acks" in opts:
        a = str(opts["kafka.acks"]).strip().lower()
        if a not in ("0", "1", "-1", "all"):
            raise InvalidConfigError(f"option 'kafka.acks' must be 0, 1, -1 or all, got {opts['kafka.acks']!r}")
        kw["acks"] = -1 if a == "all" else int(a)
    if "datadirlocktimeoutms" in opts:
        kw["lock_timeout_ms"] = _nonneg_int("dataDirLockTimeoutMs", opts["datadirlocktimeoutms"])
    if "kafka.request.timeout.ms" in opts:
        kw["request_timeout_ms"] = max(1, _nonneg_int("kafka.request.timeout.ms", opts["kafka.request.timeout.ms"]))
    if "kafka.client.id" in opts:
        kw["client_id"] = str(opts["kafka.client.id"])
    return SinkOptions(**kw)


def check_input_schema(schema, opts: SinkOptions) -> None:
    """Spark's Kafka-sink rules for the DataFrame's columns (InvalidConfigError otherwise)."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

    fields = {f.name: f.dataType for f in schema.fields}
    text = (BinaryType, StringType)
    if "value" not in fields:
        raise InvalidConfigError("the kafka-engine sink needs a 'value' column (binary or string); "
                                 f"the DataFrame has {', '.join(fields) or 'no columns'}")
    if not isinstance(fields["value"], text):
        raise InvalidConfigError(f"column 'value' must be binary or string, got {fields['value'].simpleString()}")
    if "key" in fields and not isinstance(fields["key"], text):
        raise InvalidConfigError(f"column 'key' must be binary or string, got {fields['key'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise InvalidConfigError(f"column 'partition' must be int, got {fields['partition'].simpleString()}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise InvalidConfigError(f"column 'topic' must be string, got {fields['topic'].simpleString()}")
    if "topic" not in fields and opts.topic is None:
        raise InvalidConfigError("the kafka-engine sink needs the 'topic' option or a 'topic' column")
    if "headers" in fields:
        h = fields["headers"]
        ok = (isinstance(h, ArrayType) and isinstance(h.elementType, StructType)
              and [f.name for f in h.elementType.fields] == ["key", "value"]
              and isinstance(h.elementType["key"].dataType, StringType)
              and isinstance(h.elementType["value"].dataType, BinaryType))
        if not ok:
            raise InvalidConfigError("column 'headers' must be array<struct<key: string, value: binary>>, "
                                     f"got {h.simpleString()}")


# -- targets -------------------------------------------------------------------------
class _LocalTarget:
    """The data directory opened in this task, appended to by the embedded producer."""

    def __init__(self, opts: SinkOptions):
        import engine

        deadline = time.monotonic() + opts.lock_timeout_ms / 1000.0
        delay = 0.01
        while True:
            try:
                self.eng = engine.open(opts.path, background=False)
                break
            except DataDirLockedError as e:
                now = time.monotonic()
                if now >= deadline:
                    raise DataDirLockedError(
                        e.path, f"{e.holder} (the kafka-engine sink waited {opts.lock_timeout_ms} ms "
                        "for it: tasks writing one directory in-process take turns; raise "
                        "dataDirLockTimeoutMs, write with fewer partitions, or serve the directory "
                        "with a broker)") from None
                time.sleep(min(delay * (0.5 + random.random()), max(deadline - now, 0.0)))
                delay = min(delay * 2, 0.5)
        try:
            self.producer = self.eng.producer(linger_ms=0, batch_size=opts.batch_size,
                                              compression_type=opts.compression_type)
        except BaseException:
            self.eng.close()
            raise

    def partitions(self, topic: str) -> int:
        return self.eng.ensure_topic(topic).partitions

    def send(self, topic: str, partition: int, values, keys, headers) -> None:
        self.producer.send_batch(topic, values, keys=keys, headers=headers, partition=partition)

    def close(self) -> None:
        try:
            self.producer.close()
        finally:
            self.eng.close()


class _WireTarget:
    """A broker, reached with the wire client's Produce."""

    def __init__(self, opts: SinkOptions, bootstrap: str):
        from engine.client.wire import WireClient
        from engine.records import codec_id

        self.client = WireClient(bootstrap, client_id=opts.client_id,
                                 request_timeout_ms=opts.request_timeout_ms)
        self.opts = opts
        self.codec = codec_id(opts.compression_type)

    def partitions(self, topic: str) -> int:
        return self.client.partition_count(topic, auto_create=True)

    def send(self, topic: str, partition: int, values, keys, headers) -> None:
        from engine.records import build_batches

        batches = build_batches(values, keys, None, headers, self.codec, self.opts.batch_size)
        self.client.produce(topic, partition, batches, acks=self.opts.acks,
                            timeout_ms=self.opts.request_timeout_ms)

    def close(self) -> None:
        self.client.close()


def _open_target(opts: SinkOptions):
    if opts.bootstrap_servers:
        return _WireTarget(opts, opts.bootstrap_servers)
    import engine
    addr = engine.broker_address(opts.path)
    if addr:
        return _WireTarget(opts, addr)
    return _LocalTarget(opts)


# -- the task side -------------------------------------------------------------------
def _headers_list(col: pa.Array) -> list:
    return [None if row is None else [(h["key"], h["value"]) for h in row] for row in col.to_pylist()]


def _as_binary(col: pa.Array) -> pa.Array:
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        return col.cast(pa.binary() if pa.types.is_string(col.type) else pa.large_binary())
    return col


def _write_one(target, batch: pa.RecordBatch, opts: SinkOptions, nparts: dict) -> int:
    """Send one Arrow batch; returns the number of records."""
    from .udfs import kafka_partition_array

    n = batch.num_rows
    if n == 0:
        return 0
    names = batch.schema.names
    values = _as_binary(batch.column(names.index("value")))
    keys = _as_binary(batch.column(names.index("key"))) if "key" in names else None
    headers = batch.column(names.index("headers")) if "headers" in names else None
    parts = batch.column(names.index("partition")) if "partition" in names else None
    if opts.topic is not None:
        topics = {opts.topic: None}
    else:
        tcol = batch.column(names.index("topic"))
        if tcol.null_count:
            raise InvalidConfigError("a row has a null 'topic'; set the 'topic' option or fill the column")
        enc = tcol.dictionary_encode()
        idx = enc.indices.to_numpy(zero_copy_only=False)
        tnames = enc.dictionary.to_pylist()
        topics = {tnames[0]: None} if len(tnames) == 1 else \
            {t: pa.array(np.flatnonzero(idx == i)) for i, t in enumerate(tnames)}

    def take(col, ix):
        return col if col is None or ix is None else col.take(ix)

    for topic, rows in topics.items():
        count = nparts.get(topic)
        if count is None:
            count = nparts[topic] = target.partitions(topic)
        tv, tk, th, tp = (take(c, rows) for c in (values, keys, headers, parts))
        # Kafka's choice: explicit partition, else murmur2(key), else sticky (one per batch).
        if tp is not None:
            low = pc.min(tp).as_py()
            if low is not None and low < 0:
                raise UnknownTopicOrPartitionError(f"partition {low} of topic {topic!r} is invalid")
            target_part = pc.fill_null(tp, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        else:
            target_part = np.full(len(tv), -1, dtype=np.int64)
        need = target_part < 0
        if need.any() and tk is not None:
            hashed = pc.fill_null(kafka_partition_array(tk, count), -1).to_numpy(zero_copy_only=False)
            target_part[need] = hashed[need]
            need = target_part < 0
        if need.any():
            target_part[need] = random.randrange(count)
        if (target_part >= count).any():
            bad = int(target_part[target_part >= count][0])
            raise UnknownTopicOrPartitionError(
                f"partition {bad} of topic {topic!r} does not exist ({topic!r} has {count} "
                f"partition{'s' if count != 1 else ''})")
        uniq = np.unique(target_part)
        for p in uniq:
            ix = None if len(uniq) == 1 else pa.array(np.flatnonzero(target_part == p))
            v, k, h = take(tv, ix), take(tk, ix), take(th, ix)
            target.send(topic, int(p), v, k, _headers_list(h) if h is not None else None)
    return n


def write_arrow_batches(iterator, opts: SinkOptions) -> int:
    """The task: send every Arrow batch of `iterator`; returns the number of records."""
    target = None
    total = 0
    nparts: dict = {}
    try:
        for batch in iterator:
            if batch.num_rows == 0:
                continue
            if target is None:  # open lazily: empty tasks never take the lock
                target = _open_target(opts)
            total += _write_one(target, batch, opts, nparts)
    finally:
        if target is not None:
            target.close()
    return total


@dataclass
class WriteResult(WriterCommitMessage):
    records: int


def _report(what: str, messages) -> int:
    n = sum(m.records for m in messages if isinstance(m, WriteResult))
    log.info("kafka-engine sink: %s, %d records written by successful tasks", what, n)
    return n


class KafkaEngineWriter(DataSourceArrowWriter):
    """Batch writes (``df.write.format("kafka-engine")``); see the module docstring."""

    def __init__(self, opts: SinkOptions):
        self.opts = opts

    def write(self, iterator):
        return WriteResult(write_arrow_batches(iterator, self.opts))

    def commit(self, messages):
        _report("job committed", messages)

    def abort(self, messages):
        n = _report("job aborted", messages)
        if n:
            log.warning("kafka-engine sink: the job failed; %d records already appended stay "
                        "(at-least-once, as Spark's Kafka sink)", n)


class KafkaEngineStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writes (``df.writeStream.format("kafka-engine")``); at-least-once."""

    def __init__(self, opts: SinkOptions):
        self.opts = opts

    def write(self, iterator):
        return WriteResult(write_arrow_batches(iterator, self.opts))

    def commit(self, messages, batchId):
        _report(f"micro-batch {batchId} committed", messages)

    def abort(self, messages, batchId):
        n = _report(f"micro-batch {batchId} aborted", messages)
        if n:
            log.warning("kafka-engine sink: micro-batch %d failed; %d records already appended stay "
                        "(at-least-once)", batchId, n)


def make_writer(options, schema, overwrite: bool, streaming: bool):
    """Driver side: check options and columns, refuse overwrite (Kafka topics are append-only)."""
    opts = parse_sink_options(options)
    if overwrite:
        raise InvalidConfigError("the kafka-engine sink only appends (Kafka topics cannot be "
                                 "overwritten); use mode 'append'")
    check_input_schema(schema, opts)
    return KafkaEngineStreamWriter(opts) if streaming else KafkaEngineWriter(opts)

