"""Prometheus metrics of a broker (``metrics.port`` / ``serve --metrics-listen``; off by default).

Names follow what the Prometheus JMX exporter's Kafka rules (jmx_exporter's example
``kafka-2_0_0.yml``, Strimzi's ``kafka-metrics.yaml``) make of Kafka's MBeans, so dashboards
and alerts written for Kafka work unchanged where a Kafka metric exists:

====================================================  =========================================
``kafka_network_requestmetrics_requests_total``       RequestsPerSec count, label ``request``
``kafka_network_requestmetrics_totaltimems``          TotalTimeMs per ``request`` (a histogram)
``kafka_network_requestmetrics_errors_total``         requests that failed (connection closed)
``kafka_server_brokertopicmetrics_bytesin_total``     Produce request bytes
``kafka_server_brokertopicmetrics_bytesout_total``    Fetch response bytes
``kafka_server_brokertopicmetrics_messagesin_total``  records appended since start, per ``topic``
``kafka_server_brokertopicmetrics_failedproducerequests_total`` / ``...failedfetchrequests_total``
``kafka_server_brokertopicmetrics_totalproducerequests_total`` / ``...totalfetchrequests_total``
``kafka_server_replicamanager_partitioncount``        partitions hosted here (led or followed)
``kafka_server_replicamanager_leadercount``           partitions led here
``kafka_server_replicamanager_underreplicatedpartitions``  led here with ISR < replicas
``kafka_server_replicamanager_underminisrpartitioncount`` / ``...atminisrpartitioncount``
``kafka_cluster_partition_underreplicated``           per ``topic``, ``partition`` led here (0/1)
``kafka_controller_kafkacontroller_activecontrollercount``  1 on the controller
``kafka_log_log_size`` / ``_numlogsegments`` / ``_logstartoffset`` / ``_logendoffset``
                                                      per ``topic``, ``partition``
``kafka_consumergroup_lag`` / ``_current_offset``     per ``consumergroup``, ``topic``,
                                                      ``partition`` (kafka_exporter's names)
``kafka_server_socket_server_metrics_connection_count``  open client connections, per ``listener``
``kafka_server_socket_server_metrics_connection_accept_throttle_time``  mean delay (ms) of the
                                                      connections the creation rate delayed
``engine_server_connections_rejected_total``          per ``listener``, ``reason``: ``per_ip``
                                                      (max.connections.per.ip), ``inter_broker``
                                                      (closed for the protected listener)
``engine_recovery_segments_scanned`` ...              the embedded engine's own counters
====================================================  =========================================

On a single node every partition is led here with ISR = replicas = [this node].  What differs
from Kafka: a *failed* request here is one that closed its connection (unparseable, unsupported
version, internal error) — an error code inside a Produce or Fetch response is not counted, the
responses are not parsed again for it; ``bytesin``/``bytesout`` are whole Produce requests and
Fetch responses, broker-wide (Kafka counts record bytes, also per topic); ``messagesin`` per topic
is the growth of the log end offsets since the broker started, read at scrape time.

Cost on the request path: :meth:`BrokerMetrics.request` is one counter increment and one
histogram observe per request (children resolved once per API key), two more increments for a
Produce or Fetch — nothing per record.  Everything per partition or per group is read at scrape
time by :class:`EngineCollector`, never maintained per append.

The endpoint is ``GET /metrics`` (and ``HEAD``) on its own port, served by a stdlib
``ThreadingHTTPServer`` in a daemon thread: a scrape reads partition state and asks the group
coordinator for committed offsets, blocking work that must not run on the broker's event loop.
Any other path is 404, any other method 405: the endpoint is read-only.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from ..protocol import messages as m
from .http_security import HttpSecurity, TlsHttpServer

__all__ = ["BrokerMetrics", "EngineCollector", "MetricsServer"]

log = logging.getLogger("engine.server")

# milliseconds, as TotalTimeMs
_LATENCY_BUCKETS_MS = (0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)


def _request_name(key: int) -> str:
    """Kafka's ``request=`` tag: the API's name without spaces (``Produce``, ``OffsetCommit``)."""
    return m.API_NAMES.get(key, str(key)).replace(" ", "")


class BrokerMetrics:
    """The broker's registry: request counters (updated by the connection) and the scrape-time
    :class:`EngineCollector`.  A registry per broker, so brokers in one process don't mix."""

    def __init__(self, broker):
        # no `*_created` series next to each counter: the JMX exporter's Kafka metrics have none
        # (process-wide in prometheus_client; the broker process is ours)
        disable_created_metrics()
        self.broker = broker
        self.registry = reg = CollectorRegistry(auto_describe=False)
        self._requests = Counter("kafka_network_requestmetrics_requests",
                                 "Requests processed, by API (Kafka: RequestsPerSec)",
                                 ["request"], registry=reg)
        self._time = Histogram("kafka_network_requestmetrics_totaltimems",
                               "Request time from dequeue to response written, ms (Kafka: TotalTimeMs)",
                               ["request"], buckets=_LATENCY_BUCKETS_MS, registry=reg)
        self._errors = Counter("kafka_network_requestmetrics_errors",
                               "Requests that failed and closed the connection, by API",
                               ["request", "error"], registry=reg)
        self.bytes_in = Counter("kafka_server_brokertopicmetrics_bytesin",
                                "Bytes of Produce requests received (Kafka: BytesInPerSec)", registry=reg)
        self.bytes_out = Counter("kafka_server_brokertopicmetrics_bytesout",
                                 "Bytes of Fetch responses sent (Kafka: BytesOutPerSec)", registry=reg)
        self._total = {
            m.ApiKey.PRODUCE: Counter("kafka_server_brokertopicmetrics_totalproducerequests",
                                      "Produce requests (Kafka: TotalProduceRequestsPerSec)", registry=reg),
            m.ApiKey.FETCH: Counter("kafka_server_brokertopicmetrics_totalfetchrequests",
                                    "Fetch requests (Kafka: TotalFetchRequestsPerSec)", registry=reg),
        }
        self._failed = {
            m.ApiKey.PRODUCE: Counter("kafka_server_brokertopicmetrics_failedproducerequests",
                                      "Produce requests that failed (Kafka: FailedProduceRequestsPerSec)",
                                      registry=reg),
            m.ApiKey.FETCH: Counter("kafka_server_brokertopicmetrics_failedfetchrequests",
                                    "Fetch requests that failed (Kafka: FailedFetchRequestsPerSec)",
                                    registry=reg),
        }
        self._children: dict[int, tuple] = {}
        self.collector = EngineCollector(broker)
        reg.register(self.collector)

    def _child(self, key: int) -> tuple:
        c = self._children.get(key)
        if c is None:
            name = _request_name(key)
            c = self._children[key] = (self._requests.labels(name), self._time.labels(name),
                                       self._total.get(key))
        return c

    def request(self, key: int, seconds: float, nbytes_in: int, nbytes_out: int) -> None:
        """One request answered (called by the connection, once per request)."""
        requests, hist, total = self._child(key)
        requests.inc()
        hist.observe(seconds * 1000.0)
        if total is not None:
            total.inc()
            if key == m.ApiKey.PRODUCE:
                self.bytes_in.inc(nbytes_in)
            else:
                self.bytes_out.inc(nbytes_out)

    def failed(self, key: int, error: str) -> None:
        """A request that closed its connection (unparseable, unsupported, internal error)."""
        self._errors.labels(_request_name(key), error).inc()
        failed = self._failed.get(key)
        if failed is not None:
            failed.inc()

    def scrape(self) -> bytes:
        return generate_latest(self.registry)

    def sample(self) -> dict[str, float]:
        """A few broker-wide totals (for the console's charts): {name: value}."""
        out: dict[str, float] = {}
        for metric in self.registry.collect():
            for s in metric.samples:
                if s.name in _SAMPLED:
                    out[s.name] = out.get(s.name, 0.0) + s.value
        return out


