"""The three Python clients and Kafka's Java tools against 3-broker clusters whose brokers talk to
each other over the same secured listener the clients use (a real ZooKeeper, real ``python -m
engine serve`` processes, the ACL authorizer on, ``super.users`` = the brokers and admin):

- ``sasl_ssl``: SASL_SSL with SCRAM-SHA-512; the inter-broker listener is that listener, the
  brokers log in as ``broker`` (its credential and admin's written to ZooKeeper before they start,
  as in test_inter_broker_sasl_ssl.py);
- ``mtls``: SSL with ``ssl.client.auth=required``, the principal the certificate's CN
  (``ssl.principal.mapping.rules``); a broker's client certificate to the others is its own key
  store (a certificate for both server and client use, tests/security/certs.issue_pem).

Each cluster is module-scoped (one after the other: the fixture is parametrized by mode).
confluent-kafka, kafka-python and aiokafka, as admin, produce with acks=all to an RF-3 topic
with min.insync.replicas=2 and consume it back in a group. Then alice, who has no ACLs, is refused
(TOPIC_AUTHORIZATION_FAILED) until ``kafka-acls.sh --add`` grants her the topic and the group;
then she produces and consumes with confluent-kafka and with Kafka's console producer/consumer.
The JVMs are slow to start (4-10 s each on a loaded machine): the default run starts
``kafka-acls.sh --add`` in both modes and the console round trip over SASL_SSL only;
``ENGINE_SECURE_CLUSTER_FULL=1`` runs the console round trip in both modes too, ``kafka-configs.sh
--alter/--describe`` of a SCRAM user (alice's own credential over SASL_SSL) and ``kafka-acls.sh
--list`` (so every tool in both modes).

With ``SECURITY_KAFKA=1`` the same tests run against two more rows, ``kafka-sasl_ssl`` and
``kafka-mtls``: Apache Kafka 4.0 as 3 combined KRaft nodes (bench/_kafka_cluster.py) configured the
same way -- the same certificates, listener, JAAS line, mapping rules, StandardAuthorizer and
super users; broker and admin's SCRAM credentials written by ``kafka-storage.sh format
--add-scram`` (KRaft's counterpart of writing them to ZooKeeper first); the CONTROLLER listener
SSL with ``ssl.client.auth=required``, the broker's certificate mapped to User:broker (KRaft
does not take SCRAM on the controller listener).  Both sides keep a PLAINTEXT listener that no
test uses (its User:ANONYMOUS has no ACLs).  Off by default (CI time: 3 JVMs per mode); skipped,
saying why, without Java / Kafka 4.0.  Besides passing the same assertions, each test records
its answers (error codes, ISR, end and committed offsets, group state, the topic's config and its
source, the ACLs and SCRAM credentials as described back); the Kafka row of a mode, which runs
after ours, compares them field by field (:func:`_differential`; a known difference would be an
xfail naming Kafka's answer and ours, as in tests/differential).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.cluster.conftest import Cluster, wait_for
from tests.cluster.test_inter_broker_sasl_ssl import BROKER_JAAS, MECH, _create_user
from tests.secure_clients import Bootstrap, ClientSecurity, aiokafka, confluent, kafka_python
from tests.security.certs import issue_pem, make_pki
from tests.security.test_java_tools_secure import (
    HOME,
    KAFKA_ROW,
    MAPPING,
    WHY_NOT,
    consume,
    denied,
    ok,
    produce,
    tool,
)
from tests.serving import ROOT, ZooKeeperProcess, find_zookeeper

FULL = os.environ.get("ENGINE_SECURE_CLUSTER_FULL", "") not in ("", "0")
AUTHZ = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
         "super.users": "User:broker;User:admin"}
COMMON = {"offsets.topic.num.partitions": "3", "replica.fetch.backoff.ms": "200"}
N = 30          # records per client
KAFKA_OFF = pytest.mark.skipif(not KAFKA_ROW, reason="the Apache Kafka 4.0 rows run with SECURITY_KAFKA=1 (CI time)")
ROWS = [pytest.param(("ours", "sasl_ssl"), id="sasl_ssl"), pytest.param(("ours", "mtls"), id="mtls"),
        pytest.param(("kafka", "sasl_ssl"), id="kafka-sasl_ssl", marks=KAFKA_OFF),
        pytest.param(("kafka", "mtls"), id="kafka-mtls", marks=KAFKA_OFF)]


def _args(settings: dict) -> tuple[str, ...]:
    return tuple(a for k, v in settings.items() for a in ("--config", f"{k}={v}"))


# (mode, test) -> (broker, answers) of the row that ran first; field -> why Kafka's answer and
# ours differ (none found on 2026-11-27)
ANSWERS: dict[tuple[str, str], tuple[str, dict]] = {}
KNOWN: dict[str, str] = {}


def _differential(secured, test: str, answers: dict) -> None:
    """The second row of a mode compares its answers with the first's, field by field; each
    difference names Kafka's answer and ours.  Only known ones (KNOWN) make it an xfail."""
    first = ANSWERS.setdefault((secured.mode, test), (secured.broker, answers))
    if first[0] == secured.broker:
        return
    kafka, ours = (answers, first[1]) if secured.broker == "kafka" else (first[1], answers)
    diffs = {k: f"{k}: Kafka {kafka.get(k)!r}, ours {ours.get(k)!r}" for k in sorted(set(kafka) | set(ours))
             if kafka.get(k) != ours.get(k)}
    unknown = [d for k, d in diffs.items() if k not in KNOWN]
    assert not unknown, f"{secured.mode}: Kafka 4.0 and ours answer differently:\n" + "\n".join(unknown)
    if diffs:
        pytest.xfail("; ".join(f"{d} ({KNOWN[k]})" for k, d in diffs.items()))


