"""Topic and configuration administration over the Kafka protocol, for any broker (ours or
Apache Kafka): what ``kafka-topics.sh`` and ``kafka-configs.sh`` do, and what the CLI's
``--bootstrap-server`` paths call.

::

    with WireAdmin("127.0.0.1:9092") as admin:
        admin.create_topic("events", 3, {"retention.ms": "86400000"})
        admin.describe_topic("events")          # partitions: leader, replicas, ISR, offsets
        admin.describe_configs("topic", "events")
        admin.alter_configs("topic", "events", set={"retention.ms": "1000"}, delete=["cleanup.policy"])

Requests go through :class:`~engine.client.wire.WireClient` (one wire client in the project);
a per-topic or per-resource error code raises Kafka's exception for it
(``engine.errors.api_error``).  Not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import api_error
from .wire import EARLIEST, LATEST, ApiKey, WireClient

__all__ = ["ConfigEntry", "PartitionInfo", "TopicInfo", "WireAdmin"]

RESOURCE_TYPES = {"topic": 2, "broker": 4}
_SOURCES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
            4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
            7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
_OP_SET, _OP_DELETE = 0, 1


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    log_start_offset: int
    high_watermark: int


@dataclass(frozen=True)
class TopicInfo:
    name: str
    topic_id: str
    internal: bool
    partitions: list[PartitionInfo]
    overrides: dict[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool
    sensitive: bool


class WireAdmin:
    """See the module docstring.  A context manager."""

    def __init__(self, bootstrap: str, *, client_id: str = "kafka-engine-admin",
                 request_timeout_ms: int = 30_000, security=None):
        self.client = WireClient(bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms,
                                 security=security)
        self.timeout_ms = request_timeout_ms

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> WireAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _controller_call(self, key: int, body: dict) -> dict:
        # admin requests may go to any broker of ours; Kafka forwards them to its controller
        return self.client._retrying(str(key), lambda: self.client._call(None, key, body))

    # -- topics -----------------------------------------------------------------------
    def list_topics(self) -> list[str]:
        return sorted(self.client.list_topics())

    def create_topic(self, name: str, partitions: int | None = None, config: dict | None = None,
                     replication_factor: int | None = None, validate_only: bool = False) -> None:
        body = {"topics": [{"name": name, "num_partitions": -1 if partitions is None else partitions,
                            "replication_factor": -1 if replication_factor is None else replication_factor,
                            "assignments": [],
                            "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()]}],
                "timeout": self.timeout_ms, "validate_only": validate_only}
        for t in self._controller_call(ApiKey.CREATE_TOPICS, body)["topics"]:
            if t["error_code"]:
                raise api_error(t["error_code"], t.get("error_message") or f"create topic {name!r}")

    def delete_topic(self, name: str) -> None:
        body = {"topic_names": [name], "topics": [{"name": name}], "timeout": self.timeout_ms}
        for t in self._controller_call(ApiKey.DELETE_TOPICS, body)["responses"]:
            if t["error_code"]:
                raise api_error(t["error_code"], t.get("error_message") or f"delete topic {name!r}")

    def create_partitions(self, name: str, total: int) -> None:
        body = {"topics": [{"name": name, "count": total, "assignments": None}],
                "timeout": self.timeout_ms, "validate_only": False}
        for t in self._controller_call(ApiKey.CREATE_PARTITIONS, body)["results"]:
            if t["error_code"]:
                raise api_error(t["error_code"], t.get("error_message") or f"create partitions of {name!r}")

    def describe_topic(self, name: str) -> TopicInfo:
        """Partitions with leader, replicas, ISR (from Metadata) and their offsets (ListOffsets)."""
        v = self.client._version(ApiKey.METADATA)
        body = {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
        resp = self.client._retrying("metadata", lambda: self.client._call(None, ApiKey.METADATA, body, v))
        for b in resp["brokers"]:
            self.client._brokers[b["node_id"]] = (b["host"], b["port"])
        (t,) = [t for t in resp["topics"] if t["name"] == name]
        if t["error_code"]:
            raise api_error(t["error_code"], f"describe topic {name!r}")
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        for p in parts:
            self.client.forget_leader(name, p["partition_index"])
            if p["leader_id"] >= 0:
                self.client._leaders[(name, p["partition_index"])] = p["leader_id"]
                self.client._epochs[(name, p["partition_index"])] = p.get("leader_epoch", -1)
        tps = [(name, p["partition_index"]) for p in parts]
        starts = self.client.list_offsets({tp: EARLIEST for tp in tps}) if tps else {}
        ends = self.client.list_offsets({tp: LATEST for tp in tps}) if tps else {}
        infos = [PartitionInfo(p["partition_index"], p["leader_id"], list(p["replica_nodes"]),
                               list(p["isr_nodes"]), starts[(name, p["partition_index"])][0],
                               ends[(name, p["partition_index"])][0]) for p in parts]
        overrides = {c.name: c.value for c in self.describe_configs("topic", name)
                     if c.source == "DYNAMIC_TOPIC_CONFIG"}
        tid = t.get("topic_id")
        return TopicInfo(name, str(tid) if tid is not None else "", bool(t.get("is_internal")), infos,
                         overrides)

    def alter_topic_config(self, name: str, set: dict | None = None, delete=()) -> None:
        """The embedded Engine's name for IncrementalAlterConfigs of a topic."""
        self.alter_configs("topic", name, set=set, delete=delete)

    # -- configs ------------------------------------------------------------------------
    def describe_configs(self, resource: str, name: str, keys: list[str] | None = None) -> list[ConfigEntry]:
        rtype = RESOURCE_TYPES[resource]
        body = {"resources": [{"resource_type": rtype, "resource_name": name,
                               "configuration_keys": keys}],
                "include_synonyms": False, "include_documentation": False}
        (res,) = self._controller_call(ApiKey.DESCRIBE_CONFIGS, body)["results"]
        if res["error_code"]:
            raise api_error(res["error_code"], res.get("error_message") or f"describe configs of {name!r}")
        return [ConfigEntry(c["name"], c["value"], _SOURCES.get(c.get("config_source", 5), "UNKNOWN"),
                            bool(c["read_only"]), bool(c["is_sensitive"])) for c in res["configs"]]

    def alter_configs(self, resource: str, name: str, set: dict | None = None,
                      delete: list[str] | tuple = (), validate_only: bool = False) -> None:
        """IncrementalAlterConfigs: SET the given keys, DELETE (back to the default) the others."""
        ops = [{"name": k, "config_operation": _OP_SET, "value": str(v)} for k, v in (set or {}).items()]
        ops += [{"name": k, "config_operation": _OP_DELETE, "value": None} for k in delete]
        body = {"resources": [{"resource_type": RESOURCE_TYPES[resource], "resource_name": name,
                               "configs": ops}], "validate_only": validate_only}
        (res,) = self._controller_call(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)["responses"]
        if res["error_code"]:
            raise api_error(res["error_code"], res.get("error_message") or f"alter configs of {name!r}")
