"""``engine.connect``: a Kafka cluster (ours or Apache Kafka) over the wire, with the
embedded :class:`engine.Engine`'s shape, so code moves between in-process and
remote by changing one line::

    import engine
    eng = engine.connect("127.0.0.1:9092", **{"linger.ms": 5, "compression.type": "lz4"})
    with eng.producer() as p:
        p.send_batch("events", values=table["value"], keys=table["key"])
    c = eng.consumer(**{"group.id": "g"})
    c.subscribe(["events"])
    batches = c.poll_arrow(max_records=100_000, timeout_ms=500)   # pyarrow.RecordBatch list
    table = eng.read_arrow("events", 0)

Configuration uses Kafka's names; dotted keys (a confluent-kafka style dict) and
the same keys with ``_`` for ``.`` (keyword arguments) are both accepted.  Keys
given to ``connect`` apply to every producer and consumer made from it;
``producer(**cfg)`` / ``consumer(**cfg)`` add their own.  An unknown key raises
``InvalidConfigError``, as librdkafka does.

TLS and SASL: Kafka's client keys -- ``security.protocol``, ``ssl.truststore.*``,
``ssl.keystore.*``, ``ssl.endpoint.identification.algorithm``, ``sasl.mechanism``,
``sasl.jaas.config`` (engine/client/security.py) -- given to ``connect`` apply to every
connection it makes::

    eng = engine.connect("broker1:9094", **{
        "security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="alice-secret";'})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidConfigError, KafkaApiError
from .security import CLIENT_SECURITY_KEYS, ClientSecurity
from .wire import EARLIEST, LATEST, KafkaConnectionError, WireClient

__all__ = ["RemoteEngine", "connect"]

_COMMON = {
    "bootstrap.servers": None, "client.id": "kafka-engine", "request.timeout.ms": 30000,
    "retry.backoff.ms": 100, "metadata.max.age.ms": 300000, "allow.auto.create.topics": True,
}
_PRODUCER = {
    "linger.ms": 5, "batch.size": 16384 * 64, "compression.type": "none", "acks": "all",
    "enable.idempotence": None, "retries": 2147483647, "delivery.timeout.ms": 120000,
    "max.in.flight.requests.per.connection": 5, "max.block.ms": 60000,
    "transactional.id": None, "transaction.timeout.ms": 60000,
}
_CONSUMER = {
    "group.id": None, "group.instance.id": None, "auto.offset.reset": "latest",
    "enable.auto.commit": True, "auto.commit.interval.ms": 5000, "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000, "max.poll.interval.ms": 300000, "max.poll.records": 500,
    "partition.assignment.strategy": "range,roundrobin",
    "fetch.min.bytes": 1, "fetch.max.wait.ms": 500, "fetch.max.bytes": 52428800,
    "max.partition.fetch.bytes": 1048576, "isolation.level": "read_uncommitted", "check.crcs": True,
}
_BOOL = {"allow.auto.create.topics", "enable.idempotence", "enable.auto.commit", "check.crcs"}
_STR = {"bootstrap.servers", "client.id", "compression.type", "acks", "group.id", "group.instance.id",
        "auto.offset.reset", "partition.assignment.strategy", "isolation.level", "transactional.id"}


def _normalise(settings: Mapping[str, Any], allowed: dict) -> dict:
    out = {}
    for k, v in settings.items():
        key = str(k).replace("_", ".")
        if key not in allowed:
            raise InvalidConfigError(f"unknown configuration {k!r} (Kafka's names, e.g. "
                                     f"{', '.join(sorted(allowed)[:4])}, ...)")
        if v is None:
            out[key] = None
        elif key in _BOOL:
            if isinstance(v, str):
                if v.lower() not in ("true", "false"):
                    raise InvalidConfigError(f"{key} must be true or false, got {v!r}")
                v = v.lower() == "true"
            out[key] = bool(v)
        elif key in _STR:
            out[key] = str(v).lower() if key in ("compression.type", "acks", "auto.offset.reset",
                                                 "isolation.level") else str(v)
        else:
            try:
                out[key] = int(v)
            except (TypeError, ValueError):
                raise InvalidConfigError(f"{key} must be an integer, got {v!r}") from None
            if out[key] < 0:
                raise InvalidConfigError(f"{key} must be >= 0, got {v!r}")
    return out


class RemoteEngine:
    """A connection to a Kafka cluster; see the module docstring.  Made by :func:`connect`."""

    def __init__(self, bootstrap: str | None = None, **config: Any):
        security = {}
        for k in list(config):           # Kafka's dotted names (security_protocol, too)
            key = str(k).replace("_", ".")
            if key in CLIENT_SECURITY_KEYS:
                security[key] = config.pop(k)
        self.security = ClientSecurity.from_config(security)
        cfg = _normalise(config, {**_COMMON, **_PRODUCER, **_CONSUMER})
        self.bootstrap = bootstrap or cfg.get("bootstrap.servers")
        if not self.bootstrap:
            raise InvalidConfigError("connect() needs a bootstrap address (host:port[,host:port...])")
        self._config = cfg
        self._client = self._new_client(self._settings({}, {}))
        self._closed = False

    def _settings(self, defaults: dict, given: Mapping[str, Any]) -> dict:
        return {**_COMMON, **defaults, **self._config,
                **_normalise(given, {**_COMMON, **defaults})}

    def _new_client(self, cfg: dict) -> WireClient:
        """A client for a new producer / consumer / fetcher: the bootstrap addresses, then every
        broker this engine's Metadata has named (so clients made after a bootstrap broker's loss
        still find the cluster)."""
        boot = [self.bootstrap]
        own = getattr(self, "_client", None)
        if own is not None:
            if not own._brokers:
                try:
                    own.metadata([])          # the cluster's brokers (no topic)
                except (KafkaApiError, KafkaConnectionError):
                    pass
            boot += [f"{host}:{port}" for host, port in own._brokers.values()]
        return WireClient(",".join(boot), client_id=cfg["client.id"], request_timeout_ms=cfg["request.timeout.ms"],
                          security=self.security)

    # -- producers and consumers -----------------------------------------------------------
    def producer(self, **settings: Any):
        from .arrow_producer import _CODECS, RemoteProducer
        cfg = self._settings(_PRODUCER, settings)
        if cfg["compression.type"] not in _CODECS:
            raise InvalidConfigError(f"compression.type must be one of {', '.join(_CODECS)}, "
                                     f"got {cfg['compression.type']!r}")
        if cfg["acks"] not in ("0", "1", "-1", "all"):
            raise InvalidConfigError(f"acks must be 0, 1, -1 or all, got {cfg['acks']!r}")
        all_acks = cfg["acks"] in ("-1", "all")
        in_flight = int(cfg["max.in.flight.requests.per.connection"])
        if in_flight < 1:
            raise InvalidConfigError("max.in.flight.requests.per.connection must be >= 1")
        if cfg["transactional.id"] is not None:        # as Kafka's producer: transactions need idempotence
            if cfg["enable.idempotence"] is False:
                raise InvalidConfigError("transactional.id needs enable.idempotence=true (as Kafka's producer)")
            if not all_acks:
                raise InvalidConfigError("transactional.id needs acks=all (as Kafka's producer)")
            cfg["enable.idempotence"] = True
        if cfg["enable.idempotence"] is None:          # Kafka 3+: on unless other settings conflict
            cfg["enable.idempotence"] = all_acks and in_flight <= 5
        elif cfg["enable.idempotence"] and not all_acks:
            raise InvalidConfigError("enable.idempotence=true needs acks=all (as Kafka's producer)")
        elif cfg["enable.idempotence"] and in_flight > 5:
            raise InvalidConfigError("max.in.flight.requests.per.connection must be at most 5 "
                                     "when using the idempotent producer (as Kafka's producer)")
        if cfg["batch.size"] < 1:
            raise InvalidConfigError("batch.size must be >= 1")
        if cfg["transactional.id"] is not None:
            from .remote_txn import TransactionalProducer
            return TransactionalProducer(self._new_client(cfg), cfg)
        return RemoteProducer(self._new_client(cfg), cfg)

    def consumer(self, **settings: Any):
        from .arrow_consumer import RemoteConsumer
        cfg = self._settings(_CONSUMER, settings)
        return RemoteConsumer(lambda: self._new_client(cfg), self.bootstrap, cfg)

    # -- reading -------------------------------------------------------------------------
    def read_arrow(self, topic: str, partition: int, start: int | None = None, end: int | None = None,
                   check_crc: bool = True, isolation_level: str = "read_uncommitted"):
        """Records ``start <= offset < end`` of one partition as a ``pyarrow.Table``
        (``engine.KAFKA_SCHEMA``); start defaults to the log start, end to the high watermark now
        (the last stable offset with ``isolation_level="read_committed"``, which also leaves out
        aborted transactions -- dropped by the native scanner from each Fetch answer's list)."""
        from .. import _native
        from ..arrow import is_read_committed
        iso = 1 if is_read_committed(isolation_level) else 0
        c = self._client
        lo = c.list_offsets({(topic, partition): EARLIEST})[(topic, partition)][0]
        hi = c.list_offsets({(topic, partition): LATEST}, isolation_level=iso)[(topic, partition)][0]
        start = lo if start is None else max(int(start), lo)
        end = hi if end is None else min(int(end), hi)
        import time

        from ..errors import EngineError, api_error
        sc = _native.ColumnScanner(check_crc=check_crc)
        pos = start
        deadline = None
        while pos < end:
            res = c.fetch(topic, partition, pos, max_bytes=self._config.get("max.partition.fetch.bytes", 1048576),
                          max_wait_ms=0 if deadline is None else 100, isolation_level=iso)
            if res.error_code:
                raise api_error(res.error_code, f"read of {topic}-{partition} at offset {pos}")
            if iso:
                sc.set_aborted(res.aborted_transactions or [])
            nxt, _ = sc.feed(res.records, 0, -1, pos, end)
            if nxt > pos:
                pos, deadline = nxt, None
                continue
            # nothing yet below `end` (the broker's high watermark not there yet): ask again,
            # within request.timeout.ms -- never a silently short table
            now = time.monotonic()
            if deadline is None:
                deadline = now + self._config.get("request.timeout.ms", 30000) / 1000.0
            elif now > deadline:
                raise EngineError(f"read of {topic}-{partition}: no record at offset {pos} from "
                                  f"{c.node_address(c.leader(topic, partition))} below end offset {end} "
                                  "within request.timeout.ms")
        return sc.finish(topic, partition)

    def offsets_for_times(self, timestamps: Mapping[tuple[str, int], int]) -> dict:
        """{(topic, partition): ms} -> {(topic, partition): OffsetAndTimestamp | None}."""
        from ._types import OffsetAndTimestamp, TopicPartition
        got = self._client.list_offsets({(t, int(p)): int(ms) for (t, p), ms in timestamps.items()})
        return {TopicPartition(*k): (None if o < 0 else OffsetAndTimestamp(o, ts)) for k, (o, ts) in got.items()}

    # -- administration (engine.client.admin over the same connection) ----------------------
    def _admin(self):
        from .admin import WireAdmin
        a = WireAdmin.__new__(WireAdmin)
        a.client, a.timeout_ms = self._client, self._config.get("request.timeout.ms", 30000)
        return a

    def list_topics(self) -> list[str]:
        return sorted(self._client.list_topics())

    def partitions_for(self, topic: str) -> int:
        return self._client.partition_count(topic)

    def create_topic(self, name: str, partitions: int | None = None, config: Mapping[str, Any] | None = None,
                     replication_factor: int | None = None) -> None:
        self._admin().create_topic(name, partitions, dict(config or {}), replication_factor)

    def delete_topic(self, name: str) -> None:
        self._admin().delete_topic(name)

    def create_partitions(self, name: str, total: int) -> None:
        self._admin().create_partitions(name, total)

    def describe_topic(self, name: str):
        return self._admin().describe_topic(name)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> RemoteEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(bootstrap: str | None = None, **config: Any) -> RemoteEngine:
    """A :class:`RemoteEngine` for the cluster at `bootstrap` (``host:port[,...]``)."""
    return RemoteEngine(bootstrap, **config)
