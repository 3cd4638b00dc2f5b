"""A per-link TCP proxy on 127.0.0.1 for network-partition tests: everything one side of a link
(a broker's ZooKeeper client, a follower's fetcher, a producer) sends goes through it, and a test
switches the link at runtime.

::

    proxy = LinkProxy("127.0.0.1", zk_port).start()
    connect = f"127.0.0.1:{proxy.port}"       # give this to the client instead of the target
    proxy.set("blackhole")                    # silence both ways, connections kept open
    proxy.set("delay", delay_ms=200)          # every byte forwarded 200 ms late, each way
    proxy.set("reset")                        # every connection closed with RST, new ones too
    proxy.set("pass")                         # heal
    proxy.close()

Modes:

* ``pass``: bytes forwarded both ways as they come.
* ``blackhole``: new connections are accepted but not connected onward; nothing is forwarded
  either way, nothing is closed -- the peers see silence, as behind a dropped route.  What
  either side sent meanwhile is held, in order, and delivered when the link heals (as TCP's
  retransmissions would deliver it); a connection its client closed before the heal never
  reaches the target (its SYN was "lost").
* ``reset``: every open connection is closed with a TCP RST on both sides (``SO_LINGER`` 0) and
  every new one is accepted and reset at once (the client sees ECONNRESET).
* ``delay``: each chunk is forwarded ``delay_ms`` after it was read, each way (latency without
  a throughput limit: chunks are queued with their due time).

One asyncio loop in one daemon thread serves every connection of the proxy; :meth:`set` returns
once the mode is in effect (a ``reset`` has closed what was open).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time

__all__ = ["MODES", "LinkProxy"]

MODES = ("pass", "blackhole", "reset", "delay")


def _rst(writer: asyncio.StreamWriter | None) -> None:
    """Close with an RST (SO_LINGER on, 0 s) rather than a FIN."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class _Link:
    """One client connection and (once the link lets it through) its connection to the target."""

    def __init__(self, proxy: LinkProxy, reader, writer):
        self.proxy = proxy
        self.c_reader, self.c_writer = reader, writer
        self.t_writer: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task] = []

    async def run(self) -> None:
        p = self.proxy
        to_target: asyncio.Queue = asyncio.Queue()
        # the client's bytes are read (and held) even before the target connection exists, so a
        # client that gives up during a blackhole is seen to have gone
        self.tasks.append(asyncio.create_task(self._read(self.c_reader, to_target)))
        await p._open.wait()
        if self.tasks[0].done():
            return                                 # (the client left before the link healed)
        try:
            t_reader, self.t_writer = await asyncio.open_connection(p.target_host, p.target_port)
        except OSError:
            _rst(self.c_writer)
            return
        if p.mode == "reset":                      # (reset while connecting)
            self.reset()
            return
        to_client: asyncio.Queue = asyncio.Queue()
        self.tasks += [asyncio.create_task(self._write(to_target, self.t_writer)),
                       asyncio.create_task(self._read(t_reader, to_client)),
                       asyncio.create_task(self._write(to_client, self.c_writer))]
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _read(self, reader: asyncio.StreamReader, q: asyncio.Queue) -> None:
        try:
            while data := await reader.read(65536):
                q.put_nowait((time.monotonic() + self.proxy.delay_ms / 1000.0, data))
        except OSError:
            pass
        q.put_nowait((0.0, b""))                   # end of stream

    async def _write(self, q: asyncio.Queue, writer: asyncio.StreamWriter) -> None:
        p = self.proxy
        try:
            while True:
                due, data = await q.get()
                await p._open.wait()
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                await p._open.wait()               # (a blackhole may have begun meanwhile)
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except OSError:
            self.reset()

    def reset(self) -> None:
        _rst(self.c_writer)
        _rst(self.t_writer)
        for t in self.tasks:
            t.cancel()


class LinkProxy:
    """A TCP proxy from ``127.0.0.1:<port>`` to ``target_host:target_port``, switchable between
    ``pass``, ``blackhole``, ``reset`` and ``delay`` (see the module's text)."""

    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1"):
        self.target_host, self.target_port = target_host, target_port
        self.listen_host = listen_host
        self.port = 0
        self.mode = "pass"
        self.delay_ms = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._open: asyncio.Event

    def start(self) -> LinkProxy:
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as e:   # noqa: BLE001 - handed to start()'s caller
                failed.append(e)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=f"link-proxy->{self.target_port}", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failed:
            raise failed[0]
        return self

    async def _listen(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._accept, self.listen_host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader, writer) -> None:
        if self.mode == "reset":
            _rst(writer)
            return
        link = _Link(self, reader, writer)
        self._links.add(link)
        try:
            await link.run()
        finally:
            self._links.discard(link)
            for w in (link.c_writer, link.t_writer):
                if w is not None and not w.transport.is_closing():
                    w.close()

    def set(self, mode: str, delay_ms: int = 0) -> None:
        """Switch the link to `mode` (one of :data:`MODES`); `delay_ms` is for ``delay``.
        Returns when the mode is in effect."""
        if mode not in MODES:
            raise ValueError(f"unknown link mode {mode!r} (one of {', '.join(MODES)})")
        if mode == "delay" and delay_ms <= 0:
            raise ValueError("delay needs delay_ms > 0")
        if self._loop is None:
            raise RuntimeError("LinkProxy.set before start()")

        async def apply() -> None:
            self.mode = mode
            self.delay_ms = delay_ms if mode == "delay" else 0
            if mode == "blackhole":
                self._open.clear()
            else:
                self._open.set()
            if mode == "reset":
                for link in list(self._links):
                    link.reset()
        asyncio.run_coroutine_threadsafe(apply(), self._loop).result(10)

    def close(self) -> None:
        """Stop listening and reset every connection."""
        loop = self._loop
        if loop is None or self._thread is None:
            return

        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            for link in list(self._links):
                link.reset()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shut(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> LinkProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
