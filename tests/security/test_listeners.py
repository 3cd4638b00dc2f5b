"""engine.security.listeners: Kafka's listener keys parsed and validated by Kafka's rules
(EndpointUtils.listenerListToEndpoints, KafkaConfig's inter-broker and advertised checks), and the
per-listener ``listener.name.<l>.`` overrides."""

from __future__ import annotations

import pytest

from engine.errors import InvalidConfigError
from engine.security.listeners import (
    DEFAULT_PROTOCOL_MAP,
    Endpoint,
    ListenerSettings,
    listener_config,
    listener_configs,
    listener_sasl_jaas_config,
    parse_listeners,
    parse_protocol_map,
)

DEFAULT = parse_protocol_map(None)


def test_default_protocol_map_is_kafkas():
    assert DEFAULT == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
                       "SASL_SSL": "SASL_SSL"}
    assert parse_protocol_map("") == DEFAULT == parse_protocol_map(DEFAULT_PROTOCOL_MAP)


def test_protocol_map_names_are_normalised_and_protocols_any_case():
    assert parse_protocol_map(" internal : sasl_ssl , External:SSL ") == {"INTERNAL": "SASL_SSL", "EXTERNAL": "SSL"}


@pytest.mark.parametrize("value,message", [
    ("INTERNAL:TLS", "Invalid security protocol `TLS` defined in listener.security.protocol.map"),
    ("INTERNAL", "Error parsing configuration property 'listener.security.protocol.map'"),
    ("A:SSL:SSL", "Error parsing configuration property 'listener.security.protocol.map'"),
])
def test_protocol_map_errors(value, message):
    with pytest.raises(InvalidConfigError, match=message.replace("(", r"\(")):
        parse_protocol_map(value)


def test_listeners_hosts_ports_and_names():
    eps = parse_listeners("plaintext://:9092, SSL://host.example:9093,SASL_SSL://[::1]:9094,"
                          "SASL_PLAINTEXT://10.1.2.3:0", DEFAULT)
    assert eps == [Endpoint("PLAINTEXT", "PLAINTEXT", None, 9092), Endpoint("SSL", "SSL", "host.example", 9093),
                   Endpoint("SASL_SSL", "SASL_SSL", "::1", 9094),
                   Endpoint("SASL_PLAINTEXT", "SASL_PLAINTEXT", "10.1.2.3", 0)]
    assert [str(e) for e in eps] == ["PLAINTEXT://:9092", "SSL://host.example:9093", "SASL_SSL://[::1]:9094",
                                     "SASL_PLAINTEXT://10.1.2.3:0"]
    assert eps[0].bind_host == "" and eps[2].is_tls and eps[2].is_sasl and not eps[0].is_tls
    assert parse_listeners("", DEFAULT) == []


def test_port_zero_may_repeat_and_ipv4_ipv6_pair_may_share_a_port():
    assert len(parse_listeners("PLAINTEXT://:0,SSL://:0", DEFAULT)) == 2
    assert len(parse_listeners("PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092", DEFAULT)) == 2


@pytest.mark.parametrize("value,message", [
    ("PLAINTEXT://localhost:9091,PLAINTEXT://localhost:9092", "Each listener must have a different name"),
    ("plaintext://localhost:9091,PLAINTEXT://localhost:9092", "Each listener must have a different name"),
    ("PLAINTEXT://localhost:9091,SSL://localhost:9091", "Each listener must have a different port, listeners"),
    ("PLAINTEXT://127.0.0.1:9091,SSL://127.0.0.2:9091", "If you have two listeners on the same port then one "
                                                        "needs to be IPv4 and the other IPv6"),
    ("PLAINTEXT://127.0.0.1:9091,SSL://[::1]:9091,SASL_SSL://[::2]:9091",
     "Each listener must have a different port unless exactly one listener has an IPv4 address"),
    ("INTERNAL://:9092", "No security protocol defined for listener INTERNAL"),
    ("PLAINTEXT://localhost", "Unable to parse PLAINTEXT://localhost to a broker endpoint"),
    ("PLAINTEXT:/localhost:9092", "Unable to parse"),
    ("PLAINTEXT://local host:9092", "Unable to parse"),
    ("PLAINTEXT://:70000", "port 70000 of PLAINTEXT://:70000 is outside 0..65535"),
])
def test_listener_errors(value, message):
    with pytest.raises(InvalidConfigError, match=message.replace("(", r"\(")):
        parse_listeners(value, DEFAULT)


def test_advertised_listeners_may_share_ports_but_not_names():
    pm = parse_protocol_map("HOST:SASL_SSL,LB:SASL_SSL")
    s = ListenerSettings.from_configs({
        "listener.security.protocol.map": "HOST:SASL_SSL,LB:SASL_SSL", "inter.broker.listener.name": "HOST",
        "listeners": "HOST://localhost:9091,LB://localhost:9092",
        "advertised.listeners": "HOST://localhost:9091,LB://localhost:9091"})
    assert [e.port for e in s.advertised] == [9091, 9091] and s.inter_broker_protocol == "SASL_SSL"
    assert pm == s.protocol_map
    with pytest.raises(InvalidConfigError, match="Each listener must have a different name"):
        ListenerSettings.from_configs({
            "listener.security.protocol.map": "HOST:SASL_SSL,LB:SASL_SSL", "inter.broker.listener.name": "HOST",
            "listeners": "HOST://localhost:9091,LB://localhost:9092",
            "advertised.listeners": "HOST://localhost:9091,HOST://localhost:9091"})


