"""DescribeConfigs entries as Kafka 4.0 writes them: value strings, ConfigDef types, sources and
synonyms of topic and broker keys (checked against Kafka by tests/differential)."""

from __future__ import annotations

# DescribeConfigsResponse.ConfigSource
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


def config_string(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# Kafka's ConfigDef types where the Python value's type does not tell (INT vs LONG, LIST).
_KAFKA_TYPES = {"segment.bytes": 3, "segment.index.bytes": 3, "index.interval.bytes": 3,
                "max.message.bytes": 3, "min.insync.replicas": 3, "cleanup.policy": 7,
                "log.segment.bytes": 3, "log.index.size.max.bytes": 3, "log.index.interval.bytes": 3,
                "message.max.bytes": 3, "log.cleanup.policy": 7, "num.partitions": 3,
                "default.replication.factor": 3, "broker.id": 3, "node.id": 3,
                "socket.request.max.bytes": 3, "queued.max.requests": 3,
                "num.recovery.threads.per.data.dir": 3, "group.initial.rebalance.delay.ms": 3,
                "log.flush.offset.checkpoint.interval.ms": 3,
                "log.flush.start.offset.checkpoint.interval.ms": 3,
                "group.min.session.timeout.ms": 3, "group.max.session.timeout.ms": 3,
                "group.max.size": 3, "offsets.topic.num.partitions": 3, "offset.metadata.max.bytes": 3,
                "offsets.topic.replication.factor": 4, "offsets.retention.minutes": 3,
                "log.cleaner.dedupe.buffer.size": 5, "log.dirs": 2,
                "listeners": 2, "advertised.listeners": 2, "process.roles": 7,
                "controller.quorum.voters": 7, "controller.listener.names": 2,
                "listener.security.protocol.map": 2, "inter.broker.listener.name": 2}
# Broker keys whose Kafka default is null (the value comes from an hours/minutes form): Kafka
# lists no DEFAULT synonym for them.
_NULL_DEFAULT_BROKER_KEYS = {"log.roll.ms", "log.roll.jitter.ms", "log.retention.ms",
                             "log.flush.interval.ms"}


def topic_synonyms(config, name: str, overrides) -> list[dict]:
    """A topic key's synonyms as Kafka lists them, most precedent first: the topic override
    (DYNAMIC_TOPIC_CONFIG), the broker key set in the broker's config (STATIC_BROKER_CONFIG),
    the broker key's default (DEFAULT_CONFIG)."""
    from ..config import _TOPIC_KEYS
    default, _conv, broker_key = _TOPIC_KEYS[name]
    out = []
    if name in overrides:
        out.append({"name": name, "value": config_string(overrides[name]),
                    "source": SOURCE_DYNAMIC_TOPIC})
    static = config.values.get(broker_key, default)
    if static != default:       # set in the broker's configuration
        out.append({"name": broker_key, "value": config_string(static),
                    "source": SOURCE_STATIC_BROKER})
    if broker_key not in _NULL_DEFAULT_BROKER_KEYS:
        out.append({"name": broker_key, "value": config_string(default), "source": SOURCE_DEFAULT})
    return out


def broker_entry(config, name: str) -> tuple[str | None, int, list[dict]]:
    """(value, source, synonyms) of a broker key as Kafka describes it: a key set in the broker's
    configuration (here: a value other than the default) is STATIC_BROKER_CONFIG with the default
    as its next synonym; a key whose Kafka default is null shows null when unset."""
    from ..config import _BROKER_TO_TOPIC, _ENGINE_KEYS, _TOPIC_KEYS
    default = _ENGINE_KEYS[name][0] if name in _ENGINE_KEYS else \
        _TOPIC_KEYS[_BROKER_TO_TOPIC[name]][0]
    value = config.values[name]
    null_default = name in _NULL_DEFAULT_BROKER_KEYS
    if value == default:
        if null_default:
            return None, SOURCE_DEFAULT, []
        v = config_string(value)
        return v, SOURCE_DEFAULT, [{"name": name, "value": v, "source": SOURCE_DEFAULT}]
    v = config_string(value)
    synonyms = [{"name": name, "value": v, "source": SOURCE_STATIC_BROKER}]
    if not null_default:
        synonyms.append({"name": name, "value": config_string(default), "source": SOURCE_DEFAULT})
    return v, SOURCE_STATIC_BROKER, synonyms


def config_type(value, name: str = "") -> int:
    if name in _KAFKA_TYPES:
        return _KAFKA_TYPES[name]
    if isinstance(value, bool):
        return 1      # BOOLEAN
    if isinstance(value, int):
        return 5      # LONG
    if isinstance(value, float):
        return 6      # DOUBLE
    return 2          # STRING
