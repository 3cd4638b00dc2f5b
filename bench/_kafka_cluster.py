"""A 3-node Apache Kafka 4.0 KRaft cluster on loopback for the replication benchmark.

    c = KafkaCluster(home, 3, {"broker.session.timeout.ms": "6000"})   # formats, starts, waits
    c.bootstrap; c.brokers[2].signal(signal.SIGKILL); c.brokers[2].start(); c.close()

Every node is a combined broker + controller (``process.roles=broker,controller``,
``node.id`` 1..n) with a static quorum (``controller.quorum.voters=1@127.0.0.1:C1,...``), so
``kafka-storage.sh format`` needs none of the dynamic-quorum flags (``--standalone``,
``--initial-controllers``, ``--no-initial-controllers``); every data directory is formatted with
the same cluster id (``kafka-storage.sh random-uuid``).  PLAINTEXT and CONTROLLER listeners on
free 127.0.0.1 ports; internal topics with replication factor 3 (``min.isr`` 2).  ``settings``
override any of these keys (a secured cluster: tests/cluster/test_secure_cluster_clients.py
maps CONTROLLER to SSL and names a SASL_SSL inter-broker listener), ``extra_listeners`` adds
listeners per node (port 0: a free one, then in the node's ``extra``) and ``format_args`` go to
every ``kafka-storage.sh format`` (e.g. ``--add-scram``: in KRaft the inter-broker SCRAM user
must exist before the brokers start).  Each node is ``kafka-server-start.sh`` (which execs the
JVM: the PID is Kafka's own) in its own process group, with ``KAFKA_HEAP_OPTS`` (default
``-Xmx512m -Xms512m``), logs under its directory.
Nodes are stopped by their process group only -- never with kafka-server-stop.sh, which stops
every Kafka on the machine.

The node interface is the one bench/replication.py drives for our brokers
(engine.chaos.runner._Broker): ``start()`` (returns once the PLAINTEXT port accepts),
``signal(sig)`` (waits for the process to exit), ``running``, ``proc``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from engine.chaos.procs import signal_and_wait


def find_kafka(root: str) -> str | None:
    """The kafka_2.13-4.0.0 directory: KAFKA_HOME (the distribution or the folder holding it),
    then <root>/../shared/kafka; None when absent or java is missing."""
    candidates = []
    if os.environ.get("KAFKA_HOME"):
        candidates += [os.environ["KAFKA_HOME"], os.path.join(os.environ["KAFKA_HOME"], "kafka_2.13-4.0.0")]
    candidates.append(os.path.join(root, "..", "shared", "kafka", "kafka_2.13-4.0.0"))
    for home in candidates:
        if os.path.isfile(os.path.join(home, "bin", "kafka-server-start.sh")) and shutil.which("java"):
            return os.path.abspath(home)
    return None


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):                      # held open together: n distinct ports
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _recv(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise EOFError("connection closed")
        out += chunk
    return bytes(out)


class KafkaNode:
    def __init__(self, home: str, base: str, node_id: int, port: int, cport: int, voters: str,
                 settings: dict, extra: dict[str, int] | None = None):
        self.home, self.n = home, node_id
        self.dir = os.path.join(base, f"kafka-{node_id}")
        os.makedirs(os.path.join(self.dir, "logs"), exist_ok=True)
        self.listen = f"127.0.0.1:{port}"
        self.port = port
        self.conf = os.path.join(self.dir, "server.properties")
        # more listeners, each named after its security protocol (SSL, SASL_SSL, ...)
        self.extra = dict(extra or {})
        more = "".join(f",{name}://127.0.0.1:{p}" for name, p in self.extra.items())
        conf = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}{more}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}{more}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
                                              + "".join(f",{name}:{name}" for name in (extra or {})),
            "log.dirs": os.path.join(self.dir, "log"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "share.coordinator.state.topic.replication.factor": "3",
            "share.coordinator.state.topic.min.isr": "2",
            "group.initial.rebalance.delay.ms": "0",
        }
        conf.update(settings)
        with open(self.conf, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
        self.proc: subprocess.Popen | None = None

    def _env(self) -> dict:
        return dict(os.environ, LOG_DIR=os.path.join(self.dir, "logs"),
                    KAFKA_HEAP_OPTS=os.environ.get("KAFKA_HEAP_OPTS", "-Xmx512m -Xms512m"))

    def format(self, cluster_id: str, *args: str) -> subprocess.Popen:
        return subprocess.Popen([os.path.join(self.home, "bin", "kafka-storage.sh"), "format",
                                 "-t", cluster_id, "-c", self.conf, *args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self._env())

    def start(self, timeout: float = 180) -> None:
        """Start the node; returns once its PLAINTEXT port accepts connections (a KRaft broker
        opens it only once the controller quorum has registered it)."""
        self.launch()
        self.wait_listening(timeout)

    def launch(self) -> None:
        log = open(os.path.join(self.dir, "kafka.out"), "ab")
        self.proc = subprocess.Popen([os.path.join(self.home, "bin", "kafka-server-start.sh"), self.conf],
                                     stdout=log, stderr=subprocess.STDOUT, env=self._env(),
                                     start_new_session=True)
        log.close()

    def wait_listening(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"Kafka node {self.n} exited at start:\n{self.tail()}") from None
                time.sleep(0.2)
        self.signal(signal.SIGKILL)
        raise RuntimeError(f"Kafka node {self.n} did not listen in {timeout}s:\n{self.tail()}")

    def tail(self) -> str:
        """The log's ERROR lines (the first few) and its last lines."""
        with open(os.path.join(self.dir, "kafka.out"), "rb") as f:
            text = f.read().decode("utf-8", "replace")
        errors = [ln for ln in text.splitlines() if " ERROR " in ln or "Exception:" in ln][:8]
        return "\n".join(errors) + "\n...\n" + text[-1500:]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int, timeout: float = 120) -> None:
        """Send `sig` to the node's process group and wait for it to exit (SIGKILL after
        `timeout`)."""
        signal_and_wait(self.proc, sig, timeout)


