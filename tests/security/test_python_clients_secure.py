"""confluent-kafka, kafka-python and aiokafka against one node secured as in
test_java_tools_secure.py (its ``Secured``: SASL_SSL with PLAIN admin and SCRAM-SHA-512 users, SSL
with ``ssl.client.auth=required`` and the certificate's CN as principal, StandardAuthorizer,
super user admin), per broker: ``ours`` and ``kafka`` (Apache Kafka 4.0, one KRaft node, configured the same way) --
the same assertions for both.  Runs only with ``SECURITY_KAFKA=1`` (CI time; our broker alone is
covered by the cluster version).

carol (a SCRAM-SHA-512 user made through AlterUserScramCredentials as admin) over SASL_SSL and
alice (her certificate) over mTLS are refused (TOPIC_/GROUP_AUTHORIZATION_FAILED) until one
``kafka-acls.sh --add --producer --consumer`` grants both a prefix of topics and groups; then
each of the three clients produces and consumes in its own group, over both listeners.
(The 3-broker cluster version, Kafka as 3 KRaft brokers with SECURITY_KAFKA=1 too:
tests/cluster/test_secure_cluster_clients.py.)
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.cluster.test_secure_cluster_clients import (
    _aiokafka_consume,
    _aiokafka_produce,
    _confluent_consume,
    _confluent_produce,
    _granted,
    _kafka_python_consume,
    _kafka_python_produce,
    _refused,
    _scram_user,
    _values,
)
from tests.secure_clients import Bootstrap, ClientSecurity
from tests.security.test_java_tools_secure import HOME, KAFKA_ROW, WHY_NOT, Secured, create_topic, ok, tool
from tests.serving import KafkaProcess

pytestmark = pytest.mark.skipif(HOME is None, reason=f"Kafka's Java tools are needed: {WHY_NOT}")
N = 10      # records per client per listener


@pytest.fixture(scope="module", params=["ours", "kafka"])
def node(request, tmp_path_factory):
    if not KAFKA_ROW:      # both rows: ours alone is covered by tests/cluster/test_secure_cluster_clients.py
        pytest.skip("this differential runs with SECURITY_KAFKA=1 (CI time)")
    s = Secured(request.param, str(tmp_path_factory.mktemp(f"python-clients-secure-{request.param}")))
    s.srv.start()
    yield s
    if isinstance(s.srv, KafkaProcess):
        s.srv.stop()
        return
    _code, log = s.srv.stop()
    assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"


def _round_trip(boot: Bootstrap, topic: str, prefix: str) -> None:
    values = {name: _values(f"{name}-{prefix}", N) for name in ("ck", "kp", "aio")}
    _confluent_produce(boot, topic, values["ck"])
    _kafka_python_produce(boot, topic, values["kp"])
    _aiokafka_produce(boot, topic, values["aio"])
    want = set(values["ck"] + values["kp"] + values["aio"])
    with ThreadPoolExecutor(3) as ex:
        for f in [ex.submit(consume_, boot, topic, f"{prefix}-{name}", want) for name, consume_ in
                  (("ck", _confluent_consume), ("kp", _kafka_python_consume), ("aio", _aiokafka_consume))]:
            f.result()


def test_refused_until_kafka_acls_grants_then_three_clients_round_trip(node):
    prefix = f"pc-{uuid.uuid4().hex[:8]}"
    carol = Bootstrap(node.sasl_ssl, ClientSecurity("SASL_SSL", node.bob.cafile, username="carol",
                                                    password="carol-secret"))
    alice = Bootstrap(node.ssl, node.alice)
    rows = {"sasl_ssl": (carol, f"{prefix}-sasl"), "mtls": (alice, f"{prefix}-mtls")}
    _scram_user(Bootstrap(node.sasl_ssl, node.admin), "carol", "carol-secret")
    for _boot, topic in rows.values():
        create_topic(node, topic)
    with ThreadPoolExecutor(2) as ex:
        for f in [ex.submit(_refused, boot, topic, f"{topic}-refused") for boot, topic in rows.values()]:
            f.result()
    ok(tool("kafka-acls.sh", "--bootstrap-server", node.sasl_ssl, "--command-config", node.admin.properties_path,
            "--add", "--allow-principal", "User:carol", "--allow-principal", "User:alice", "--producer",
            "--consumer", "--topic", prefix, "--group", prefix, "--resource-pattern-type", "prefixed"))
    for boot, topic in rows.values():
        _granted(boot, topic)
    for boot, topic in rows.values():
        _round_trip(boot, topic, topic)