def _listener_port(broker, name: str) -> int:
    m = re.search(rf"listener {name} \({name}\) on [\d.]+:(\d+)", broker.log_text())
    assert m, broker.log_text()[-2000:]
    return int(m.group(1))


class Secured:
    """A cluster of one mode: ``address`` (its secured listeners, once started), ``admin`` /
    ``alice`` (ClientSecurity with their Java properties files); ``tls`` and ``secured`` are the
    settings both brokers get (``ours`` here, ``kafka`` in :class:`KafkaSecured`)."""

    broker = "ours"

    def __init__(self, mode: str, directory):
        self.mode = mode
        pki = make_pki(str(directory))
        self.broker_pem = issue_pem(pki, "broker", "broker", broker=True)
        ca = pki.path("ca.pem")
        self.tls = {"ssl.keystore.type": "PEM", "ssl.keystore.location": self.broker_pem,
                    "ssl.truststore.type": "PEM", "ssl.truststore.location": ca}
        if mode == "sasl_ssl":
            self.listener = "SASL_SSL"
            self.secured = {"sasl.enabled.mechanisms": MECH, "sasl.mechanism.inter.broker.protocol": MECH,
                            f"listener.name.sasl_ssl.{MECH.lower()}.sasl.jaas.config": BROKER_JAAS}
            self.admin = ClientSecurity("SASL_SSL", ca, username="admin", password="admin-secret")
            self.alice = ClientSecurity("SASL_SSL", ca, username="alice", password="alice-secret")
        else:
            self.listener = "SSL"
            self.secured = {"listener.name.ssl.ssl.client.auth": "required", "ssl.principal.mapping.rules": MAPPING}
            self.admin = ClientSecurity("SSL", ca, certfile=issue_pem(pki, "admin", "admin"))
            self.alice = ClientSecurity("SSL", ca, certfile=pki.path("client.pem"))     # CN=alice
        self.admin = self.admin.write_properties(pki.path("admin.properties"))
        self.alice = self.alice.write_properties(pki.path("alice.properties"))
        self.address = ""

    def boot(self, sec: ClientSecurity) -> Bootstrap:
        return Bootstrap(self.address, sec)

    def create_topic(self, topic: str, partitions: int = 2) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient(confluent(self.boot(self.admin)))
        admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
        wait_for(lambda: all(len(p.isrs) == 3 for p in
                             admin.list_topics(topic, timeout=10).topics[topic].partitions.values()),
                 60, f"{topic}: every replica in the ISR (followers fetching over {self.mode})")


