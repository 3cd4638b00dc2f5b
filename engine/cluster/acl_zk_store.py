"""The ACL authorizer's store in cluster mode: the ACLs in ZooKeeper where Kafka's ZooKeeper-mode
AclAuthorizer kept them (engine/security/acl_zk.py has the forms), so that every broker of the
cluster decides with the same ACLs.

- CreateAcls / DeleteAcls on any broker change each affected resource pattern's node
  (``/kafka-acl/<Type>/<name>``, ``/kafka-acl-extended/prefixed/<Type>/<name>``) with a write
  conditional on the version read, read again and retried on a conflict (Kafka's
  ``updateResourceAcls``; engine/cluster/zk_change.py), the node deleted when no ACL is left; then
  announce the change (``/kafka-acl-changes/acl_changes_<seq>``, or under
  ``/kafka-acl-extended-changes`` for a prefixed pattern).  The writer takes the new ACLs at
  once (a DescribeAcls right after sees them).
- Every broker (the writer too) watches both change paths and, per notification, re-reads that
  pattern's node and takes it as it is (:meth:`Authorizer.refresh`), so all converge on
  ZooKeeper's content; the re-read and the broker's own writes are serialised by the
  authorizer's lock, so an older content never replaces a newer one for good.
- At :meth:`ZkAclStore.share` (the broker joined the cluster) every ACL is loaded from
  ZooKeeper.  Before it the store holds none and refuses changes (REQUEST_TIMED_OUT: the client
  retries): the broker serves only super users until it has the cluster's ACLs.

The file ``acls.json`` of a node alone is not used in cluster mode (as Kafka's AclAuthorizer
read only ZooKeeper).

Concurrency: ``update`` runs in a worker thread (the ACL handlers' off_loop) with the
authorizer's lock held; the notifications are handled on each ChangeListener's own thread.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from kazoo.exceptions import NoNodeError

from ..errors import RequestTimedOutError
from ..security.acl import AclBinding, PatternType
from ..security.acl_zk import (
    CHANGE_PREFIX,
    EXTENDED_CHANGE_PATH,
    LITERAL_CHANGE_PATH,
    decode_zk_acl_change,
    decode_zk_acls,
    encode_zk_acl_change,
    encode_zk_acls,
    parse_zk_acl_path,
    zk_acl_path,
    zk_change_path,
    zk_store_path,
)
from ..security.authorizer import Authorizer, Change, PatternKey, Transform
from .zk import ZkStore, answered_as_timeout
from .zk_change import ChangeListener, notify, update_node

__all__ = ["ZkAclStore"]

log = logging.getLogger("engine.cluster")

_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)


def _describe(key: PatternKey) -> str:
    rt, pt, name = key
    return f"the ACLs of {rt.name}:{pt.name}:{name}"


def _acl_order(b: AclBinding) -> tuple:
    return (b.principal, b.host, b.operation, b.permission)


class ZkAclStore:
    """An :class:`~engine.security.authorizer.AclStore` over ZooKeeper (see the module doc)."""

    def __init__(self) -> None:
        self.zk: ZkStore | None = None
        self._listeners: list[ChangeListener] = []

    # -- the AclStore protocol (called with the authorizer's lock held) -----------------------
    def load(self) -> list[AclBinding]:
        zk = self.zk
        if zk is None:
            return []
        out: list[AclBinding] = []
        for ptype in _PATTERN_TYPES:
            root = zk_store_path(ptype)
            try:
                types = zk.bounded("get_children", root)
            except NoNodeError:
                continue
            for rtype in sorted(types):
                try:
                    names = zk.bounded("get_children", f"{root}/{rtype}")
                except NoNodeError:
                    continue
                for name in sorted(names):
                    out += self._read(zk, parse_zk_acl_path(f"{root}/{rtype}/{name}"))
        return out

    def read(self, pattern: PatternKey) -> list[AclBinding]:
        """(ZooKeeper's errors as they are: the change listener retries on them.)"""
        zk = self.zk
        return [] if zk is None else self._read(zk, pattern)

    def validate(self, binding: AclBinding) -> None:
        zk_acl_path(binding.resource_type, binding.pattern_type, binding.name)   # no "/" in the name

    def update(self, transforms: Mapping[PatternKey, Transform],
               current: Mapping[PatternKey, frozenset[AclBinding]]
               ) -> tuple[dict[PatternKey, Change], dict[PatternKey, Exception]]:
        """Each pattern's node changed on its own (as Kafka does): the ones that failed are
        answered per pattern, the others took effect."""
        zk = self.zk
        if zk is None:
            raise RequestTimedOutError("the ACLs are kept in ZooKeeper and this broker has not "
                                       "joined the cluster yet")
        changes: dict[PatternKey, Change] = {}
        failures: dict[PatternKey, Exception] = {}
        for key, transform in transforms.items():
            try:
                with answered_as_timeout(_describe(key)):
                    before, after = self._update(zk, key, transform)
            except Exception as e:
                log.warning("%s not changed: %s", _describe(key), e)
                failures[key] = e
                continue
            if before == after:
                continue
            changes[key] = (before, after)
            try:
                with answered_as_timeout(f"the change notification of {_describe(key)}"):
                    notify(zk, zk_change_path(key[1]), encode_zk_acl_change(*key))
            except Exception as e:       # written: in effect here; the others learn at its next change
                log.error("%s changed in ZooKeeper but the change notification failed: %s",
                          _describe(key), e)
        return changes, failures

    # -- ZooKeeper ----------------------------------------------------------------------------
    @staticmethod
    def _read(zk: ZkStore, key: PatternKey) -> list[AclBinding]:
        try:
            data, _ = zk.bounded("get", zk_acl_path(*key))
        except NoNodeError:
            return []
        return decode_zk_acls(*key, data)

    @staticmethod
    def _update(zk: ZkStore, key: PatternKey, transform: Transform) -> Change:
        seen: list[Change] = []

        def step(data: bytes | None) -> bytes | None:
            before = frozenset(decode_zk_acls(*key, data))
            after = transform(before)
            seen.append((before, after))
            if after == before:
                return data
            return encode_zk_acls(sorted(after, key=_acl_order)) if after else None

        update_node(zk, zk_acl_path(*key), step)
        return seen[-1]

    def share(self, zk: ZkStore, authorizer: Authorizer) -> None:
        """Keep ``authorizer``'s ACLs (its store is this one) in ZooKeeper from now on: watch
        both change paths, then load every ACL."""
        if authorizer.store is not self:
            raise ValueError("share() needs the authorizer that keeps its ACLs in this store")
        for ptype in _PATTERN_TYPES:
            zk.bounded("ensure_path", zk_store_path(ptype))
        self.zk = zk
        for root in (LITERAL_CHANGE_PATH, EXTENDED_CHANGE_PATH):
            handler = functools.partial(self._changed, authorizer, root)
            self._listeners.append(ChangeListener(zk, root, CHANGE_PREFIX, handler).start())
        authorizer.reload()
        log.info("ACLs loaded from ZooKeeper: %d", len(authorizer))

    def _changed(self, authorizer: Authorizer, root: str, data: bytes) -> None:
        authorizer.refresh([decode_zk_acl_change(root, data)])

    def close(self) -> None:
        """Stop listening for changes (the broker is stopping)."""
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
