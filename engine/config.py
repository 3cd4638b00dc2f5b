"""Configuration with Kafka's key names and defaults.

Topic-level keys (``segment.bytes``, ``retention.ms``, ...) live in
:class:`LogConfig`; each has a broker-level default under Kafka's ``log.``-style
name (``log.segment.bytes``, ``log.retention.ms``, ...) in :class:`EngineConfig`.
Values of the wrong type or range raise :class:`~engine.errors.InvalidConfigError`.
A broker key Apache Kafka 4.0 documents but this project does not implement
(``num.network.threads``, ``socket.send.buffer.bytes``, ...) is accepted, its value
checked against Kafka's type, and listed in :attr:`EngineConfig.ignored` (the broker
warns once at start), so a Kafka ``server.properties`` works as it is; a key Kafka does
not know either is an error naming the closest valid key.

Durability follows Kafka: ``flush.messages=1`` makes every append wait for
``fdatasync`` before it is acknowledged (concurrent appenders share one sync:
group commit); the default leaves data in the page cache, as Kafka does.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._kafka_configs import KAFKA_BROKER_KEYS
from .errors import InvalidConfigError

__all__ = ["INTERNAL_BROKER_KEYS", "OWN_BROKER_KEYS", "TOPIC_CONFIG_DEFAULTS", "EngineConfig", "LogConfig",
           "is_sensitive", "keys_without_effect", "parse_properties", "shown_value"]

LONG_MAX = 9223372036854775807
_COMPRESSION_TYPES = ("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd")


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[str, Any], int]:
    def conv(key: str, value: Any) -> int:
        if isinstance(value, bool):
            raise InvalidConfigError(f"{key}: expected an integer, got {value!r}")
        try:
            v = int(value)
        except (TypeError, ValueError):
            raise InvalidConfigError(f"{key}: expected an integer, got {value!r}") from None
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            if hi is None:
                raise InvalidConfigError(f"{key}: {v} is below the minimum {lo}")
            if lo is None:
                raise InvalidConfigError(f"{key}: {v} is above the maximum {hi}")
            raise InvalidConfigError(f"{key}: {v} is outside [{lo}, {hi}]")
        return v

    return conv


def _float(lo: float, hi: float) -> Callable[[str, Any], float]:
    def conv(key: str, value: Any) -> float:
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise InvalidConfigError(f"{key}: expected a number, got {value!r}") from None
        if not lo <= v <= hi:
            raise InvalidConfigError(f"{key}: {v} is outside [{lo}, {hi}]")
        return v

    return conv


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise InvalidConfigError(f"{key}: expected true or false, got {value!r}")


def _choice(*options: str) -> Callable[[str, Any], str]:
    def conv(key: str, value: Any) -> str:
        s = str(value).strip()
        if s not in options:
            raise InvalidConfigError(f"{key}: {s!r} is not one of {', '.join(options)}")
        return s

    return conv


def _cleanup_policy(key: str, value: Any) -> str:
    # the order given is kept, as Kafka does (APPEND of compact to delete describes as
    # "delete,compact"); the log only asks whether a policy is in the list
    parts = list(dict.fromkeys(p.strip() for p in str(value).split(",") if p.strip()))
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise InvalidConfigError(f"{key}: {value!r} must be delete, compact or both")
    return ",".join(parts)


# key -> (default, converter, broker-level key)
_TOPIC_KEYS: dict[str, tuple[Any, Callable[[str, Any], Any], str]] = {
    "segment.bytes": (1073741824, _int(14, 2**31 - 1), "log.segment.bytes"),
    "segment.ms": (604800000, _int(1), "log.roll.ms"),
    "segment.jitter.ms": (0, _int(0), "log.roll.jitter.ms"),
    "segment.index.bytes": (10485760, _int(4 * 12), "log.index.size.max.bytes"),
    "index.interval.bytes": (4096, _int(0), "log.index.interval.bytes"),
    "retention.bytes": (-1, _int(-1), "log.retention.bytes"),
    "retention.ms": (604800000, _int(-1), "log.retention.ms"),
    "max.message.bytes": (1048588, _int(0), "message.max.bytes"),
    "flush.messages": (LONG_MAX, _int(1), "log.flush.interval.messages"),
    "flush.ms": (LONG_MAX, _int(0), "log.flush.interval.ms"),
    "cleanup.policy": ("delete", _cleanup_policy, "log.cleanup.policy"),
    "compression.type": ("producer", _choice(*_COMPRESSION_TYPES), "compression.type"),
    "message.timestamp.type": (
        "CreateTime", _choice("CreateTime", "LogAppendTime"), "log.message.timestamp.type"),
    "message.timestamp.before.max.ms": (LONG_MAX, _int(0), "log.message.timestamp.before.max.ms"),
    "message.timestamp.after.max.ms": (3600000, _int(0), "log.message.timestamp.after.max.ms"),
    "min.insync.replicas": (1, _int(1), "min.insync.replicas"),
    "preallocate": (False, _bool, "log.preallocate"),
    "file.delete.delay.ms": (60000, _int(0), "log.segment.delete.delay.ms"),
    "delete.retention.ms": (86400000, _int(0), "log.cleaner.delete.retention.ms"),
    "min.compaction.lag.ms": (0, _int(0), "log.cleaner.min.compaction.lag.ms"),
    "max.compaction.lag.ms": (LONG_MAX, _int(1), "log.cleaner.max.compaction.lag.ms"),
    "min.cleanable.dirty.ratio": (0.5, _float(0.0, 1.0), "log.cleaner.min.cleanable.ratio"),
    "unclean.leader.election.enable": (False, _bool, "unclean.leader.election.enable"),
}

TOPIC_CONFIG_DEFAULTS: dict[str, Any] = {k: v[0] for k, v in _TOPIC_KEYS.items()}

# Engine (broker) level keys that are not a topic default.
_ENGINE_KEYS: dict[str, tuple[Any, Callable[[str, Any], Any]]] = {
    "log.dirs": ("./data", lambda k, v: str(v)),
    "log.dir": ("/tmp/kafka-logs", lambda k, v: str(v)),   # used when log.dirs is not set
    "num.partitions": (1, _int(1)),
    "default.replication.factor": (1, _int(1)),
    "auto.create.topics.enable": (True, _bool),
    "log.retention.check.interval.ms": (300000, _int(1)),
    "log.flush.scheduler.interval.ms": (LONG_MAX, _int(1)),
    "log.flush.offset.checkpoint.interval.ms": (60000, _int(0)),
    "log.flush.start.offset.checkpoint.interval.ms": (60000, _int(0)),
    "num.recovery.threads.per.data.dir": (2, _int(1)),       # Kafka 4.0's default (KIP-1030)
    "log.cleaner.enable": (True, _bool),
    "log.cleaner.backoff.ms": (15000, _int(0)),
    "log.cleaner.dedupe.buffer.size": (134217728, _int(1024)),
    "broker.id": (0, _int(-1)),
    "node.id": (0, _int(-1)),
    # cluster mode (engine/cluster): ZooKeeper-era Kafka's keys; "" = single node, no ZooKeeper
    "zookeeper.connect": ("", lambda k, v: str(v).strip()),
    "zookeeper.session.timeout.ms": (18000, _int(1)),
    "zookeeper.connection.timeout.ms": (18000, _int(1)),
    # ZooKeeper security (engine/cluster/zk_auth.py): ACLs on the broker's znodes for its SASL
    # principal; the JAAS file whose Client section holds that principal (Kafka takes it from
    # -Djava.security.auth.login.config in KAFKA_OPTS, which is read too when this is "")
    "zookeeper.set.acl": (False, _bool),
    "java.security.auth.login.config": ("", lambda k, v: str(v).strip()),
    # ZooKeeper over TLS (engine/cluster/zk_tls.py): Kafka 3.x's keys and defaults (KIP-515); ""
    # is Kafka's null (a store type unset: told from the file name, as ZooKeeper does)
    "zookeeper.ssl.client.enable": (False, _bool),
    "zookeeper.clientCnxnSocket": ("", lambda k, v: str(v).strip()),
    "zookeeper.ssl.keystore.location": ("", lambda k, v: str(v).strip()),
    "zookeeper.ssl.keystore.password": ("", lambda k, v: str(v)),       # a password (is_sensitive)
    "zookeeper.ssl.keystore.type": ("", lambda k, v: str(v).strip()),
    "zookeeper.ssl.truststore.location": ("", lambda k, v: str(v).strip()),
    "zookeeper.ssl.truststore.password": ("", lambda k, v: str(v)),     # a password
    "zookeeper.ssl.truststore.type": ("", lambda k, v: str(v).strip()),
    "zookeeper.ssl.protocol": ("TLSv1.2", lambda k, v: str(v).strip()),
    "zookeeper.ssl.enabled.protocols": ("", lambda k, v: str(v).strip()),
    "zookeeper.ssl.cipher.suites": ("", lambda k, v: str(v).strip()),
    "zookeeper.ssl.endpoint.identification.algorithm": ("HTTPS", lambda k, v: str(v).strip()),
    "zookeeper.ssl.crl.enable": (False, _bool),
    "zookeeper.ssl.ocsp.enable": (False, _bool),
    "broker.rack": ("", lambda k, v: str(v).strip()),        # "" = none (Kafka: null)
    "replica.lag.time.max.ms": (30000, _int(1)),
    # the replica fetcher (engine/replica/manager.py passes what the configuration set)
    "replica.fetch.wait.max.ms": (500, _int(0)),
    "replica.fetch.min.bytes": (1, _int(1)),
    "replica.fetch.max.bytes": (1048576, _int(0)),
    "replica.fetch.response.max.bytes": (10485760, _int(0)),
    "replica.fetch.backoff.ms": (1000, _int(0)),
    "replica.socket.timeout.ms": (30000, _int(1)),
    "replica.high.watermark.checkpoint.interval.ms": (5000, _int(1)),
    "auto.leader.rebalance.enable": (True, _bool),
    "leader.imbalance.check.interval.seconds": (300, _int(1)),
    "leader.imbalance.per.broker.percentage": (10, _int(0, 100)),
    "controlled.shutdown.enable": (True, _bool),
    "controlled.shutdown.timeout.ms": (30000, _int(0)),   # ours: how long SIGTERM waits for it
    # broker (network) keys, read by engine.server
    "listeners": ("PLAINTEXT://127.0.0.1:9092", lambda k, v: str(v)),
    "advertised.listeners": ("", lambda k, v: str(v)),
    "socket.request.max.bytes": (104857600, _int(1)),
    "connections.max.idle.ms": (600000, _int(1)),
    "queued.max.requests": (500, _int(1)),
    "process.roles": ("broker,controller", lambda k, v: str(v)),
    "controller.quorum.voters": ("", lambda k, v: str(v)),
    "controller.listener.names": ("", lambda k, v: str(v)),
    "listener.security.protocol.map": ("", lambda k, v: str(v)),
    "inter.broker.listener.name": ("", lambda k, v: str(v)),
    # operator endpoints of `serve` (not Kafka keys): -1 = off (the default), 0 = any free port
    "metrics.port": (-1, _int(-1, 65535)),          # Prometheus GET /metrics (engine/server/metrics.py)
    "metrics.host": ("127.0.0.1", lambda k, v: str(v)),
    "console.port": (-1, _int(-1, 65535)),          # web console (engine/console)
    "console.host": ("127.0.0.1", lambda k, v: str(v)),
    # the console and /metrics: HTTPS with a TLS listener's settings, basic auth of SCRAM users
    # (engine/server/http_security.py)
    "http.tls.listener": ("", lambda k, v: str(v).strip()),
    "http.authentication": ("none", _choice("none", "basic")),
    # group coordinator (engine.coordinator)
    "group.initial.rebalance.delay.ms": (3000, _int(0)),
    "group.min.session.timeout.ms": (6000, _int(0)),
    "group.max.session.timeout.ms": (1800000, _int(0)),
    "group.max.size": (2147483647, _int(1)),
    "offsets.topic.num.partitions": (50, _int(1)),
    "offsets.topic.replication.factor": (3, _int(1)),   # cluster mode; capped by live brokers
    "offsets.commit.timeout.ms": (5000, _int(1)),       # cluster mode: acks=all wait of its writes
    "offsets.retention.minutes": (10080, _int(1)),
    "offsets.retention.check.interval.ms": (600000, _int(1)),
    "offset.metadata.max.bytes": (4096, _int(0)),
    # idempotent producers (engine.storage.producer_state)
    "producer.id.expiration.ms": (86400000, _int(1)),
    "producer.id.expiration.check.interval.ms": (600000, _int(1)),
    # transaction coordinator (engine.coordinator.transactions)
    "transaction.state.log.num.partitions": (50, _int(1)),
    "transaction.state.log.replication.factor": (3, _int(1)),   # cluster mode; capped by live brokers
    "transaction.state.log.min.isr": (2, _int(1)),      # cluster mode; capped by its replication factor
    "transaction.max.timeout.ms": (900000, _int(1)),
    "transactional.id.expiration.ms": (604800000, _int(1)),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (10000, _int(1)),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (3600000, _int(1)),
    "transaction.partition.verification.enable": (True, _bool),
}
# Keys above that are accepted and shown but change nothing on a single node (yet).
_NO_EFFECT_KEYS = frozenset({
    "log.flush.scheduler.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "num.recovery.threads.per.data.dir", "queued.max.requests", "process.roles",
    "controller.quorum.voters", "controller.listener.names",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
})
# Kafka's keys (not in the table above) that engine.server gives effect: the listeners' protocols
# (engine/server/listener.py), SASL (engine/server/sasl_handlers.py) and TLS; for SASL and TLS a
# ``listener.name.<listener>.`` prefixed form has effect too, and so does PLAIN's
# ``listener.name.<listener>.plain.sasl.jaas.config`` and OAUTHBEARER's
# ``listener.name.<listener>.oauthbearer.sasl.jaas.config`` / ``...sasl.server.callback.handler.class``.
# TLS listeners' keys (engine/security/tls.py server_context, ssl_principal.py SslPrincipalMapper)
_SERVER_TLS_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.certificates", "ssl.truststore.password", "ssl.enabled.protocols", "ssl.protocol",
    "ssl.cipher.suites", "ssl.client.auth", "ssl.principal.mapping.rules",
})
# OAUTHBEARER's secured validator (engine/security/oauthbearer_jwt.py), listener-prefixed too
_OAUTHBEARER_KEYS = frozenset({
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.clock.skew.seconds",
    # the JWKS refresh (engine/security/jwks_refresh.py)
    "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
})
# The ACL authorizer's keys (Kafka passes every broker key to its authorizer; these two are not in
# its broker key list): engine/server/access.py reads them when authorizer.class.name names it.
AUTHORIZER_KEYS = frozenset({"super.users", "allow.everyone.if.no.acl.found"})
# Connection limits (engine/server/connection_quotas.py); the quota windows shape the creation rate
_CONNECTION_QUOTA_KEYS = frozenset({
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "max.connection.creation.rate", "quota.window.num", "quota.window.size.seconds",
    # the controller_mutation_rate token bucket (engine/server/mutation_quotas.py)
    "controller.quota.window.num", "controller.quota.window.size.seconds",
})
SERVER_APPLIED_KEYS = frozenset({
    "authorizer.class.name", *AUTHORIZER_KEYS,
    "listener.security.protocol.map", "inter.broker.listener.name", "security.inter.broker.protocol",
    "sasl.enabled.mechanisms", "sasl.server.max.receive.size",
    "connection.failed.authentication.delay.ms", "connections.max.reauth.ms", *_SERVER_TLS_KEYS,
    *_OAUTHBEARER_KEYS,
    *_CONNECTION_QUOTA_KEYS,
    # how this broker connects to the others (engine/client/security.py ClientSecurity.inter_broker)
    "sasl.mechanism.inter.broker.protocol", "ssl.endpoint.identification.algorithm",
})


def _server_applied(key: str) -> bool:
    if key in SERVER_APPLIED_KEYS:
        return True
    if key.startswith("listener.name."):
        rest = key[len("listener.name."):].partition(".")[2]
        return rest in ("sasl.enabled.mechanisms", "plain.sasl.jaas.config", "connections.max.reauth.ms",
                        "max.connections", "max.connection.creation.rate", "scram-sha-256.sasl.jaas.config",
                        "scram-sha-512.sasl.jaas.config", "ssl.endpoint.identification.algorithm",
                        # OAUTHBEARER's validator options and handler (engine/security/sasl.py)
                        "oauthbearer.sasl.jaas.config", "oauthbearer.sasl.server.callback.handler.class") \
            or rest in _SERVER_TLS_KEYS or rest in _OAUTHBEARER_KEYS or rest.endswith(".connections.max.reauth.ms")
    return False


# Kafka's internal broker keys (defined, undocumented, not listed by DescribeConfigs).
INTERNAL_BROKER_KEYS = frozenset({"producer.id.expiration.check.interval.ms"})
_BROKER_TO_TOPIC = {v[2]: k for k, v in _TOPIC_KEYS.items()}
# This project's own broker keys (Kafka has none of these names): listed by DescribeConfigs too.
OWN_BROKER_KEYS = frozenset(k for k in [*_ENGINE_KEYS, *_BROKER_TO_TOPIC]
                            if k not in KAFKA_BROKER_KEYS and k not in INTERNAL_BROKER_KEYS)
# Kafka also accepts the hour/minute forms of a few broker keys.
_TIME_ALIASES = {
    "log.roll.hours": ("log.roll.ms", 3600000),
    "log.retention.hours": ("log.retention.ms", 3600000),
    "log.retention.minutes": ("log.retention.ms", 60000),
}


_PASSWORD_KEYS = frozenset(k for k, t in KAFKA_BROKER_KEYS.items() if t == "password")


def is_sensitive(key: str) -> bool:
    """Whether `key` holds a secret Kafka types PASSWORD (``sasl.jaas.config``, ``ssl.*.password``,
    ``ssl.keystore.key``, ...), also behind a ``listener.name.<l>.[<mechanism>.]`` prefix, or any
    key ending in ``.password`` or ``.secret``: never logged or printed (Kafka shows
    ``[hidden]``)."""
    if key in _PASSWORD_KEYS or key.endswith((".password", ".secret")):
        return True
    if key.startswith("listener.name."):
        return any(key.endswith("." + k) for k in _PASSWORD_KEYS)
    return False


def shown_value(key: str, value: Any) -> Any:
    """`value` as it may be logged: ``[hidden]`` for a sensitive key (:func:`is_sensitive`)."""
    return "[hidden]" if is_sensitive(key) else value


def keys_without_effect() -> list[str]:
    """Kafka 4.0's documented broker keys that are accepted (type-checked, named in the startup
    warning) but change nothing here, sorted; ``listener.name.*`` prefixed keys are accepted too."""
    applied = set(_ENGINE_KEYS) | set(_BROKER_TO_TOPIC) | set(_TIME_ALIASES)
    return sorted((set(KAFKA_BROKER_KEYS) - applied - SERVER_APPLIED_KEYS) | _NO_EFFECT_KEYS)


class LogConfig(Mapping[str, Any]):
    """The effective configuration of one topic: defaults overlaid with overrides.

    Behaves as a read-only mapping of Kafka key names to typed values;
    :attr:`overrides` holds only what was set explicitly (what Kafka's
    DescribeConfigs reports as a topic config rather than a default).
    """

    __slots__ = ("_values", "overrides")

    def __init__(self, overrides: Mapping[str, Any] | None = None,
                 defaults: Mapping[str, Any] | None = None):
        values = dict(TOPIC_CONFIG_DEFAULTS)
        if defaults:
            values.update(defaults)
        self.overrides: dict[str, Any] = {}
        for key, raw in (overrides or {}).items():
            if key not in _TOPIC_KEYS:
                raise InvalidConfigError(f"unknown topic config key {key!r}")
            self.overrides[key] = _TOPIC_KEYS[key][1](key, raw)
        values.update(self.overrides)
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def with_overrides(self, changes: Mapping[str, Any]) -> LogConfig:
        merged = dict(self.overrides)
        merged.update(changes)
        defaults = {k: v for k, v in self._values.items() if k not in self.overrides}
        return LogConfig(merged, defaults)

    def __repr__(self) -> str:
        return f"LogConfig({self.overrides!r})"

    # Attribute-style access for the hot keys (read by the storage layer).
    @property
    def segment_bytes(self) -> int:
        return self._values["segment.bytes"]

    @property
    def index_interval_bytes(self) -> int:
        return self._values["index.interval.bytes"]

    @property
    def max_message_bytes(self) -> int:
        return self._values["max.message.bytes"]

    @property
    def durable(self) -> bool:
        """True when every append waits for fdatasync (``flush.messages=1``)."""
        return self._values["flush.messages"] == 1


@dataclass
class EngineConfig:
    """Engine-wide settings: Kafka's broker keys, including the ``log.*`` topic defaults."""

    values: dict[str, Any]
    # keys the configuration set (server.properties, --config) under their effective names (an
    # hour/minute alias under the ms key), typed: DescribeConfigs reports them as STATIC_BROKER_CONFIG
    explicit: dict[str, Any] = field(default_factory=dict)
    ignored: dict[str, Any] = field(default_factory=dict)    # given, accepted, without effect here

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any] | None = None) -> EngineConfig:
        values: dict[str, Any] = {k: v[0] for k, v in _ENGINE_KEYS.items()}
        for default, _conv, bkey in _TOPIC_KEYS.values():
            values[bkey] = default
        explicit: dict[str, Any] = {}
        ignored: dict[str, Any] = {}
        for key, raw in (settings or {}).items():
            if key in _TIME_ALIASES:
                target, mult = _TIME_ALIASES[key]
                values[target] = explicit[target] = _int(0)(key, raw) * mult
            elif key in _ENGINE_KEYS:
                values[key] = explicit[key] = _ENGINE_KEYS[key][1](key, raw)
            elif key in _BROKER_TO_TOPIC:
                tkey = _BROKER_TO_TOPIC[key]
                values[key] = explicit[key] = _TOPIC_KEYS[tkey][1](key, raw)
            elif key in KAFKA_BROKER_KEYS or key in AUTHORIZER_KEYS or key.startswith("listener.name."):
                explicit[key] = _kafka_typed(key, raw)
                if not _server_applied(key):
                    ignored[key] = explicit[key]
                continue
            else:
                raise InvalidConfigError(f"unknown configuration key {key!r}{_did_you_mean(key)}")
            if key in _NO_EFFECT_KEYS:
                ignored[key] = explicit[key]
        return cls(values, explicit, ignored)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def topic_defaults(self) -> dict[str, Any]:
        """The broker-level defaults, keyed by topic key name."""
        return {tkey: self.values[bkey] for tkey, (_d, _c, bkey) in _TOPIC_KEYS.items()}

    @staticmethod
    def broker_key(topic_key: str) -> str:
        """The broker-level key that sets a topic key's default (``segment.bytes`` ->
        ``log.segment.bytes``)."""
        return _TOPIC_KEYS[topic_key][2]

    @staticmethod
    def default(key: str) -> Any:
        """Kafka's default of an engine or broker-level topic key."""
        if key in _ENGINE_KEYS:
            return _ENGINE_KEYS[key][0]
        return _TOPIC_KEYS[_BROKER_TO_TOPIC[key]][0]

    def log_config(self, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        return LogConfig(overrides, self.topic_defaults())


def _did_you_mean(key: str) -> str:
    known = [*_ENGINE_KEYS, *_BROKER_TO_TOPIC, *_TIME_ALIASES, *KAFKA_BROKER_KEYS]
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


_KAFKA_TYPES: dict[str, Callable[[str, Any], Any]] = {
    "int": _int(-2**31, 2**31 - 1), "short": _int(-2**15, 2**15 - 1),
    "long": _int(-2**63, 2**63 - 1), "boolean": _bool, "double": _float(float("-inf"), float("inf")),
}


def _kafka_typed(key: str, raw: Any) -> Any:
    """A value of a Kafka key this project does not implement, checked against Kafka's type."""
    conv = _KAFKA_TYPES.get(KAFKA_BROKER_KEYS.get(key, "string"))
    return conv(key, raw) if conv is not None else str(raw)


def parse_properties(text: str, source: str = "") -> dict[str, str]:
    """Parse a Java-style ``server.properties`` file (``key=value`` / ``key: value``, ``#`` comments);
    errors name ``source`` (the file) and the line."""
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in s:
                k, v = s.split(sep, 1)
                out[k.strip()] = v.strip()
                break
        else:
            where = f"{source} line {lineno}" if source else f"line {lineno}"
            raise InvalidConfigError(f"{where}: expected key=value, got {line!r}")
    return out
