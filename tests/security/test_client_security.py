"""Our own clients on TLS and SASL listeners (engine/client/security.py): ``engine.connect`` and
the CLI's ``--command-config`` against the SSL (mutual TLS) and SASL_SSL (SCRAM) listeners of a
broker started here (tests/security/test_broker_tls.py's TlsBroker) and the SASL_PLAINTEXT (PLAIN)
listener of test_broker_sasl.py's SaslBroker; a wrong password, an untrusted CA, a certificate
for another host and an unserved mechanism fail at once with their typed errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pyarrow as pa
import pytest

import engine
from engine.errors import (
    InvalidConfigError,
    SaslAuthenticationError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from tests.security.certs import _issue, _name
from tests.security.test_broker_sasl import SaslBroker
from tests.security.test_broker_tls import TlsBroker, pki  # noqa: F401  (the module-scoped fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="{user}" password="{password}";')
MECHS = {"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}


@pytest.fixture
def broker(tmp_path, pki):  # noqa: F811
    b = TlsBroker(str(tmp_path / "data"), pki, MECHS)
    b.store.set_password("alice", "SCRAM-SHA-512", "alice-512")
    yield b
    b.stop()


def _trust(pki) -> dict:  # noqa: F811
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem")}


def _scram(pki, mechanism="SCRAM-SHA-512", password="alice-512") -> dict:  # noqa: F811
    return {"security.protocol": "SASL_SSL", **_trust(pki), "sasl.mechanism": mechanism,
            "sasl.jaas.config": SCRAM_JAAS.format(user="alice", password=password)}


def _mtls(pki) -> dict:  # noqa: F811
    return {"security.protocol": "SSL", **_trust(pki), "ssl.keystore.type": "PEM",
            "ssl.keystore.location": pki.path("client.pem")}


def _roundtrip(eng, n: int = 50) -> None:
    """Create a topic, produce n records, read them back and through a consumer group."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    eng.create_topic(topic, 2)
    values = [f"v{i}".encode() for i in range(n)]
    with eng.producer() as p:
        p.send_batch(topic, values=pa.array(values, pa.binary()), partitions=pa.array([0] * n, pa.int32()))
    assert eng.read_arrow(topic, 0).column("value").to_pylist() == values
    c = eng.consumer(**{"group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for batch in c.poll_arrow(max_records=1000, timeout_ms=500):
                got += batch.column("value").to_pylist()
        assert sorted(got) == sorted(values)
    finally:
        c.close()


def test_connect_over_sasl_ssl_scram_sha_512(broker, pki):  # noqa: F811
    with engine.connect(broker.sasl_ssl, **_scram(pki)) as eng:
        _roundtrip(eng)
    # and SCRAM-SHA-256, the keyword-argument spelling of the keys
    with engine.connect(broker.sasl_ssl, security_protocol="SASL_SSL", ssl_truststore_type="PEM",
                        ssl_truststore_location=pki.path("ca.pem"), sasl_mechanism="SCRAM-SHA-256",
                        sasl_jaas_config=SCRAM_JAAS.format(user="alice", password="alice-secret")) as eng:
        assert eng.list_topics()
        assert ("SASL_SSL", "User:alice") in broker.principals()


def test_connect_over_mutual_tls(broker, pki):  # noqa: F811
    with engine.connect(broker.ssl, **_mtls(pki)) as eng:
        _roundtrip(eng, 10)
        assert ("SSL", "User:CN=alice,OU=eng,O=acme,C=US") in broker.principals()


def test_inline_pem_trust_store(broker, pki):  # noqa: F811
    with open(pki.path("ca.pem")) as f:
        ca = f.read()
    cfg = {**_scram(pki), "ssl.truststore.certificates": ca}
    del cfg["ssl.truststore.location"]
    with engine.connect(broker.sasl_ssl, **cfg) as eng:
        assert isinstance(eng.list_topics(), list)


def test_wrong_password_is_a_typed_error_at_once(broker, pki):  # noqa: F811
    t0 = time.monotonic()
    with pytest.raises(SaslAuthenticationError, match="SCRAM-SHA-512.*alice"):
        engine.connect(broker.sasl_ssl, **_scram(pki, password="wrong"))
    with pytest.raises(SaslAuthenticationError, match="SCRAM-SHA-256"):
        engine.connect(broker.sasl_ssl, **_scram(pki, "SCRAM-SHA-256", password="wrong"))
    assert time.monotonic() - t0 < 5


def test_unserved_mechanism(broker, pki):  # noqa: F811
    with pytest.raises(UnsupportedSaslMechanismError, match="PLAIN.*SCRAM-SHA-256"):
        engine.connect(broker.sasl_ssl, **{**_scram(pki), "sasl.mechanism": "PLAIN"})
    with pytest.raises(InvalidConfigError, match="GSSAPI"):
        engine.connect(broker.sasl_ssl, **{k: v for k, v in _scram(pki).items() if k != "sasl.mechanism"})


def test_untrusted_broker_certificate(broker, pki):  # noqa: F811
    t0 = time.monotonic()
    with pytest.raises(SslAuthenticationError, match="certificate"):
        engine.connect(broker.sasl_ssl, **{**_scram(pki), "ssl.truststore.location": pki.path("other-ca.pem")})
    assert time.monotonic() - t0 < 5


def test_mtls_listener_without_a_client_certificate(broker, pki):  # noqa: F811
    from engine.client.connection import KafkaConnectionError
    t0 = time.monotonic()
    with pytest.raises((SslAuthenticationError, KafkaConnectionError)):
        engine.connect(broker.ssl, **{"security.protocol": "SSL", **_trust(pki)})
    assert time.monotonic() - t0 < 5


def test_host_name_check(tmp_path, pki):  # noqa: F811
    """A certificate for another host: refused with the default https check, taken with an empty
    ssl.endpoint.identification.algorithm."""
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec
    other = _issue(_name(C="US", O="acme", CN="elsewhere.example"), ec.generate_private_key(ec.SECP256R1()),
                   pki.ca, sans=[x509.DNSName("elsewhere.example")])
    path = str(tmp_path / "elsewhere.pem")
    with open(path, "wb") as f:
        f.write(other.key_pem() + other.chain_pem())
    b = TlsBroker(str(tmp_path / "data"), pki, {"ssl.keystore.location": path})
    try:
        cfg = _scram(pki, "SCRAM-SHA-256", "alice-secret")
        with pytest.raises(SslAuthenticationError, match="(?i)hostname|IP address mismatch|match"):
            engine.connect(b.sasl_ssl, **cfg)
        with engine.connect(b.sasl_ssl, **{**cfg, "ssl.endpoint.identification.algorithm": ""}) as eng:
            assert isinstance(eng.list_topics(), list)
    finally:
        b.stop()


def test_sasl_plaintext_plain(tmp_path):
    b = SaslBroker(str(tmp_path / "data"), {"connection.failed.authentication.delay.ms": "0"})
    try:
        cfg = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
               "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                   'username="alice" password="alice-secret";'}
        with engine.connect(b.sasl_bootstrap, **cfg) as eng:
            _roundtrip(eng, 10)
        # librdkafka's sasl.username / sasl.password work as well
        with engine.connect(b.sasl_bootstrap, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                                 "sasl.username": "admin", "sasl.password": "admin-secret"}) as eng:
            assert isinstance(eng.list_topics(), list)
        with pytest.raises(SaslAuthenticationError, match="PLAIN"):
            engine.connect(b.sasl_bootstrap, **{**cfg, "sasl.jaas.config": cfg["sasl.jaas.config"].replace(
                "alice-secret", "nope")})
        # a client that speaks no SASL on a SASL listener is closed, not hung
        from engine.client.connection import KafkaConnectionError
        with pytest.raises(KafkaConnectionError), engine.connect(b.sasl_bootstrap, request_timeout_ms=3000) as eng:
            eng.list_topics()
    finally:
        b.stop()


def test_bad_client_configuration(pki):  # noqa: F811
    with pytest.raises(InvalidConfigError, match="security.protocol"):
        engine.connect("127.0.0.1:1", security_protocol="TLS")
    with pytest.raises(InvalidConfigError, match="username"):
        engine.connect("127.0.0.1:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN")
    with pytest.raises(InvalidConfigError, match="login module"):
        engine.connect("127.0.0.1:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                       sasl_jaas_config='com.sun.security.auth.module.Krb5LoginModule required;')
    with pytest.raises(InvalidConfigError, match="ssl.truststore"):
        engine.connect("127.0.0.1:1", security_protocol="SSL", ssl_truststore_location=pki.path("ca.pem"))


# -- the CLI's --command-config -------------------------------------------------------------
def _cli(*argv: str, stdin: bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *argv], cwd=ROOT, input=stdin,
                          capture_output=True, timeout=timeout)


def _properties(path, cfg: dict) -> str:
    with open(path, "w") as f:
        f.write("# client properties, as Kafka's tools take them\n")
        for k, v in cfg.items():
            f.write(f"{k}={v}\n")
    return str(path)


def test_cli_with_command_config(broker, pki, tmp_path):  # noqa: F811
    props = _properties(tmp_path / "client.properties", {**_scram(pki), "client.id": "ops"})
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    boot = ["--bootstrap-server", broker.sasl_ssl, "--command-config", props]
    r = _cli("topics", "create", topic, "--partitions", "1", *boot)
    assert r.returncode == 0, r.stderr.decode()
    r = _cli("topics", "list", *boot)
    assert topic in r.stdout.decode().split()
    r = _cli("produce", topic, *boot, stdin=b"a\nb\nc\n")
    assert r.returncode == 0, r.stderr.decode()
    r = _cli("consume", topic, "--from-beginning", "--max-messages", "3", "--group", "cli-g", *boot)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().split() == ["a", "b", "c"]
    r = _cli("groups", "describe", "cli-g", "--bootstrap-server", broker.sasl_ssl, "--command-config", props)
    assert r.returncode == 0 and topic in r.stdout.decode(), r.stderr.decode()
    mtls = _properties(tmp_path / "mtls.properties", _mtls(pki))
    r = _cli("topics", "describe", topic, "--bootstrap-server", broker.ssl, "--command-config", mtls)
    assert r.returncode == 0 and "PartitionCount: 1" in r.stdout.decode(), r.stderr.decode()


def test_cli_wrong_password_and_bad_file(broker, pki, tmp_path):  # noqa: F811
    bad = _properties(tmp_path / "bad.properties", _scram(pki, password="wrong"))
    t0 = time.monotonic()
    r = _cli("topics", "list", "--bootstrap-server", broker.sasl_ssl, "--command-config", bad)
    assert r.returncode != 0
    assert "SCRAM-SHA-512" in r.stderr.decode() and "alice" in r.stderr.decode()
    assert time.monotonic() - t0 < 30
    unknown = _properties(tmp_path / "unknown.properties", {"security.protocol": "SSL", "ssl.bogus": "1"})
    r = _cli("topics", "list", "--bootstrap-server", broker.sasl_ssl, "--command-config", unknown)
    assert r.returncode != 0 and "ssl.bogus" in r.stderr.decode()
    # without --command-config a SASL_SSL listener is not reachable: the flag is what makes it work
    r = _cli("topics", "list", "--bootstrap-server", broker.sasl_ssl, timeout=90)
    assert r.returncode != 0


# -- the broker's side: ClientSecurity.inter_broker ------------------------------------------
def test_inter_broker_security_from_broker_keys(pki):  # noqa: F811
    from engine.client.security import ClientSecurity
    base = {"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "listener.name.internal.ssl.truststore.type": "PEM",
            "listener.name.internal.ssl.truststore.location": pki.path("ca.pem")}
    with pytest.raises(InvalidConfigError, match="GSSAPI"):        # Kafka's default mechanism
        ClientSecurity.inter_broker(base)
    cfg = {**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}
    with pytest.raises(InvalidConfigError, match="listener.name.internal.scram-sha-256.sasl.jaas.config"):
        ClientSecurity.inter_broker(cfg)
    cfg["listener.name.internal.scram-sha-256.sasl.jaas.config"] = SCRAM_JAAS.format(user="b", password="pw-XYZZY")
    sec = ClientSecurity.inter_broker(cfg)
    assert (sec.protocol, sec.mechanism, sec.username) == ("SASL_SSL", "SCRAM-SHA-256", "b")
    assert sec.ssl_context is not None and sec.ssl_context.check_hostname      # https by default
    assert "XYZZY" not in repr(sec) and "XYZZY" not in repr(vars(sec).get("ssl_context"))
    off = ClientSecurity.inter_broker({**cfg, "listener.name.internal.ssl.endpoint.identification.algorithm": ""})
    assert off.ssl_context is not None and not off.ssl_context.check_hostname
    # the listener's trust store is the one read: a broken one fails
    with pytest.raises(InvalidConfigError, match="truststore"):
        ClientSecurity.inter_broker({**cfg, "listener.name.internal.ssl.truststore.location": pki.path("nope.pem")})
    assert ClientSecurity.inter_broker({"listeners": "PLAINTEXT://127.0.0.1:0"}) is None


def test_inter_broker_security_logs_in(broker, pki):  # noqa: F811
    """What a follower does: a Connection with the inter-broker security to a SASL_SSL listener."""
    from engine.client.connection import Connection
    from engine.client.security import ClientSecurity
    cfg = {"listeners": "SASL_SSL://127.0.0.1:0", "security.inter.broker.protocol": "SASL_SSL",
           "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
           "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(user="alice",
                                                                                       password="alice-512"),
           "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem")}
    host, port = broker.sasl_ssl.rsplit(":", 1)
    conn = Connection(host, int(port), b"replica-9", 5.0, ClientSecurity.inter_broker(cfg))
    try:
        assert conn.tls
        assert ("SASL_SSL", "User:alice") in broker.principals()
    finally:
        conn.close()


