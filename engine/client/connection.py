"""One TCP connection to a Kafka broker: framing, request headers, correlation ids.

:class:`Connection` sends requests (header v1/v2, the body as pre-encoded parts, written with one
``sendmsg`` when it fits) and reads their responses into a Reader over the body; with
``reuse=True`` a response is read into the connection's own receive buffer (the caller copies out
what it keeps before the next one).  Any socket error, a short frame, a response to another
request or an unparseable body raises :class:`KafkaConnectionError` and closes the connection,
so the caller reconnects (as Kafka's clients do).  Blocking; one thread at a time per connection.
Used by :class:`engine.client.wire.WireClient`, the producer pipeline
(engine/client/produce_pipeline.py) and, broker to broker, the follower's
:class:`engine.replica.fetcher.ReplicaFetcher`; it sits below both (house layering: the connection
module next to metadata), so it imports only the protocol codecs and errors.

TLS and SASL: given a ``security`` (an :class:`engine.client.security.ClientSecurity`, which sits
above this module), the socket is wrapped in TLS and the SASL exchange done right after the TCP
connect, before the connection is handed out.  A TLS socket cannot ``sendmsg``: its parts are
joined and sent with ``sendall``.  A TLS error while reading or writing (TLS 1.3 tells the client
that its certificate was refused only then) raises :class:`~engine.errors.SslAuthenticationError`,
not retried.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from ..errors import InvalidRequestError, KafkaConnectionError, SslAuthenticationError
from ..protocol.messages import FLEXIBLE_FROM, ApiKey, _entity, read_struct
from ..protocol.primitives import Reader

__all__ = ["Connection", "KafkaConnectionError", "read_response", "tls_refused"]


def tls_refused(e: BaseException) -> bool:
    """A TLS error that is a refusal (an alert: unknown CA, certificate required, bad
    certificate, handshake failure), not a connection that went away."""
    return isinstance(e, ssl.SSLError) and not isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError))


class Connection:
    """One blocking TCP connection to a broker (see the module docstring)."""

    def __init__(self, host: str, port: int, client_id: bytes, timeout_s: float, security: Any = None):
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise KafkaConnectionError(f"cannot connect to {host}:{port}: {e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.address = f"{host}:{port}"
        self.client_id = client_id
        self.corr = 0
        self.rbuf: bytearray | None = None    # the reused receive buffer (receive(reuse=True))
        self.sock = sock
        self.tls = False
        if security is not None:    # engine.client.security.ClientSecurity: TLS, then SASL
            self.sock = security.wrap(sock, host)
            self.tls = isinstance(self.sock, ssl.SSLSocket)
            security.authenticate(self)

    def request(self, api_key: int, version: int, body_parts: list, expect_response: bool = True,
                reuse: bool = False):
        """Send one request; return a Reader over the response body (after the header)."""
        corr = self.send(api_key, version, body_parts)
        return self.receive(api_key, version, corr, reuse) if expect_response else None

    def send(self, api_key: int, version: int, body_parts: list) -> int:
        """Send one request without waiting (requests may be pipelined: Kafka answers the
        requests of one connection in order); its correlation id."""
        self.corr = (self.corr + 1) & 0x7FFFFFFF
        flex = version >= FLEXIBLE_FROM[api_key]
        head = struct.pack(">hhih", api_key, version, self.corr, len(self.client_id)) + self.client_id
        if flex:
            head += b"\x00"
        size = len(head) + sum(len(p) for p in body_parts)
        try:
            self._send_all([struct.pack(">i", size), head, *body_parts])
        except OSError as e:
            self.close()
            if tls_refused(e):
                raise SslAuthenticationError(f"{self.address}: TLS: {e}") from None
            raise KafkaConnectionError(f"{self.address}: {e or type(e).__name__}") from None
        return self.corr

    def receive(self, api_key: int, version: int, corr: int, reuse: bool = False):
        """The next response, which must answer request `corr`: a Reader over its body.
        With `reuse` the frame is read into this connection's receive buffer, overwritten by
        the next such receive: the caller must be done with every view of it by then."""
        try:
            frame = self._recv_frame(reuse)
        except (OSError, EOFError) as e:
            self.close()
            if tls_refused(e):      # e.g. the broker refused our certificate (TLS 1.3: now)
                raise SslAuthenticationError(f"{self.address}: TLS: {e}") from None
            if self.tls and corr == 1:
                raise KafkaConnectionError(f"{self.address}: {e or type(e).__name__} (the broker closed the "
                                           "TLS connection before its first answer: does the listener "
                                           "require a client certificate? ssl.keystore.*)") from None
            raise KafkaConnectionError(f"{self.address}: {e or type(e).__name__}") from None
        r = Reader(frame)
        flex = version >= FLEXIBLE_FROM[api_key]
        try:
            got = r.int32()
            if got != corr:
                raise InvalidRequestError(f"response to request {got}, expected {corr}")
            if flex and api_key != ApiKey.API_VERSIONS:  # ApiVersions responses keep header v0
                r.tagged_fields()
        except InvalidRequestError as e:
            self.close()
            raise KafkaConnectionError(f"{self.address}: unparseable response header: {e}") from None
        return r

    def buffered(self) -> bool:
        """Whether bytes of a response are already read and decrypted (TLS), which ``select``
        on the socket does not show: a caller polling for answers checks this first."""
        if not self.tls:
            return False
        try:
            return self.sock.pending() > 0      # type: ignore[attr-defined]
        except (OSError, ValueError):
            return False

    def _send_all(self, parts: list) -> None:
        """sendmsg the parts (no join: record batches are not copied), resuming partial sends."""
        if self.tls:     # no sendmsg on a TLS socket
            self.sock.sendall(b"".join(parts))
            return
        views = [memoryview(p).cast("B") for p in parts if len(p)]
        while views:
            sent = self.sock.sendmsg(views[:512])
            while sent:
                if sent >= len(views[0]):
                    sent -= len(views[0])
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0

    def _recv_into(self, view: memoryview) -> None:
        got = 0
        n = len(view)
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if k == 0:
                raise EOFError(f"connection closed after {got} of {n} bytes")
            got += k

    def _recv_frame(self, reuse: bool = False):
        head = bytearray(4)
        self._recv_into(memoryview(head))
        (n,) = struct.unpack(">i", head)
        if n < 4:
            raise EOFError(f"bad response size {n}")
        if not reuse:
            frame = bytearray(n)  # the only copy of the records: socket -> this buffer
            self._recv_into(memoryview(frame))
            return frame
        buf = self.rbuf
        if buf is None or len(buf) < n:
            # a new buffer (zero-filled once), kept for the next frames: no fresh pages and
            # no memset per response (a caller still holding views of the old one keeps it)
            buf = self.rbuf = bytearray(max(n, 2 * len(buf) if buf is not None else n))
        view = memoryview(buf)[:n]
        self._recv_into(view)
        return view

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


_Connection = Connection        # the former private name


def read_response(conn: Connection, api_key: int, version: int, corr: int) -> dict:
    """The decoded response to request `corr` on `conn`; an unparseable body closes the
    connection and raises :class:`KafkaConnectionError` (the request may have been applied)."""
    r = conn.receive(api_key, version, corr)
    try:
        return read_struct(_entity(api_key, version, True), r)
    except InvalidRequestError as e:
        conn.close()
        raise KafkaConnectionError(f"unparseable response to API {api_key} v{version} from "
                                   f"{conn.address}: {e}") from None
