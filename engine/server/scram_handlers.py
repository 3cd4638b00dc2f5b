"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51) over the broker's SCRAM
credential store (``broker.scram_credentials``: engine/security/credentials.py's
ScramCredentialStore, ``scram-credentials.json`` in the data directory).

Kafka's rules are the store's (those of Kafka 4.0's ScramControlManager): per-user results,
deletions first, DUPLICATE_RESOURCE for a user named twice, UNACCEPTABLE_CREDENTIAL for an
empty user or iterations outside [4096, 16384], UNSUPPORTED_SASL_MECHANISM for a mechanism
other than SCRAM-SHA-256 (1) / SCRAM-SHA-512 (2), RESOURCE_NOT_FOUND for deleting or
describing what is not there.  A change is written to disk (fsync) off the event loop before
the answer, and the SASL listeners authenticate with it from the next exchange on.

Cluster mode: ``broker.scram_credentials`` is then engine/cluster/scram_zk.py's
ZkScramCredentials (given by serve), which writes a change to ZooKeeper's ``/config/users``,
where every broker's watch takes it.

Authorization (``broker.access``, engine/server/access.py), before the store is read, as Kafka
4.0: DescribeUserScramCredentials needs DESCRIBE on the cluster, else the top-level
CLUSTER_AUTHORIZATION_FAILED (31) and the same for each user asked for;
AlterUserScramCredentials needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for each
user named (once, sorted) and nothing changes.

Concurrency: runs on the broker's event loop; the store is thread-safe.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import ErrorCode
from ..protocol import messages as m
from ..security.credentials import ScramDeletion, ScramUpsertion
from .access import AclOperation

__all__ = ["ScramHandlers"]

log = logging.getLogger("engine.server")

_CLUSTER_DENIED = "Cluster authorization failed."


class ScramHandlers:
    def __init__(self, handlers) -> None:
        self.broker = handlers.broker

    def table(self) -> dict:
        return {m.ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.describe_user_scram_credentials,
                m.ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.alter_user_scram_credentials}

    async def describe_user_scram_credentials(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, v, body.buf[body.pos:])
        users = None if req.users is None else [u.name for u in req.users]
        if not self.broker.access.cluster(conn, AclOperation.DESCRIBE):
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            return [m.encode(m.ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, v, {
                "throttle_time": 0, "error_code": denied, "error_message": _CLUSTER_DENIED,
                "results": [{"user": u, "error_code": denied, "error_message": _CLUSTER_DENIED,
                             "credential_infos": []} for u in users or ()]})]
        results = self.broker.scram_credentials.describe(users)
        return [m.encode(m.ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, v, {
            "throttle_time": 0, "error_code": ErrorCode.NONE, "error_message": None,
            "results": [{"user": r.user, "error_code": r.error_code,
                         "error_message": r.error_message,
                         "credential_infos": [{"mechanism": c.mechanism, "iterations": c.iterations}
                                              for c in r.credential_infos]}
                        for r in results]})]

    async def alter_user_scram_credentials(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.ALTER_USER_SCRAM_CREDENTIALS, v, body.buf[body.pos:])
        if not self.broker.access.cluster(conn, AclOperation.ALTER):
            named = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
            log.info("SCRAM credential change for %s refused to %s", ", ".join(named), conn.principal)
            return [m.encode(m.ApiKey.ALTER_USER_SCRAM_CREDENTIALS, v, {
                "throttle_time": 0, "results": [
                    {"user": u, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                     "error_message": _CLUSTER_DENIED} for u in named]})]
        deletions = [ScramDeletion(d.name, int(d.mechanism)) for d in req.deletions]
        upsertions = [ScramUpsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt),
                                     bytes(u.salted_password)) for u in req.upsertions]
        store = self.broker.scram_credentials
        # the store fsyncs its file: not on the event loop
        results = await asyncio.get_running_loop().run_in_executor(
            None, store.alter, deletions, upsertions)
        changed = [r.user for r in results if r.error_code == ErrorCode.NONE]
        if changed:
            log.info("SCRAM credentials changed for %s by %s", ", ".join(changed), conn.principal)
        return [m.encode(m.ApiKey.ALTER_USER_SCRAM_CREDENTIALS, v, {
            "throttle_time": 0,
            "results": [{"user": r.user, "error_code": r.error_code,
                         "error_message": r.error_message} for r in results]})]
