"""A broker's listeners from Kafka's keys, validated by Kafka's rules, and per-listener settings.

::

    listeners=INTERNAL://10.0.0.5:9092,EXTERNAL://:9093,LOCAL://[::1]:9094
    listener.security.protocol.map=INTERNAL:SASL_SSL,EXTERNAL:SSL,LOCAL:PLAINTEXT
    advertised.listeners=INTERNAL://broker1.internal:9092,EXTERNAL://broker1.example.com:9093
    inter.broker.listener.name=INTERNAL            # or security.inter.broker.protocol=SASL_SSL
    listener.name.external.ssl.client.auth=required

- ``listeners``: ``NAME://HOST:PORT`` entries, comma separated (Kafka's ``EndpointUtils``
  pattern: HOST empty means every interface, an IPv6 address may be in ``[...]``).  Names are
  upper-cased (Kafka's ``ListenerName.normalised``) and unique; ports are unique (port 0, any
  free port, excepted) unless exactly two listeners share one, one on an IPv4 and one on an IPv6
  address (KIP-797).  Without the key: Kafka's default ``PLAINTEXT://:9092``.
- ``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs, protocol one of PLAINTEXT, SSL,
  SASL_PLAINTEXT, SASL_SSL (any case).  Unset or empty: Kafka's default, each protocol mapped to
  its own name (so a listener must then be named after its protocol).  As in Kafka's KRaft
  mode, when the map is not set and nothing uses SSL or SASL, each ``controller.listener.names``
  name is added as PLAINTEXT.  Every listener name must be in the map.
- ``advertised.listeners``: what clients are told; unset or empty: ``listeners``.  Names must be
  among the listeners' names, ports may repeat, and ``0.0.0.0`` is refused.  Listeners named in
  ``controller.listener.names`` are not broker listeners (Kafka's rule).
- ``inter.broker.listener.name`` or ``security.inter.broker.protocol`` (never both; default
  PLAINTEXT): the listener brokers use between each other; it must be an advertised broker
  listener.
- Per-listener settings: ``listener.name.<name in lower case>.<key>`` overrides ``<key>`` for
  that listener (:func:`listener_config`, :func:`listener_configs`); a SASL mechanism's JAAS
  line is ``listener.name.<l>.<mechanism in lower case>.sasl.jaas.config``
  (:func:`listener_sasl_jaas_config`; the broker never reads the unprefixed ``sasl.jaas.config``).

Errors are :class:`~engine.errors.InvalidConfigError` with Kafka's wording.  Empty strings are
treated as unset, because this project's configuration table gives ``""`` to keys that are.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import InvalidConfigError
from engine.security.jaas import listener_jaas_key

__all__ = ["DEFAULT_LISTENERS", "DEFAULT_PROTOCOL_MAP", "PROTOCOLS", "Endpoint", "ListenerSettings",
           "listener_config", "listener_configs", "listener_prefix", "listener_sasl_jaas_config",
           "parse_listeners", "parse_protocol_map"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka 4.0's defaults (SocketServerConfigs)
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
DEFAULT_LISTENERS = "PLAINTEXT://:9092"
DEFAULT_INTER_BROKER_PROTOCOL = "PLAINTEXT"

# Kafka's EndpointUtils.uriParseExp, matched against the whole entry
_ENDPOINT = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")
_CSV = re.compile(r"\s*,\s*")


@dataclass(frozen=True)
class Endpoint:
    """One listener: its (upper-case) name, security protocol, host (None: every interface) and
    port (0: any free port)."""

    name: str
    security_protocol: str
    host: str | None
    port: int

    @property
    def bind_host(self) -> str:
        """The address to bind: ``""`` (every interface) where the host is empty."""
        return self.host or ""

    @property
    def is_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def is_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    def __str__(self) -> str:
        host = self.host or ""
        if ":" in host:
            host = f"[{host}]"
        return f"{self.name}://{host}:{self.port}"


def _csv(value: str) -> list[str]:
    """Kafka's Csv.parseCsvList: comma separated, blanks around commas dropped, empty items skipped."""
    value = value.strip()
    return [v for v in _CSV.split(value) if v] if value else []


def _text(configs: Mapping[str, Any], key: str) -> str | None:
    """The value of ``key`` as a string, None where unset or empty."""
    value = configs.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        value = ",".join(str(v) for v in value) if isinstance(value, Iterable) else str(value)
    return value if value.strip() else None


def _protocol(name: str, key: str) -> str:
    proto = name.strip().upper()
    if proto not in PROTOCOLS:
        raise InvalidConfigError(f"Invalid security protocol `{name.strip()}` defined in {key}")
    return proto


