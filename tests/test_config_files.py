"""The configuration files users start from: the shipped, annotated config/server.properties
starts the broker with no 'accepted without effect' warning, and the documented list of Kafka keys
accepted without effect (docs/broker.md, "Configuration keys") is the one engine.config computes
(so the documentation stays true)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from confluent_kafka import Producer

from engine.config import EngineConfig, is_sensitive, keys_without_effect, parse_properties
from tests.serving import ServeProcess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = os.path.join(ROOT, "config", "server.properties")


def test_shipped_properties_have_only_keys_with_an_effect():
    with open(SHIPPED) as f:
        settings = parse_properties(f.read(), SHIPPED)
    cfg = EngineConfig.from_mapping(settings)
    assert cfg.ignored == {}
    assert cfg["num.partitions"] == 1 and cfg["log.retention.ms"] == 168 * 3600 * 1000


def test_shipped_properties_start_the_broker_without_warnings(tmp_path):
    srv = ServeProcess(tmp_path, SHIPPED)          # --data-dir and --listen override the file's
    srv.start()
    try:
        p = Producer({"bootstrap.servers": srv.bootstrap})
        errors = []
        for i in range(5):
            p.produce("shipped-props", b"v%d" % i, on_delivery=lambda e, m: e and errors.append(e))
        assert p.flush(30) == 0 and not errors
    finally:
        code, log = srv.stop()
    assert code == 0, log
    assert "accepted without effect" not in log, log
    assert "effective non-default configuration" in log


def test_docs_list_the_keys_accepted_without_effect():
    with open(os.path.join(ROOT, "docs", "broker.md")) as f:
        text = f.read()
    block = re.search(r"<!-- keys-without-effect:.*?-->\n(.*?)\n<!-- /keys-without-effect -->", text, re.S)
    assert block, "docs/broker.md lost its keys-without-effect block"
    listed = re.findall(r"`([a-z0-9.]+)`", block.group(1))
    assert listed == keys_without_effect()
    assert f"The {len(listed)} Kafka 4.0 broker keys accepted without effect" in text


def test_secrets_are_never_logged_or_printed(tmp_path):
    """Kafka's PASSWORD keys (a listener's JAAS line with its users' passwords, ssl.key.password)
    show as [hidden] in the broker's startup log and (sensitive) in `configs --describe`."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'user_admin="jaas-s3cret";')
    assert is_sensitive("sasl.jaas.config") and is_sensitive("listener.name.sasl_ssl.plain.sasl.jaas.config")
    assert is_sensitive("listener.name.ssl.ssl.keystore.key") and is_sensitive("ssl.truststore.password")
    assert not is_sensitive("ssl.keystore.location") and not is_sensitive("sasl.enabled.mechanisms")
    srv = ServeProcess(tmp_path / "d", "--config", "sasl.enabled.mechanisms=PLAIN",
                       "--config", f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
                       "--config", "ssl.key.password=key-s3cret")
    srv.bootstrap = f"PLAINTEXT://{srv.bootstrap},SASL_PLAINTEXT://127.0.0.1:0"
    srv.start()
    code, log = srv.stop()
    assert code == 0, log
    assert "effective non-default configuration" in log and "jaas.config=[hidden]" in log, log
    assert "s3cret" not in log, log
    r = subprocess.run([sys.executable, "-m", "engine", "configs", "--data-dir", srv.data,
                        "--entity-type", "brokers", "--entity-name", "1", "--config", "ssl.key.password=key-s3cret",
                        "--config", f"sasl.jaas.config={jaas}"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ssl.key.password=(sensitive) sensitive=true" in r.stdout and "s3cret" not in r.stdout, r.stdout
