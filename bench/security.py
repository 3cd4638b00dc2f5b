"""Produce and consume over PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-256), ours and Apache Kafka
4.0's, in one run, with confluent-kafka on loopback.

    python -m bench.security [--records 200000] [--size 1024] [--rounds 2] [--no-kafka]
                             [--client confluent|engine]

Both brokers get the same three listeners on 127.0.0.1 (certificates made for the run with
``cryptography``, as the tests make them: tests/security/certs.py) and the same SCRAM user,
created through AlterUserScramCredentials on the PLAINTEXT listener.  Ours is
``python -m engine serve`` (one process); Kafka is one combined KRaft node
(bench/_kafka_cluster.py).  Each round produces ``--records`` records of ``--size`` bytes
(acks=1, linger.ms=5, batch.size=1 MiB, one partition) then consumes them, per protocol, the
brokers interleaved; the best round is printed.  The producer's connections are made before the
clock starts (one record produced and flushed first), as consume is timed from its first record:
a TLS handshake and metadata round trips are not throughput.  ``--client engine`` produces with
``engine.connect``'s producer instead of confluent-kafka (consume stays confluent-kafka's): a
second client, whose TLS records are full 16 KiB ones where librdkafka sends a 1 MiB Produce as
~450 TLS records, most of them under 2 KiB (measured on the broker side, 2026-11-27).

Printed: records/s per broker and protocol; each protocol's rate over the same broker's
PLAINTEXT rate (goal: our SSL at >= 0.7 of our PLAINTEXT at 1 KiB); ours over Kafka's per
protocol (goal: ahead of Kafka's TLS); and each broker's CPU seconds (user + system, from
/proc/PID/stat) per 100,000 records in the best round, and the client's in the same round (this
process's: confluent-kafka's librdkafka threads and engine.connect run in it; the client shares
the machine's cores with the broker, so on a 2-core machine records/s measure both).
Our TLS listeners send fetched data buffered (read, then encrypted), not with sendfile.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench._kafka_cluster import KafkaCluster, _free_ports, find_kafka  # noqa: E402
from bench.broker_clients import cpu_seconds  # noqa: E402

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, PASSWORD = "bench", "bench-secret"


def _client_conf(protocol: str, port: int, ca: str) -> dict:
    conf: dict = {"bootstrap.servers": f"127.0.0.1:{port}", "broker.address.family": "v4"}
    if protocol in ("SSL", "SASL_SSL"):
        conf.update({"security.protocol": protocol, "ssl.ca.location": ca})
    if protocol == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": PASSWORD})
    return conf


def _add_user(port: int) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    futs = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode())])
    futs[USER].result(60)


class Ours:
    name = "ours"

    def __init__(self, base: str, pem: str):
        self.ports = dict(zip(PROTOCOLS, _free_ports(3), strict=True))
        listeners = ",".join(f"{p}://127.0.0.1:{port}" for p, port in self.ports.items())
        conf = [f"listeners={listeners}", "sasl.enabled.mechanisms=SCRAM-SHA-256", "ssl.keystore.type=PEM",
                f"ssl.keystore.location={pem}", "num.partitions=1"]
        args = [x for kv in conf for x in ("--config", kv)]
        self.proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--data-dir",
                                      os.path.join(base, "ours"), "--log-level", "warning", *args],
                                     cwd=ROOT, stderr=subprocess.PIPE, text=True)
        seen = []
        while True:
            line = self.proc.stderr.readline()
            seen.append(line)
            if re.search(r"^serving .* on ", line):
                break
            if not line:
                raise RuntimeError(f"our broker did not start: {''.join(seen)}")
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        _add_user(self.ports["PLAINTEXT"])

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


class Kafka:
    name = "Kafka 4.0"

    def __init__(self, home: str, pem: str):
        ssl_port, sasl_port = _free_ports(2)
        settings = {
            "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1", "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": pem,
        }
        self.cluster = KafkaCluster(home, 1, settings,
                                    extra_listeners={1: {"SSL": ssl_port, "SASL_SSL": sasl_port}})
        node = self.cluster.brokers[1]
        self.ports = {"PLAINTEXT": node.port, "SSL": ssl_port, "SASL_SSL": sasl_port}
        _add_user(node.port)

    def cpu(self) -> float:
        return self.cluster.broker_cpu()

    def close(self) -> None:
        self.cluster.close()


def produce(conf: dict, topic: str, n: int, size: int, timed) -> float:
    """records/s from the first record to the last acknowledged; ``timed`` (a context manager)
    wraps that span only, after the producer's connections are made."""
    from confluent_kafka import Producer

    from bench._util import send_values
    p = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "acks": "1",
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2 * 1024 * 1024})
    values = [os.urandom(size // 2).hex().encode() for _ in range(4096)]
    p.produce(topic, b"warm-up")             # connect (TLS handshake, metadata) off the clock
    if p.flush(60) != 0:
        raise RuntimeError("warm-up record left undelivered")
    with timed:
        t0 = time.perf_counter()
        send_values(p, topic, values, 0, n)
        if p.flush(300) != 0:
            raise RuntimeError("records left undelivered")
        dt = time.perf_counter() - t0
    return n / dt


def _engine_conf(protocol: str, port: int, ca: str) -> dict:
    conf: dict = {"bootstrap.servers": f"127.0.0.1:{port}"}
    if protocol in ("SSL", "SASL_SSL"):
        conf.update({"security.protocol": protocol, "ssl.truststore.type": "PEM",
                     "ssl.truststore.location": ca, "ssl.endpoint.identification.algorithm": ""})
    if protocol == "SASL_SSL":
        conf.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config":
                     "org.apache.kafka.common.security.scram.ScramLoginModule required "
                     f'username="{USER}" password="{PASSWORD}";'})
    return conf


