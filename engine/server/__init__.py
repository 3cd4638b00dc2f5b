"""The Kafka wire-protocol broker: an asyncio server in front of a node (engine/node.py).

``Broker(node, host, port)`` (a :class:`~engine.node.Node`) with ``await start()`` / ``await stop()``;
``python -m engine serve --data-dir DIR --listen HOST:PORT`` runs one; ``Engine.serve()`` serves an
Engine already open in this process (a :class:`BackgroundBroker`).
"""

from .background import BackgroundBroker
from .broker import Broker

__all__ = ["BackgroundBroker", "Broker"]