_SAMPLED = {
    "kafka_network_requestmetrics_requests_total",
    "kafka_server_brokertopicmetrics_bytesin_total",
    "kafka_server_brokertopicmetrics_bytesout_total",
    "kafka_server_brokertopicmetrics_messagesin_total",
    "kafka_server_socket_server_metrics_connection_count",
    "kafka_consumergroup_lag",
}


class EngineCollector:
    """Per-partition, per-group and engine gauges, read from the broker's node at scrape time."""

    def __init__(self, broker):
        self.broker = broker
        self.node = broker.node
        self._baseline: dict[tuple[str, int], int] | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Remember every partition's log end offset: MessagesIn counts appends after this."""
        with self._lock:
            self._baseline = {key: lg.log_end_offset for key, lg in self._logs()}

    def _logs(self):
        return sorted(self.node.logs.logs().items())

    def describe(self):
        return []

    def collect(self):
        node = self.node
        if node.closed:
            return
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Partition size in bytes (Kafka: Log.Size)", labels=labels)
        segs = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of a partition", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset", labels=labels)
        msgs = CounterMetricFamily("kafka_server_brokertopicmetrics_messagesin",
                                   "Records appended since the broker started (Kafka: MessagesInPerSec)",
                                   labels=["topic"])
        logs = self._logs()
        if self._baseline is None:
            self.start()
        per_topic: dict[str, int] = {}
        hw: dict[tuple[str, int], int] = {}
        for (topic, p), lg in logs:
            lbl = [topic, str(p)]
            leo = lg.log_end_offset
            hw[(topic, p)] = lg.high_watermark
            size.add_metric(lbl, lg.size)
            segs.add_metric(lbl, len(lg.segments))
            start.add_metric(lbl, lg.log_start_offset)
            end.add_metric(lbl, leo)
            if not topic.startswith("__"):
                per_topic[topic] = per_topic.get(topic, 0) + max(0, leo - self._baseline.get((topic, p), 0))
        for topic, n in sorted(per_topic.items()):
            msgs.add_metric([topic], n)
        yield from (size, segs, start, end, msgs)
        yield from self._replica_metrics(len(logs))
        yield from self._connection_metrics()
        yield from self._group_metrics(hw)
        lm = node.logs
        scanned = sum(lg.recovery_stats.segments_scanned for _k, lg in logs)
        scanned_bytes = sum(lg.recovery_stats.bytes_scanned for _k, lg in logs)
        yield GaugeMetricFamily("engine_recovery_segments_scanned",
                                "Segments recovery walked when the data directory was opened",
                                value=scanned)
        yield GaugeMetricFamily("engine_recovery_bytes_scanned",
                                "Bytes recovery read when the data directory was opened",
                                value=scanned_bytes)
        yield GaugeMetricFamily("engine_recovery_events", "Recovery events at open (truncations, rebuilt indexes)",
                                value=len(lm.recovery_report))
        pool = self.broker.buffers
        yield GaugeMetricFamily("engine_server_buffer_pool_bytes",
                                "Bytes held by the broker's pool of large receive buffers",
                                value=pool._bytes)
        yield CounterMetricFamily("engine_server_buffer_pool_reused",
                                  "Large receive buffers served from the pool", value=pool.reused)

    def _connection_metrics(self):
        """Per listener: open connections and what the connection limits did
        (engine/server/connection_quotas.py)."""
        quotas = self.broker.connection_quotas
        count = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                  "Open client connections", labels=["listener"])
        throttle = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_accept_throttle_time",
                                     "Mean delay (ms) of the connections the creation rate delayed",
                                     labels=["listener"])
        rejected = CounterMetricFamily("engine_server_connections_rejected",
                                       "Connections closed by the connection limits",
                                       labels=["listener", "reason"])
        for name, quota in sorted(list(quotas.listeners.items())):
            stats = quota.stats
            count.add_metric([name], quota.count)
            throttle.add_metric([name], stats.throttle_ms / stats.throttled if stats.throttled else 0.0)
            rejected.add_metric([name, "per_ip"], stats.rejected)
            rejected.add_metric([name, "inter_broker"], stats.closed_for_inter_broker)
        yield from (count, throttle, rejected)

    def _replica_metrics(self, n_logs: int):
        """ReplicaManager's gauges and each led partition's UnderReplicated flag, from the replica
        layer's partition states (one node: every log is led here and fully replicated)."""
        rm = self.broker.replicas
        parts = rm.partitions()
        led = [p for p in parts if p.is_leader]
        # a node alone leads every log of its directory, also those not served yet
        n, leaders = (n_logs, n_logs) if rm.view.local else (len(parts), len(led))
        under = GaugeMetricFamily("kafka_cluster_partition_underreplicated",
                                  "1 when a partition led here has fewer in-sync replicas than replicas",
                                  labels=["topic", "partition"])
        n_under = n_under_min = n_at_min = 0
        for p in sorted(led, key=lambda p: (p.topic, p.partition)):
            isr, replicas, min_isr = len(p.isr), len(p.replicas), p.min_isr
            flag = isr < replicas
            under.add_metric([p.topic, str(p.partition)], int(flag))
            n_under += flag
            n_under_min += isr < min_isr
            n_at_min += isr == min_isr
        yield GaugeMetricFamily("kafka_server_replicamanager_partitioncount",
                                "Partitions on this broker (led or followed)", value=n)
        yield GaugeMetricFamily("kafka_server_replicamanager_leadercount",
                                "Partitions led by this broker", value=leaders)
        yield GaugeMetricFamily("kafka_server_replicamanager_underreplicatedpartitions",
                                "Partitions led here whose ISR is smaller than their replica set",
                                value=n_under)
        yield GaugeMetricFamily("kafka_server_replicamanager_underminisrpartitioncount",
                                "Partitions led here whose ISR is below min.insync.replicas",
                                value=n_under_min)
        yield GaugeMetricFamily("kafka_server_replicamanager_atminisrpartitioncount",
                                "Partitions led here whose ISR is exactly min.insync.replicas",
                                value=n_at_min)
        yield under
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the broker that is the cluster's controller",
                                value=int(rm.view.controller_id() == rm.view.node_id))

    def _group_metrics(self, hw: dict):
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus committed offset",
                                labels=["consumergroup", "topic", "partition"])
        cur = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset",
                                labels=["consumergroup", "topic", "partition"])
        for group, offsets in self.group_offsets():
            for (t, p), off in sorted(offsets.items()):
                lbl = [group, t, str(p)]
                cur.add_metric(lbl, off)
                if (t, p) in hw:
                    lag.add_metric(lbl, max(0, hw[(t, p)] - off))
        yield lag
        yield cur

    def group_offsets(self) -> list[tuple[str, dict]]:
        """[(group id, {(topic, partition): committed offset})] from the group coordinator."""
        coord = self.node.hosted("group")
        if coord is None or not getattr(coord, "running", False) or getattr(coord, "on_current_loop", False):
            return []
        try:
            err, listings = coord.call(coord.list_groups, timeout=5)
            if err:
                return []
            out = []
            for g in sorted(listings, key=lambda g: g.group_id):
                err, got = coord.call(coord.fetch_offsets, g.group_id, None, timeout=5)
                if not err:
                    out.append((g.group_id, {tp: om.offset for tp, om in got.items() if om.offset >= 0}))
            return out
        except Exception as e:             # a scrape never fails because of the coordinator
            log.debug("metrics: group offsets unavailable: %s", e)
            return []


