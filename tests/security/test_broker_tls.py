"""TLS listeners on the broker (engine/server/tls_channel.py): SSL with client certificates
(mTLS, the principal from the certificate) and SASL_SSL with SCRAM, next to PLAINTEXT; real
clients; a plaintext client on a TLS port, a TLS client on a plaintext port and a certificate
of another CA are refused."""

from __future__ import annotations

import socket
import ssl
import struct
import time
import uuid

import pytest

from engine.server.listener import listeners_from_configs
from tests.security.certs import make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


class TlsBroker:
    def __init__(self, data_dir: str, pki, extra: dict | None = None):
        import engine
        from engine.security.credentials import ScramCredentialStore
        from engine.server import BackgroundBroker
        cfg = {"ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
               "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
               "listener.name.ssl.ssl.client.auth": "required",
               "sasl.enabled.mechanisms": "SCRAM-SHA-256",
               "connection.failed.authentication.delay.ms": "0", **(extra or {})}
        self.engine = engine.open(data_dir, cfg, background=False)
        self.store = ScramCredentialStore(data_dir)
        self.store.set_password("alice", "SCRAM-SHA-256", "alice-secret")
        listeners, _ = listeners_from_configs(
            {**cfg, "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0"},
            scram_credentials=self.store)
        self._bg = BackgroundBroker(self.engine, listeners=listeners, scram_credentials=self.store)
        self.broker = self._bg.broker
        self.plain, self.ssl, self.sasl_ssl = (f"127.0.0.1:{li.port}" for li in listeners)
        self.ports = [li.port for li in listeners]

    def principals(self):
        return self._bg.call(lambda: sorted((c.listener.name, c.principal)
                                            for c in self.broker._connections))

    def stop(self):
        self._bg.stop()
        self.engine.close()


@pytest.fixture
def tls_broker(tmp_path, pki):
    b = TlsBroker(str(tmp_path / "data"), pki)
    yield b
    b.stop()


def _client_ctx(pki, cert: str | None = "client.pem") -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=pki.path("ca.pem"))
    if cert:
        ctx.load_cert_chain(pki.path(cert))
    return ctx


def _roundtrip(bootstrap: str, auth: dict) -> None:
    from confluent_kafka import Consumer, Producer
    topic = f"t-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": bootstrap, **auth})
    for i in range(20):
        p.produce(topic, (f"v{i}-" + "x" * 2000).encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-" + topic,
                  "auto.offset.reset": "earliest", **auth})
    c.subscribe([topic])
    got = []
    deadline = time.time() + 30
    while len(got) < 20 and time.time() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    c.close()
    assert [g.split(b"-")[0] for g in got] == [f"v{i}".encode() for i in range(20)]


def test_confluent_kafka_over_mtls(tls_broker, pki):
    _roundtrip(tls_broker.ssl, {"security.protocol": "SSL", "ssl.ca.location": pki.path("ca.pem"),
                                "ssl.certificate.location": pki.path("client.pem"),
                                "ssl.key.location": pki.path("client.pem")})


def test_confluent_kafka_over_sasl_ssl_scram(tls_broker, pki):
    _roundtrip(tls_broker.sasl_ssl, {"security.protocol": "SASL_SSL", "ssl.ca.location": pki.path("ca.pem"),
                                     "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                                     "sasl.password": "alice-secret"})


def test_kafka_python_over_ssl(tls_broker, pki):
    from kafka import KafkaConsumer, KafkaProducer
    auth = {"security_protocol": "SSL", "ssl_cafile": pki.path("ca.pem"),
            "ssl_certfile": pki.path("client.pem"), "ssl_keyfile": pki.path("client.pem")}
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=tls_broker.ssl, **auth)
    for i in range(3):
        p.send(topic, f"v{i}".encode())
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, bootstrap_servers=tls_broker.ssl, auto_offset_reset="earliest",
                      consumer_timeout_ms=10000, **auth)
    got = []
    for record in c:
        got.append(record.value)
        if len(got) == 3:
            break
    c.close()
    assert got == [b"v0", b"v1", b"v2"]


def _api_versions_frame() -> bytes:
    body = struct.pack(">hhih", 18, 0, 1, 1) + b"t"
    return struct.pack(">i", len(body)) + body


def test_principal_from_the_client_certificate(tls_broker, pki):
    with socket.create_connection(("127.0.0.1", tls_broker.ports[1]), timeout=5) as raw:
        with _client_ctx(pki).wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(_api_versions_frame())
            assert len(s.recv(4)) == 4
            assert ("SSL", "User:CN=alice,OU=eng,O=acme,C=US") in tls_broker.principals()


def test_plaintext_client_on_a_tls_port_is_closed(tls_broker):
    with socket.create_connection(("127.0.0.1", tls_broker.ports[1]), timeout=5) as s:
        s.sendall(_api_versions_frame())
        s.settimeout(5)
        got = b""
        try:
            while chunk := s.recv(1024):       # a TLS alert at most, then closed
                got += chunk
        except ConnectionResetError:
            pass
        assert len(got) < 64 and not got.startswith(b"\x00\x00")    # no Kafka answer


def test_tls_client_on_the_plaintext_port_fails(tls_broker, pki):
    with socket.create_connection(("127.0.0.1", tls_broker.ports[0]), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            _client_ctx(pki).wrap_socket(raw, server_hostname="localhost")


@pytest.mark.parametrize("cert", ["other-client.pem", None])
def test_certificate_of_another_ca_or_none_is_refused(tls_broker, pki, cert):
    with socket.create_connection(("127.0.0.1", tls_broker.ports[1]), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with _client_ctx(pki, cert).wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(_api_versions_frame())          # TLS 1.3: the refusal comes after
                if not s.recv(4):
                    raise ConnectionError("closed")


def test_kafka_python_over_sasl_ssl_scram(tls_broker, pki):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=tls_broker.sasl_ssl, security_protocol="SASL_SSL",
                      ssl_cafile=pki.path("ca.pem"), sasl_mechanism="SCRAM-SHA-256",
                      sasl_plain_username="alice", sasl_plain_password="alice-secret")
    topic = f"kps-{uuid.uuid4().hex[:8]}"
    meta = p.send(topic, b"over SASL_SSL").get(timeout=30)
    p.close()
    assert meta.offset == 0


def test_aiokafka_over_mtls(tls_broker, pki):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    ctx = _client_ctx(pki)
    topic = f"aks-{uuid.uuid4().hex[:8]}"

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=tls_broker.ssl, security_protocol="SSL", ssl_context=ctx)
        await p.start()
        try:
            await p.send_and_wait(topic, b"v" * 100_000)       # a fetch of ~100 KB through TLS
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=tls_broker.ssl, security_protocol="SSL",
                             ssl_context=ctx, auto_offset_reset="earliest")
        await c.start()
        try:
            record = await asyncio.wait_for(c.getone(), 30)
            return record.value
        finally:
            await c.stop()

    assert asyncio.run(run()) == b"v" * 100_000


@pytest.mark.parametrize("cert,principal", [
    ("client.pem", "User:alice"), (None, "User:ANONYMOUS")])
def test_requested_client_auth_and_mapping_rules(tmp_path, pki, cert, principal):
    b = TlsBroker(str(tmp_path / "d"), pki, {"listener.name.ssl.ssl.client.auth": "requested",
                                             "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/L,DEFAULT"})
    try:
        with socket.create_connection(("127.0.0.1", b.ports[1]), timeout=5) as raw:
            with _client_ctx(pki, cert).wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(_api_versions_frame())
                assert len(s.recv(4)) == 4
                assert ("SSL", principal) in b.principals()
    finally:
        b.stop()
