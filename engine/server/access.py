"""Who may do what: the one place the request handlers ask (Kafka's ``AuthHelper``).

The broker holds one :class:`Access` (``broker.access``), built from ``authorizer.class.name``:
with no authorizer configured every operation is allowed and the authorized-operations fields
say "all the type supports" (engine/server/authz.py); with Kafka's ACL authorizer
(engine/security/authorizer.py) each question goes to it with the connection's principal
(``conn.principal``: ``User:ANONYMOUS`` on PLAINTEXT, the SASL user or the certificate's mapped
name) and host (the peer's IP).

Handlers ask before they look anything up, as Kafka's KafkaApis does, so that an unauthorised
caller learns nothing about what exists (a topic it may not DESCRIBE answers
TOPIC_AUTHORIZATION_FAILED whether or not it exists).  What each API checks is Kafka's
(docs/security.md lists it); the error codes are Kafka's ``*_AUTHORIZATION_FAILED``.

Concurrency: called on the broker's event loop; the authorizer is thread-safe and memoises its
answers, so a check is a dict lookup on the hot path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
from ..security.authorizer import Authorizer, acl_authorizer_configured
from . import authz
from .sasl_handlers import ANONYMOUS

__all__ = ["Access", "AclOperation", "ResourceType"]

_ALL_OPERATIONS = {
    ResourceType.TOPIC: authz.TOPIC_OPERATIONS,
    ResourceType.GROUP: authz.GROUP_OPERATIONS,
    ResourceType.CLUSTER: authz.CLUSTER_OPERATIONS,
}


def _caller(conn) -> tuple[str, str]:
    peer = getattr(conn, "peer", None)
    host = peer[0] if isinstance(peer, tuple) and peer else "127.0.0.1"
    return getattr(conn, "principal", ANONYMOUS), host


class Access:
    """The authorization questions of the request path; ``authorizer`` None: allow all."""

    def __init__(self, authorizer: Authorizer | None = None):
        self.authorizer = authorizer

    @classmethod
    def from_configs(cls, configs: Mapping[str, object], directory: str | None) -> Access:
        """From Kafka's keys (``authorizer.class.name``, ``super.users``,
        ``allow.everyone.if.no.acl.found``); the ACLs kept in ``directory`` (the data directory)."""
        if not acl_authorizer_configured(configs):
            return cls(None)
        return cls(Authorizer.from_configs(configs, directory))

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def allowed(self, conn, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        authorizer = self.authorizer
        if authorizer is None:
            return True
        principal, host = _caller(conn)
        return authorizer.authorize(principal, host, operation, resource_type, name)

    def cluster(self, conn, operation: AclOperation) -> bool:
        """May the caller do ``operation`` on the cluster (the CLUSTER resource ``kafka-cluster``)?"""
        return self.allowed(conn, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def topic(self, conn, operation: AclOperation, name: str) -> bool:
        return self.allowed(conn, operation, ResourceType.TOPIC, name)

    def group(self, conn, operation: AclOperation, name: str) -> bool:
        return self.allowed(conn, operation, ResourceType.GROUP, name)

    def transactional_id(self, conn, operation: AclOperation, name: str) -> bool:
        return self.allowed(conn, operation, ResourceType.TRANSACTIONAL_ID, name)

    def filter(self, conn, operation: AclOperation, resource_type: ResourceType,
               names: Iterable[str]) -> set[str]:
        """The names among ``names`` the caller may do ``operation`` on."""
        names = set(names)
        authorizer = self.authorizer
        if authorizer is None:
            return names
        principal, host = _caller(conn)
        return {n for n in names if authorizer.authorize(principal, host, operation, resource_type, n)}

    def any_of_type(self, conn, operation: AclOperation, resource_type: ResourceType) -> bool:
        """May the caller do ``operation`` on at least one resource of the type (Kafka's
        ``authorizeByResourceType``: an idempotent producer's WRITE on some topic)?"""
        authorizer = self.authorizer
        if authorizer is None:
            return True
        principal, host = _caller(conn)
        return authorizer.authorize_by_resource_type(principal, host, operation, resource_type)

    def operations(self, conn, requested: bool, resource_type: ResourceType, name: str) -> int:
        """An authorized-operations field: ``Integer.MIN_VALUE`` when the request did not ask,
        else the bitfield of the operations the caller may do on the resource."""
        if not requested:
            return authz.OMITTED
        authorizer = self.authorizer
        if authorizer is None:
            return _ALL_OPERATIONS.get(resource_type, 0)
        principal, host = _caller(conn)
        return authorizer.authorized_operations(principal, host, resource_type, name)
