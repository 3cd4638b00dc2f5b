"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31), as Kafka 4.0 answers them.

With no authorizer configured (``authorizer.class.name`` empty) each answers SECURITY_DISABLED
with Kafka's message.  With the ACL authorizer (engine/server/access.py):

* DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls need ALTER on it;
  otherwise CLUSTER_AUTHORIZATION_FAILED (for the whole request, per creation, per filter).
* A binding or filter Kafka refuses (an UNKNOWN / ANY type where one is needed, a CLUSTER
  resource not named ``kafka-cluster``, a malformed principal, ...) gets INVALID_REQUEST with
  Kafka's message, per creation / filter; the others take effect.
* DescribeAcls answers the matching ACLs grouped by resource pattern; DeleteAcls answers per
  filter the ACLs it deleted (all filters see the ACLs as they were before the request).

The ACLs are kept where the authorizer keeps them (a file in the data directory; ZooKeeper in
cluster mode) before the answer is sent: a change is saved off the event loop.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import ErrorCode, InvalidRequestError, KafkaApiError
from ..protocol import messages as m
from ..security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from .common import admin_bound_s, off_loop

__all__ = ["AclHandlers"]

log = logging.getLogger("engine.server")

_NO_AUTHORIZER = "No Authorizer is configured."
_CLUSTER_DENIED = "Cluster authorization failed."


def _filter(f) -> AclBindingFilter:
    return AclBindingFilter(f.resource_type_filter, f.resource_name_filter,
                            getattr(f, "pattern_type_filter", PatternType.LITERAL), f.principal_filter,
                            f.host_filter, f.operation, f.permission_type)


def _no_unknown(*codes: int) -> None:
    """Kafka refuses an ACL request holding an UNKNOWN (or unknown) enum value as malformed: the
    connection closes (its request classes' "contains UNKNOWN elements" check)."""
    if any(c == 0 for c in codes):
        raise InvalidRequestError("the ACL request contains UNKNOWN elements")


def _check_filter(f) -> None:
    _no_unknown(ResourceType(f.resource_type_filter), PatternType(getattr(f, "pattern_type_filter", 3)),
                AclOperation(f.operation), AclPermissionType(f.permission_type))


def _failed(e: BaseException) -> tuple[int, str | None]:
    if isinstance(e, KafkaApiError):
        return e.code, str(e)
    log.error("ACL change failed: %s", e)
    return ErrorCode.UNKNOWN_SERVER_ERROR, str(e)


class AclHandlers:
    """The three ACL APIs; ``table()`` maps API keys to them (merged into Handlers)."""

    def __init__(self, handlers):
        self.access = handlers.broker.access
        self.node = handlers.node

    def table(self) -> dict:
        return {
            m.ApiKey.DESCRIBE_ACLS: self.describe_acls,
            m.ApiKey.CREATE_ACLS: self.create_acls,
            m.ApiKey.DELETE_ACLS: self.delete_acls,
        }

    def _refused(self, conn) -> tuple[int, str] | None:
        """Why a change of ACLs is refused: no authorizer, or no ALTER on the cluster."""
        if self.access.authorizer is None:
            return ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER
        if not self.access.cluster(conn, AclOperation.ALTER):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_DENIED
        return None

    def _deadline(self) -> float:
        return asyncio.get_running_loop().time() + admin_bound_s(self.node, 30.0)

    async def describe_acls(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DESCRIBE_ACLS, v, body.buf[body.pos:])
        _check_filter(req)
        out = {"throttle_time": 0, "error_code": 0, "error_message": None, "resources": []}
        authorizer = self.access.authorizer
        if authorizer is None:
            out.update(error_code=ErrorCode.SECURITY_DISABLED,
                       error_message="No Authorizer is configured on the broker")
        elif not self.access.cluster(conn, AclOperation.DESCRIBE):
            out.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=_CLUSTER_DENIED)
        else:
            try:
                found = authorizer.describe(_filter(req))
            except KafkaApiError as e:
                out.update(error_code=e.code, error_message=str(e))
            else:
                groups: dict[tuple, list[dict]] = {}
                for b in found:
                    groups.setdefault((b.resource_type, b.name, b.pattern_type), []).append({
                        "principal": b.principal, "host": b.host, "operation": b.operation,
                        "permission_type": b.permission})
                out["resources"] = [{"resource_type": rt, "resource_name": name, "pattern_type": pt,
                                     "acls": acls} for (rt, name, pt), acls in groups.items()]
        return [m.encode(m.ApiKey.DESCRIBE_ACLS, v, out)]

    async def create_acls(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.CREATE_ACLS, v, body.buf[body.pos:])
        for c in req.creations:
            _no_unknown(ResourceType(c.resource_type), PatternType(getattr(c, "resource_pattern_type", 3)),
                        AclOperation(c.operation), AclPermissionType(c.permission_type))
        authorizer = self.access.authorizer
        refused = self._refused(conn)
        if refused is not None:
            code, msg = refused
            return [m.encode(m.ApiKey.CREATE_ACLS, v, {"throttle_time": 0, "results": [
                {"error_code": code, "error_message": msg} for _ in req.creations]})]
        bindings = [AclBinding(c.resource_type, c.resource_name,
                               getattr(c, "resource_pattern_type", PatternType.LITERAL),
                               c.principal, c.host, c.operation, c.permission_type)
                    for c in req.creations]
        try:
            errors = await off_loop(self._deadline(), "creating ACLs", authorizer.create, bindings)
            results = [{"error_code": 0, "error_message": None} if e is None else
                       {"error_code": e.code, "error_message": str(e)} for e in errors]
        except Exception as e:        # the ACLs could not be kept: none took effect
            code, msg = _failed(e)
            results = [{"error_code": code, "error_message": msg} for _ in bindings]
        return [m.encode(m.ApiKey.CREATE_ACLS, v, {"throttle_time": 0, "results": results})]

    async def delete_acls(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DELETE_ACLS, v, body.buf[body.pos:])
        for f in req.filters:
            _check_filter(f)
        authorizer = self.access.authorizer
        refused = self._refused(conn)
        if refused is not None:
            code, msg = refused
            return [m.encode(m.ApiKey.DELETE_ACLS, v, {"throttle_time": 0, "filter_results": [
                {"error_code": code, "error_message": msg, "matching_acls": []} for _ in req.filters]})]
        filters = [_filter(f) for f in req.filters]
        try:
            results = await off_loop(self._deadline(), "deleting ACLs", authorizer.delete, filters)
            out = []
            for r in results:
                if r.error is not None:
                    out.append({"error_code": r.error.code, "error_message": str(r.error),
                                "matching_acls": []})
                    continue
                out.append({"error_code": 0, "error_message": None, "matching_acls": [
                    {"error_code": 0, "error_message": None, "resource_type": b.resource_type,
                     "resource_name": b.name, "pattern_type": b.pattern_type,
                     "principal": b.principal, "host": b.host, "operation": b.operation,
                     "permission_type": b.permission} for b in r.bindings]})
        except Exception as e:
            code, msg = _failed(e)
            out = [{"error_code": code, "error_message": msg, "matching_acls": []} for _ in filters]
        return [m.encode(m.ApiKey.DELETE_ACLS, v, {"throttle_time": 0, "filter_results": out})]
