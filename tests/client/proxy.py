"""A misbehaving Kafka TCP proxy on 127.0.0.1 for fault tests.

It forwards whole request/response frames between a client and a broker and, when armed
for an API key, breaks the next response(s) to that API in one of these ways:

* ``close``    -- send half the response frame, then close the client connection
* ``garbage``  -- answer a frame of the right size but random bytes after the correlation id
* ``stall``    -- never answer (the connection stays open)
* ``corrupt``  -- flip one byte near the end of the frame (inside the last record batch)
* ``drop``     -- let the broker do the work, then close before the client sees the answer
* ``refuse``   -- Produce only: never forward the request, answer every partition in it with
  ``refuse_error`` (default NOT_LEADER_OR_FOLLOWER, 6) -- the broker never saw it, and the
  connection's later requests go through (a retriable refusal in the middle of a pipeline)

``arm(api_key, mode, times, after)`` (``after`` responses to that API pass first); ``fired`` counts
the responses broken so far.
``record(api_key)`` keeps every later request frame of that API (without its size prefix)
in ``recorded``.  The broker
must advertise the proxy's address (``--advertised``) so every client connection goes
through it.
"""

from __future__ import annotations

import os
import socket
import struct
import threading


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


def _frame(sock: socket.socket) -> bytes:
    head = _recv_exact(sock, 4)
    (n,) = struct.unpack(">i", head)
    return head + _recv_exact(sock, n)


def _refusal(frame: bytes, error_code: int) -> bytes:
    """A Produce response frame answering every partition of the Produce request `frame`
    (without its size prefix) with `error_code`, read and written with the broker's codec."""
    from engine.protocol.frames import parse_request_header, response_header
    from engine.protocol.messages import FLEXIBLE_FROM, encode_produce_response, parse_produce_request

    version = struct.unpack_from(">h", frame, 2)[0]
    flexible = version >= FLEXIBLE_FROM[0]
    header, r = parse_request_header(memoryview(frame), flexible)
    req = parse_produce_request(r, version)
    body = encode_produce_response(version, [(t, [(p.index, error_code, -1, -1, -1, "refused by the test proxy")
                                                  for p in parts]) for t, parts in req.topics])
    out = response_header(header.correlation_id, flexible) + body
    return struct.pack(">i", len(out)) + bytes(out)


class MisbehavingProxy:
    def __init__(self, upstream_port: int, port: int = 0):
        self.upstream = ("127.0.0.1", upstream_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.plan: dict[int, list] = {}       # api_key -> [mode, times left]
        self.fired = 0
        self.on_fire = None                   # callback(mode) after a response was broken
        self.refuse_error = 6                 # the error code of mode "refuse"
        self.closed = False
        self.socks: list[socket.socket] = []
        self.recording: set[int] = set()
        self.recorded: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, api_key: int, mode: str, times: int = 1, after: int = 0) -> None:
        with self.lock:
            self.plan[api_key] = [mode, times, after]

    def record(self, api_key: int) -> None:
        with self.lock:
            self.recording.add(api_key)

    def disarm(self) -> None:
        with self.lock:
            self.plan.clear()

    def _take(self, api_key: int) -> str | None:
        with self.lock:
            step = self.plan.get(api_key)
            if not step or step[1] == 0:
                return None
            if step[2] > 0:
                step[2] -= 1
                return None
            step[1] -= 1
            self.fired += 1
            return step[0]

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            up = socket.create_connection(self.upstream, timeout=60)
        except OSError:
            client.close()
            return
        self.socks += [client, up]
        try:
            while True:
                req = _frame(client)
                api_key = struct.unpack_from(">h", req, 4)[0]
                if api_key in self.recording:
                    with self.lock:
                        self.recorded.append(req[4:])
                mode = self._take(api_key)
                if mode == "refuse":
                    if self.on_fire is not None:
                        self.on_fire(mode)
                    client.sendall(_refusal(req[4:], self.refuse_error))
                    continue
                up.sendall(req)
                resp = _frame(up)
                if mode is None:
                    client.sendall(resp)
                    continue
                if self.on_fire is not None:
                    self.on_fire(mode)
                if mode == "close":
                    client.sendall(resp[: len(resp) // 2])
                    break
                if mode == "drop":
                    break
                if mode == "garbage":
                    client.sendall(resp[:8] + os.urandom(len(resp) - 8))
                elif mode == "corrupt":
                    b = bytearray(resp)
                    b[-12] ^= 0xFF
                    client.sendall(bytes(b))
                elif mode == "stall":
                    while not self.closed:
                        threading.Event().wait(0.2)
                    break
        except (OSError, EOFError):
            pass
        finally:
            client.close()
            up.close()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
