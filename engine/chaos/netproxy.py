"""A per-link TCP proxy on 127.0.0.1 for network-partition tests: everything one side of a link
(a broker's ZooKeeper client, a follower's fetcher, a producer) sends goes through it, and a test
switches the link at runtime.

::

    proxy = LinkProxy("127.0.0.1", zk_port).start()
    connect = f"127.0.0.1:{proxy.port}"       # give this to the client instead of the target
    proxy.set("blackhole")                    # silence both ways, connections kept open
    proxy.set("delay", delay_ms=200)          # every byte forwarded 200 ms late, each way
    proxy.set("reset")                        # every connection closed with RST, new ones too
    proxy.set("drop-responses")               # the client's bytes go on, the target's are dropped
    proxy.set("pass")                         # heal
    proxy.close()

    kproxy = LinkProxy("127.0.0.1", broker_port, kafka=True).start()   # in front of a broker
    kproxy.rule("replica-2", "blackhole")     # only connections whose client id starts so
    kproxy.rule("replica-2", None)            # that rule gone; kproxy.clear_rules(): all gone

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
* ``drop-responses``: the client's bytes are forwarded to the target (new connections are
  connected onward), the target's bytes are read and discarded; the connection stays open, the
  client hears nothing (a lost acknowledgement: the server receives and acts on each request).
  What was dropped stays dropped.  When the link leaves ``drop-responses``, every connection
  that had bytes dropped is reset (RST both ways, as ``reset``) rather than passed on: a response
  cut mid-frame would otherwise corrupt the client's stream, and a Kafka client would see
  responses skipped; it reconnects and its request timeouts and retries take over.  A connection
  nothing was dropped on (or the target's EOF only) goes on.  With ``kafka=True`` the proxy
  counts the response frames it dropped, by the API key of the request each answered
  (:attr:`LinkProxy.dropped`: ``{api_key: count}``, ``0`` Produce).

Per client (``kafka=True``, a proxy in front of a Kafka listener speaking PLAINTEXT): the first
request header a connection sends names its ``client_id`` (brokers' replica fetchers send
``replica-<id>``, their inter-broker requests ``broker-<id>-inter-broker``; a test's clients set
``client.id``); :meth:`LinkProxy.rule` gives the connections whose client id starts with a prefix
their own mode, the longest matching prefix winning, the proxy's mode for the rest and for a
connection not yet identified (one that has sent nothing, as the brokers' liveness watch).  A
connection is identified before its first bytes are forwarded, so a rule in force when it opens
holds its very first request.

One asyncio loop in one daemon thread serves every connection of the proxy; :meth:`set` returns
once the mode is in effect (a ``reset`` has closed what was open).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
import struct
import threading
import time

__all__ = ["MODES", "LinkProxy"]

MODES = ("pass", "blackhole", "reset", "delay", "drop-responses")
MAX_AWAITED = 1024          # (kafka proxies) requests remembered per link awaiting a response


def _rst(writer: asyncio.StreamWriter | None) -> None:
    """Close with an RST (SO_LINGER on, 0 s) rather than a FIN."""
    if writer is None:
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _client_id(head: bytes) -> str | None:
    """The client_id of a Kafka request header at the start of `head` (size, api_key,
    api_version, correlation_id, client_id as a nullable int16-length string); None while
    `head` is too short to tell, "" for a null id or bytes that are not a request header."""
    if len(head) < 14:
        return None
    size, n = struct.unpack_from(">i", head, 0)[0], struct.unpack_from(">h", head, 12)[0]
    if size < 10 or n < 0:
        return ""
    if len(head) < 14 + n:
        return None if size >= 10 + n else ""
    return head[14:14 + n].decode("utf-8", "replace")


class _Frames:
    """Where Kafka frames (an int32 size, then that many bytes) start in a byte stream fed in
    chunks: :meth:`feed` returns the first `head` bytes (size prefix included) of each frame
    whose first `head` bytes it completed."""

    def __init__(self, head: int):
        self.head_len, self.head, self.skip = head, b"", 0

    def feed(self, data: bytes) -> list[bytes]:
        out, i = [], 0
        while i < len(data):
            if self.skip:
                n = min(self.skip, len(data) - i)
                self.skip, i = self.skip - n, i + n
                continue
            take = min(self.head_len - len(self.head), len(data) - i)
            self.head, i = self.head + data[i:i + take], i + take
            if len(self.head) == self.head_len:
                out.append(self.head)
                self.skip = max(struct.unpack_from(">i", self.head)[0] + 4 - self.head_len, 0)
                self.head = b""
        return out


class _Link:
    """One client connection and (once the link lets it through) its connection to the target."""

    def __init__(self, proxy: LinkProxy, reader, writer):
        self.proxy = proxy
        self.c_reader, self.c_writer = reader, writer
        self.t_writer: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task] = []
        self.client_id: str | None = None          # (kafka proxies) once its first header came
        self.open = asyncio.Event()                # this link's pass/blackhole switch
        self.mode, self.delay_ms = "pass", 0
        self.dropped = 0                           # bytes of the target's it dropped (+1 for EOF)
        self.requests = _Frames(12)                # (size, api_key, api_version, correlation_id)
        self.responses = _Frames(8)                # (size, correlation_id)
        # correlation id -> api key, awaiting a response, in request order (a Kafka connection
        # answers in that order: requests before an answered one got none -- acks=0 Produce)
        self.api_of: collections.OrderedDict[int, int] = collections.OrderedDict()
        self.apply()

    def apply(self) -> None:
        """Take the mode the proxy gives this link now (its rule, else the proxy's)."""
        was = self.mode
        self.mode, self.delay_ms = self.proxy._mode_for(self.client_id)
        if was == "drop-responses" and self.mode != was and self.dropped:
            self.mode = "reset"                    # (its stream is cut: see the module's text)
        if self.mode == "blackhole":
            self.open.clear()
        else:
            self.open.set()
        if self.mode == "reset":
            self.reset()

    async def run(self) -> None:
        p = self.proxy
        to_target: asyncio.Queue = asyncio.Queue()
        # the client's bytes are read (and held) even before the target connection exists, so a
        # client that gives up during a blackhole is seen to have gone
        self.tasks.append(asyncio.create_task(self._read(self.c_reader, to_target, identify=p.kafka)))
        await self.open.wait()
        if self.tasks[0].done():
            return                                 # (the client left before the link healed)
        try:
            t_reader, self.t_writer = await asyncio.open_connection(p.target_host, p.target_port)
        except OSError:
            _rst(self.c_writer)
            return
        if self.mode == "reset":                   # (reset while connecting)
            self.reset()
            return
        to_client: asyncio.Queue = asyncio.Queue()
        self.tasks += [asyncio.create_task(self._write(to_target, self.t_writer)),
                       asyncio.create_task(self._read(t_reader, to_client)),
                       asyncio.create_task(self._write(to_client, self.c_writer, responses=True))]
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _read(self, reader: asyncio.StreamReader, q: asyncio.Queue, identify: bool = False) -> None:
        head = b""
        try:
            while data := await reader.read(65536):
                if identify and self.client_id is None:
                    head += data
                    if (cid := _client_id(head)) is None:
                        continue                   # (not enough of the header yet)
                    self.client_id, data, head = cid, head, b""
                    self.apply()                   # its rule, before its first bytes go on
                q.put_nowait((time.monotonic() + self.delay_ms / 1000.0, data))
        except OSError:
            pass
        q.put_nowait((0.0, b""))                   # end of stream

    async def _write(self, q: asyncio.Queue, writer: asyncio.StreamWriter, responses: bool = False) -> None:
        try:
            while True:
                due, data = await q.get()
                await self.open.wait()
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
                await self.open.wait()             # (a blackhole may have begun meanwhile)
                if self.proxy.kafka:
                    self._scan(data, responses)
                if responses and self.mode == "drop-responses":
                    self.dropped += len(data) or 1
                    if not data:
                        return                     # (the target's EOF dropped too: silence)
                    continue
                if not data:
                    if writer.can_write_eof():
                        writer.write_eof()
                    return
                writer.write(data)
                await writer.drain()
        except OSError:
            self.reset()

    def _scan(self, data: bytes, responses: bool) -> None:
        """(kafka proxies) Note each request's API key by its correlation id; count the response
        frames dropped by the API key of their request."""
        if not responses:
            for h in self.requests.feed(data):
                api_key, _, corr = struct.unpack_from(">hhi", h, 4)
                self.api_of[corr] = api_key
                if len(self.api_of) > MAX_AWAITED:          # (an acks=0 stream, never answered)
                    self.api_of.popitem(last=False)
            return
        for h in self.responses.feed(data):
            corr, api_key = struct.unpack_from(">i", h, 4)[0], -1
            while self.api_of:                  # (the unanswered before it will never be)
                c, k = self.api_of.popitem(last=False)
                if c == corr:
                    api_key = k
                    break
            if self.mode == "drop-responses":
                self.proxy.dropped[api_key] = self.proxy.dropped.get(api_key, 0) + 1

    def reset(self) -> None:
        _rst(self.c_writer)
        _rst(self.t_writer)
        for t in self.tasks:
            t.cancel()


class LinkProxy:
    """A TCP proxy from ``127.0.0.1:<port>`` to ``target_host:target_port``, switchable between
    ``pass``, ``blackhole``, ``reset``, ``delay`` and ``drop-responses`` (see the module's text); with ``kafka=True``
    also per client id (:meth:`rule`)."""

    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1",
                 kafka: bool = False):
        self.target_host, self.target_port = target_host, target_port
        self.listen_host = listen_host
        self.kafka = kafka
        self.port = 0
        self.mode = "pass"
        self.delay_ms = 0
        self.rules: dict[str, tuple[str, int]] = {}     # client id prefix -> (mode, delay_ms)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self.dropped: dict[int, int] = {}   # (kafka=True) api key -> responses drop-responses dropped

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

    def _mode_for(self, client_id: str | None) -> tuple[str, int]:
        if client_id is not None:
            hits = [pre for pre in self.rules if client_id.startswith(pre)]
            if hits:
                return self.rules[max(hits, key=len)]
        return self.mode, self.delay_ms

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.listen_host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader, writer) -> None:
        link = _Link(self, reader, writer)
        if link.mode == "reset":                   # (reset at once: the client sees ECONNRESET)
            return
        self._links.add(link)
        try:
            await link.run()
        finally:
            self._links.discard(link)
            for w in (link.c_writer, link.t_writer):
                if w is not None and not w.transport.is_closing():
                    w.close()

    @staticmethod
    def _check(mode: str, delay_ms: int) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown link mode {mode!r} (one of {', '.join(MODES)})")
        if mode == "delay" and delay_ms <= 0:
            raise ValueError("delay needs delay_ms > 0")

    def _apply(self, change) -> None:
        """Run `change` on the proxy's loop, then give every open link its mode."""
        if self._loop is None:
            raise RuntimeError("LinkProxy used before start()")

        async def apply() -> None:
            change()
            for link in list(self._links):
                link.apply()
        asyncio.run_coroutine_threadsafe(apply(), self._loop).result(10)

    def set(self, mode: str, delay_ms: int = 0) -> None:
        """Switch the link to `mode` (one of :data:`MODES`); `delay_ms` is for ``delay``.
        Connections a :meth:`rule` matches keep theirs.  Returns when the mode is in effect."""
        self._check(mode, delay_ms)

        def change() -> None:
            self.mode = mode
            self.delay_ms = delay_ms if mode == "delay" else 0
        self._apply(change)

    def rule(self, client_id_prefix: str, mode: str | None, delay_ms: int = 0) -> None:
        """Connections whose client id starts with `client_id_prefix` get `mode` (None: the
        rule goes, they follow the proxy's mode again).  Needs ``kafka=True``.  Returns when
        the rule is in effect on the open connections."""
        if not self.kafka:
            raise ValueError("client id rules need a LinkProxy made with kafka=True")
        if mode is not None:
            self._check(mode, delay_ms)

        def change() -> None:
            if mode is None:
                self.rules.pop(client_id_prefix, None)
            else:
                self.rules[client_id_prefix] = (mode, delay_ms if mode == "delay" else 0)
        self._apply(change)

    def clear_rules(self) -> None:
        """Every client id rule gone."""
        self._apply(self.rules.clear)

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
