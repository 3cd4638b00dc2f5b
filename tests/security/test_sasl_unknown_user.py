"""A SCRAM login of a user this broker does not know (yet) is answered, never dropped: on SASL_SSL
and SASL_PLAINTEXT, raw and with confluent-kafka (issue 19).

In cluster mode a user created through one broker reaches the others through their ZooKeeper
watch (engine/cluster/scram_zk.py); until then a login there is the login of an unknown user.
Kafka 4.0 answers that SASL_AUTHENTICATION_FAILED (58) with "Authentication failed during
authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512" after
``connection.failed.authentication.delay.ms``, then closes (at the first token; we answer a fake
salt and fail at the proof, docs/security.md).  Checked here: the answer's code, Kafka's message,
the delay, a clean close after it (TLS close_notify), a user that arrives between the two tokens
(the exchange already under way fails the same way, the next one logs in), and what a
confluent-kafka client reports meanwhile (an authentication error, not a transport failure).

(librdkafka's "SASL authentication error: SaslAuthenticateRequest failed: Local: Broker transport
failure (after 0ms in state DOWN)" is its own: a consumer closed while its group-coordinator
connection is still in SASL drops that connection and then fails the pending request; it logs the
same against Kafka 4.0 -- docs/security.md.)"""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from engine.errors import ErrorCode
from engine.protocol import messages as m
from engine.security.scram_client import ScramClient
from engine.server.listener import listeners_from_configs
from tests.security.certs import make_pki
from tests.security.test_broker_sasl import _read_frame, _request, _response

MECH = "SCRAM-SHA-512"
DELAY_MS = 200
KAFKA_MESSAGE = ("Authentication failed during authentication due to invalid credentials with SASL "
                 f"mechanism {MECH}")


class ScramBroker:
    """One in-process broker with a SASL_PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-512 only)
    next to the PLAINTEXT one between brokers."""

    def __init__(self, directory: str):
        import engine
        from engine.security.credentials import ScramCredentialStore
        from engine.server import BackgroundBroker
        self.pki = make_pki(directory)
        cfg = {"ssl.keystore.type": "PEM", "ssl.keystore.location": self.pki.path("server.pem"),
               "ssl.truststore.type": "PEM", "ssl.truststore.location": self.pki.path("ca.pem"),
               "sasl.enabled.mechanisms": MECH,
               "connection.failed.authentication.delay.ms": str(DELAY_MS)}
        data = f"{directory}/data"
        self.engine = engine.open(data, cfg, background=False)
        self.store = ScramCredentialStore(data)
        listeners, _ = listeners_from_configs(
            {**cfg, "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"},
            scram_credentials=self.store)
        self._bg = BackgroundBroker(self.engine, listeners=listeners, scram_credentials=self.store)
        self.ports = {"SASL_PLAINTEXT": listeners[1].port, "SASL_SSL": listeners[2].port}

    def connect(self, protocol: str) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.ports[protocol]), timeout=10)
        if protocol == "SASL_SSL":
            ctx = ssl.create_default_context(cafile=self.pki.path("ca.pem"))
            s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
        return s

    def stop(self) -> None:
        self._bg.stop()
        self.engine.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = ScramBroker(str(tmp_path_factory.mktemp("sasl-unknown-user")))
    yield b
    b.stop()


def _authenticate(s, token: bytes):
    body = m.encode(m.ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token}, response=False)
    s.sendall(_request(m.ApiKey.SASL_AUTHENTICATE, 2, body, corr=2))
    frame = _read_frame(s)
    assert frame is not None, "the broker closed the connection instead of answering SaslAuthenticate"
    return _response(m.ApiKey.SASL_AUTHENTICATE, 2, frame)


def _handshake(s) -> None:
    body = m.encode(m.ApiKey.SASL_HANDSHAKE, 1, {"mechanism": MECH}, response=False)
    s.sendall(_request(m.ApiKey.SASL_HANDSHAKE, 1, body))
    assert _response(m.ApiKey.SASL_HANDSHAKE, 1, _read_frame(s)).error_code == ErrorCode.NONE


def _closed_cleanly(s) -> bool:
    """End of stream after the answer: a FIN (TLS: close_notify first), not a reset."""
    s.settimeout(5)
    return s.recv(1) == b""


def _refused_at_the_proof(s, client: ScramClient, before_final=None) -> None:
    _handshake(s)
    first = _authenticate(s, client.first_message())
    assert first.error_code == ErrorCode.NONE          # a fake salt, as for a real user
    assert b",i=4096" in bytes(first.auth_bytes)
    if before_final is not None:
        before_final()
    final = client.final_message(bytes(first.auth_bytes))
    t0 = time.monotonic()
    resp = _authenticate(s, final)
    waited = time.monotonic() - t0
    assert (resp.error_code, resp.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, KAFKA_MESSAGE)
    assert waited >= DELAY_MS / 1000 * 0.9, waited     # connection.failed.authentication.delay.ms
    assert _closed_cleanly(s)


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_unknown_user_is_answered_after_the_delay_then_closed(broker, protocol):
    with broker.connect(protocol) as s:
        _refused_at_the_proof(s, ScramClient(MECH, "nobody", "whatever"))


def test_user_arriving_mid_exchange_is_refused_then_logs_in(broker):
    """The credential reaches this broker (as a ZooKeeper watch brings it) between the client's two
    tokens: that exchange, begun with the fake salt, fails with the same answer; the next logs in."""
    user, password = "late-arrival", "late-secret"
    with broker.connect("SASL_SSL") as s:
        _refused_at_the_proof(s, ScramClient(MECH, user, password),
                              before_final=lambda: broker.store.set_password(user, MECH, password))
    with broker.connect("SASL_SSL") as s:
        _handshake(s)
        client = ScramClient(MECH, user, password)
        first = _authenticate(s, client.first_message())
        final = _authenticate(s, client.final_message(bytes(first.auth_bytes)))
        assert final.error_code == ErrorCode.NONE, final.error_message
        client.verify(bytes(final.auth_bytes))
        assert client.complete


def test_confluent_kafka_sees_an_authentication_error_until_the_user_exists(broker):
    """What librdkafka reports while the user is not on this broker: _AUTHENTICATION with Kafka's
    message -- never a transport failure; once the credential is there the same client gets in."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient
    user, password = "not-yet", "not-yet-secret"
    errors: list = []
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.ports['SASL_SSL']}",
                         "security.protocol": "SASL_SSL", "ssl.ca.location": broker.pki.path("ca.pem"),
                         "sasl.mechanism": MECH, "sasl.username": user, "sasl.password": password,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200,
                         "error_cb": errors.append})
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        admin.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert KAFKA_MESSAGE in errors[0].str(), errors[0].str()
    # (with its one broker refusing, librdkafka adds its own _ALL_BROKERS_DOWN)
    allowed = {KafkaError._AUTHENTICATION, KafkaError._ALL_BROKERS_DOWN}
    broker.store.set_password(user, MECH, password)
    md = admin.list_topics(timeout=15)
    assert md.brokers, md
    assert {e.code() for e in errors} <= allowed, errors      # no _TRANSPORT: nothing dropped
