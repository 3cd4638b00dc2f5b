"""A broker per test: an Engine in tmp_path served on 127.0.0.1:<free port> by a
Broker running on its own event loop in a background thread."""

from __future__ import annotations

import socket
import struct

import pytest


class BrokerThread:
    """Opens an Engine on `data_dir` and serves it (engine.server.BackgroundBroker)."""

    def __init__(self, data_dir: str, config: dict | None = None, **broker_kwargs):
        import engine
        from engine.server import BackgroundBroker

        self.engine = engine.open(data_dir, config, background=False)
        try:
            self._bg = BackgroundBroker(self.engine.node, "127.0.0.1", 0, **broker_kwargs)
        except BaseException:
            self.engine.close()
            raise
        self.loop = self._bg.loop
        self.broker = self._bg.broker
        self.port = self._bg.port
        self.bootstrap = self._bg.bootstrap

    def call(self, fn, *args):
        """Run fn(*args) on the broker's loop (engine access from tests stays single-threaded)."""
        return self._bg.call(fn, *args)

    def stop(self) -> None:
        self._bg.stop()
        self.engine.close()


@pytest.fixture
def broker(tmp_path):
    b = BrokerThread(str(tmp_path / "data"))
    yield b
    b.stop()


@pytest.fixture
def make_broker(tmp_path):
    made = []

    def make(config=None, **kwargs):
        b = BrokerThread(str(tmp_path / f"data{len(made)}"), config, **kwargs)
        made.append(b)
        return b
    yield make
    for b in made:
        b.stop()


# -- raw wire helpers -------------------------------------------------------------
def connect(port: int, timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return s


def request_frame(api_key: int, version: int, corr: int, body: bytes, flexible: bool = False,
                  client_id: bytes = b"raw") -> bytes:
    header = struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id
    if flexible:
        header += b"\x00"
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


def recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise EOFError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def recv_frame(s: socket.socket) -> bytes:
    (n,) = struct.unpack(">i", recv_exact(s, 4))
    return recv_exact(s, n)


def is_closed(s: socket.socket, timeout: float = 5.0) -> bool:
    """True when the peer closed (EOF or reset) within `timeout` without sending anything."""
    s.settimeout(timeout)
    try:
        data = s.recv(1)
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return data == b""


def api_versions_ok(port: int) -> bool:
    """A fresh connection gets a well-formed ApiVersions v0 answer (error 0)."""
    with connect(port) as s:
        s.sendall(request_frame(18, 0, 7, b""))
        resp = recv_frame(s)
    corr, err = struct.unpack_from(">ih", resp, 0)
    return corr == 7 and err == 0
