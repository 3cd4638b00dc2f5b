"""The per-listener SASL mechanism registry: Kafka's keys in, an authenticator per exchange out."""

from __future__ import annotations

import pytest
from aiokafka.conn import ScramAuthenticator
from kafka.net.sasl.plain import SaslMechanismPlain

from engine.errors import InvalidConfigError, JaasConfigError, UnsupportedSaslMechanismError
from engine.security.credentials import ScramCredentialStore
from engine.security.plain import PlainServer
from engine.security.sasl import SaslServerFactory
from engine.security.scram import ScramServer

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="a" user_admin="a" user_alice="alice-pw";')


def _scram_login(auth, user, password, mech):
    client = ScramAuthenticator(loop=None, sasl_plain_password=password,
                                sasl_plain_username=user, sasl_mechanism=mech)
    gen = client._authenticator
    token, _ = next(gen)
    token, _ = gen.send(auth.evaluate(token))
    final = auth.evaluate(token)
    with pytest.raises(StopIteration):
        gen.send(final)


def test_from_configs_with_listener_keys(tmp_path):
    store = ScramCredentialStore(str(tmp_path))
    store.set_password("alice", "SCRAM-SHA-512", "scram-pw")
    configs = {
        "sasl.enabled.mechanisms": "GSSAPI",          # overridden for the listener
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN, SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
    }
    factory = SaslServerFactory.from_configs(configs, "SASL_SSL", scram_credentials=store)
    assert factory.enabled_mechanisms == ["PLAIN", "SCRAM-SHA-512"]

    plain = factory.create("PLAIN")
    assert isinstance(plain, PlainServer)
    plain.evaluate(SaslMechanismPlain(sasl_plain_username="alice",
                                      sasl_plain_password="alice-pw").auth_bytes())
    assert plain.principal == "User:alice"

    scram = factory.create("SCRAM-SHA-512")
    assert isinstance(scram, ScramServer)
    _scram_login(scram, "alice", "scram-pw", "SCRAM-SHA-512")
    assert scram.complete and scram.principal == "User:alice"


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "GSSAPI", "OAUTHBEARER", "plain", ""])
def test_unsupported_mechanism(mech):
    factory = SaslServerFactory(["PLAIN", "SCRAM-SHA-512"], plain_users={},
                                scram_credentials=lambda u, m: None)
    with pytest.raises(UnsupportedSaslMechanismError) as e:
        factory.create(mech)
    assert e.value.code == 33 and factory.enabled_mechanisms == ["PLAIN", "SCRAM-SHA-512"]


def test_each_exchange_is_fresh_and_unknown_users_are_consistent():
    factory = SaslServerFactory("SCRAM-SHA-256", scram_credentials=lambda u, m: None)
    a, b = factory.create("SCRAM-SHA-256"), factory.create("SCRAM-SHA-256")
    assert a is not b
    salt = [x.evaluate(b"n,,n=ghost,r=n1").split(b",")[1] for x in (a, b)]
    assert salt[0] == salt[1]            # one factory, one fake salt per unknown user


@pytest.mark.parametrize("configs,match", [
    ({}, "GSSAPI"),                                               # Kafka's default, not served
    ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
      "listener.name.l.plain.sasl.jaas.config": PLAIN_JAAS}, "OAUTHBEARER"),
    ({"sasl.enabled.mechanisms": " , "}, "empty"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "listener.name.l.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": PLAIN_JAAS},   # not for brokers
     "listener.name.l.plain.sasl.jaas.config"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256"}, "credential store"),
])
def test_bad_configs(configs, match):
    with pytest.raises(InvalidConfigError, match=match):
        SaslServerFactory.from_configs(configs, "L")


def test_plain_jaas_must_be_the_plain_module():
    configs = {"sasl.enabled.mechanisms": ["PLAIN"],
               "listener.name.l.plain.sasl.jaas.config":
                   'org.apache.kafka.common.security.scram.ScramLoginModule required;'}
    with pytest.raises(JaasConfigError, match="PlainLoginModule"):
        SaslServerFactory.from_configs(configs, "L")
