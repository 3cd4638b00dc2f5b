"""The Prometheus endpoint of `python -m engine serve --metrics-listen`: scraped over HTTP after
real confluent-kafka produce and consume (counters move by the amounts sent, per-partition gauges
are there), read-only (POST 405) and exact about its path (404)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from tests.serving import ServeProcess, free_port

ck = pytest.importorskip("confluent_kafka")
pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402


def scrape(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))), 0.0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    mport = free_port()
    srv = ServeProcess(tmp_path_factory.mktemp("metrics"), "--config", "num.partitions=2",
                       "--config", "group.initial.rebalance.delay.ms=0",
                       "--metrics-listen", f"127.0.0.1:{mport}").start()
    srv.metrics_port = mport
    yield srv
    srv.stop()


def test_counters_and_gauges_after_produce_and_consume(broker):
    before = scrape(broker.metrics_port)
    assert value(before, "kafka_server_replicamanager_partitioncount") >= 0
    topic = "metered"
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(25):
        p.produce(topic, key=b"k%d" % i, value=b"v" * 100, partition=i % 2)
    assert p.flush(30) == 0
    c = ck.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "meter-group",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    import time
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got += 1
    assert got == 20
    c.commit(asynchronous=False)
    after = scrape(broker.metrics_port)
    c.close()

    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 25
    produced = value(after, "kafka_network_requestmetrics_requests_total", request="Produce") - \
        value(before, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert produced >= 1
    assert value(after, "kafka_server_brokertopicmetrics_totalproducerequests_total") - \
        value(before, "kafka_server_brokertopicmetrics_totalproducerequests_total") == produced
    # at least the 25 values of 100 bytes came in; fetches sent them back out
    assert value(after, "kafka_server_brokertopicmetrics_bytesin_total") - \
        value(before, "kafka_server_brokertopicmetrics_bytesin_total") >= 2500
    assert value(after, "kafka_server_brokertopicmetrics_bytesout_total") >= 2000
    assert value(after, "kafka_network_requestmetrics_requests_total", request="Fetch") >= 1
    assert value(after, "kafka_network_requestmetrics_requests_total", request="Metadata") >= 1
    # the latency histogram: one observation per request
    assert value(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == \
        value(after, "kafka_network_requestmetrics_requests_total", request="Produce")
    assert value(after, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") == \
        value(after, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
    # per-partition gauges, computed at scrape time
    for part, n in ((0, 13), (1, 12)):
        assert value(after, "kafka_log_log_logendoffset", topic=topic, partition=part) == n
        assert value(after, "kafka_log_log_size", topic=topic, partition=part) > 100 * n
        assert value(after, "kafka_log_log_numlogsegments", topic=topic, partition=part) == 1
        assert value(after, "kafka_log_log_logstartoffset", topic=topic, partition=part) == 0
    assert value(after, "kafka_server_replicamanager_partitioncount") >= 2
    # the consumer's commit: lag = high watermark - committed offset, per partition
    lags = {k: v for k, v in after.items() if k[0] == "kafka_consumergroup_lag"
            and ("consumergroup", "meter-group") in k[1]}
    assert sum(lags.values()) == 5, lags
    assert value(after, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
    assert ("engine_recovery_segments_scanned", ()) in after
    assert not [k for k in after if k[0].endswith("_created")]     # as the JMX exporter: none


def test_wrong_path_is_404_and_post_is_405(broker):
    for path in ("/", "/metricsx", "/metrics/../etc", "/%00"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}{path}", timeout=10)
        assert e.value.code == 404, path
    req = urllib.request.Request(f"http://127.0.0.1:{broker.metrics_port}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 405


def test_metrics_port_config_key_and_off_by_default(tmp_path):
    from engine.config import EngineConfig
    cfg = EngineConfig.from_mapping({})
    assert cfg["metrics.port"] == -1 and cfg["console.port"] == -1
    port = free_port()
    srv = ServeProcess(tmp_path, "--config", f"metrics.port={port}").start()
    try:
        assert value(scrape(port), "kafka_server_replicamanager_partitioncount") == 0
    finally:
        code, text = srv.stop()
    assert code == 0
    assert f"metrics on http://127.0.0.1:{port}/metrics" in text
