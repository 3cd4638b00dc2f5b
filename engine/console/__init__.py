"""A web console for operators: topics and partitions, consumer groups and lag, a message
browser, a produce form and small metric charts (see server.py for the design).

Served by the broker (``serve --console-listen HOST:PORT`` or ``console.port``; off by default)
from its Engine, or standalone over the Kafka protocol::

    python -m engine console --bootstrap-server 127.0.0.1:9092 --listen 127.0.0.1:8080
"""

from .server import ConsoleServer
from .sources import EngineSource, WireSource

__all__ = ["ConsoleServer", "EngineSource", "WireSource"]
