"""SCRAM credentials shared through ZooKeeper in cluster mode, where Kafka's ZooKeeper-mode
brokers kept them: ``/config/users/<sanitized user>`` holding
``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=..."}}``
(other keys of the node, such as quotas, kept as they are) and a
``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":"users/<user>"}``
per change, as Kafka's AdminZkClient writes them (engine/security/credentials.py has the forms).

:class:`ZkScramCredentials` stands where a broker's ScramCredentialStore stands (the SASL
listeners' lookup, Describe/AlterUserScramCredentials): lookups and DescribeUserScramCredentials
read the local store, which a ZooKeeper watch on every user node keeps equal to ZooKeeper's
(``replace_user``; so the file in the data directory is a cache that survives a restart);
AlterUserScramCredentials decides with Kafka's rules over that state, writes each changed user's
node and its notification, then applies the change locally at once.  Before :meth:`share` is
called (the broker has not joined the cluster yet, or a node alone) it is the local store alone.

Concurrency: ``alter`` runs in a worker thread (ZooKeeper calls are bounded, engine/cluster/zk.py);
the watches run on kazoo's thread; the store is thread-safe.
"""

from __future__ import annotations

import functools
import logging
import threading
import urllib.parse
from collections.abc import Iterable, Sequence

from ..errors import ScramCredentialFormatError
from ..security.credentials import (
    AlterResult,
    DescribeResult,
    ScramCredentialStore,
    ScramDeletion,
    ScramUpsertion,
    decode_zk_user_config,
    encode_zk_user_config,
    plan_alter,
    zk_user_path,
)
from ..security.scram import ScramCredential
from .config_zk import update_config_node
from .zk import answered_as_timeout

__all__ = ["ZkScramCredentials"]

log = logging.getLogger("engine.cluster")

USERS = "/config/users"


class ZkScramCredentials:
    def __init__(self, store: ScramCredentialStore) -> None:
        self.store = store
        self.zk = None                       # engine/cluster/zk.py ZkStore once shared
        self._lock = threading.Lock()        # one alter at a time from this broker
        self._watched: set[str] = set()

    # -- what a SaslServerFactory and the handlers call ----------------------------------------
    def __call__(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.store.get(user, mechanism)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.store.get(user, mechanism)

    def describe(self, users: Sequence[str] | None = None) -> list[DescribeResult]:
        return self.store.describe(users)

    def alter(self, deletions: Iterable[ScramDeletion],
              upsertions: Iterable[ScramUpsertion]) -> list[AlterResult]:
        zk = self.zk
        if zk is None:
            return self.store.alter(deletions, upsertions)
        with self._lock:
            results, changes = plan_alter(self.store.snapshot(), deletions, upsertions)
            by_user: dict[str, dict[str, ScramCredential | None]] = {}
            for (user, mech), cred in changes.items():
                by_user.setdefault(user, {})[mech] = cred
            for user, mechs in by_user.items():
                with answered_as_timeout(f"the SCRAM credentials of {user}"):
                    self._write_user(zk, user, mechs)
        return results

    # -- ZooKeeper ----------------------------------------------------------------------------
    def _write_user(self, zk, user: str, mechs: dict[str, ScramCredential | None]) -> None:
        path = zk_user_path(user)
        final: dict[str, ScramCredential] = {}

        def change(data: bytes | None) -> bytes:
            # the node's other keys (quotas, engine/cluster/quota_zk.py) are kept as they are
            creds, other = decode_zk_user_config(data) if data is not None else ({}, {})
            for mech, cred in mechs.items():
                if cred is None:
                    creds.pop(mech, None)
                else:
                    creds[mech] = cred
            final.clear()
            final.update(creds)
            return encode_zk_user_config(creds, other)

        # conditional on the version read: a quota change to the same node is never lost
        update_config_node(zk, path, zk_user_path(user)[len("/config/"):], change)
        self.store.replace_user(user, final)
        log.info("SCRAM credentials of %s written to ZooKeeper (%s)", user, ", ".join(sorted(final)) or "none")

    def share(self, zk) -> None:
        """Take the cluster's credentials from now on: load every user node and watch them."""
        from kazoo.recipe.watchers import ChildrenWatch
        zk.bounded("ensure_path", USERS)
        self.zk = zk
        ChildrenWatch(zk.watch_client, USERS, self._users_changed)

    def _users_changed(self, children: list[str]) -> None:
        names = {urllib.parse.unquote(c): c for c in children}
        for user in set(u for u, _ in self.store.snapshot()) - set(names):
            self.store.replace_user(user, {})       # removed from ZooKeeper
        from kazoo.recipe.watchers import DataWatch
        zk = self.zk
        assert zk is not None
        for user, node in names.items():
            if node not in self._watched:
                self._watched.add(node)
                DataWatch(zk.watch_client, f"{USERS}/{node}", functools.partial(self._user_changed, user))

    def _user_changed(self, user: str, data, _stat) -> bool | None:
        if data is None:
            self.store.replace_user(user, {})
            self._watched.discard(urllib.parse.quote(user, safe=""))
            return False                            # the node is gone: stop watching it
        try:
            creds, _other = decode_zk_user_config(data)
        except ScramCredentialFormatError as e:
            log.warning("ZooKeeper %s/%s: %s: ignored", USERS, user, e)
            return None
        self.store.replace_user(user, creds)
        return None
