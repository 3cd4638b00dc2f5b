"""Kafka's own Java tools against one ``python -m engine serve`` node secured as an operator would:
a SASL_SSL listener (PLAIN ``admin`` from the JAAS line, SCRAM-SHA-512 users), an SSL listener
with ``ssl.client.auth=required`` (the principal from the certificate's CN through
``ssl.principal.mapping.rules``) and the ACL authorizer (StandardAuthorizer, super user admin).

- ``kafka-configs.sh --command-config`` (admin over SASL_SSL) adds bob's SCRAM-SHA-512
  credential; bob then logs in;
- ``kafka-acls.sh --add`` / ``--list`` / ``--remove --force`` manage bob's ACLs;
- ``kafka-console-producer.sh --producer.config`` / ``kafka-console-consumer.sh
  --consumer.config`` as bob: TopicAuthorizationException before the ACLs and after their
  removal, a round trip with them;
- the same console round trip over mTLS as ``alice`` (her certificate's CN).

(Kafka vs us answer by answer: tests/differential/test_security_differential.py; this module is
"our broker works with the real tools".) Every test runs per broker: ``ours``, and with
``SECURITY_KAFKA=1`` ``kafka`` -- Apache Kafka 4.0 (one KRaft node) configured the same way, so the
same assertions hold for both (the row is off by default: CI time). Skipped, saying why, without
Java / Kafka 4.0. The JVMs run with ``KAFKA_HEAP_OPTS=-Xmx256m``; independent tool runs go in parallel.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.secure_clients import ClientSecurity, confluent
from tests.security.certs import make_pki
from tests.serving import KafkaProcess, ServeProcess, find_kafka, free_port

HOME, WHY_NOT = find_kafka()
pytestmark = pytest.mark.skipif(HOME is None, reason=f"Kafka's Java tools are needed: {WHY_NOT}")
T = 90  # seconds: any one tool run
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')
# "CN=alice,OU=eng,O=acme,C=US" -> alice
MAPPING = "RULE:^CN=([^,]*),.*$/$1/,DEFAULT"


KAFKA_ROW = os.environ.get("SECURITY_KAFKA", "") not in ("", "0")
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


class Secured:
    """One node of ``broker`` ("ours" or "kafka": Apache Kafka 4.0, single-node KRaft) with the
    SASL_SSL and SSL listeners, the same PEM certificates, JAAS line, mapping rules and
    authorizer.  Kafka's own PLAINTEXT listeners (controller, inter-broker) stay unsecured; their
    principal User:ANONYMOUS is a super user there (else KRaft refuses its own registration)."""

    def __init__(self, broker: str, directory: str):
        pki_dir = os.path.join(directory, "pki")
        os.makedirs(pki_dir)
        pki = make_pki(pki_dir)
        self.broker = broker
        self.sasl_port, self.ssl_port = free_port(), free_port()
        common = {
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
            "ssl.keystore.type": "PEM", "ssl.keystore.location": pki.path("server.pem"),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
            "listener.name.ssl.ssl.client.auth": "required",
            "ssl.principal.mapping.rules": MAPPING,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "group.initial.rebalance.delay.ms": "0",
            "offsets.topic.num.partitions": "1"}
        secured = f"SASL_SSL://127.0.0.1:{self.sasl_port},SSL://127.0.0.1:{self.ssl_port}"
        self.srv: ServeProcess | KafkaProcess
        if broker == "ours":
            self.srv = ServeProcess(os.path.join(directory, "broker"), "--config",
                                    f"listeners=PLAINTEXT://127.0.0.1:0,{secured}",
                                    *(a for k, v in common.items() for a in ("--config", f"{k}={v}")))
        else:
            assert HOME is not None
            os.makedirs(os.path.join(directory, "kafka"))
            k = KafkaProcess(HOME, os.path.join(directory, "kafka"))
            while {self.sasl_port, self.ssl_port} & {k.port, k.controller_port}:
                self.sasl_port, self.ssl_port = free_port(), free_port()
                secured = f"SASL_SSL://127.0.0.1:{self.sasl_port},SSL://127.0.0.1:{self.ssl_port}"
            listeners = f"PLAINTEXT://127.0.0.1:{k.port},CONTROLLER://127.0.0.1:{k.controller_port},{secured}"
            k.settings += [f"listeners={listeners}", f"advertised.listeners={listeners}",
                           "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                           "SASL_SSL:SASL_SSL,SSL:SSL",
                           f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={SCRAM_LOGIN}",
                           *(f"{k_}={v}" for k_, v in {**common,
                                                       "super.users": "User:admin;User:ANONYMOUS"}.items())]
            self.srv = k
        self.sasl_ssl = f"127.0.0.1:{self.sasl_port}"
        self.ssl = f"127.0.0.1:{self.ssl_port}"
        ca = pki.path("ca.pem")
        self.admin = ClientSecurity("SASL_SSL", ca, mechanism="PLAIN", username="admin",
                                    password="admin-secret").write_properties(os.path.join(pki_dir, "admin.properties"))
        self.bob = ClientSecurity("SASL_SSL", ca, username="bob",
                                  password="bob-secret").write_properties(os.path.join(pki_dir, "bob.properties"))
        self.alice = ClientSecurity("SSL", ca, certfile=pki.path("client.pem")).write_properties(
            os.path.join(pki_dir, "alice.properties"))


@pytest.fixture(scope="module", params=["ours", "kafka"])
def secured(request, tmp_path_factory):
    if request.param == "kafka" and not KAFKA_ROW:
        pytest.skip("the Apache Kafka 4.0 row runs with SECURITY_KAFKA=1 (CI time)")
    s = Secured(request.param, str(tmp_path_factory.mktemp(f"java-tools-secure-{request.param}")))
    s.srv.start()
    yield s
    if isinstance(s.srv, KafkaProcess):
        s.srv.stop()
        return
    _code, log = s.srv.stop()
    assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"


def tool(name: str, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    assert HOME is not None
    env = dict(os.environ, KAFKA_HEAP_OPTS="-Xmx256m")
    return subprocess.run([os.path.join(HOME, "bin", name), *args], input=input, capture_output=True,
                          text=True, timeout=T, env=env)


def ok(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"{r.args[0]} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def produce(bootstrap: str, sec: ClientSecurity, topic: str, lines: str) -> subprocess.CompletedProcess:
    return tool("kafka-console-producer.sh", "--bootstrap-server", bootstrap, "--topic", topic,
                "--producer.config", sec.properties_path, "--producer-property", "delivery.timeout.ms=20000",
                "--producer-property", "request.timeout.ms=10000", "--producer-property", "max.block.ms=20000",
                input=lines)


def consume(bootstrap: str, sec: ClientSecurity, topic: str, group: str, n: int) -> subprocess.CompletedProcess:
    return tool("kafka-console-consumer.sh", "--bootstrap-server", bootstrap, "--topic", topic,
                "--consumer.config", sec.properties_path, "--group", group, "--from-beginning",
                "--max-messages", str(n), "--timeout-ms", "30000")


def acls(secured: Secured, *args: str) -> subprocess.CompletedProcess:
    return tool("kafka-acls.sh", "--bootstrap-server", secured.sasl_ssl, "--command-config",
                secured.admin.properties_path, *args)


def create_topic(secured: Secured, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(confluent(_boot(secured.sasl_ssl, secured.admin)))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def _boot(address: str, sec: ClientSecurity):
    from tests.secure_clients import Bootstrap
    return Bootstrap(address, sec)


def denied(r: subprocess.CompletedProcess) -> bool:
    return "TopicAuthorizationException" in r.stdout + r.stderr


def test_scram_user_acls_and_console_round_trip_over_sasl_ssl(secured):
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    create_topic(secured, topic)
    # kafka-configs.sh as admin (PLAIN over SASL_SSL) gives bob a SCRAM-SHA-512 credential
    ok(tool("kafka-configs.sh", "--bootstrap-server", secured.sasl_ssl, "--command-config",
            secured.admin.properties_path, "--alter", "--entity-type", "users", "--entity-name", "bob",
            "--add-config", "SCRAM-SHA-512=[password=bob-secret]"))

    # bob logs in, but may not write or read the topic yet
    with ThreadPoolExecutor(2) as ex:
        p = ex.submit(produce, secured.sasl_ssl, secured.bob, topic, "no\n")
        c = ex.submit(consume, secured.sasl_ssl, secured.bob, topic, group, 1)
        p, c = p.result(), c.result()
    assert denied(p), f"producer without ACLs:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}"
    assert denied(c), f"consumer without ACLs:\n{c.stdout[-2000:]}\n{c.stderr[-3000:]}"
    assert "SaslAuthenticationException" not in p.stderr + c.stderr, p.stderr[-3000:]

    # kafka-acls.sh --add: Write, Read, Describe on the topic and Read on the group
    with ThreadPoolExecutor(2) as ex:
        a = ex.submit(acls, secured, "--add", "--allow-principal", "User:bob", "--operation", "Write",
                      "--operation", "Read", "--operation", "Describe", "--topic", topic)
        g = ex.submit(acls, secured, "--add", "--allow-principal", "User:bob", "--operation", "Read",
                      "--group", group)
        ok(a.result())
        ok(g.result())
    listed = ok(acls(secured, "--list", "--topic", topic))
    for op in ("WRITE", "READ", "DESCRIBE"):
        assert f"(principal=User:bob, host=*, operation={op}, permissionType=ALLOW)" in listed, listed

    r = produce(secured.sasl_ssl, secured.bob, topic, "one\ntwo\n")
    assert ok(r) is not None and not denied(r), r.stderr[-3000:]
    r = consume(secured.sasl_ssl, secured.bob, topic, group, 2)
    assert ok(r).splitlines() == ["one", "two"], r.stderr[-3000:]

    # kafka-acls.sh --remove --force: the topic's ACLs go, bob is refused again
    ok(acls(secured, "--remove", "--force", "--allow-principal", "User:bob", "--operation", "Write",
            "--operation", "Read", "--operation", "Describe", "--topic", topic))
    listed = ok(acls(secured, "--list", "--topic", topic))
    assert "User:bob" not in listed, listed
    with ThreadPoolExecutor(2) as ex:
        p = ex.submit(produce, secured.sasl_ssl, secured.bob, topic, "three\n")
        c = ex.submit(consume, secured.sasl_ssl, secured.bob, topic, f"{group}-2", 1)
        p, c = p.result(), c.result()
    assert denied(p), p.stderr[-3000:]
    assert denied(c), c.stderr[-3000:]


def test_unknown_scram_user_is_refused(secured):
    """(bob's own wrong password: the module's first test logs him in; an unknown user here.)"""
    from confluent_kafka import KafkaError, Producer
    errors: list = []
    bad = ClientSecurity("SASL_SSL", secured.bob.cafile, username="nobody", password="wrong")
    p = Producer(confluent(_boot(secured.sasl_ssl, bad), error_cb=errors.append))
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        p.poll(0.2)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert "invalid credentials" in errors[0].str(), errors[0].str()


def test_console_round_trip_over_mtls_as_the_certificate_cn(secured):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType
    from confluent_kafka.admin import ResourceType as RT
    topic, group = f"m-{uuid.uuid4().hex[:8]}", f"mg-{uuid.uuid4().hex[:8]}"
    create_topic(secured, topic)
    r = produce(secured.ssl, secured.alice, topic, "no\n")
    assert denied(r), f"alice before her ACLs:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    admin = AdminClient(confluent(_boot(secured.sasl_ssl, secured.admin)))
    bindings = [AclBinding(RT.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
    bindings.append(AclBinding(RT.GROUP, group, ResourcePatternType.LITERAL, "User:alice", "*",
                               AclOperation.READ, AclPermissionType.ALLOW))
    for f in admin.create_acls(bindings).values():
        f.result(30)
    ok(produce(secured.ssl, secured.alice, topic, "m1\nm2\n"))
    r = consume(secured.ssl, secured.alice, topic, group, 2)
    assert ok(r).splitlines() == ["m1", "m2"], r.stderr[-3000:]
