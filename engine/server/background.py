"""A broker for a node the caller already has open, on its own event loop thread.

``Engine.serve()`` returns one: the embedded writer keeps producing and
consuming in-process while Kafka clients — and read-only opens in other
processes that join consumer groups — reach the same data directory over the
wire.  ``stop()`` (or the ``with`` block's end) stops the broker; the node (and
the Engine owning it) stays open and is closed by its owner.  It takes the
:class:`~engine.node.Node` to serve, or an Engine, whose ``node`` it serves.
"""

from __future__ import annotations

import asyncio
import threading

from .broker import Broker

__all__ = ["BackgroundBroker"]


class BackgroundBroker:
    """``Broker(node, host, port, **kwargs)`` served from a daemon thread; `node` may be an
    Engine (the embedded facade), whose ``node`` is served."""

    def __init__(self, node, host: str = "127.0.0.1", port: int = 0, **broker_kwargs):
        self.node = node = getattr(node, "node", node)      # an Engine: the node it owns
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(node, host, port, **broker_kwargs)
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(self.broker.start())
            except BaseException as e:          # reported to the caller below
                failure.append(e)
                started.set()
                return
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, name="engine-broker", daemon=True)
        self.thread.start()
        if not started.wait(30) or failure:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            if failure:
                raise failure[0]
            raise RuntimeError("the broker did not start within 30 s")
        self.host = host
        self.port = self.broker.port
        self.bootstrap = f"{host}:{self.port}"

    def call(self, fn, *args):
        """Run fn(*args) on the broker's loop and return its result."""
        async def wrap():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(30)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()

    def __enter__(self) -> BackgroundBroker:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
