"""`python -m engine serve` with a PLAINTEXT and a SASL_PLAINTEXT (or SASL_SSL) listener: SCRAM
users added with Kafka's own kafka-configs.sh (skipped without Java / Kafka 4.0) and
confluent-kafka's admin client, clients logging in over SASL, credentials surviving a restart,
config errors at start."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest

from tests.serving import ROOT, ServeProcess, find_kafka, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')


@pytest.fixture
def serve_sasl(tmp_path):
    sasl_port = free_port()
    srv = ServeProcess(tmp_path, "--config",
                       f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                       "--config", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                       "--config", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}",
                       "--config", "group.initial.rebalance.delay.ms=0")
    srv.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
    srv.start()
    yield srv
    _code, log = srv.stop()
    assert "Traceback" not in log, log[-4000:]


def _roundtrip(bootstrap: str, auth: dict) -> None:
    from confluent_kafka import Consumer, Producer
    topic = f"t-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": bootstrap, **auth})
    p.produce(topic, b"hello")
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest", **auth})
    c.subscribe([topic])
    deadline = time.time() + 30
    got = None
    while got is None and time.time() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got = msg.value()
    c.close()
    assert got == b"hello"


def _scram(user: str, password: str, mechanism: str = "SCRAM-SHA-256") -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def test_confluent_admin_adds_users_that_survive_a_restart(serve_sasl):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )
    admin = AdminClient({"bootstrap.servers": serve_sasl.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret"})
    futs = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                     b"erin-secret")])
    assert futs["erin"].result(timeout=30) is None
    # deleting what is not there: RESOURCE_NOT_FOUND
    futs = admin.alter_user_scram_credentials([
        UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_256)])
    with pytest.raises(Exception, match="RESOURCE_NOT_FOUND|does not exist"):
        futs["erin"].result(timeout=30)
    # iterations below 4096: UNACCEPTABLE_CREDENTIAL
    futs = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("frank", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"x")])
    with pytest.raises(Exception, match="UNACCEPTABLE_CREDENTIAL|terations"):
        futs["frank"].result(timeout=30)
    _roundtrip(serve_sasl.sasl_bootstrap, _scram("erin", "erin-secret", "SCRAM-SHA-512"))
    serve_sasl.stop()
    serve_sasl.start()
    _roundtrip(serve_sasl.sasl_bootstrap, _scram("erin", "erin-secret", "SCRAM-SHA-512"))
    _roundtrip(serve_sasl.bootstrap, {})           # the PLAINTEXT listener beside it


def test_kafka_configs_sh_adds_a_scram_user(serve_sasl, tmp_path):
    home, why = find_kafka()
    if home is None:
        pytest.skip(f"kafka-configs.sh needs Apache Kafka 4.0 and Java: {why}")
    tool = os.path.join(home, "bin", "kafka-configs.sh")
    out = subprocess.run([tool, "--bootstrap-server", serve_sasl.bootstrap, "--alter", "--entity-type", "users",
                          "--entity-name", "dave", "--add-config",
                          "SCRAM-SHA-256=[iterations=8192,password=dave-secret]"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    _roundtrip(serve_sasl.sasl_bootstrap, _scram("dave", "dave-secret"))
    # and over the SASL listener, with --command-config as Kafka's tools take it
    props = tmp_path / "admin.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     'username="dave" password="dave-secret";\n')
    out = subprocess.run([tool, "--bootstrap-server", serve_sasl.sasl_bootstrap, "--command-config", str(props),
                          "--alter", "--entity-type", "users", "--entity-name", "dave",
                          "--add-config", "SCRAM-SHA-512=[password=dave-512]"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    _roundtrip(serve_sasl.sasl_bootstrap, _scram("dave", "dave-512", "SCRAM-SHA-512"))
    # (kafka-configs.sh --describe --entity-type users also asks DescribeClientQuotas: tests/security/test_quotas.py)


@pytest.mark.parametrize("config,message", [
    (["sasl.enabled.mechanisms=GSSAPI"], "GSSAPI"),                              # Kafka's default
    (["sasl.enabled.mechanisms=PLAIN"], "plain.sasl.jaas.config"),               # no users for PLAIN
    (["listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SSL"], "a TLS listener needs a key store"),
    (["listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT"], "PLAINTEXT"),      # not in the map
])
def test_serve_refuses_what_it_cannot_serve(tmp_path, config, message):
    args = [sys.executable, "-m", "engine", "serve", "--data-dir", str(tmp_path / "d"),
            "--listen", f"127.0.0.1:{free_port()}",
            "--config", f"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{free_port()}"]
    for c in config:
        args += ["--config", c]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode != 0
    assert message in out.stderr, out.stderr[-2000:]


def test_serve_with_a_sasl_ssl_listener(tmp_path):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    from tests.security.certs import make_pki
    (tmp_path / "pki").mkdir()
    pki = make_pki(str(tmp_path / "pki"))
    tls_port = free_port()
    srv = ServeProcess(tmp_path / "srv", "--config",
                       f"listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{tls_port}",
                       "--config", "sasl.enabled.mechanisms=SCRAM-SHA-512",
                       "--config", "ssl.keystore.type=PEM",
                       "--config", f"ssl.keystore.location={pki.path('server.pem')}",
                       "--config", "group.initial.rebalance.delay.ms=0").start()
    try:
        admin = AdminClient({"bootstrap.servers": srv.bootstrap})
        futs = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "gina", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"gina-secret")])
        assert futs["gina"].result(timeout=30) is None
        _roundtrip(f"127.0.0.1:{tls_port}", {**_scram("gina", "gina-secret", "SCRAM-SHA-512"),
                                             "security.protocol": "SASL_SSL",
                                             "ssl.ca.location": pki.path("ca.pem")})
    finally:
        _code, log = srv.stop()
    assert "Traceback" not in log, log[-4000:]
    assert "accepted without effect" not in log, log[-4000:]


def test_cluster_mode_needs_the_inter_broker_credentials(tmp_path):
    """A SASL inter-broker listener is taken in cluster mode (brokers log in to each other), but
    not without the broker's mechanism and JAAS line: refused at start, naming the key."""
    def serve(*extra: str):
        args = [sys.executable, "-m", "engine", "serve", "--data-dir", str(tmp_path / "d"),
                "--listen", f"SASL_PLAINTEXT://127.0.0.1:{free_port()}", "--zookeeper", "127.0.0.1:1",
                "--config", "sasl.enabled.mechanisms=SCRAM-SHA-256",
                "--config", "inter.broker.listener.name=SASL_PLAINTEXT", *extra]
        return subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=ROOT)
    out = serve()
    assert out.returncode != 0
    assert "sasl.mechanism.inter.broker.protocol=GSSAPI" in out.stderr, out.stderr[-2000:]
    out = serve("--config", "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256")
    assert out.returncode != 0
    assert "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config" in out.stderr, out.stderr[-2000:]
