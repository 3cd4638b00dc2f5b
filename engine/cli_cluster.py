"""Command-line glue of cluster mode: ``serve --broker-id N --zookeeper HOST:PORT`` and
``python -m engine cluster --brokers N`` (ZooKeeper plus N brokers on loopback, in the foreground).

Kept apart from engine/__main__.py; nothing here imports kazoo unless ``zookeeper.connect`` is set.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time

log = logging.getLogger("engine.cluster")


# -- serve ------------------------------------------------------------------------------
def add_serve_flags(s: argparse.ArgumentParser) -> None:
    s.add_argument("--broker-id", type=int, default=None, metavar="N",
                   help="this broker's id in a cluster (default: broker.id, 0)")
    s.add_argument("--zookeeper", default=None, metavar="HOST:PORT[/chroot]",
                   help="join the cluster whose metadata is in this ZooKeeper (zookeeper.connect; "
                        "default: a single node, no ZooKeeper)")


def apply_serve_flags(args: argparse.Namespace, settings: dict) -> None:
    if getattr(args, "broker_id", None) is not None:
        settings["broker.id"] = str(args.broker_id)
    if getattr(args, "zookeeper", None):
        settings["zookeeper.connect"] = args.zookeeper


def make_member(node, host: str, inter_broker_listener: str = "PLAINTEXT"):
    """The cluster membership of `node` (engine/node.py) when ``zookeeper.connect`` is set (None
    otherwise), not yet started: the node serves its view (``node.use_view(member.view)``);
    `host`: the inter-broker listener's advertised host, `inter_broker_listener` its name."""
    cfg = node.config
    if not cfg["zookeeper.connect"]:
        return None
    from .cluster.member import ClusterMember
    return ClusterMember(node, cfg["broker.id"], cfg["zookeeper.connect"], host, 0, cfg,
                         rack=cfg["broker.rack"] or None, inter_broker_listener=inter_broker_listener)


def start_member(member, broker, node, port: int, endpoints=None) -> None:
    """Register (ClusterError when the id is taken), start the controller candidate and the
    metadata watches, and let the watches drive the broker's replica manager.  `endpoints`:
    every advertised listener, ``[(name, protocol, host, port)]`` (None: the inter-broker
    listener alone, at `port`)."""
    from .cluster.local import ZkTopics
    member.port = port
    if endpoints:
        member.set_endpoints(endpoints)
    member.start()
    node.use_topics(ZkTopics(node, member))     # producer ids, topic configs, auto-create
    member.attach(broker.replicas)


def cluster_link(member, node, security=None):
    """What the node's group and transaction coordinators need in cluster mode (given to the
    node with ``node.use_cluster`` before the broker hosts them): their internal topics are
    created through ZooKeeper (replication factor ``offsets.topic.replication.factor`` /
    ``transaction.state.log.replication.factor`` capped by the live brokers, as Kafka), their
    partitions loaded when this broker becomes leader, their writes replicated with acks=all;
    ``security``: how the link reaches other brokers (the inter-broker listener's TLS / SASL)."""
    from .cluster import admin
    from .coordinator.cluster_link import ClusterLink
    from .errors import TopicAlreadyExistsError

    cfg = node.config
    keys = {"__consumer_offsets": ("offsets.topic.replication.factor", None),
            "__transaction_state": ("transaction.state.log.replication.factor", "transaction.state.log.min.isr")}

    def create_topic(topic: str, partitions: int, config: dict) -> None:
        rf_key, isr_key = keys[topic]
        rf = max(1, min(cfg[rf_key], len(member.view.brokers())))
        config = dict(config)
        if isr_key is not None:
            config["min.insync.replicas"] = min(cfg[isr_key], rf)
        try:
            admin.create_topic(member, topic, partitions, rf, config, timeout_s=10.0)
        except TopicAlreadyExistsError:
            pass
        deadline = time.monotonic() + 10
        while member.view.assignment(topic) is None and time.monotonic() < deadline:
            time.sleep(0.02)        # another broker created it: wait for this broker's watch

    return ClusterLink(node.replicas, member.view, create_topic, cfg["offsets.commit.timeout.ms"], security)


