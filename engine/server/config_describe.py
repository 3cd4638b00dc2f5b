"""DescribeConfigs entries as Kafka 4.0 builds them, and IncrementalAlterConfigs operations.

* ``config_type``: the ConfigDef type of each topic key in Kafka's LogConfig (``segment.bytes``
  is an INT, ``cleanup.policy`` a LIST, ...), not one guessed from the Python value.
* ``config_source``: a topic override is DYNAMIC_TOPIC_CONFIG; otherwise a topic key whose broker
  key the server's configuration set is STATIC_BROKER_CONFIG, else DEFAULT_CONFIG. For the
  broker resource: STATIC_BROKER_CONFIG for keys the configuration set, DEFAULT_CONFIG otherwise.
* ``synonyms`` (when asked): most specific first — the topic override, the broker key as the
  configuration set it, and the broker key's default where Kafka has one (``log.roll.ms``,
  ``log.roll.jitter.ms``, ``log.retention.ms`` and ``log.flush.interval.ms`` default to null in
  Kafka, so ``segment.ms``, ``segment.jitter.ms``, ``retention.ms`` and ``flush.ms`` list none).
"""

from __future__ import annotations

from ..config import TOPIC_CONFIG_DEFAULTS, EngineConfig, is_sensitive

SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
TOPIC_CONFIG_TYPES = {
    "segment.bytes": INT, "segment.ms": LONG, "segment.jitter.ms": LONG,
    "segment.index.bytes": INT, "index.interval.bytes": INT, "retention.bytes": LONG,
    "retention.ms": LONG, "max.message.bytes": INT, "flush.messages": LONG, "flush.ms": LONG,
    "cleanup.policy": LIST, "compression.type": STRING, "message.timestamp.type": STRING,
    "message.timestamp.before.max.ms": LONG, "message.timestamp.after.max.ms": LONG,
    "min.insync.replicas": INT, "preallocate": BOOLEAN, "file.delete.delay.ms": LONG,
    "delete.retention.ms": LONG, "min.compaction.lag.ms": LONG, "max.compaction.lag.ms": LONG,
    "min.cleanable.dirty.ratio": DOUBLE, "unclean.leader.election.enable": BOOLEAN,
}
_NULL_BROKER_DEFAULT = {"segment.ms", "segment.jitter.ms", "retention.ms", "flush.ms"}


def config_string(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def value_type(value) -> int:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return LONG
    if isinstance(value, float):
        return DOUBLE
    return STRING


def topic_entry(name: str, values, overrides, broker: EngineConfig, synonyms: bool) -> dict:
    """One DescribeConfigs entry of a topic resource."""
    value = config_string(values[name])
    bkey = broker.broker_key(name)
    syn = []
    if name in overrides:
        syn.append({"name": name, "value": value, "source": SOURCE_DYNAMIC_TOPIC})
    if bkey in broker.explicit:
        syn.append({"name": bkey, "value": config_string(broker[bkey]),
                    "source": SOURCE_STATIC_BROKER})
    if name not in _NULL_BROKER_DEFAULT:
        syn.append({"name": bkey, "value": config_string(TOPIC_CONFIG_DEFAULTS[name]),
                    "source": SOURCE_DEFAULT})
    if name in overrides:
        source = SOURCE_DYNAMIC_TOPIC
    elif bkey in broker.explicit:
        source = SOURCE_STATIC_BROKER
    else:
        source = SOURCE_DEFAULT
    return {"name": name, "value": value, "read_only": False, "config_source": source,
            "is_sensitive": False, "synonyms": syn if synonyms else [],
            "config_type": TOPIC_CONFIG_TYPES.get(name, value_type(values[name])),
            "documentation": None}


_KAFKA_TYPE_CODES = {"boolean": BOOLEAN, "string": STRING, "int": INT, "short": 4, "long": LONG,
                     "double": DOUBLE, "list": LIST, "class": 8, "password": 9}
# Broker keys whose Kafka default is null (the value comes from an hours/minutes form or from
# another key): unset, Kafka shows null and lists no DEFAULT synonym.
_NULL_DEFAULT_BROKER_KEYS = {"log.roll.ms", "log.roll.jitter.ms", "log.retention.ms",
                             "log.flush.interval.ms", "broker.rack"}


def broker_entry(name: str, broker: EngineConfig, synonyms: bool) -> dict:
    """One DescribeConfigs entry of the broker resource (every key static here): Kafka's ConfigDef
    type; a key the configuration set is STATIC_BROKER_CONFIG with the default as its next
    synonym; an unset key whose Kafka default is null shows null."""
    from .._kafka_configs import KAFKA_BROKER_KEYS
    value = config_string(broker[name])
    null_default = name in _NULL_DEFAULT_BROKER_KEYS
    default = broker.default(name)
    syn = []
    if name in broker.explicit:
        source = SOURCE_STATIC_BROKER
        syn.append({"name": name, "value": value, "source": SOURCE_STATIC_BROKER})
        if not null_default:
            syn.append({"name": name, "value": config_string(default), "source": SOURCE_DEFAULT})
    else:
        source = SOURCE_DEFAULT
        if null_default:
            value = None
        else:
            syn.append({"name": name, "value": value, "source": SOURCE_DEFAULT})
    kafka_type = KAFKA_BROKER_KEYS.get(name)
    sensitive = is_sensitive(name)      # a password (zookeeper.ssl.keystore.password): null, as Kafka
    if sensitive:
        value = None
        syn = [dict(s, value=None) for s in syn]
    return {"name": name, "value": value, "read_only": True, "config_source": source,
            "is_sensitive": sensitive, "synonyms": syn if synonyms else [],
            "config_type": _KAFKA_TYPE_CODES.get(kafka_type or ("password" if sensitive else ""),
                                                 value_type(broker[name])),
            "documentation": None}


# IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType)
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def apply_config_ops(effective, overrides: dict, ops) -> tuple[dict, list]:
    """IncrementalAlterConfigs operations -> (keys to set, keys to delete).

    APPEND / SUBTRACT work on list-valued keys (``cleanup.policy``), starting
    from the effective value; on any other key they are INVALID_CONFIG.
    """
    from ..errors import InvalidConfigError, InvalidRequestError

    sets: dict = {}
    deletes: list = []
    for op in ops:
        if op.config_operation == OP_SET:
            sets[op.name] = op.value
        elif op.config_operation == OP_DELETE:
            deletes.append(op.name)
        elif op.config_operation in (OP_APPEND, OP_SUBTRACT):
            if op.name != "cleanup.policy":
                raise InvalidConfigError(f"{op.name} is not a list; APPEND/SUBTRACT need a list config")
            items = [x for x in str(sets.get(op.name, effective[op.name])).split(",") if x]
            for x in (op.value or "").split(","):
                if op.config_operation == OP_APPEND and x and x not in items:
                    items.append(x)
                elif op.config_operation == OP_SUBTRACT and x in items:
                    items.remove(x)
            sets[op.name] = ",".join(items)
        else:
            raise InvalidRequestError(f"unknown config operation {op.config_operation}")
    return sets, deletes
