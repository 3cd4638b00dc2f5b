"""ZooKeeper entity config nodes as Kafka's ZooKeeper-mode brokers kept them (AdminZkClient):
``/config/<entity path>`` holding ``{"version":1,"config":{"key":"value",...}}`` and, per change,
a ``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":"<entity path>"}``.

One node may hold keys that different writers own: ``/config/users/<user>`` holds a user's SCRAM
credentials (engine/cluster/scram_zk.py) and its quotas (engine/cluster/quota_zk.py).  So every
writer changes a node through :func:`update_config_node`: read, change only its own keys, write
back conditionally on the version it read (retried when another writer came between), so
neither clobbers the other's keys.

Concurrency: blocking ZooKeeper calls (bounded, engine/cluster/zk.py); call from a worker thread.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..errors import RequestTimedOutError
from .zk_change import ConcurrentUpdateError, notify, update_node

__all__ = ["CHANGES", "read_config_node", "update_config_node"]

CHANGES = "/config/changes/config_change_"
_RETRIES = 20


def decode_config(data: bytes | None) -> dict:
    """The ``config`` object of a node's JSON (``{}`` for an empty or foreign node)."""
    if not data:
        return {}
    try:
        doc = json.loads(data)
    except ValueError:
        return {}
    config = doc.get("config") if isinstance(doc, dict) else None
    return dict(config) if isinstance(config, dict) else {}


def read_config_node(zk, path: str) -> dict | None:
    """The node's ``config`` object, None if there is no node."""
    from kazoo.exceptions import NoNodeError
    try:
        data, _ = zk.bounded("get", path)
    except NoNodeError:
        return None
    return decode_config(data)


def update_config_node(zk, path: str, entity_path: str, change: Callable[[bytes | None], bytes]) -> None:
    """Set the node at ``path`` to ``change(its current bytes or None)`` -- conditionally on the
    version read, again if another writer changed it meanwhile (engine/cluster/zk_change.py) --
    and notify the change."""
    try:
        update_node(zk, path, change, retries=_RETRIES)
    except ConcurrentUpdateError:
        raise RequestTimedOutError(f"ZooKeeper {path}: changed by others {_RETRIES} times in a row") from None
    notify(zk, CHANGES, json.dumps({"version": 2, "entity_path": entity_path},
                                   separators=(",", ":")).encode("utf-8"))
