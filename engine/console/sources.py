"""Where the console's data comes from: the broker's own Engine, or a broker over the wire.

Both sources answer the same questions with plain dicts and :class:`~engine.records.Record`
lists, and both bound what one request reads: at most ``MAX_RECORDS`` records and about
``MAX_READ_BYTES`` of log per page (one batch more when a single batch is larger).
"""

from __future__ import annotations

import threading
from typing import Any

from .. import records as rec
from ..group_admin import GroupAdmin

__all__ = ["EngineSource", "WireSource", "MAX_RECORDS", "MAX_READ_BYTES"]

MAX_RECORDS = 100
MAX_READ_BYTES = 1 << 20


def _bounded(records: list, offset: int, limit: int) -> list:
    out = [r for r in records if r.offset >= offset]
    return out[:max(1, min(limit, MAX_RECORDS))]


class EngineSource:
    """The Engine a broker serves (``serve --console-listen``): sizes and segments included."""

    def __init__(self, engine, metrics=None, view=None):
        self.engine = engine
        self.metrics = metrics
        self.view = view          # the broker's ClusterView: leader, replicas and ISR per partition
        self.name = engine.path

    def topics(self) -> list[dict]:
        return [self.topic(t) for t in self.engine.list_topics()]

    def topic(self, name: str) -> dict:
        d = self.engine.describe_topic(name)
        return {"name": d.name, "topic_id": str(d.topic_id),
                "partitions": [{"partition": p.partition, "log_start_offset": p.log_start_offset,
                                "high_watermark": p.high_watermark, "log_end_offset": p.log_end_offset,
                                "size_bytes": p.size_bytes, "segments": p.segments,
                                **self._roles(name, p.partition)}
                               for p in d.partitions],
                "config": {k: v for k, v in sorted(d.config.items())},
                "overrides": sorted(d.overrides)}

    def _roles(self, topic: str, partition: int) -> dict:
        """Leader, replicas and ISR as the broker's cluster view has them (None: unknown)."""
        if self.view is None:
            return {"leader": None, "replicas": None, "isr": None}
        try:
            leader, _epoch, replicas, isr = self.view.partition_state(topic, partition)
        except Exception:                # being created or deleted: shown as unknown
            return {"leader": None, "replicas": None, "isr": None}
        return {"leader": leader, "replicas": list(replicas), "isr": list(isr)}

    def _coordinator(self):
        if self.engine.read_only:
            return None
        return self.engine.group_coordinator

    def groups(self) -> list[tuple[str, str, str]]:
        c = self._coordinator()
        if c is None:
            return []
        err, listings = c.call(c.list_groups, timeout=10)
        if err:
            return []
        return sorted((g.group_id, g.protocol_type, g.state) for g in listings)

    def group(self, group_id: str) -> dict:
        from ..client.assignors import decode_assignment
        from ..errors import api_error
        c = self._coordinator()
        desc = c.call(c.describe_groups, [group_id], timeout=10)[0]
        if desc.error_code:
            raise api_error(desc.error_code, f"DescribeGroups {group_id}")
        err, got = c.call(c.fetch_offsets, group_id, None, timeout=10)
        if err:
            raise api_error(err, f"OffsetFetch {group_id}")
        members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                    "partitions": decode_assignment(m.assignment) if desc.protocol_type == "consumer" else []}
                   for m in desc.members]
        offsets = {tp: om.offset for tp, om in got.items() if om.offset >= 0}
        return _group_dict(group_id, desc.state, desc.protocol_name, members, offsets, self._hw)

    def _hw(self, topic: str, partition: int) -> int | None:
        try:
            return self.engine.replicas.local.local_offsets(topic, partition).high_watermark
        except KeyError:
            return None

    def records(self, topic: str, partition: int, offset: int | None = None,
                timestamp: int | None = None, limit: int = 20) -> dict:
        replicas = self.engine.replicas          # every read through the replica layer
        offs = replicas.local.local_offsets(topic, partition)
        if timestamp is not None:
            found = replicas.local.local_offset_for_timestamp(topic, partition, timestamp)
            offset = found[0] if found else offs.high_watermark
        if offset is None or offset < offs.log_start_offset:
            offset = offs.log_start_offset
        hw = offs.high_watermark
        out: list = []
        if offset < hw:
            info = replicas.local.read_from_local_log(topic, partition, offset, MAX_READ_BYTES)
            out = _bounded(rec.decode(info.read()), offset, limit)
        return {"offset": offset, "records": out, "log_start_offset": offs.log_start_offset,
                "high_watermark": hw}

    def produce(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
                headers: list) -> int:
        p = self.engine.producer()
        try:
            res = p.send_batch(topic, [value], keys=[key], headers=[headers], partition=partition)
            p.flush()
        finally:
            p.close()
        return res[0].first_offset

    def sample(self) -> dict[str, float]:
        if self.metrics is not None:
            return self.metrics.sample()
        return {}

    def close(self) -> None:
        pass


