"""Configuration over the wire: DescribeConfigs (32) and IncrementalAlterConfigs (44), as Kafka
4.0 answers them (the legacy AlterConfigs is admin_handlers.py's).

A topic's configuration is its overrides over the broker's defaults (engine/config.py); entries
are described by engine/server/config_describe.py (sources, synonyms, types).  Every broker key
is static here: a change to a broker resource gets Kafka's answer for static keys
(:func:`~engine.server.common.broker_config_change`).  A topic's change goes to ZooKeeper in a
cluster, bounded by one round trip (:func:`~engine.server.common.zookeeper_bound_s`).
"""

from __future__ import annotations

import asyncio
import functools
import logging

from ..config import INTERNAL_BROKER_KEYS
from ..errors import ClusterAuthorizationError, InvalidRequestError, TopicAuthorizationError
from ..protocol import messages as m
from ..security.acl import AclOperation
from . import config_describe
from .common import (
    _RESOURCE_BROKER,
    _RESOURCE_TOPIC,
    _record_error,
    broker_config_change,
    off_loop,
    zookeeper_bound_s,
)

__all__ = ["ConfigHandlers"]

_RESOURCE_BROKER_LOGGER = 8

log = logging.getLogger("engine.server")


class ConfigHandlers:
    """The config handlers; ``table()`` maps API keys to them (merged into Handlers)."""

    def __init__(self, handlers):
        self.handlers = handlers
        self.node = handlers.node
        self.view = handlers.view
        self.access = handlers.broker.access

    def _may(self, conn, r, operation: AclOperation) -> None:
        """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for a broker."""
        access = self.access
        if not access.enabled:
            return
        if r.resource_type == _RESOURCE_TOPIC:
            if not access.topic(conn, operation, r.resource_name):
                raise TopicAuthorizationError("Topic authorization failed.")
        elif r.resource_type in (_RESOURCE_BROKER, _RESOURCE_BROKER_LOGGER):
            if not access.cluster(conn, operation):
                raise ClusterAuthorizationError("Cluster authorization failed.")

    def table(self) -> dict:
        return {
            m.ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            m.ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
        }

    # -- DescribeConfigs (32) ---------------------------------------------------------
    async def describe_configs(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.DESCRIBE_CONFIGS, v, body.buf[body.pos:])
        node = self.node
        results = []
        for r in req.resources:
            res = {"error_code": 0, "error_message": "", "resource_type": r.resource_type,
                   "resource_name": r.resource_name, "configs": []}     # Kafka: "" when no error
            try:
                self._may(conn, r, AclOperation.DESCRIBE_CONFIGS)
                if r.resource_type == _RESOURCE_TOPIC:
                    cfg = node.topic_config(r.resource_name)
                    values = dict(cfg)

                    # this resource's values, bound now
                    entry = functools.partial(config_describe.topic_entry, values=values, overrides=cfg.overrides,
                                              broker=node.config, synonyms=req.include_synonyms)
                elif r.resource_type == _RESOURCE_BROKER:
                    node_id = self.view.node_id
                    if r.resource_name not in ("", str(node_id)):
                        raise InvalidRequestError(f"broker {r.resource_name!r} is not this broker ({node_id})")
                    values = {k: v for k, v in node.config.values.items() if k not in INTERNAL_BROKER_KEYS}

                    entry = functools.partial(config_describe.broker_entry, broker=node.config,
                                              synonyms=req.include_synonyms)
                else:
                    raise InvalidRequestError(f"resource type {r.resource_type} is not supported")
                # null or empty both mean every key (Kafka's ConfigHelper; kafka-python sends [])
                wanted = set(r.configuration_keys) if r.configuration_keys else None
                for name in sorted(values):
                    if wanted is None or name in wanted:
                        res["configs"].append(entry(name))
            except Exception as e:
                _record_error(res, e, "describe configs of %r failed", r.resource_name)
            results.append(res)
        return [m.encode(m.ApiKey.DESCRIBE_CONFIGS, v, {"throttle_time": 0, "results": results})]

    # -- IncrementalAlterConfigs (44) -----------------------------------------------------
    async def incremental_alter_configs(self, header, body, conn):
        v = header.api_version
        req = m.decode(m.ApiKey.INCREMENTAL_ALTER_CONFIGS, v, body.buf[body.pos:])
        node = self.node
        responses = []
        # a topic's change goes to ZooKeeper in a cluster: one round trip's bound for the request
        deadline = asyncio.get_running_loop().time() + zookeeper_bound_s(node)
        for r in req.resources:
            res = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                   "resource_name": r.resource_name}
            try:
                self._may(conn, r, AclOperation.ALTER_CONFIGS)
                if r.resource_type == _RESOURCE_BROKER:
                    names = [op.name for op in r.configs if op.config_operation != config_describe.OP_DELETE]
                    res["error_code"], res["error_message"] = broker_config_change(
                        r.resource_name, names, self.view.node_id)
                    responses.append(res)
                    continue
                if r.resource_type != _RESOURCE_TOPIC:
                    raise InvalidRequestError(f"Unknown resource type {r.resource_type}")
                current = dict(node.topic_metadata(r.resource_name).config)
                sets, deletes = config_describe.apply_config_ops(node.topic_config(r.resource_name), current, r.configs)
                if req.validate_only:
                    merged = {k: x for k, x in {**current, **sets}.items() if k not in deletes}
                    node.config.log_config(merged)
                else:
                    await off_loop(deadline, f"altering the config of {r.resource_name!r}", node.alter_topic_config,
                                   r.resource_name, sets, deletes)
            except Exception as e:
                _record_error(res, e, "incremental alter configs of %r failed", r.resource_name)
            responses.append(res)
        return [m.encode(m.ApiKey.INCREMENTAL_ALTER_CONFIGS, v, {"throttle_time": 0, "responses": responses})]
