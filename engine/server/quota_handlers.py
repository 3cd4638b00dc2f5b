"""DescribeClientQuotas (48) and AlterClientQuotas (49), as Kafka 4.0 answers them.

The quotas are the broker's quota configuration (``broker.quotas.store``: engine/security/
quotas.py's ClientQuotaStore, ``client-quotas.json`` in the data directory; in cluster mode
engine/cluster/quota_zk.py's, which keeps them in ZooKeeper).  engine/server/quotas.py enforces
them from the next request on.

* DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster, AlterClientQuotas ALTER_CONFIGS on
  it (KafkaApis); otherwise CLUSTER_AUTHORIZATION_FAILED ("Cluster authorization failed."), for
  the whole Describe answer (entries null) and for each Alter entry.
* Describe: Kafka's filter (exact name, default, any; ``strict``); a filter Kafka refuses is
  INVALID_REQUEST with its message (an unknown entity type: UNSUPPORTED_VERSION), entries null.
* Alter: per entry, Kafka 4.0's rules and messages (ClientQuotaControlManager): an empty or
  repeated entity, an unknown entity type, an empty name, an ip entity with a user or client id
  or a name that is no address, a key the entity type does not take, a rate not above 0, a
  fractional or too large byte / connection rate: INVALID_REQUEST, that entity unchanged; the others are
  applied (written to disk, or ZooKeeper, before the answer) unless ``validate_only``.

Concurrency: runs on the broker's event loop; the change is made in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import ErrorCode, KafkaApiError
from ..protocol import messages as m
from ..security.acl import AclOperation
from ..security.quotas import CLIENT_ID, IP, USER, DescribeFilterError, QuotaAlteration
from .common import admin_bound_s, off_loop

__all__ = ["QuotaHandlers"]

log = logging.getLogger("engine.server")

_CLUSTER_DENIED = "Cluster authorization failed."


class QuotaHandlers:
    """The two client quota APIs; ``table()`` maps API keys to them (merged into Handlers)."""

    def __init__(self, handlers) -> None:
        self.broker = handlers.broker
        self.node = handlers.node

    def table(self) -> dict:
        return {m.ApiKey.DESCRIBE_CLIENT_QUOTAS: self.describe_client_quotas,
                m.ApiKey.ALTER_CLIENT_QUOTAS: self.alter_client_quotas}

    async def describe_client_quotas(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DESCRIBE_CLIENT_QUOTAS, v, body.buf[body.pos:])
        # (Kafka 4.0 answers an empty message, not null, when it succeeds)
        out: dict = {"throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": "",
                     "entries": None}
        if not self.broker.access.cluster(conn, AclOperation.DESCRIBE_CONFIGS):
            out.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=_CLUSTER_DENIED)
        else:
            components = [(c.entity_type, int(c.match_type), c.match) for c in req.components]
            try:
                found = self.broker.quotas.store.describe(components, bool(req.strict))
            except DescribeFilterError as e:
                out.update(error_code=e.code, error_message=str(e))
            else:
                out["entries"] = [
                    {"entity": [{"entity_type": t, "entity_name": n} for t, n in _kafka_order(entity)],
                     "values": [{"key": k, "value": val} for k, val in sorted(quotas.items())]}
                    for entity, quotas in found]
        return [m.encode(m.ApiKey.DESCRIBE_CLIENT_QUOTAS, v, out)]

    async def alter_client_quotas(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.ALTER_CLIENT_QUOTAS, v, body.buf[body.pos:])
        entities = [[{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]
                    for entry in req.entries]
        if not self.broker.access.cluster(conn, AclOperation.ALTER_CONFIGS):
            results = [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_DENIED)] * len(entities)
        else:
            alterations = [QuotaAlteration(
                tuple((e.entity_type, e.entity_name) for e in entry.entity),
                tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops))
                for entry in req.entries]
            store = self.broker.quotas.store
            deadline = asyncio.get_running_loop().time() + admin_bound_s(self.node, 30.0)
            try:
                # the store writes its file (cluster mode: ZooKeeper): not on the event loop
                results = await off_loop(deadline, "the client quotas", store.alter, alterations,
                                         bool(req.validate_only))
            except KafkaApiError as e:
                results = [(e.code, str(e))] * len(entities)
            except OSError as e:
                log.error("client quota change failed: %s", e)
                results = [(ErrorCode.UNKNOWN_SERVER_ERROR, str(e))] * len(entities)
            changed = [str(a.entity) for a, (code, _) in zip(alterations, results, strict=True)
                       if code == ErrorCode.NONE]
            if changed and not req.validate_only:
                log.info("client quotas changed for %s by %s", ", ".join(changed), conn.principal)
        return [m.encode(m.ApiKey.ALTER_CLIENT_QUOTAS, v, {
            "throttle_time": 0,
            "entries": [{"error_code": code, "error_message": msg, "entity": entity}
                        for entity, (code, msg) in zip(entities, results, strict=True)]})]


def _kafka_order(entity):
    """An entity's (type, name) pairs in the order Kafka 4.0 lists them (its entries map)."""
    d = dict(entity)
    return [(t, d[t]) for t in (CLIENT_ID, USER, IP) if t in d]