def test_pipelined_produce_over_tls(broker, pki):  # noqa: F811
    """Many Produce requests in flight on TLS connections (joined and sent with sendall there)."""
    topic = f"pipe-{uuid.uuid4().hex[:8]}"
    with engine.connect(broker.sasl_ssl, **_scram(pki), request_timeout_ms=20000) as eng:
        eng.create_topic(topic, 4)
        t0 = time.monotonic()
        with eng.producer(linger_ms=0, max_in_flight_requests_per_connection=5) as p:
            for i in range(300):
                p.send_batch(topic, values=pa.array([f"{i}-{j}".encode() for j in range(20)], pa.binary()),
                             partitions=pa.array([i % 4] * 20, pa.int32()))
            p.flush()
        elapsed = time.monotonic() - t0
        assert sum(eng.read_arrow(topic, q).num_rows for q in range(4)) == 300 * 20
    assert elapsed < 15, elapsed


def test_answers_already_decrypted_are_seen(pki):  # noqa: F811
    """Two answers in one TLS record: after the first is read the second sits decrypted in the
    TLS layer, where select() does not see it; Connection.buffered() does (the produce pipeline
    polls it before select)."""
    import socket
    import ssl
    import struct
    import threading

    from engine.client.connection import Connection
    from engine.client.security import ClientSecurity
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(pki.path("server.pem"))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        raw, _ = listener.accept()
        with server_ctx.wrap_socket(raw, server_side=True) as s:
            head = s.recv(4)
            (n,) = struct.unpack(">i", head)
            while n:
                n -= len(s.recv(n))
            frames = b"".join(struct.pack(">ii", 4, corr) for corr in (1, 2))   # two empty answers
            s.sendall(frames)
            s.recv(1)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    sec = ClientSecurity.from_config({"security.protocol": "SSL", **_trust(pki)})
    conn = Connection("127.0.0.1", port, b"t", 5.0, sec)
    try:
        corr = conn.send(18, 0, [b""])
        conn.receive(18, 0, corr)
        assert conn.buffered()                 # the second answer, decrypted already
        import select
        assert select.select([conn.sock], [], [], 0.2)[0] == []    # what select alone would say
    finally:
        conn.close()
        listener.close()
        t.join(5)


def test_console_with_command_config(broker, pki, tmp_path):  # noqa: F811
    """`python -m engine console --bootstrap-server <SASL_SSL> --command-config FILE` shows the topics."""
    import json
    import signal
    import urllib.request

    from tests.serving import free_port
    topic = f"con-{uuid.uuid4().hex[:8]}"
    with engine.connect(broker.sasl_ssl, **_scram(pki)) as eng:
        eng.create_topic(topic, 1)
    props = _properties(tmp_path / "client.properties", _scram(pki))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "engine", "console", "--bootstrap-server", broker.sasl_ssl,
                             "--command-config", props, "--listen", f"127.0.0.1:{port}"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        topics = None
        while topics is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/topics", timeout=10) as r:
                    topics = json.loads(r.read())
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(0.2)
        assert topics is not None and topic in json.dumps(topics)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