class _WireGroups(GroupAdmin):
    """GroupAdmin's wire half, given a bootstrap address instead of a data directory."""

    def __init__(self, bootstrap: str, security=None):   # no super().__init__(): it opens a directory
        from ..client.group import WireTransport
        self._wire = WireTransport(bootstrap, client_id="kafka-engine-console", security=security)
        self._eng = None

    def close(self) -> None:
        self._wire.close()


class WireSource:
    """A broker over the Kafka protocol (``python -m engine console --bootstrap-server``).
    Sizes and segment counts are not in the protocol's answers we use: shown as unknown.
    One lock: the WireClient is not thread-safe and the console serves requests in threads.
    ``security``: TLS / SASL to the broker (engine.client.security.ClientSecurity, from
    ``--command-config``)."""

    def __init__(self, bootstrap: str, security=None):
        from ..client.wire import WireClient
        self.name = bootstrap
        self.client = WireClient(bootstrap, client_id="kafka-engine-console", request_timeout_ms=15000,
                                 security=security)
        self._groups = _WireGroups(bootstrap, security)
        self._lock = threading.Lock()

    def topics(self) -> list[dict]:
        with self._lock:
            meta = self.client.metadata()
        return [self.topic(t, meta[t]) for t in sorted(meta)]

    def topic(self, name: str, parts: list | None = None) -> dict:
        with self._lock:
            if parts is None:
                parts = self.client.metadata([name])[name]
            reqs = {}
            for p in parts:
                reqs[(name, p.partition)] = -2
            starts = self.client.list_offsets(reqs)
            ends = self.client.list_offsets({k: -1 for k in reqs})
            config = self._configs(name)
        return {"name": name, "topic_id": "",
                "partitions": [{"partition": p.partition, "log_start_offset": starts[(name, p.partition)][0],
                                "high_watermark": ends[(name, p.partition)][0],
                                "log_end_offset": ends[(name, p.partition)][0],
                                "size_bytes": None, "segments": None, "leader": p.leader,
                                "replicas": list(p.replicas), "isr": list(p.isr)} for p in parts],
                "config": config, "overrides": []}

    def _configs(self, name: str) -> dict[str, Any]:
        from ..client.wire import ApiKey
        try:
            r = self.client._call(None, ApiKey.DESCRIBE_CONFIGS,
                                  {"resources": [{"resource_type": 2, "resource_name": name,
                                                  "configuration_keys": None}],
                                   "include_synonyms": False}, version=1)
            return {c["name"]: c["value"] for res in r["results"] for c in res["configs"]}
        except Exception:
            return {}

    def groups(self) -> list[tuple[str, str, str]]:
        with self._lock:
            return self._groups.list()

    def group(self, group_id: str) -> dict:
        with self._lock:
            st = self._groups.describe(group_id)
            members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                        "partitions": m.partitions} for m in st.members]
            ends = self.client.list_offsets({tp: -1 for tp in st.offsets}) if st.offsets else {}
        return _group_dict(group_id, st.state, st.protocol, members, st.offsets,
                           lambda t, p: ends.get((t, p), (None,))[0])

    def records(self, topic: str, partition: int, offset: int | None = None,
                timestamp: int | None = None, limit: int = 20) -> dict:
        with self._lock:
            lo_hi = self.client.list_offsets({(topic, partition): -2})
            start = lo_hi[(topic, partition)][0]
            hw = self.client.list_offsets({(topic, partition): -1})[(topic, partition)][0]
            if timestamp is not None:
                found = self.client.list_offsets({(topic, partition): timestamp})[(topic, partition)][0]
                offset = hw if found < 0 else found
            if offset is None or offset < start:
                offset = start
            out: list = []
            if offset < hw:
                res = self.client.fetch(topic, partition, offset, max_bytes=MAX_READ_BYTES, max_wait_ms=0)
                out = _bounded(rec.decode(bytes(res.records)), offset, limit)
        return {"offset": offset, "records": out, "log_start_offset": start, "high_watermark": hw}

    def produce(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
                headers: list) -> int:
        batch = rec.build_batch([(value, key, headers)])
        with self._lock:
            return self.client.produce(topic, partition, [batch])

    def sample(self) -> dict[str, float]:
        """Totals over the wire: records in all logs (end offsets) and the groups' lag."""
        with self._lock:                  # one Metadata and one ListOffsets, not a page's worth
            meta = self.client.metadata()
            ends = self.client.list_offsets({(t, p.partition): -1 for t, ps in meta.items()
                                             if not t.startswith("__") for p in ps})
        total = sum(off for off, _ts in ends.values())
        lag = 0
        for gid, _ptype, _state in self.groups():
            lag += sum(o["lag"] or 0 for o in self.group(gid)["offsets"])
        return {"log_end_offsets_total": total, "kafka_consumergroup_lag": lag}

    def close(self) -> None:
        self.client.close()
        self._groups.close()


def _group_dict(group_id, state, protocol, members, offsets, hw_of) -> dict:
    rows = []
    for (t, p), off in sorted(offsets.items()):
        hw = hw_of(t, p)
        rows.append({"topic": t, "partition": p, "committed": off, "high_watermark": hw,
                     "lag": None if hw is None else max(0, hw - off)})
    return {"group_id": group_id, "state": state, "protocol": protocol, "members": members,
            "offsets": rows}