def stop_member(member, node) -> None:
    """SIGTERM in cluster mode: controlled shutdown first (leaderships move away while this
    broker still serves), then leave ZooKeeper."""
    if member is None:
        return
    if node.config["controlled.shutdown.enable"]:
        member.controlled_shutdown(node.config["controlled.shutdown.timeout.ms"] / 1000.0)
    member.stop()


# -- cluster ----------------------------------------------------------------------------
def add_cluster_parser(sub) -> None:
    c = sub.add_parser("cluster", help="run ZooKeeper and N brokers on 127.0.0.1 (a local cluster)")
    c.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    c.add_argument("--dir", default=None, help="where their data goes (default: a new temp dir)")
    c.add_argument("--base-port", type=int, default=9092,
                   help="broker N listens on base-port + N - 1 (default 9092)")
    c.add_argument("--zookeeper-port", type=int, default=2181, help="ZooKeeper's port (default 2181)")
    c.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="a broker setting for every broker (repeatable)")
    c.set_defaults(func=cmd_cluster)
    from .chaos.runner import add_chaos_parser
    add_chaos_parser(sub)


def cmd_cluster(args: argparse.Namespace) -> int:
    """ZooKeeper from Debian's package and N ``serve`` processes; Ctrl-C (or SIGTERM) stops them
    all (brokers first, each with a controlled shutdown, then ZooKeeper)."""
    from .cluster.zkserver import ZooKeeperServer, find_zookeeper

    if find_zookeeper()[0] is None:
        raise SystemExit(f"error: {find_zookeeper()[1]}")
    base = os.path.abspath(args.dir or tempfile.mkdtemp(prefix="engine-cluster-"))
    os.makedirs(base, exist_ok=True)
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(1))
    zk = ZooKeeperServer(os.path.join(base, "zookeeper"), args.zookeeper_port).start()
    print(f"zookeeper on {zk.connect} (log {zk.log_path})", file=sys.stderr, flush=True)
    procs: list[tuple[int, subprocess.Popen, str]] = []
    try:
        for n in range(1, args.brokers + 1):
            d = os.path.join(base, f"broker-{n}")
            os.makedirs(d, exist_ok=True)
            listen = f"127.0.0.1:{args.base_port + n - 1}"
            extra = [x for kv in (args.config or []) for x in ("--config", kv)]
            logf = open(os.path.join(d, "broker.log"), "ab")
            p = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--data-dir", os.path.join(d, "data"),
                                  "--listen", listen, "--broker-id", str(n), "--zookeeper", zk.connect, *extra],
                                 stdout=logf, stderr=subprocess.STDOUT, start_new_session=True)
            logf.close()
            procs.append((n, p, listen))
        for n, p, listen in procs:
            logpath = os.path.join(base, f"broker-{n}", "broker.log")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not stop:
                with open(logpath, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
                if "serving " in text:
                    break
                if p.poll() is not None:
                    raise SystemExit(f"error: broker {n} exited at start:\n{text[-2000:]}")
                time.sleep(0.1)
            print(f"broker {n} on {listen} (log {logpath})", file=sys.stderr, flush=True)
        print(f"cluster up: --bootstrap-server {','.join(x[2] for x in procs)}   (Ctrl-C stops it)",
              file=sys.stderr, flush=True)
        while not stop:
            for n, p, _listen in procs:
                if p.poll() is not None:
                    print(f"broker {n} exited with {p.returncode}", file=sys.stderr, flush=True)
                    procs.remove((n, p, _listen))
                    break
            time.sleep(0.2)
    finally:
        # one at a time: each controlled shutdown moves leaderships to brokers still running
        for _n, p, _l in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
        zk.stop()
        print(f"stopped; data kept in {base}", file=sys.stderr, flush=True)
    return 0
