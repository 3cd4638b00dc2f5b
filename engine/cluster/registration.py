"""A broker's registration ``/brokers/ids/<id>``: Kafka's JSON layout (its ``BrokerIdZNode``), one
address per advertised listener.

::

    {"version":5,"host":"127.0.0.1","port":9092,"jmx_port":-1,"timestamp":"<ms>",
     "endpoints":["CLIENT://127.0.0.1:9092","INTERNAL://127.0.0.1:9093"],
     "listener_security_protocol_map":{"CLIENT":"PLAINTEXT","INTERNAL":"SASL_SSL"},
     "rack":"r1","features":{}}

``endpoints`` holds every advertised broker listener (``advertised.listeners``, the listener
itself where that key does not name it); ``host`` / ``port`` are those of the first endpoint whose
security protocol is PLAINTEXT, or ``null`` / ``-1`` when there is none (Kafka keeps them for
clients older than multiple listeners).  Reading accepts Kafka's older versions too: version 1
(only ``host`` / ``port``: one PLAINTEXT listener) and versions 2-3 (``endpoints`` without the
protocol map: each listener is named after its protocol).

Who uses which endpoint: clients are answered with the addresses of the listener their request
came in on (engine/server/common.py); brokers reach each other on the inter-broker listener's
(``inter.broker.listener.name``, or the one named after ``security.inter.broker.protocol``).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field

__all__ = ["BrokerRegistration", "RegistrationError"]

_ENDPOINT = re.compile(r"([A-Za-z0-9_.-]+)://(\[[^\]]*\]|[^:/]*):(-?\d+)")


class RegistrationError(ValueError):
    """A registration that is not Kafka's layout (unknown version, garbled endpoint)."""


@dataclass(frozen=True)
class BrokerRegistration:
    """Listener name (upper case) -> advertised (host, port), in registration order; the security
    protocol of each listener; the broker's rack."""

    endpoints: dict[str, tuple[str, int]]
    protocols: dict[str, str] = field(default_factory=dict)
    rack: str | None = None

    @classmethod
    def of(cls, listeners: list[tuple[str, str, str, int]], rack: str | None = None) -> BrokerRegistration:
        """From ``[(listener name, security protocol, advertised host, advertised port), ...]``."""
        return cls({n.upper(): (h, int(p)) for n, _proto, h, p in listeners},
                   {n.upper(): proto.upper() for n, proto, _h, _p in listeners}, rack)

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        """(host, port) of `listener` (any case); None when this broker does not advertise it."""
        return self.endpoints.get(listener.upper())

    def describe(self) -> str:
        """``NAME://host:port,...`` (for messages)."""
        return ",".join(f"{n}://{h}:{p}" for n, (h, p) in self.endpoints.items())

    def to_json(self) -> bytes:
        plain = next(((h, p) for n, (h, p) in self.endpoints.items()
                      if self.protocols.get(n, n) == "PLAINTEXT"), (None, -1))
        reg: dict = {"features": {}, "listener_security_protocol_map": dict(self.protocols),
                     "endpoints": [f"{n}://{h}:{p}" for n, (h, p) in self.endpoints.items()],
                     "jmx_port": -1, "host": plain[0], "timestamp": str(int(time.time() * 1000)),
                     "port": plain[1], "version": 5}
        if self.rack:
            reg["rack"] = self.rack
        return json.dumps(reg, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> BrokerRegistration:
        """Any version Kafka wrote (1..5); RegistrationError for anything else."""
        try:
            d = json.loads(data)
            version = int(d.get("version", 1))
        except (ValueError, TypeError, AttributeError) as e:
            raise RegistrationError(f"not a broker registration: {data[:200]!r}") from e
        rack = d.get("rack")
        if version < 1:
            raise RegistrationError(f"unsupported version of broker registration: {data[:200]!r}")
        if version == 1 or "endpoints" not in d:
            return cls({"PLAINTEXT": (d["host"], int(d["port"]))}, {"PLAINTEXT": "PLAINTEXT"}, rack)
        protocol_map = {str(k).upper(): str(v).upper()
                        for k, v in (d.get("listener_security_protocol_map") or {}).items()}
        endpoints: dict[str, tuple[str, int]] = {}
        protocols: dict[str, str] = {}
        for text in d["endpoints"]:
            m = _ENDPOINT.fullmatch(str(text))
            if m is None:
                raise RegistrationError(f"garbled endpoint {text!r} in broker registration")
            name = m.group(1).upper()
            host = m.group(2)[1:-1] if m.group(2).startswith("[") else m.group(2)
            endpoints[name] = (host, int(m.group(3)))
            protocols[name] = protocol_map.get(name, name)     # before version 4: named after it
        return cls(endpoints, protocols, rack)
