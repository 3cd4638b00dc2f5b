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

Concurrency: runs on the broker's event loop; the store is thread-safe.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import ErrorCode
from ..protocol import messages as m
from ..security.credentials import ScramDeletion, ScramUpsertion

__all__ = ["ScramHandlers"]

log = logging.getLogger("engine.server")


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
