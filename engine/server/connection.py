"""One client connection: framing, in-order processing, backpressure, zero-copy fetch writes.

Wire contract (see engine/protocol/frames.py): size-prefixed frames; one
response per request (except Produce acks=0), in request order.  Like Kafka
we process one request at a time per connection; up to ``max_inflight``
further frames, and at most ``max_queued_bytes`` of them (a frame larger
than that alone is still accepted), are buffered, after which we stop
reading the socket (TCP backpressure).  A bad size prefix, an unknown API key or version (ApiVersions
excepted: it gets a v0 UNSUPPORTED_VERSION answer), a header or body that
does not parse, or an internal error all close the connection — after the
responses to earlier requests have been written.

Why raw non-blocking sockets (``loop.sock_recv`` / ``sock_sendall``) and not
an asyncio Transport: a FileSlice goes out with ``sendfile(2)`` straight from
the segment file, and waiting for the socket to become writable needs
``loop.add_writer(fd)``, which asyncio and uvloop both refuse on an fd a
Transport owns.  With the socket ours, a response is written in order as
``sock_sendall(header + leading bytes)``, then per FileSlice a loop of
``sendfile_nonblocking`` + wait-for-writable, then the trailing bytes.  If
sendfile fails (unsupported fd, odd error) the slice is sent from
``FileSlice.read()`` instead; if the file got shorter than the slice (a
deleted or truncated segment) the missing bytes are zeros so the framing we
announced stays intact (the client drops the partial batch).

Reading: frames up to 64 KiB go through one scratch buffer (many per
recv); a larger frame — a Produce — is read with ``recv_into`` straight into
a buffer of its exact size from the broker's BufferPool (engine/server/buffers.py),
after its size prefix passed socket.request.max.bytes, and the handler patches
its batches in place: the records are copied once, kernel to buffer, before
the pwrite.  The buffer goes back to the pool after the response unless a
handler kept a view of it.

Listeners and SASL: a connection knows the listener it came in on (``listener``: name,
security protocol, advertised address; engine/server/listener.py) and its ``principal``
(``User:ANONYMOUS`` until a SASL exchange names one).  On a SASL listener ``sasl`` is the
connection's SaslSession (engine/server/sasl_handlers.py): until it completes, a frame's size
prefix is checked against ``sasl.server.max.receive.size`` instead, only the SASL requests are
let in (anything else closes the connection unanswered), tokens after a v0 handshake are raw
frames, and a failed exchange closes the connection after its answer.

Client quotas (engine/server/quotas.py): while any is configured, each request is recorded
against its caller's quotas after the handler returned (the throttle time patched into the
response's throttle_time_ms); after sending a throttled response the connection processes no
further request for the throttle time (Kafka's mute, KIP-219).

TLS (SSL / SASL_SSL listeners): ``tls`` is a TlsChannel (engine/server/tls_channel.py) over
the same raw socket: the handshake runs first (bounded by connections.max.idle.ms), reads and
writes go through it, and responses are sent buffered -- a FileSlice is read (``FileSlice.read``)
instead of sendfile'd, since the kernel would send it unencrypted.  On an SSL listener the
principal comes from the client's certificate (ssl.principal.mapping.rules).

Concurrency: everything runs on the broker's event loop; two tasks per
connection (reader, processor) share only the frame queue.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct

from .. import _native
from ..errors import InvalidRequestError, UnsupportedVersionError
from ..protocol import messages as m
from ..protocol.frames import check_frame_size, parse_request_header, peek_header, response_header
from .sasl_handlers import ANONYMOUS, SaslSession
from .tls_channel import TlsChannel
from .watchdog import InFlight

__all__ = ["Connection"]

log = logging.getLogger("engine.server")

_EOF = object()
_SIZE = struct.Struct(">i")
_SCRATCH = 65536          # frames up to this size (with prefix) are read through one scratch buffer
_SENDFILE_CHUNK = 1 << 30
_ZEROS = bytes(65536)


class Connection:
    def __init__(self, broker, sock: socket.socket, peer, listener=None):
        self.broker = broker
        self.sock = sock
        self.peer = peer
        self.listener = listener          # engine/server/listener.py Listener; None: the broker's
        self.principal = ANONYMOUS        # User:<name> once a SASL exchange completes
        self.sasl: SaslSession | None = None
        self.tls: TlsChannel | None = None
        if listener is not None and listener.ssl_context is not None:
            self.tls = TlsChannel(listener.ssl_context, sock)
        if listener is not None and listener.sasl is not None:
            self.sasl = SaslSession(listener.sasl, max_receive_size=broker.sasl_max_receive_size,
                                    failed_delay_ms=broker.failed_auth_delay_ms,
                                    reauth_ms_by_mechanism=listener.reauth_ms)
        self.loop = asyncio.get_running_loop()
        # Unbounded so the end-of-stream marker can always be queued; the reader
        # enforces max_inflight / max_queued_bytes itself before adding a frame.
        self.queue: asyncio.Queue = asyncio.Queue()
        self.use_sendfile = broker.use_sendfile
        self.busy = False
        self.closed = False
        self.requests = 0
        self.queued_bytes = 0
        self.inflight: InFlight | None = None     # the request being processed (watchdog.py)
        self.last_active = self.loop.time()       # the last request taken (connection_quotas.py)
        self._drained = asyncio.Event()

    def advertised_address(self) -> tuple[str, int]:
        listener = self.listener
        if listener is not None:              # the address of the listener the client came to
            if listener.advertised_host:
                return listener.advertised_host, listener.advertised_port or listener.port
            return self.sock.getsockname()[0], listener.advertised_port or listener.port
        if self.broker.advertised_host:
            return self.broker.advertised_host, self.broker.advertised_port or self.broker.port
        host, port = self.sock.getsockname()[:2]
        return host, self.broker.advertised_port or port

    async def _tls_handshake(self) -> bool:
        tls = self.tls
        assert tls is not None
        try:
            await asyncio.wait_for(tls.handshake(), self.broker.idle_timeout)
        except (ssl.SSLError, ConnectionError, OSError, TimeoutError) as e:
            log.info("connection %s: TLS handshake failed: %s: closing", self.peer, e)
            return False
        mapper = self.listener.principal_mapper
        if self.sasl is None and mapper is not None:      # SSL: the certificate names the client
            try:
                self.principal = mapper.principal(tls.peer_certificate())
            except Exception as e:      # no rule matches (Kafka: NoMatchingRule fails the login)
                log.info("connection %s: no principal for the client certificate: %s: closing",
                         self.peer, e)
                return False
        return True

    async def run(self) -> None:
        if self.tls is not None and not await self._tls_handshake():
            await self._lingering_close()     # the TLS alert is not destroyed by a reset
            return
        reader = self.loop.create_task(self._read_loop())
        try:
            await self._process_loop()
        except (ConnectionError, OSError) as e:
            log.debug("connection %s: %s", self.peer, e)
        finally:
            reader.cancel()
            try:
                await reader
            except BaseException:
                pass
        await self._lingering_close()

    async def _lingering_close(self) -> None:
        """FIN first, then discard what the client still sends (bounded) before close().

        Closing with unread bytes in the receive buffer makes the kernel send
        RST, which can destroy responses the client has not read yet (B8:
        earlier pipelined requests must get their answers)."""
        if self.closed:
            return
        try:
            if self.tls is not None:
                await self.tls.close_notify()
            self.sock.shutdown(socket.SHUT_WR)
            deadline = self.loop.time() + 0.5
            drained = 0
            while drained < (1 << 20):
                left = deadline - self.loop.time()
                if left <= 0:
                    break
                data = await asyncio.wait_for(self.loop.sock_recv(self.sock, 65536), left)
                if not data:
                    break
                drained += len(data)
        except (TimeoutError, OSError):
            pass
        finally:
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass

    # -- reading -------------------------------------------------------------
    async def _recv_into(self, view: memoryview) -> int:
        """recv_into `view`; 0 at end of stream or after the idle timeout with nothing in hand."""
        tls = self.tls
        if tls is None:
            try:
                return self.sock.recv_into(view)     # data already waiting: no future, no timer
            except (BlockingIOError, InterruptedError):
                pass
        else:
            n = tls.read_nowait(view)               # records already here: no future, no timer
            if n is not None:
                return n
        idle = self.broker.idle_timeout
        while True:
            try:
                if tls is not None:
                    return await asyncio.wait_for(tls.recv_into(view), idle)
                return await asyncio.wait_for(self.loop.sock_recv_into(self.sock, view), idle)
            except TimeoutError:
                if self.busy or not self.queue.empty():
                    continue
                log.info("connection %s idle for %.0f s: closing", self.peer, idle)
                return 0

    async def _read_loop(self) -> None:
        """Read frames: small ones through a scratch buffer (many per recv), large ones
        straight into a pooled buffer of their exact size (recv_into, no further copy).

        The size prefix is checked against socket.request.max.bytes before anything
        is allocated for the body (check_frame_size)."""
        max_request = self.broker.max_request_bytes
        pool = self.broker.buffers
        scratch = bytearray(_SCRATCH)
        sview = memoryview(scratch)
        start = end = 0                          # unread bytes: scratch[start:end]
        try:
            while True:
                avail = end - start
                size = -1
                if avail >= 4:
                    size = _SIZE.unpack_from(scratch, start)[0]
                    sasl = self.sasl
                    if sasl is None or sasl.complete:
                        check_frame_size(size, max_request)
                    elif not 0 <= size <= sasl.max_receive_size:   # v0 tokens have no header
                        raise InvalidRequestError(f"frame of {size} bytes before SASL authentication "
                                                  f"(sasl.server.max.receive.size "
                                                  f"{sasl.max_receive_size})")
                if size < 0 or avail - 4 < size <= _SCRATCH - 4:
                    # need more bytes in the scratch buffer (move the partial frame to the front)
                    if start:
                        scratch[:avail] = bytes(sview[start:end])
                        start, end = 0, avail
                    n = await self._recv_into(sview[end:])
                    if not n:
                        break
                    end += n
                    continue
                if size <= avail - 4:            # whole frame in the scratch buffer
                    frame = scratch[start + 4:start + 4 + size]
                    start += 4 + size
                    if start == end:
                        start = end = 0
                else:                            # a large frame: read the rest in place
                    have = avail - 4
                    frame = pool.take(size)
                    fview = memoryview(frame)
                    fview[:have] = sview[start + 4:end]
                    start = end = 0
                    got = have
                    while got < size:
                        n = await self._recv_into(fview[got:])
                        if not n:
                            break
                        got += n
                    fview.release()
                    if got < size:
                        break                    # end of stream inside a frame
                while self.queue.qsize() >= self.broker.max_inflight or (
                        self.queued_bytes and
                        self.queued_bytes + len(frame) > self.broker.max_queued_bytes):
                    self._drained.clear()
                    await self._drained.wait()
                self.queued_bytes += len(frame)
                self.queue.put_nowait(frame)
                frame = None
        except InvalidRequestError as e:
            log.info("connection %s: %s: closing", self.peer, e)
        except (ConnectionError, OSError):
            pass
        finally:
            self.queue.put_nowait(_EOF)

    # -- processing ------------------------------------------------------------
    async def _process_loop(self) -> None:
        handlers = self.broker.handlers
        pool = self.broker.buffers
        metrics = self.broker.metrics          # None unless metrics or the console are on
        quotas = self.broker.quotas            # client quotas (quotas.py): idle unless configured
        clock = self.loop.time
        while True:
            frame = await self.queue.get()
            if frame is _EOF:
                return
            throttle = 0
            t0 = self.last_active = clock()
            key = -1
            self.queued_bytes -= len(frame)
            self._drained.set()
            self.busy = True
            try:
                try:
                    sasl = self.sasl
                    if sasl is not None and not sasl.complete:
                        if sasl.raw_tokens:           # after a SaslHandshake v0
                            if not await sasl.raw_token(frame, self):
                                return
                            continue
                        key, version, corr = peek_header(frame)
                        supported = m.SUPPORTED.get(key)
                        sasl.admit(key, supported is not None and
                                   supported[0] <= version <= supported[1])
                    elif sasl is not None and sasl.expired(clock()):
                        key = peek_header(frame)[0]
                        if key != m.ApiKey.SASL_HANDSHAKE:    # KIP-368: re-authenticate or go
                            log.info("connection %s: SASL session expired: closing", self.peer)
                            return
                    key, version, corr = peek_header(frame)
                    supported = m.SUPPORTED.get(key)
                    if supported is None:
                        raise UnsupportedVersionError(f"unknown API key {key}")
                    lo, hi = supported
                    if key == m.ApiKey.API_VERSIONS and version > hi:
                        # KIP-511: do not parse the body; v0 answer with our range.
                        body = m.encode_api_versions_response(0, 35, {key: supported})
                        await self._send(response_header(corr, False), [body])
                        continue
                    if not lo <= version <= hi:
                        raise UnsupportedVersionError(
                            f"{m.API_NAMES[key]} v{version} outside the served range {lo}-{hi}")
                    flexible = m.is_flexible(key, version)
                    header, reader = parse_request_header(frame, flexible)
                    self.inflight = InFlight(key, version, corr, header.client_id, t0)
                    mark = quotas.begin() if quotas.active else None
                    parts = await handlers.handle(header, reader, self)
                    if mark is not None:       # recorded; throttle_time_ms set in the response
                        throttle = quotas.end(self, header, frame, parts, mark)
                except (InvalidRequestError, UnsupportedVersionError) as e:
                    log.info("connection %s: %s: closing", self.peer, e)
                    if metrics is not None:
                        metrics.failed(key, type(e).__name__)
                    return
                except (ConnectionError, asyncio.CancelledError):
                    raise
                except Exception as e:
                    log.exception("connection %s: request failed: closing", self.peer)
                    if metrics is not None:
                        metrics.failed(key, type(e).__name__)
                    return
                self.requests += 1
                out = 0
                if parts is not None:
                    resp_flexible = flexible and key != m.ApiKey.API_VERSIONS
                    if metrics is not None and key == m.ApiKey.FETCH:
                        out = sum(len(p) for p in parts)
                    await self._send(response_header(corr, resp_flexible), parts)
                if metrics is not None:
                    metrics.request(key, clock() - t0, len(frame), out)
                if sasl is not None and sasl.failed:
                    return                        # after the failure's answer: close
            finally:
                self.busy = False
                if self.inflight is not None and self.inflight.reported:
                    log.warning("answered after %.1f s: %s from %s", clock() - t0,
                                self.inflight.describe(), self.peer)
                self.inflight = None
                # back to the pool unless a handler kept a view of it (BufferPool.give checks)
                header = reader = parts = None
                pool.give(frame)
            if throttle:        # KIP-219: the response first, then no request read for that long
                await asyncio.sleep(throttle / 1000.0)

    # -- writing ----------------------------------------------------------------
    async def send_frame(self, payload: bytes) -> None:
        """One size-prefixed frame without a response header (a SASL v0 token)."""
        await self._send(b"", [payload])

    async def _send(self, header: bytes, parts: list) -> None:
        size = len(header) + sum(len(p) for p in parts)
        pending = bytearray(size.to_bytes(4, "big", signed=True))
        pending += header
        if self.tls is not None:                  # buffered: no sendfile through TLS
            tls = self.tls                        # each part encrypted as it is (no joined copy)
            for part in parts:
                if not isinstance(part, (bytes, bytearray, memoryview)):
                    part = _slice_bytes(part)
                if len(pending) + len(part) <= 16384:     # small runs: one TLS record
                    pending += part
                    continue
                if pending:
                    tls.write(pending)
                    pending = bytearray()
                await tls.sendall(part)
            if pending:
                await tls.sendall(pending)
            return
        for part in parts:
            if isinstance(part, (bytes, bytearray, memoryview)):
                pending += part
                continue
            if pending:
                await self.loop.sock_sendall(self.sock, pending)
                pending = bytearray()
            await self._send_slice(part)
        if pending:
            await self.loop.sock_sendall(self.sock, pending)

    async def _send_slice(self, fs) -> None:
        sent = 0
        if self.use_sendfile:
            out_fd = self.sock.fileno()
            try:
                while sent < fs.size:
                    n = _native.sendfile_nonblocking(out_fd, fs.fd, fs.position + sent,
                                                     min(fs.size - sent, _SENDFILE_CHUNK))
                    if n > 0:
                        sent += n
                    elif n == 0:
                        break                    # the file is shorter than the slice
                    else:
                        await self._writable(out_fd)
                if sent == fs.size:
                    return
            except (ConnectionError, BrokenPipeError):
                raise
            except OSError as e:
                log.warning("sendfile of %r failed (%s): falling back to read()", fs, e)
        data = b""
        try:
            data = _read_range(fs, sent)
        except OSError as e:
            log.warning("read of %r failed (%s): sending zeros", fs, e)
        if data:
            await self.loop.sock_sendall(self.sock, data)
            sent += len(data)
        while sent < fs.size:                    # keep the announced framing
            chunk = _ZEROS[:min(len(_ZEROS), fs.size - sent)]
            await self.loop.sock_sendall(self.sock, chunk)
            sent += len(chunk)

    async def _writable(self, fd: int) -> None:
        fut = self.loop.create_future()
        self.loop.add_writer(fd, _set_done, fut)
        try:
            await fut
        finally:
            self.loop.remove_writer(fd)


def _set_done(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def _slice_bytes(fs) -> bytes:
    """A FileSlice's bytes (zeros where the file is shorter or unreadable: the framing stays)."""
    data = b""
    try:
        data = fs.read()
    except OSError as e:
        log.warning("read of %r failed (%s): sending zeros", fs, e)
    if len(data) < fs.size:
        data = bytes(data) + bytes(fs.size - len(data))
    return data


def _read_range(fs, skip: int) -> bytes:
    if skip == 0:
        return fs.read()
    import os
    out = bytearray()
    pos, end = fs.position + skip, fs.position + fs.size
    while pos < end:
        chunk = os.pread(fs.fd, end - pos, pos)
        if not chunk:
            break
        out += chunk
        pos += len(chunk)
    return bytes(out)