def produce_engine(conf: dict, topic: str, n: int, size: int, timed) -> float:
    """As :func:`produce`, with engine.connect's producer (columns of 8192 values per call)."""
    import engine
    values = [os.urandom(size // 2).hex().encode() for _ in range(4096)]
    values = (values * (n // len(values) + 1))[:n]
    eng = engine.connect(**conf)
    try:
        p = eng.producer(**{"acks": "1", "linger.ms": 5, "batch.size": 1 << 20})
        p.send_batch(topic, [b"warm-up"])
        p.flush(60)
        with timed:
            t0 = time.perf_counter()
            for i in range(0, n, 8192):
                p.send_batch(topic, values[i:i + 8192])
            p.flush(300)
            dt = time.perf_counter() - t0
        p.close()
    finally:
        eng.close()
    return n / dt


class _CpuTimer:
    """Context manager: the broker's CPU seconds over the span, kept in ``seconds``, and this
    process's -- the client's: confluent-kafka's librdkafka threads or engine.connect run here --
    in ``client_seconds``."""

    def __init__(self, broker) -> None:
        self.broker, self.seconds, self.client_seconds = broker, 0.0, 0.0

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system

    def __enter__(self) -> _CpuTimer:
        self._start, self._own_start = self.broker.cpu(), self._own()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = self.broker.cpu() - self._start
        self.client_seconds = self._own() - self._own_start


def consume(conf: dict, topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    from bench._util import consume_timed
    c = Consumer({**conf, "group.id": "bench-security", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        dt, timed = consume_timed(c, n)
    finally:
        c.close()
    return timed / dt if dt > 0 else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-kafka", action="store_true", help="ours only")
    ap.add_argument("--client", choices=("confluent", "engine"), default="confluent",
                    help="the producing client (consume is confluent-kafka's either way)")
    args = ap.parse_args(argv)
    from tests.security.certs import make_pki
    base = tempfile.mkdtemp(prefix="bench-security-")
    os.makedirs(os.path.join(base, "pki"))
    pki = make_pki(os.path.join(base, "pki"))
    pem, ca = pki.path("server.pem"), pki.path("ca.pem")
    brokers: list[Ours | Kafka] = []
    home = None if args.no_kafka else find_kafka(ROOT)
    try:
        brokers.append(Ours(base, pem))
        if home is not None:
            brokers.append(Kafka(home, pem))
        elif not args.no_kafka:
            print("Kafka 4.0 not found (KAFKA_HOME or ../shared/kafka): ours only", file=sys.stderr)
        best: dict = {}
        cpu: dict = {}                        # broker CPU s per 100k records, in the best round
        client_cpu: dict = {}                 # the client's (this process's), the same round
        for r in range(args.rounds):
            for proto in PROTOCOLS:
                for b in brokers:             # interleaved: the machine's noise falls on both
                    topic = f"sec-{proto.lower()}-{r}"
                    print(f"round {r + 1}: {b.name} {proto}", file=sys.stderr, flush=True)
                    pt, ct = _CpuTimer(b), _CpuTimer(b)
                    if args.client == "engine":
                        prate = produce_engine(_engine_conf(proto, b.ports[proto], ca), topic,
                                               args.records, args.size, pt)
                    else:
                        prate = produce(_client_conf(proto, b.ports[proto], ca), topic, args.records,
                                        args.size, pt)
                    conf = _client_conf(proto, b.ports[proto], ca)
                    with ct:
                        crate = consume(conf, topic, args.records)
                    for op, rate, timer in (("produce", prate, pt), ("consume", crate, ct)):
                        key = (b.name, proto, op)
                        if rate > best.get(key, 0.0):
                            best[key] = rate
                            cpu[key] = timer.seconds * 100_000 / args.records
                            client_cpu[key] = timer.client_seconds * 100_000 / args.records
    finally:
        for b in brokers:
            b.close()
        shutil.rmtree(base, ignore_errors=True)
    names = [b.name for b in brokers]
    print(f"{args.records} records of {args.size} B, acks=1, best of {args.rounds} rounds, "
          f"producing with {args.client}; records/s, the broker's and the client's CPU s per 100k records")
    head = "| op | protocol | " + " | ".join(f"{n} rec/s | {n} vs own PLAINTEXT | {n} CPU s/100k | "
                                              f"client CPU s/100k ({n})" for n in names)
    head += " | ours / Kafka |" if len(names) > 1 else " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for op in ("produce", "consume"):
        for proto in PROTOCOLS:
            cells = []
            for n in names:
                rate = best[(n, proto, op)]
                cells += [f"{rate:,.0f}", f"{rate / best[(n, 'PLAINTEXT', op)]:.2f}",
                          f"{cpu[(n, proto, op)]:.2f}", f"{client_cpu[(n, proto, op)]:.2f}"]
            tail = (f" | {best[('ours', proto, op)] / best[('Kafka 4.0', proto, op)]:.2f} |"
                    if len(names) > 1 else " |")
            print(f"| {op} | {proto} | " + " | ".join(cells) + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