class KafkaCluster:
    """n combined KRaft nodes on 127.0.0.1 in `directory` (else a temp dir, removed by close());
    ready once Metadata (on the PLAINTEXT listener) lists n brokers."""

    name, key = "Kafka 4.0", "kafka"
    session_name = "broker.session.timeout.ms"
    DEFAULT_SESSION_MS = 9000                   # Kafka 4.0's broker.session.timeout.ms

    def __init__(self, home: str, n: int = 3, settings: dict | None = None, timeout: float = 240,
                 extra_listeners: dict[int, dict[str, int]] | None = None, format_args: tuple[str, ...] = (),
                 directory: str | None = None):
        self.home = home
        self.settings = {k: str(v) for k, v in (settings or {}).items()}
        self.session_ms = int(self.settings.get("broker.session.timeout.ms", self.DEFAULT_SESSION_MS))
        self.owns_base = directory is None
        self.base = directory or tempfile.mkdtemp(prefix="bench-repl-kafka-")
        extra = {i: dict(listeners) for i, listeners in (extra_listeners or {}).items()}
        wanted = [(i, name) for i, listeners in extra.items() for name, port in listeners.items() if port == 0]
        ports = _free_ports(2 * n + len(wanted))          # an extra listener's port 0: one of these
        for (i, name), port in zip(wanted, ports[2 * n:], strict=True):
            extra[i][name] = port
        voters = ",".join(f"{i}@127.0.0.1:{ports[n + i - 1]}" for i in range(1, n + 1))
        self.brokers = {i: KafkaNode(home, self.base, i, ports[i - 1], ports[n + i - 1], voters, self.settings,
                                     extra.get(i))
                        for i in range(1, n + 1)}
        self.bootstrap = ",".join(b.listen for b in self.brokers.values())
        try:
            out = subprocess.run([os.path.join(home, "bin", "kafka-storage.sh"), "random-uuid"],
                                 capture_output=True, text=True, check=True, env=self.brokers[1]._env())
            self.cluster_id = out.stdout.strip().splitlines()[-1]
            fmts = [b.format(self.cluster_id, *format_args) for b in self.brokers.values()]    # in parallel
            for b, p in zip(self.brokers.values(), fmts, strict=True):
                text = p.communicate(120)[0].decode("utf-8", "replace")
                if p.returncode != 0:
                    raise RuntimeError(f"kafka-storage.sh format failed for node {b.n}:\n{text}")
            for b in self.brokers.values():           # all at once: a node waits for the quorum
                b.launch()
            for b in self.brokers.values():
                b.wait_listening()
            self._wait_brokers(n, timeout)
        except BaseException:
            self.close()
            raise

    def _wait_brokers(self, n: int, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient
        a = AdminClient({"bootstrap.servers": self.bootstrap, "broker.address.family": "v4"})
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            try:
                seen = sorted(a.list_topics(timeout=5).brokers)
                if len(seen) == n:
                    return
            except Exception:                                       # noqa: BLE001 (still starting)
                pass
            for b in self.brokers.values():
                if not b.running:
                    raise RuntimeError(f"Kafka node {b.n} exited at start:\n{b.tail()}")
            time.sleep(0.5)
        raise RuntimeError(f"Kafka cluster: Metadata lists brokers {seen} after {timeout}s, not {n}")

    def active_controller(self) -> int | None:
        """The active KRaft controller's node id, None if unknown: DescribeQuorum v0 (key 55,
        flexible; a broker forwards it to the controller) for __cluster_metadata-0, on a raw
        socket (the project's wire client does not speak key 55)."""
        import struct

        from engine.protocol.messages import _entity, encode, read_struct
        from engine.protocol.primitives import Reader
        body = encode(55, 0, {"topics": [{"topic_name": "__cluster_metadata",
                                          "partitions": [{"partition_index": 0}]}]}, response=False)
        head = struct.pack(">hhih", 55, 0, 1, 5) + b"bench" + b"\x00"         # request header v2
        for b in self.brokers.values():
            if not b.running:
                continue
            try:
                with socket.create_connection(("127.0.0.1", b.port), 5) as s:
                    s.sendall(struct.pack(">i", len(head) + len(body)) + head + body)
                    size = struct.unpack(">i", _recv(s, 4))[0]
                    r = Reader(bytearray(_recv(s, size)))
                r.int32()                                               # correlation id
                r.tagged_fields()                                       # response header v1
                resp = read_struct(_entity(55, 0, True), r)
                part = resp["topics"][0]["partitions"][0]
                if resp["error_code"] == 0 and part["error_code"] == 0 and part["leader_id"] >= 0:
                    return int(part["leader_id"])
            except Exception:                                           # noqa: BLE001 (informative only)
                continue
        return None

    def broker_cpu(self) -> float:
        """User + system CPU seconds used so far by the running nodes, together."""
        from bench.broker_clients import cpu_seconds
        return sum(cpu_seconds(b.proc.pid) for b in self.brokers.values() if b.running)

    def close(self) -> None:
        """SIGTERM to every node at once (the data is thrown away: no quorum is needed for
        the last ones), SIGKILL after 30 s; the directory is removed if it was our temp dir."""
        live = [b for b in self.brokers.values() if b.running]
        for b in live:
            os.killpg(b.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for b in live:
            try:
                b.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                b.signal(signal.SIGKILL)
        if self.owns_base:
            shutil.rmtree(self.base, ignore_errors=True)
