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
    (see ALLOWED in test_differential.py); their presence is still compared."""
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
