"""ZooKeeper session loss: a broker cut off from ZooKeeper stops acting as leader before the
controller elects anyone else, and registers again cleanly once it can reach ZooKeeper.

The broker under test reaches ZooKeeper through a TCP proxy in this process, which the test cuts
(every connection closed, new ones refused) and heals; its Kafka listener stays reachable.
"""

from __future__ import annotations

import datetime
import re
import socket
import threading
import uuid

from engine.client.wire import WireClient
from engine.errors import KafkaApiError
from tests.cluster.conftest import SESSION_MS, wait_for, zk_json
from tests.cluster.test_replication import _create, _state
from tests.serving import ServeProcess


class Proxy:
    def __init__(self, upstream: str):
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.address = f"127.0.0.1:{self.lsock.getsockname()[1]}"
        self.cut_off = False
        self.socks: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            if self.cut_off:
                c.close()
                continue
            try:
                u = socket.create_connection(self.upstream)
            except OSError:
                c.close()
                continue
            with self._lock:
                self.socks += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.close()
            except OSError:
                pass

    def cut(self):
        self.cut_off = True
        with self._lock:
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def heal(self):
        self.cut_off = False

    def close(self):
        self.cut()
        self.lsock.close()


def _log_time(text: str, pattern: str) -> datetime.datetime:
    for line in text.splitlines():
        if re.search(pattern, line):
            return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    raise AssertionError(f"no log line matches {pattern!r}")


def test_cut_off_broker_fences_itself_then_registers_again(tmp_path, zk, zk_client, cluster_factory):
    c = cluster_factory(2)
    proxy = Proxy(zk.connect)
    b3 = ServeProcess(tmp_path / "broker-3", "--broker-id", "3", "--zookeeper", proxy.address,
                      "--config", f"zookeeper.session.timeout.ms={SESSION_MS}",
                      "--config", "replica.lag.time.max.ms=2000").start()
    try:
        topic = f"fence-{uuid.uuid4().hex[:6]}"
        _create(c.brokers[1].bootstrap, topic, 3, 3)
        wait_for(lambda: len(zk_client.get_children(f"/brokers/topics/{topic}/partitions")) == 3,
                 what="partition states")
        led = [p for p in range(3) if _state(zk_client, topic, p)["leader"] == 3]
        assert led, "leaders are balanced: broker 3 leads one partition"
        p = led[0]
        epoch = _state(zk_client, topic, p)["leader_epoch"]
        # broker 3 has taken the leadership ZooKeeper gives it (its own Metadata says so) before
        # the cut: on a loaded machine its watch could otherwise come after, and it would know
        # nothing of the topic to fence
        def leads_it():
            with WireClient(b3.bootstrap, request_timeout_ms=5000) as wc:
                try:
                    return wc.metadata([topic])[topic][p].leader == 3
                except KafkaApiError:
                    return False
        wait_for(leads_it, what="broker 3 serving as the leader it was given")

        proxy.cut()
        wait_for(lambda: "no longer acting as leader" in b3.log_text(), timeout=SESSION_MS / 1000 + 10,
                 what="broker 3 fencing itself")
        # while fenced, broker 3 itself says it leads nothing (Metadata asked of broker 3 itself)
        with WireClient(b3.bootstrap, request_timeout_ms=20000) as wc:
            part = wc.metadata([topic])[topic][p]
        assert part.leader == -1 and part.error_code == 5       # LEADER_NOT_AVAILABLE
        new = wait_for(lambda: _state(zk_client, topic, p)["leader"] not in (3, -1) and _state(zk_client, topic, p),
                       timeout=SESSION_MS / 1000 + 30, what="a new leader elected by the controller")
        assert new["leader_epoch"] == epoch + 1 and 3 not in new["isr"]
        ctrl = zk_json(zk_client, "/controller")[0]["brokerid"]
        fenced_at = _log_time(b3.log_text(), "no longer acting as leader")
        elected_at = _log_time(c.brokers[ctrl].log_text(), rf"{topic}-{p} leader=\d+ epoch={epoch + 1}")
        assert fenced_at < elected_at, (fenced_at, elected_at)

        proxy.heal()
        wait_for(lambda: "registered again after its ZooKeeper session expired" in b3.log_text(),
                 timeout=60, what="broker 3 registering again")
        reg = zk_json(zk_client, "/brokers/ids/3")[0]
        assert reg["port"] == b3.port
        # it follows the new leader and rejoins the ISR
        wait_for(lambda: 3 in _state(zk_client, topic, p)["isr"], timeout=60, what="broker 3 back in the ISR")
    finally:
        code, log = b3.stop()
        proxy.close()
    assert "Traceback" not in log, log[-4000:]
