"""Helpers shared by the request handler modules (handlers, admin_handlers, group_handlers):
error codes into answers, topic ids, and the cluster view's brokers and partitions as Metadata /
DescribeTopicPartitions entries.  No handler imports another handler module for these."""

from __future__ import annotations

import base64
import logging
import uuid

from ..errors import ErrorCode, KafkaApiError

log = logging.getLogger("engine.server")

_ZERO_UUID = uuid.UUID(int=0)

# DescribeConfigs / IncrementalAlterConfigs constants (Kafka's ConfigResource.Type,
# DescribeConfigsResponse.ConfigSource and ConfigEntry.ConfigType).
_RESOURCE_TOPIC = 2
_RESOURCE_BROKER = 4


def _code(e: BaseException) -> int:
    if isinstance(e, KafkaApiError):
        return e.code
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _record_error(res: dict, e: BaseException, what: str, *args, message: bool = True) -> None:
    """Put an exception into a per-item response: Kafka's code (and message); log the unexpected."""
    if not isinstance(e, KafkaApiError):
        log.exception(what, *args)
    res["error_code"] = _code(e)
    if message:
        res["error_message"] = str(e)[:300]


def partition_entry(view, topic: str, p: int, *, describe: bool = False) -> dict:
    """A partition of a Metadata (or, `describe`, DescribeTopicPartitions) answer, from the view."""
    try:
        leader, epoch, replicas, isr = view.partition_state(topic, p)
        live = view.brokers()
        error = ErrorCode.NONE if leader in live else ErrorCode.LEADER_NOT_AVAILABLE
        res = {"error_code": error, "partition_index": p, "leader_id": leader if error == 0 else -1,
               "leader_epoch": epoch, "replica_nodes": replicas, "isr_nodes": isr,
               "offline_replicas": [r for r in replicas if r not in live]}
    except KafkaApiError as e:
        res = {"error_code": _code(e), "partition_index": p, "leader_id": -1, "leader_epoch": -1,
               "replica_nodes": [], "isr_nodes": [], "offline_replicas": []}
    if describe:
        res["eligible_leader_replicas"] = []
        res["last_known_elr"] = []
    return res


def broker_entries(view, conn, id_key: str = "node_id") -> list[dict]:
    """The live brokers of the view; this node's address is the one the client connected to
    (the advertised one) when the view has none for it."""
    host, port = conn.advertised_address()
    out = []
    for node, (h, p, rack) in sorted(view.brokers().items()):
        if node == view.node_id and h is None:
            h, p = host, port
        out.append({id_key: node, "host": h, "port": p, "rack": rack})
    return out


def _replica_id(req) -> int:
    """The fetching replica: ``replica_id`` before Fetch v15, ``replica_state`` from v15 (KIP-903)."""
    rid = getattr(req, "replica_id", None)
    if rid is None:
        state = getattr(req, "replica_state", None)
        rid = state.replica_id if state is not None else -1
    return rid


def _topic_uuid(topic_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))
    except (ValueError, TypeError):
        return _ZERO_UUID


def broker_config_change(resource_name: str, set_names: list[str], node_id: int) -> tuple[int, str | None]:
    """(error code, message) of setting `set_names` on broker `resource_name` ("" = any broker).

    Every broker config here is static (read at start), so any key set gets Kafka's answer for a
    static config; with none set (AlterConfigs' empty set, IncrementalAlterConfigs deletes) there
    is no dynamic value to remove and the answer is success, as Kafka's."""
    if resource_name not in ("", str(node_id)):
        return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {node_id}, but received {resource_name}"
    if set_names:
        return ErrorCode.INVALID_REQUEST, f"Cannot update these configs dynamically: Set({', '.join(set_names)})"
    return 0, None
