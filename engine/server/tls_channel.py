"""TLS over a connection's raw non-blocking socket: ``ssl.SSLObject`` with two ``MemoryBIO``s.

asyncio's ``sock_*`` functions refuse an ``SSLSocket``, and a Transport would take the socket
away from the connection's own I/O (see engine/server/connection.py), so a TLS listener's
connection keeps its raw socket and runs the TLS state machine in memory: bytes read from the
socket go into the incoming BIO, ``SSLObject.read`` gives the plaintext; ``SSLObject.write`` puts
records into the outgoing BIO, which is flushed to the socket with ``loop.sock_sendall``.

- :meth:`handshake` runs the server side of the handshake (bounded by the caller); a peer that
  is not a TLS client, a certificate the trust store refuses or a missing one with
  ``ssl.client.auth=required`` raise ``ssl.SSLError`` after OpenSSL's alert is sent (as Kafka
  sends it), and the connection closes.
- :meth:`recv_into` returns plaintext bytes, 0 at the end of the stream (close_notify or EOF).
- :meth:`sendall` encrypts and writes; responses with FileSlices are sent buffered
  (no sendfile through TLS).
- :meth:`peer_certificate` is the client's certificate (DER) when it sent one.

Concurrency: one reader (the connection's read loop) and one writer (its processing loop) on the
broker's event loop; the SSLObject is used by one coroutine at a time between awaits.
"""

from __future__ import annotations

import asyncio
import socket
import ssl

__all__ = ["TlsChannel"]

_READ = 262144


class TlsChannel:
    def __init__(self, context: ssl.SSLContext, sock: socket.socket) -> None:
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self._in, self._out, server_side=True)
        self._eof = False
        self._writing = asyncio.Lock()   # the reader may flush too (TLS 1.3 tickets): keep order

    async def _flush(self) -> None:
        async with self._writing:
            data = self._out.read()
            if data:
                await self.loop.sock_sendall(self.sock, data)

    async def _fill(self) -> bool:
        """Read raw bytes into the incoming BIO; False at the end of the stream."""
        data = await self.loop.sock_recv(self.sock, _READ)
        if not data:
            self._in.write_eof()
            self._eof = True
            return False
        self._in.write(data)
        return True

    async def handshake(self) -> None:
        while True:
            try:
                self.obj.do_handshake()
                await self._flush()
                return
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill():
                    raise ConnectionError("end of stream during the TLS handshake") from None
            except ssl.SSLError:
                # OpenSSL wrote its alert (bad_certificate, decode_error, ...) into the outgoing
                # BIO: send it, as Kafka does, so the client learns why (not just a reset)
                try:
                    await self._flush()
                except OSError:
                    pass
                raise

    def read_nowait(self, view: memoryview) -> int | None:
        """Plaintext into ``view`` from what the socket already holds, without waiting: as many
        TLS records as fit (a large Produce frame is many 16 KiB records, one Python round
        each otherwise); None when nothing can be read now, 0 at the end of the stream."""
        total, want = 0, len(view)
        obj = self.obj
        while total < want:
            try:
                got = int(obj.read(want - total, view[total:]))    # with a buffer: a count
            except ssl.SSLWantReadError:
                if self._eof or self._out.pending:     # the async path flushes first
                    break
                try:
                    data = self.sock.recv(_READ)
                except (BlockingIOError, InterruptedError):
                    break
                if not data:
                    self._in.write_eof()
                    self._eof = True
                else:
                    self._in.write(data)
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return total
            if not got:
                return total
            total += got
        return total or None

    async def recv_into(self, view: memoryview) -> int:
        while True:
            try:
                return int(self.obj.read(len(view), view))     # with a buffer: a count
            except ssl.SSLWantReadError:
                await self._flush()          # TLS 1.3 session tickets, key updates
                if self._eof or not await self._fill():
                    return 0
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return 0

    def write(self, data) -> None:
        """Encrypt ``data`` into the outgoing buffer (sent by the next :meth:`sendall`)."""
        view = memoryview(data)
        while view:
            n = self.obj.write(view)
            view = view[n:]

    async def sendall(self, data) -> None:
        self.write(data)
        await self._flush()

    async def close_notify(self) -> None:
        try:
            self.obj.unwrap()
        except (ssl.SSLError, ValueError):
            pass
        try:
            await self._flush()
        except OSError:
            pass

    def peer_certificate(self) -> bytes | None:
        try:
            return self.obj.getpeercert(binary_form=True)
        except ValueError:
            return None