def _one(name: str, doc: str, labels: list, values: list, value: float) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=labels)
    g.add_metric(values, value)
    return g


class _MetricsHandler(BaseHTTPRequestHandler):
    server_version = "kafka-engine-metrics"
    metrics: BrokerMetrics
    security: HttpSecurity | None

    def do_GET(self):
        if self.security is not None and self.security.principal(self) is None:
            return                      # answered 401
        path = self.path.split("?", 1)[0]
        if path != "/metrics":
            self._reply(404, b"not found: the metrics are at /metrics\n", "text/plain; charset=utf-8")
            return
        try:
            body = self.metrics.scrape()
        except Exception:
            log.exception("metrics scrape failed")
            self._reply(500, b"scrape failed\n", "text/plain; charset=utf-8")
            return
        self._reply(200, body, CONTENT_TYPE_LATEST)

    def do_HEAD(self):
        self.do_GET()

    def _refuse(self):
        self.send_response(405)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def _reply(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, fmt, *args):       # scrapes every few seconds: debug level only
        log.debug("metrics %s: " + fmt, self.client_address[0], *args)


def http_server(host: str, port: int, handler: type, security: HttpSecurity | None = None,
                **attrs) -> TlsHttpServer:
    """A threading HTTP server on host:port (0: any free port) whose handler class gets `attrs`
    and ``security`` (engine/server/http_security.py: HTTPS and basic auth, None for neither);
    a bind error names the address (as the broker's does)."""
    try:
        httpd = TlsHttpServer((host, port), type("Handler", (handler,), dict(attrs, security=security)))
    except OSError as e:
        raise OSError(e.errno, e.strerror, f"{host}:{port}") from e
    httpd.ssl_context = security.ssl_context if security is not None else None
    return httpd


class MetricsServer:
    """``GET /metrics`` on host:port (port 0: any free one) in a daemon thread."""

    def __init__(self, metrics: BrokerMetrics, host: str = "127.0.0.1", port: int = 0,
                 security: HttpSecurity | None = None):
        self.httpd = http_server(host, port, _MetricsHandler, security, metrics=metrics)
        self.host = host
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        log.info("metrics on %s://%s:%d/metrics", "https" if self.httpd.ssl_context else "http",
                 self.host, self.port)
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

