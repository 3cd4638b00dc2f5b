"""SASL PLAIN server exchange, with kafka-python's and aiokafka's PLAIN clients as the peer."""

from __future__ import annotations

import pytest
from aiokafka.conn import SaslPlainAuthenticator
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.net.sasl.plain import SaslMechanismPlain

from engine.errors import IllegalSaslStateError, SaslAuthenticationError
from engine.security.jaas import parse_jaas_config, plain_users
from engine.security.plain import PlainServer

USERS = plain_users(parse_jaas_config(
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" '
    'user_b\u00f6b="p\u00e4ss";')[0])
GENERIC = ("Authentication failed during authentication due to invalid credentials with "
           "SASL mechanism PLAIN")


def _kafka_python_token(user, password):
    return SaslMechanismPlain(sasl_plain_username=user, sasl_plain_password=password).auth_bytes()


def _aiokafka_token(user, password):
    auth = SaslPlainAuthenticator(loop=None, sasl_plain_username=user, sasl_plain_password=password)
    token, expects_answer = next(auth._authenticator)
    assert expects_answer
    return token


@pytest.mark.parametrize("token_of", [_kafka_python_token, _aiokafka_token])
@pytest.mark.parametrize("user,password", [("alice", "alice-secret"), ("b\u00f6b", "p\u00e4ss")])
def test_real_clients_authenticate(token_of, user, password):
    srv = PlainServer(USERS)
    assert srv.evaluate(token_of(user, password)) == b""
    assert srv.complete and srv.authorization_id == user and srv.principal == f"User:{user}"
    client = SaslMechanismPlain(sasl_plain_username=user, sasl_plain_password=password)
    client.receive(b"")                    # the empty answer is what the client takes as success
    assert client.is_authenticated()


@pytest.mark.parametrize("user,password", [("alice", "wrong"), ("alice", "alice-secre"),
                                           ("alice", "alice-secret "), ("mallory", "alice-secret"),
                                           ("Alice", "alice-secret")])
def test_bad_credentials_get_one_message(user, password):
    srv = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError) as e:
        srv.evaluate(_kafka_python_token(user, password))
    assert str(e.value) == "Authentication failed: Invalid username or password"
    assert e.value.code == 58 and not srv.complete


def test_authzid_empty_or_the_user():
    assert PlainServer(USERS).evaluate(b"\x00alice\x00alice-secret") == b""
    srv = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        srv.evaluate(b"admin\x00alice\x00alice-secret")


@pytest.mark.parametrize("token", [b"", b"alice", b"alice\x00alice-secret",
                                   b"\x00alice\x00alice-secret\x00x", b"\x00\x00alice-secret",
                                   b"\x00alice\x00", b"\xff\x00alice\x00alice-secret"])
def test_malformed_tokens(token):
    srv = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError) as e:
        srv.evaluate(token)
    assert str(e.value) == GENERIC and srv.failure


def test_one_token_only():
    srv = PlainServer(USERS)
    srv.evaluate(b"\x00alice\x00alice-secret")
    with pytest.raises(IllegalSaslStateError):
        srv.evaluate(b"\x00alice\x00alice-secret")
    failed = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError):
        failed.evaluate(b"\x00alice\x00nope")
    with pytest.raises(IllegalSaslStateError):    # no second try on the same exchange
        failed.evaluate(b"\x00alice\x00alice-secret")
    with pytest.raises(IllegalSaslStateError):
        _ = failed.principal


@settings(max_examples=300, deadline=None)
@given(token=st.binary(max_size=100))
def test_any_bytes_fail_cleanly(token):
    srv = PlainServer(USERS)
    try:
        srv.evaluate(token)
    except SaslAuthenticationError:
        assert not srv.complete
    else:
        assert token.split(b"\x00")[1:] in ([b"admin", b"admin-secret"], [b"alice", b"alice-secret"],
                                            ["b\u00f6b".encode(), "p\u00e4ss".encode()])
