"""``/brokers/ids/<id>`` in Kafka's layout (engine/cluster/registration.py): what a broker writes,
and every version Kafka's ``BrokerIdZNode.decode`` reads (no ZooKeeper needed)."""

from __future__ import annotations

import json

import pytest

from engine.cluster.registration import BrokerRegistration, RegistrationError


def test_written_as_kafka_version_5():
    reg = BrokerRegistration.of([("client", "PLAINTEXT", "b1.example.com", 9092),
                                 ("INTERNAL", "SASL_SSL", "10.0.0.1", 9093)], rack="r1")
    d = json.loads(reg.to_json())
    assert d["version"] == 5 and d["jmx_port"] == -1 and int(d["timestamp"]) > 0
    assert d["endpoints"] == ["CLIENT://b1.example.com:9092", "INTERNAL://10.0.0.1:9093"]
    assert d["listener_security_protocol_map"] == {"CLIENT": "PLAINTEXT", "INTERNAL": "SASL_SSL"}
    assert (d["host"], d["port"], d["rack"]) == ("b1.example.com", 9092, "r1")    # the PLAINTEXT one
    assert BrokerRegistration.from_json(reg.to_json()) == reg


def test_no_plaintext_listener_registers_null_host():
    d = json.loads(BrokerRegistration.of([("SSL", "SSL", "h", 9093)]).to_json())
    assert (d["host"], d["port"]) == (None, -1) and "rack" not in d


def test_older_versions_are_read():
    v1 = BrokerRegistration.from_json(b'{"version":1,"host":"h","port":9092,"jmx_port":-1}')
    assert v1.endpoint("plaintext") == ("h", 9092) and v1.protocols == {"PLAINTEXT": "PLAINTEXT"}
    v3 = BrokerRegistration.from_json(b'{"version":3,"host":"h","port":9092,"jmx_port":-1,'
                                      b'"endpoints":["PLAINTEXT://h:9092","SSL://[::1]:9093"],"rack":"r"}')
    assert v3.endpoint("SSL") == ("::1", 9093) and v3.protocols["SSL"] == "SSL" and v3.rack == "r"
    assert v3.endpoint("INTERNAL") is None
    with pytest.raises(RegistrationError):
        BrokerRegistration.from_json(b'{"version":0,"host":"h","port":1}')
    with pytest.raises(RegistrationError):
        BrokerRegistration.from_json(b'{"version":5,"endpoints":["nonsense"]}')
