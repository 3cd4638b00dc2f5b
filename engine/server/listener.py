"""The broker's listeners from Kafka's keys: one bound socket and accept loop each.

::

    listeners=PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT  (Kafka's default)
    advertised.listeners=PLAINTEXT://broker1:9092,SASL_PLAINTEXT://broker1:9093

The keys are read and validated by engine/security/listeners.py (Kafka's rules and messages);
this module makes the broker's :class:`Listener` objects from them:

- each broker listener (controller listeners left out) is bound and served; a connection is
  answered in Metadata / FindCoordinator with the ``advertised.listeners`` address of the
  listener it came in on (the listener's own where unset; with an empty host, the local address
  the client reached);
- SASL_PLAINTEXT listeners serve the mechanisms of ``sasl.enabled.mechanisms`` (or
  ``listener.name.<name>.sasl.enabled.mechanisms``) through engine.security.sasl's
  SaslServerFactory; SCRAM checks against the broker's credential store;
- SSL and SASL_SSL listeners take their TLS context from the ``ssl.*`` keys (and
  ``listener.name.<name>.ssl.*`` overrides) through engine/security/tls.py; an SSL listener's
  clients are named by their certificate (``ssl.client.auth``, ``ssl.principal.mapping.rules``:
  engine/security/ssl_principal.py),
  a SASL_SSL listener's by SASL.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidConfigError
from ..security.listeners import ListenerSettings, listener_config
from ..security.sasl import SaslServerFactory
from ..security.ssl_principal import SslPrincipalMapper
from ..security.tls import server_context

__all__ = ["SERVED_PROTOCOLS", "Listener", "listeners_from_configs"]

SERVED_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")


@dataclass(eq=False)
class Listener:
    """One listener: its name, security protocol, bind address and advertised address."""

    name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    host: str = "127.0.0.1"
    port: int = 9092                        # the bound port once the broker started
    advertised_host: str | None = None
    advertised_port: int | None = None
    sasl: SaslServerFactory | None = None   # SASL_* listeners: the mechanisms served
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)   # SSL, SASL_SSL
    principal_mapper: SslPrincipalMapper | None = field(default=None, repr=False)   # SSL
    reauth_ms: dict[str, int] = field(default_factory=dict)   # mechanism -> connections.max.reauth.ms
    sock: socket.socket | None = field(default=None, repr=False)
    task: Any = field(default=None, repr=False)     # the accept loop

    def address(self) -> str:
        """HOST:PORT as advertised (the bound one where nothing is advertised)."""
        return f"{self.advertised_host or self.host}:{self.advertised_port or self.port}"


def _reauth_ms(configs: Mapping[str, Any], listener: str, sasl) -> dict[str, int]:
    """connections.max.reauth.ms per enabled mechanism: Kafka's
    ``listener.name.<l>.<mechanism>.connections.max.reauth.ms``, else the listener's, else the
    broker's (0: sessions do not expire)."""
    if sasl is None:
        return {}
    base = listener_config(configs, listener, "connections.max.reauth.ms", 0) or 0
    out = {}
    for mech in sasl.enabled_mechanisms:
        raw = configs.get(f"listener.name.{listener.lower()}.{mech.lower()}.connections.max.reauth.ms", base)
        try:
            out[mech] = max(0, int(raw or 0))
        except (TypeError, ValueError):
            raise InvalidConfigError(f"connections.max.reauth.ms must be a number, not {raw!r}") from None
    return out


def listeners_from_configs(configs: Mapping[str, Any], *,
                           scram_credentials=None) -> tuple[list[Listener], ListenerSettings]:
    """The broker's listeners from Kafka's keys (see the module doc), and the validated settings
    (``inter_broker_listener`` etc.).  InvalidConfigError for what cannot be served."""
    settings = ListenerSettings.from_configs(configs)
    out = []
    for ep in settings.broker_listeners:
        if ep.security_protocol not in SERVED_PROTOCOLS:
            raise InvalidConfigError(f"listener {ep.name}: {ep.security_protocol} listeners are not "
                                     f"served yet (served: {', '.join(SERVED_PROTOCOLS)})")
        sasl = None
        if ep.is_sasl:
            sasl = SaslServerFactory.from_configs(configs, ep.name, scram_credentials=scram_credentials)
        context = mapper = None
        if ep.is_tls:       # engine/security/tls.py: ssl.* keys, listener.name.<l>.ssl.* overrides
            context = server_context(configs, ep.name)
            if not ep.is_sasl:
                mapper = SslPrincipalMapper.from_configs(configs, ep.name)
        adv = settings.advertised_for(ep.name)
        out.append(Listener(ep.name, ep.security_protocol, ep.bind_host, ep.port,
                            adv.host or None, adv.port or None, sasl, context, mapper,
                            reauth_ms=_reauth_ms(configs, ep.name, sasl)))
    return out, settings