def parse_protocol_map(value: str | None) -> dict[str, str]:
    """``listener.security.protocol.map`` -> {LISTENER NAME: PROTOCOL}; None or blank: Kafka's default."""
    key = "listener.security.protocol.map"
    out: dict[str, str] = {}
    for item in _csv(value if value and value.strip() else DEFAULT_PROTOCOL_MAP):
        parts = re.split(r"\s*:\s*", item)
        if len(parts) != 2 or not parts[0]:
            raise InvalidConfigError(f"Error parsing configuration property '{key}': "
                                     f"{item!r} is not LISTENER_NAME:SECURITY_PROTOCOL")
        out[parts[0].upper()] = _protocol(parts[1], key)
    return out


def _is_ip(host: str | None) -> int:
    """4 or 6 for an IP address literal, 0 otherwise (a name, or every interface)."""
    if not host:
        return 0
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).version
    except ValueError:
        return 0


def parse_listeners(value: str, protocol_map: Mapping[str, str], *, key: str = "listeners",
                    require_distinct_ports: bool = True) -> list[Endpoint]:
    """``NAME://HOST:PORT,...`` -> endpoints, by Kafka's ``listenerListToEndpoints``.

    ``require_distinct_ports`` is True for ``listeners`` and False for ``advertised.listeners``
    (several advertised listeners may name one port, e.g. behind a load balancer)."""
    endpoints = []
    for entry in _csv(value):
        m = _ENDPOINT.fullmatch(entry)
        if not m:
            raise InvalidConfigError(f"Error creating broker listeners from '{value}': "
                                     f"Unable to parse {entry} to a broker endpoint")
        name, host, port = m.group(1).upper(), m.group(2) or None, int(m.group(3))
        if not 0 <= port <= 65535:
            raise InvalidConfigError(f"Error creating broker listeners from '{value}': "
                                     f"port {port} of {entry} is outside 0..65535")
        if name not in protocol_map:
            raise InvalidConfigError(f"Error creating broker listeners from '{value}': "
                                     f"No security protocol defined for listener {name}")
        endpoints.append(Endpoint(name, protocol_map[name], host, port))
    if len({e.name for e in endpoints}) != len(endpoints):
        raise InvalidConfigError(f"Each listener must have a different name, {key}: {value}")
    by_port: dict[int, list[Endpoint]] = {}
    for e in endpoints:
        if e.port != 0:
            by_port.setdefault(e.port, []).append(e)
    for port, same in by_port.items():
        if len(same) < 2:
            continue
        with_ip = [e for e in same if _is_ip(e.host)]
        without_ip = [e for e in same if not _is_ip(e.host)]
        if require_distinct_ports and len(without_ip) > 1:
            raise InvalidConfigError(f"Each listener must have a different port, {key}: {value}")
        if not with_ip:
            continue
        if len(with_ip) != 2:
            raise InvalidConfigError("Each listener must have a different port unless exactly one listener "
                                     f"has an IPv4 address and the other IPv6 address, {key}: {value}, "
                                     f"port: {port}")
        if require_distinct_ports and (without_ip or {_is_ip(e.host) for e in with_ip} != {4, 6}):
            raise InvalidConfigError("If you have two listeners on the same port then one needs to be IPv4 "
                                     f"and the other IPv6, {key}: {value}, port: {port}")
    return endpoints