class OursSecured(Secured):
    """Three ``python -m engine serve`` brokers on a real ZooKeeper; over SASL_SSL broker's and
    admin's SCRAM credentials are written to ZooKeeper before they start."""

    def __init__(self, mode: str, directory, zk, zk_client):
        super().__init__(mode, directory)
        if mode == "sasl_ssl":
            _create_user(zk_client, "broker", "broker-secret")
            _create_user(zk_client, "admin", "admin-secret")
        self.cluster = Cluster(directory, zk, 3,
                               "--config", f"listeners=PLAINTEXT://127.0.0.1:0,{self.listener}://127.0.0.1:0",
                               "--config", f"inter.broker.listener.name={self.listener}",
                               *_args({**self.tls, **self.secured, **AUTHZ, **COMMON}))

    def start(self) -> None:
        self.cluster.start()
        self.address = ",".join(f"127.0.0.1:{_listener_port(b, self.listener)}"
                                for b in self.cluster.brokers.values())


class KafkaSecured(Secured):
    """Apache Kafka 4.0, 3 combined KRaft nodes, the same settings; see the module's docstring."""

    broker = "kafka"

    def __init__(self, mode: str, directory):
        super().__init__(mode, directory)
        self.directory = str(directory)
        self.settings = {
            **self.tls, **self.secured, **AUTHZ, **COMMON,
            "listener.security.protocol.map": f"CONTROLLER:SSL,PLAINTEXT:PLAINTEXT,{self.listener}:{self.listener}",
            "inter.broker.listener.name": self.listener,
            "listener.name.controller.ssl.client.auth": "required",
            "listener.name.controller.ssl.principal.mapping.rules": MAPPING}
        self.format_args: tuple[str, ...] = ()
        if mode == "sasl_ssl":
            self.format_args = ("--add-scram", f"{MECH}=[name=broker,password=broker-secret]",
                                "--add-scram", f"{MECH}=[name=admin,password=admin-secret]")
        self.cluster = None

    def start(self) -> None:
        import sys
        if ROOT not in sys.path:
            sys.path.insert(0, ROOT)
        from bench._kafka_cluster import KafkaCluster
        assert HOME is not None
        self.cluster = KafkaCluster(HOME, 3, self.settings, format_args=self.format_args, directory=self.directory,
                                    extra_listeners={i: {self.listener: 0} for i in (1, 2, 3)})
        self.address = ",".join(f"127.0.0.1:{b.extra[self.listener]}" for b in self.cluster.brokers.values())


@pytest.fixture(scope="module", params=ROWS)
def secured(request, tmp_path_factory):
    broker, mode = request.param
    directory = tmp_path_factory.mktemp(f"secure-cluster-{broker}-{mode}")
    if broker == "kafka":
        if HOME is None:
            pytest.skip(f"the Apache Kafka 4.0 rows need Kafka: {WHY_NOT}")
        k = KafkaSecured(mode, directory)
        try:
            k.start()
            yield k
        finally:
            if k.cluster is not None:
                k.cluster.close()
        return
    cp, why = find_zookeeper()
    if cp is None:
        pytest.skip(why)
    from kazoo.client import KazooClient
    zk = ZooKeeperProcess(directory / "zookeeper").start()
    zk_client = KazooClient(zk.connect, timeout=20)
    zk_client.start(60)
    try:
        s = OursSecured(mode, directory, zk, zk_client)
        try:
            s.start()
            yield s
        finally:
            logs = s.cluster.stop()      # (also the brokers that started when another did not)
    finally:
        zk_client.stop()
        zk_client.close()
        zk.stop()
    for i, log in logs.items():
        assert "Traceback" not in log, f"broker {i} logged a traceback:\n{log[-4000:]}"


