"""The raw side of the differential tests: one request written with kio (Kafka's JSON schemas)
to a broker, its answer read back as plain dicts, and a field-by-field comparison.

Requests are encoded by ``engine.protocol.messages.encode(response=False)`` (kio's writer) and
answers decoded by ``messages.read_struct`` (a bounds-checked walk of kio's response schema), so
neither side of a comparison goes through the broker's own response encoders."""

from __future__ import annotations

import socket
import struct

from engine.protocol import messages as m
from engine.protocol.primitives import Reader
from tests.server.conftest import recv_exact


class Client:
    """One connection to one broker; ``call`` sends a request and returns the answer as dicts."""

    def __init__(self, port: int, client_id: str = "diff"):
        self.port = port
        self.client_id = client_id.encode()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.corr = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, key: int, version: int, data: dict) -> dict:
        self.corr += 1
        flex = m.is_flexible(key, version)
        body = m.encode(key, version, data, response=False)
        header = struct.pack(">hhih", key, version, self.corr, len(self.client_id)) + self.client_id
        frame = header + (b"\x00" if flex else b"") + body
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        (n,) = struct.unpack(">i", recv_exact(self.sock, 4))
        resp = recv_exact(self.sock, n)
        assert struct.unpack_from(">i", resp)[0] == self.corr
        r = Reader(resp, 4)
        if flex and key != 18:           # ApiVersions answers keep the v0 header
            r.tagged_fields()
        out = m.read_struct(m._entity(key, version, True), r)
        assert r.remaining == 0, f"{r.remaining} bytes left after the {m.API_NAMES[key]} answer"
        return out

    def login(self, user: str, password: str) -> None:
        """SASL PLAIN on this connection (SaslHandshake v1 + SaslAuthenticate v2)."""
        hs = self.call(17, 1, {"mechanism": "PLAIN"})
        assert hs["error_code"] == 0, hs
        auth = self.call(36, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})
        assert auth["error_code"] == 0, auth

    def api_ranges(self) -> dict[int, tuple[int, int]]:
        resp = self.call(18, 3, {"client_software_name": "diff", "client_software_version": "1"})
        return {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}


def plain(value):
    """kio values (ErrorCode enums, uuids, tuples, memoryviews, i16/i32 newtypes) as plain
    Python values for comparison and readable assertion messages."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, (str, float)):
        return value
    return str(value)


def diff(ours, theirs, ignore: frozenset | set = frozenset(), path: str = "") -> list[str]:
    """Every difference between two decoded answers, as 'path: ours != theirs' lines.

    ``ignore`` holds field names (any depth) whose values may legitimately differ
    (ALLOWED below; why each may differ: test_differential.py); their presence is still compared."""
    out: list[str] = []
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for k in sorted(set(ours) | set(theirs)):
            p = f"{path}.{k}" if path else k
            if k not in ours or k not in theirs:
                out.append(f"{p}: only in {'ours' if k in ours else 'Kafka'}")
            elif k not in ignore:
                out += diff(ours[k], theirs[k], ignore, p)
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return [f"{path}: {len(ours)} items != {len(theirs)} items: {ours!r} != {theirs!r}"]
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            out += diff(a, b, ignore, f"{path}[{i}]")
        return out
    if ours != theirs:
        out.append(f"{path}: ours {ours!r} != Kafka {theirs!r}")
    return out


def error_codes(answer):
    """Every error_code in an answer, depth first (what a step was about)."""
    if isinstance(answer, dict):
        own = [answer["error_code"]] if "error_code" in answer else []
        return own + [c for k, v in answer.items() if k != "error_code" for c in error_codes(v)]
    if isinstance(answer, list):
        return [c for v in answer for c in error_codes(v)]
    return []


ALLOWED = frozenset({"cluster_id", "host", "port", "throttle_time_ms"})
NODE_FIELDS = {"node_id", "leader_id", "controller_id", "replica_nodes", "isr_nodes",
               "offline_replicas", "coordinator_id", "broker_id"}


def normalize(value, self_id: int, field: str = "", messages: bool = False):
    """An answer with the deployment-specific values of ALLOWED's list mapped to comparable
    ones; ``messages`` keeps error_message texts (else only "null or not" is compared)."""
    if field == "aborted_transactions" and value == []:
        return None          # Kafka writes [] on an unknown partition, null elsewhere: both "none"
    if isinstance(value, dict):
        return {k: normalize(v, self_id, k, messages) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v, self_id, field, messages) for v in value]
    if field in NODE_FIELDS and isinstance(value, int):
        return "self" if value == self_id else value
    if field == "topic_id":
        return "zero" if value in ("00000000-0000-0000-0000-000000000000", None) else "id"
    if field == "error_message" and not messages:
        return None if value is None else "<text>"
    if field in ("member_id", "leader") and isinstance(value, str) and len(value) > 37:
        return value[:-36] + "<uuid>"
    return value


class Pair:
    """Our broker and Kafka; ``same()`` sends one request to both and returns both answers."""

    def __init__(self, ours, kafka, user: str | None = None, messages: bool = False):
        """``user``: log in with SASL PLAIN as ``user`` (password ``<user>-secret``) on each
        broker's ``sasl_port``; ``messages``: compare error_message texts too."""
        attr = "sasl_port" if user else "port"
        self.ports = {"ours": getattr(ours, attr), "kafka": getattr(kafka, attr)}
        self.conns = {name: Client(port) for name, port in self.ports.items()}
        self.messages = messages
        if user:
            for c in self.conns.values():
                c.login(user, f"{user}-secret")
        ranges = {name: c.api_ranges() for name, c in self.conns.items()}
        self.version = {k: min(hi, ranges["kafka"].get(k, (0, -1))[1])
                        for k, (lo, hi) in ranges["ours"].items()}
        self.self_id = {}
        for name, c in self.conns.items():
            md = plain(c.call(3, 9, {"topics": [], "allow_auto_topic_creation": False,
                                     "include_cluster_authorized_operations": False,
                                     "include_topic_authorized_operations": False}))
            self.self_id[name] = md["brokers"][0]["node_id"]

    def both(self, key: int, data: dict, version: int | None = None) -> tuple[dict, dict]:
        v = self.version[key] if version is None else version
        out = []
        for name in ("ours", "kafka"):
            resp = plain(self.conns[name].call(key, v, data))
            out.append(normalize(resp, self.self_id[name], messages=self.messages))
        return out[0], out[1]

    def same(self, key: int, data: dict, version: int | None = None, ignore=(),
             sort=None) -> dict:
        """Assert both answers are equal outside ALLOWED (+ ``ignore``); return ours."""
        a, b = self.both(key, data, version)
        if sort:
            a, b = sort(a), sort(b)
        d = diff(a, b, ALLOWED | set(ignore))
        assert not d, f"ours != Kafka for {data}:\n" + "\n".join(d)
        return a

    def close(self):
        for c in self.conns.values():
            c.close()