@dataclass(frozen=True)
class ListenerSettings:
    """A broker's listeners as Kafka's keys describe them (:meth:`from_configs`).

    ``listeners`` are what the broker binds (controller listeners included), ``advertised`` what
    clients are told per broker listener, ``protocol_map`` the effective
    ``listener.security.protocol.map``; ``inter_broker_listener`` and ``inter_broker_protocol``
    what brokers use between each other."""

    listeners: tuple[Endpoint, ...]
    advertised: tuple[Endpoint, ...]
    protocol_map: Mapping[str, str]
    inter_broker_listener: str
    inter_broker_protocol: str
    controller_listener_names: tuple[str, ...] = ()

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any]) -> ListenerSettings:
        """Read and validate the listener keys of a broker configuration (raw
        ``server.properties`` strings or :attr:`engine.config.EngineConfig.values`)."""
        listeners_text = _text(configs, "listeners") or DEFAULT_LISTENERS
        controllers = tuple(n.strip() for n in (_text(configs, "controller.listener.names") or "").split(",")
                            if n.strip())
        map_text = _text(configs, "listener.security.protocol.map")
        protocol_map = parse_protocol_map(map_text)
        if map_text is None and controllers:
            # Kafka (KRaft): controller listeners default to PLAINTEXT unless SSL/SASL is in use
            names = [n.upper() for n in controllers]
            for entry in _csv(listeners_text):
                m = _ENDPOINT.fullmatch(entry)
                if m:
                    names.append(m.group(1).upper())
            if not any(n in ("SSL", "SASL_PLAINTEXT", "SASL_SSL") for n in names):
                for n in controllers:
                    protocol_map.setdefault(n.upper(), "PLAINTEXT")
        listeners = parse_listeners(listeners_text, protocol_map)
        adv_text = _text(configs, "advertised.listeners")
        advertised = (parse_listeners(adv_text, protocol_map, key="advertised.listeners",
                                      require_distinct_ports=False) if adv_text is not None else listeners)
        broker_adv = [e for e in advertised if e.name not in controllers]

        ibl = _text(configs, "inter.broker.listener.name")
        ibp = _text(configs, "security.inter.broker.protocol")
        if ibl is not None and ibp is not None:
            raise InvalidConfigError("Only one of inter.broker.listener.name and "
                                     "security.inter.broker.protocol should be set.")
        if ibl is not None:
            inter_name = ibl.strip().upper()
            if inter_name not in protocol_map:
                raise InvalidConfigError(f"Listener with name {inter_name} defined in inter.broker.listener.name "
                                         "not found in listener.security.protocol.map.")
            inter_proto = protocol_map[inter_name]
        else:
            inter_proto = _protocol(ibp or DEFAULT_INTER_BROKER_PROTOCOL, "security.inter.broker.protocol")
            inter_name = inter_proto

        adv_names = [e.name for e in broker_adv]
        if not adv_names:
            raise InvalidConfigError("There must be at least one broker advertised listener.")
        if inter_name not in adv_names:
            raise InvalidConfigError("inter.broker.listener.name must be a listener name defined in "
                                     "advertised.listeners. The valid options based on currently configured "
                                     f"listeners are {','.join(adv_names)}")
        names = [e.name for e in listeners]
        if not set(adv_names) <= set(names):
            raise InvalidConfigError("advertised.listeners listener names must be equal to or a subset of the "
                                     f"ones defined in listeners. Found {','.join(adv_names)}. The valid options "
                                     f"based on the current configuration are {','.join(names)}")
        if any(e.host == "0.0.0.0" for e in advertised):
            raise InvalidConfigError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                                     "Use a routable IP address.")
        return cls(tuple(listeners), tuple(broker_adv), dict(protocol_map), inter_name, inter_proto,
                   controllers)

    @property
    def broker_listeners(self) -> tuple[Endpoint, ...]:
        """The listeners clients and brokers connect to (controller listeners left out)."""
        return tuple(e for e in self.listeners if e.name not in self.controller_listener_names)

    def listener(self, name: str) -> Endpoint:
        """The bound listener called ``name`` (any case); KeyError if there is none."""
        wanted = name.upper()
        for e in self.listeners:
            if e.name == wanted:
                return e
        raise KeyError(f"no listener named {wanted}")

    def advertised_for(self, name: str) -> Endpoint:
        """What clients connecting to listener ``name`` are told: its ``advertised.listeners``
        entry, or the listener itself where that key does not name it."""
        wanted = name.upper()
        for e in self.advertised:
            if e.name == wanted:
                return e
        return self.listener(wanted)


def listener_prefix(listener: str) -> str:
    """``listener.name.<listener in lower case>.``"""
    return f"listener.name.{listener.lower()}."


_UNSET = object()


def listener_config(configs: Mapping[str, Any], listener: str, key: str, default: Any = None) -> Any:
    """The value of ``key`` for ``listener``: ``listener.name.<l>.<key>`` where set, else ``key``,
    else ``default`` (Kafka's prefix override)."""
    value = configs.get(listener_prefix(listener) + key, _UNSET)
    if value is _UNSET:
        value = configs.get(key, default)
    return value


def listener_configs(configs: Mapping[str, Any], listener: str) -> dict[str, Any]:
    """All settings as ``listener`` sees them (Kafka's ``valuesWithPrefixOverride``): every key
    that is not a ``listener.name.`` key, then the listener's own ``listener.name.<l>.<key>``
    keys with the prefix stripped, overriding.  Other listeners' keys are left out."""
    prefix = listener_prefix(listener)
    out = {k: v for k, v in configs.items() if not k.startswith("listener.name.")}
    for k, v in configs.items():
        if k.startswith(prefix) and len(k) > len(prefix):
            out[k[len(prefix):]] = v
    return out


def listener_sasl_jaas_config(configs: Mapping[str, Any], listener: str, mechanism: str) -> str | None:
    """``listener.name.<l>.<mechanism in lower case>.sasl.jaas.config``, None where unset."""
    value = configs.get(listener_jaas_key(listener, mechanism))
    return None if value is None else str(value)