def test_settings_defaults():
    s = ListenerSettings.from_configs({})
    assert s.listeners == (Endpoint("PLAINTEXT", "PLAINTEXT", None, 9092),) == s.advertised
    assert (s.inter_broker_listener, s.inter_broker_protocol) == ("PLAINTEXT", "PLAINTEXT")
    # this project's configuration table gives "" to unset keys: the same as unset
    s2 = ListenerSettings.from_configs({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "",
                                        "listener.security.protocol.map": "", "inter.broker.listener.name": ""})
    assert s2.advertised_for("plaintext") == Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)


def test_settings_named_listeners_and_inter_broker_listener():
    s = ListenerSettings.from_configs({
        "listeners": "INTERNAL://10.0.0.5:9092,EXTERNAL://:9093",
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,EXTERNAL:SSL",
        "advertised.listeners": "INTERNAL://broker1.internal:9092,EXTERNAL://broker1.example.com:9093",
        "inter.broker.listener.name": "internal"})
    assert (s.inter_broker_listener, s.inter_broker_protocol) == ("INTERNAL", "SASL_SSL")
    assert s.listener("external").host is None
    assert s.advertised_for("EXTERNAL").host == "broker1.example.com"
    with pytest.raises(KeyError):
        s.listener("nope")


def test_security_inter_broker_protocol_names_the_listener_called_after_it():
    s = ListenerSettings.from_configs({"listeners": "PLAINTEXT://:9092,SSL://:9093",
                                       "security.inter.broker.protocol": "ssl"})
    assert (s.inter_broker_listener, s.inter_broker_protocol) == ("SSL", "SSL")
    with pytest.raises(InvalidConfigError, match="must be a listener name defined in advertised.listeners"):
        ListenerSettings.from_configs({"listeners": "INTERNAL://:9092,EXTERNAL://:9093",
                                       "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SSL",
                                       "security.inter.broker.protocol": "SSL"})


def test_kraft_controller_listener_defaults_to_plaintext():
    s = ListenerSettings.from_configs({"listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
                                       "controller.listener.names": "CONTROLLER",
                                       "advertised.listeners": "PLAINTEXT://localhost:9092"})
    assert s.protocol_map["CONTROLLER"] == "PLAINTEXT"
    assert [e.name for e in s.broker_listeners] == ["PLAINTEXT"] and len(s.listeners) == 2
    # with SSL in use the controller listener needs its own mapping, as in Kafka
    with pytest.raises(InvalidConfigError, match="No security protocol defined for listener CONTROLLER"):
        ListenerSettings.from_configs({"listeners": "SSL://:9092,CONTROLLER://:9093",
                                       "controller.listener.names": "CONTROLLER",
                                       "inter.broker.listener.name": "SSL"})


@pytest.mark.parametrize("configs,message", [
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
     "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
    ({"inter.broker.listener.name": "INTERNAL"},
     "Listener with name INTERNAL defined in inter.broker.listener.name not found in listener.security.protocol.map."),
    ({"security.inter.broker.protocol": "TLS"},
     "Invalid security protocol `TLS` defined in security.inter.broker.protocol"),
    ({"listeners": "SSL://:9093"},     # the default inter-broker protocol PLAINTEXT has no listener
     "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options "
     "based on currently configured listeners are SSL"),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://h:9092,SSL://h:9093"},
     "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. "
     "Found PLAINTEXT,SSL. The valid options based on the current configuration are PLAINTEXT"),
    ({"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
     "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0."),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "Each listener must have a different name"),
    ({"listeners": "INTERNAL://:9092", "listener.security.protocol.map": "EXTERNAL:SSL"},
     "No security protocol defined for listener INTERNAL"),
])
def test_settings_errors(configs, message):
    with pytest.raises(InvalidConfigError) as e:
        ListenerSettings.from_configs(configs)
    assert message in str(e.value)


def test_per_listener_overrides():
    configs = {"ssl.client.auth": "none", "ssl.keystore.location": "/etc/k.pem",
               "listener.name.external.ssl.client.auth": "required",
               "listener.name.internal.ssl.keystore.location": "/etc/internal.pem",
               "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "x required;"}
    assert listener_config(configs, "EXTERNAL", "ssl.client.auth") == "required"
    assert listener_config(configs, "INTERNAL", "ssl.client.auth") == "none"
    assert listener_config(configs, "INTERNAL", "ssl.cipher.suites", "dflt") == "dflt"
    ext = listener_configs(configs, "External")
    assert ext == {"ssl.client.auth": "required", "ssl.keystore.location": "/etc/k.pem"}
    assert listener_configs(configs, "INTERNAL")["ssl.keystore.location"] == "/etc/internal.pem"
    assert listener_sasl_jaas_config(configs, "SASL_SSL", "SCRAM-SHA-256") == "x required;"
    assert listener_sasl_jaas_config(configs, "SASL_SSL", "PLAIN") is None
