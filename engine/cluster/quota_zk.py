"""Client quotas shared through ZooKeeper in cluster mode, where Kafka's ZooKeeper-mode brokers
kept them: ``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>``,
``/config/clients/<client-id>``, ``/config/ips/<ip>`` (``<default>`` for a default entry, names
sanitized as Kafka's Sanitizer does), each ``{"version":1,"config":{"producer_byte_rate":"1048576",...}}``, and a
``/config/changes/config_change_<seq>`` notification per change (engine/cluster/config_zk.py).
A user's node also holds its SCRAM credentials (engine/cluster/scram_zk.py): a quota change
rewrites only the quota keys, conditionally on the version it read.

:class:`ZkClientQuotas` stands where the broker's ClientQuotaStore stands (the quota manager,
Describe/AlterClientQuotas): reads are the local store's, which a watch on the change
notifications keeps equal to ZooKeeper's (every notification reloads the quota nodes; so the
file in the data directory is a cache that survives a restart); AlterClientQuotas decides with
Kafka's rules over that state, writes each changed entity's node and its notification, then
applies the change locally at once.  Before :meth:`share` is called (the broker has not joined
a cluster, or a node alone) it is the local store alone.

Concurrency: ``alter`` runs in a worker thread; the watch runs on kazoo's thread; the store is
thread-safe.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from ..security.credentials import decode_zk_user_config, encode_zk_user_config
from ..security.quotas import (
    ALL_QUOTA_KEYS,
    IP_QUOTA_KEYS,
    QUOTA_KEYS,
    ClientQuotaStore,
    Entity,
    QuotaAlteration,
    entity_from_zk,
    ip_entity_from_zk,
    plan_alter,
    quotas_from_zk_config,
    zk_config_value,
    zk_entity_path,
    zk_path,
)
from .config_zk import decode_config, read_config_node, update_config_node
from .zk import answered_as_timeout

__all__ = ["ZkClientQuotas"]

log = logging.getLogger("engine.cluster")

USERS = "/config/users"
CLIENTS = "/config/clients"
IPS = "/config/ips"
CHANGES_PARENT = "/config/changes"


def _with_quotas(data: bytes | None, quotas: dict[str, float], user_node: bool) -> bytes:
    """A node's bytes with its quota keys replaced by ``quotas`` (other keys kept)."""
    if user_node:               # SCRAM credentials parsed and written back as they are
        creds, other = decode_zk_user_config(data) if data else ({}, {})
    else:
        creds, other = {}, {k: str(v) for k, v in decode_config(data).items()}
    other = {k: v for k, v in other.items() if k not in ALL_QUOTA_KEYS}
    other.update({k: zk_config_value(k, v) for k, v in sorted(quotas.items())})
    return encode_zk_user_config(creds, other)


def _ensure_user_node(zk, path: str) -> None:
    from kazoo.exceptions import NodeExistsError
    if zk.bounded("exists", path) is None:
        try:
            zk.bounded("create", path, encode_zk_user_config({}, {}), makepath=True)
        except NodeExistsError:
            pass


class ZkClientQuotas:
    def __init__(self, store: ClientQuotaStore) -> None:
        self.store = store
        self.zk = None                       # engine/cluster/zk.py ZkStore once shared
        self._lock = threading.Lock()        # one alter at a time from this broker

    # -- what the quota manager and the handlers call ------------------------------------------
    def listen(self, listener: Callable[[], None]) -> None:
        self.store.listen(listener)

    def snapshot(self) -> dict[Entity, dict[str, float]]:
        return self.store.snapshot()

    def describe(self, components, strict: bool):
        return self.store.describe(components, strict)

    def alter(self, alterations: Sequence[QuotaAlteration], validate_only: bool = False):
        zk = self.zk
        if zk is None:
            return self.store.alter(alterations, validate_only)
        with self._lock:
            current = self.store.snapshot()
            results, changes = plan_alter(current, alterations)
            if validate_only or not changes:
                return results
            for entity, quotas in changes.items():
                with answered_as_timeout(f"the client quotas of {zk_entity_path(entity)}"):
                    if len(entity) == 2:     # the user's node first, a config node (not empty)
                        _ensure_user_node(zk, zk_path(entity[:1]))
                    update_config_node(
                        zk, zk_path(entity), zk_entity_path(entity),
                        lambda data, q=quotas, e=entity: _with_quotas(data, q, len(e) == 1 and e[0][0] == "user"))
                if quotas:
                    current[entity] = quotas
                else:
                    current.pop(entity, None)
                log.info("client quotas of %s written to ZooKeeper: %s", zk_entity_path(entity), quotas or "none")
            self.store.replace(current)
        return results

    # -- ZooKeeper ----------------------------------------------------------------------------
    def share(self, zk) -> None:
        """Take the cluster's quotas from now on: load them, and again at every change
        notification."""
        from kazoo.recipe.watchers import ChildrenWatch
        for path in (USERS, CLIENTS, IPS, CHANGES_PARENT):
            zk.bounded("ensure_path", path)
        self.zk = zk
        ChildrenWatch(zk.watch_client, CHANGES_PARENT, self._changed)

    def _changed(self, _children) -> None:
        try:
            self.store.replace(self._load())
        except Exception as e:       # ZooKeeper away: the next notification loads them again
            log.warning("client quotas not reloaded from ZooKeeper: %s: %s", type(e).__name__, e)

    def _load(self) -> dict[Entity, dict[str, float]]:
        from kazoo.exceptions import NoNodeError
        zk = self.zk
        assert zk is not None
        out: dict[Entity, dict[str, float]] = {}

        def take(path: str, entity: Entity) -> None:
            config = read_config_node(zk, path)
            quotas = quotas_from_zk_config(config or {}, path, IP_QUOTA_KEYS if path.startswith(IPS) else QUOTA_KEYS)
            if quotas:
                out[entity] = quotas

        for user in zk.bounded("get_children", USERS):
            take(f"{USERS}/{user}", entity_from_zk(user, None))
            try:
                clients = zk.bounded("get_children", f"{USERS}/{user}/clients")
            except NoNodeError:
                clients = []
            for client in clients:
                take(f"{USERS}/{user}/clients/{client}", entity_from_zk(user, client))
        for client in zk.bounded("get_children", CLIENTS):
            take(f"{CLIENTS}/{client}", entity_from_zk(None, client))
        for ip in zk.bounded("get_children", IPS):
            take(f"{IPS}/{ip}", ip_entity_from_zk(ip))
        return out