def _values(prefix: str, n: int = N) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(n)]


def _confluent_produce(boot: Bootstrap, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer
    errors: list = []
    p = Producer(confluent(boot, acks="all", **{"enable.idempotence": True}))
    for v in values:
        p.produce(topic, v, key=v[-1:], on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert p.flush(60) == 0 and errors == [], errors


def _confluent_consume(boot: Bootstrap, topic: str, group: str, want: set[bytes]) -> None:
    from confluent_kafka import Consumer
    c = Consumer(confluent(boot, **{"group.id": group, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    while not want <= got and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.add(m.value())
    c.close()                  # commits through the group coordinator (acks=all on __consumer_offsets)
    assert want <= got, sorted(want - got)[:5]


def _kafka_python_produce(boot: Bootstrap, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer
    p = KafkaProducer(**kafka_python(boot), acks="all")
    for f in [p.send(topic, v, key=v[-1:]) for v in values]:
        f.get(60)
    p.close()


def _kafka_python_consume(boot: Bootstrap, topic: str, group: str, want: set[bytes]) -> None:
    from kafka import KafkaConsumer
    c = KafkaConsumer(topic, **kafka_python(boot), group_id=group, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=1000)
    c.topics()           # metadata before the first poll (tests/conformance/test_kafka_python.py)
    got: set[bytes] = set()
    deadline = time.monotonic() + 60
    while not want <= got and time.monotonic() < deadline:
        got.update(m.value for m in c)
    c.commit()
    c.close()
    assert want <= got, sorted(want - got)[:5]


def _aiokafka_produce(boot: Bootstrap, topic: str, values: list[bytes]) -> None:
    async def run():
        from aiokafka import AIOKafkaProducer
        p = AIOKafkaProducer(**aiokafka(boot), acks="all")
        await p.start()
        try:
            for v in values:
                await p.send_and_wait(topic, v, key=v[-1:])
        finally:
            await p.stop()
    asyncio.run(run())


def _aiokafka_consume(boot: Bootstrap, topic: str, group: str, want: set[bytes]) -> None:
    async def run():
        from aiokafka import AIOKafkaConsumer
        c = AIOKafkaConsumer(topic, **aiokafka(boot), group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        got: set[bytes] = set()
        try:
            deadline = time.monotonic() + 60
            while not want <= got and time.monotonic() < deadline:
                for records in (await c.getmany(timeout_ms=500)).values():
                    got.update(r.value for r in records)
            await c.commit()
        finally:
            await c.stop()
        assert want <= got, sorted(want - got)[:5]
    asyncio.run(run())


def test_clients_produce_acks_all_and_consume_in_a_group(secured):
    """Each client produces with acks=all (RF 3, min ISR 2: a follower must have fetched over the
    secured inter-broker listener), then each consumes the whole topic in its own group (the
    coordinator commits to __consumer_offsets, replicated the same way)."""
    topic = f"sc-{uuid.uuid4().hex[:8]}"
    secured.create_topic(topic)
    boot = secured.boot(secured.admin)
    _confluent_produce(boot, topic, _values("ck"))
    _kafka_python_produce(boot, topic, _values("kp"))
    _aiokafka_produce(boot, topic, _values("aio"))
    want = set(_values("ck") + _values("kp") + _values("aio"))
    groups = {name: f"{name}-{topic}" for name in ("ck", "kp", "aio")}
    with ThreadPoolExecutor(3) as ex:
        for f in [ex.submit(consume_, boot, topic, groups[name], want) for name, consume_ in
                  (("ck", _confluent_consume), ("kp", _kafka_python_consume), ("aio", _aiokafka_consume))]:
            f.result()
    _differential(secured, "clients", _topic_answers(boot, topic, groups))


def _topic_answers(boot: Bootstrap, topic: str, groups: dict[str, str]) -> dict:
    """What admin reads back: replicas and ISR sizes, end offsets (each client picks the same
    partition for a key on both brokers), each group's committed offsets and state, the topic's
    min.insync.replicas and its source."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource
    admin = AdminClient(confluent(boot))
    parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
    out: dict = {"replicas/isr": sorted((p, len(m.replicas), len(m.isrs)) for p, m in parts.items())}
    c = Consumer(confluent(boot, **{"group.id": f"probe-{topic}"}))
    out["end offsets"] = [c.get_watermark_offsets(TopicPartition(topic, p), 10) for p in sorted(parts)]
    c.close()
    for name, group in groups.items():
        tps = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
        out[f"{name} committed"] = sorted((tp.partition, tp.offset) for tp in tps.topic_partitions)
        desc = admin.describe_consumer_groups([group])[group].result(30)
        out[f"{name} group"] = (desc.state.name, len(desc.members), desc.partition_assignor)
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entry = admin.describe_configs([res])[res].result(30)["min.insync.replicas"]
    out["min.insync.replicas"] = (entry.value, entry.source)
    return out


def _refused(boot: Bootstrap, topic: str, group: str) -> dict:
    """Alice's confluent-kafka producer gets TOPIC_AUTHORIZATION_FAILED (her login itself
    succeeds: an authentication error would be _AUTHENTICATION), her group consumer an
    authorization error too."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
    delivered: list = []
    p = Producer(confluent(boot, **{"message.timeout.ms": 20000}))
    p.produce(topic, b"refused", on_delivery=lambda err, _m: delivered.append(err))
    p.flush(30)
    assert [e.code() if e else None for e in delivered] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], delivered
    c = Consumer(confluent(boot, **{"group.id": group, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    errors: list = []
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        try:
            m = c.poll(0.5)
        except KafkaException as e:
            errors.append(e.args[0])
            continue
        if m is not None and m.error():
            errors.append(m.error())
        assert m is None or m.error(), "a record read without ACLs"
    c.close()
    # (Kafka checks the group first: FindCoordinator answers GROUP_AUTHORIZATION_FAILED)
    assert errors and errors[0].code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                           KafkaError.TOPIC_AUTHORIZATION_FAILED), errors
    return {"refused produce": delivered[0].name(), "refused consumer": errors[0].name()}


def _granted(boot: Bootstrap, topic: str) -> None:
    """Alice's producer gets through once every broker has the ACLs (kafka-acls.sh --add wrote
    them through one broker; ZooKeeper tells the others)."""
    from confluent_kafka import KafkaError, Producer
    last: list = []

    def produced() -> bool:
        delivered: list = []
        p = Producer(confluent(boot, acks="all", **{"message.timeout.ms": 10000}))
        p.produce(topic, b"granted", on_delivery=lambda err, _m: delivered.append(err))
        p.flush(15)
        last[:] = delivered
        if delivered and delivered[0] is not None:
            assert delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, delivered
        return delivered == [None]
    wait_for(produced, 30, f"alice's produce after kafka-acls.sh --add (last: {last})")


def _scram_user(boot: Bootstrap, user: str, password: str) -> None:
    """The user's SCRAM credential through AlterUserScramCredentials (kafka-configs.sh's request)."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient(confluent(boot))
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())])[user].result(30)


def test_acl_refused_until_kafka_acls_grants(secured):
    """A client without ACLs is refused; ``kafka-acls.sh --add`` grants alice the topic and the
    group; she produces and consumes with confluent-kafka and, over SASL_SSL (both modes with
    ENGINE_SECURE_CLUSTER_FULL=1), with the console producer/consumer (the consumer resumes at her
    group's committed offset). ENGINE_SECURE_CLUSTER_FULL=1 also runs ``kafka-configs.sh
    --alter/--describe`` of a SCRAM user (alice herself over SASL_SSL) and ``kafka-acls.sh --list``."""
    if HOME is None:
        pytest.skip("Kafka's Java tools are needed (tests/serving.find_kafka)")
    console = FULL or secured.mode == "sasl_ssl"
    topic, group = f"acl-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin_cfg = ("--bootstrap-server", secured.address, "--command-config", secured.admin.properties_path)
    user = "alice" if secured.mode == "sasl_ssl" else "carol"      # a SCRAM user (SASL_SSL: alice logs in)
    alice = secured.boot(secured.alice)
    with ThreadPoolExecutor(3) as ex:
        topic_made = ex.submit(secured.create_topic, topic, 1)
        if FULL:
            ok(tool("kafka-configs.sh", *admin_cfg, "--alter", "--entity-type", "users", "--entity-name", user,
                    "--add-config", f"{MECH}=[iterations=4096,password={user}-secret]"))
            described = ex.submit(tool, "kafka-configs.sh", *admin_cfg, "--describe", "--entity-type", "users",
                                  "--entity-name", user)
        elif secured.mode == "sasl_ssl":
            _scram_user(secured.boot(secured.admin), user, f"{user}-secret")
        topic_made.result()
        answers = _refused(alice, topic, group)
        ok(tool("kafka-acls.sh", *admin_cfg, "--add", "--allow-principal", "User:alice", "--producer",
                "--consumer", "--topic", topic, "--group", group))
        if FULL:
            out = ok(described.result())
            assert f"SCRAM credential configs for user-principal '{user}' are {MECH}=iterations=4096" in out, out
            listed = ex.submit(tool, "kafka-acls.sh", *admin_cfg, "--list", "--topic", topic)
        _granted(alice, topic)
        _confluent_consume(alice, topic, group, {b"granted"})       # commits the group's offset
        if console:      # both JVMs at once: the consumer resumes after "granted" whenever it joins
            consumed = ex.submit(consume, secured.address, secured.alice, topic, group, 2)
            r = produce(secured.address, secured.alice, topic, "one\ntwo\n")
            assert ok(r) is not None and not denied(r), r.stderr[-3000:]
            r = consumed.result()
            assert ok(r).splitlines() == ["one", "two"], r.stderr[-3000:]
        if FULL:
            out = ok(listed.result())
            for op in ("WRITE", "READ", "DESCRIBE", "CREATE"):
                assert f"(principal=User:alice, host=*, operation={op}, permissionType=ALLOW)" in out, out
    answers.update(_acl_answers(secured.boot(secured.admin), topic, group,
                                user if FULL or secured.mode == "sasl_ssl" else None))
    _differential(secured, "acl", answers)


def _acl_answers(boot: Bootstrap, topic: str, group: str, user: str | None) -> dict:
    """What admin reads back: alice's ACLs (names as TOPIC / GROUP), her group's committed offsets
    and state, the topic's end offset, and `user`'s SCRAM credential."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )
    admin = AdminClient(confluent(boot))
    acls = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                                None, AclOperation.ANY, AclPermissionType.ANY)).result(30)
    names = {topic: "TOPIC", group: "GROUP"}
    out: dict = {"acls": sorted((a.restype.name, names.get(a.name, a.name), a.resource_pattern_type.name,
                                 a.principal, a.host, a.operation.name, a.permission_type.name) for a in acls)}
    tps = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    out["committed"] = sorted((tp.partition, tp.offset) for tp in tps.topic_partitions)
    desc = admin.describe_consumer_groups([group])[group].result(30)
    out["group"] = (desc.state.name, len(desc.members))
    c = Consumer(confluent(boot, **{"group.id": f"probe-{topic}"}))
    out["end offsets"] = c.get_watermark_offsets(TopicPartition(topic, 0), 10)
    c.close()
    if user is not None:
        info = admin.describe_user_scram_credentials([user])[user].result(30)
        out["scram"] = sorted((ci.mechanism.name, ci.iterations) for ci in info.scram_credential_infos)
    return out
