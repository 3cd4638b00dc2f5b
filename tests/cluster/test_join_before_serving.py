"""A broker in cluster mode answers nothing before it has joined the cluster (Kafka's
``SocketServer.enableRequestProcessing`` after the broker's registration).

A broker restarted at once after a SIGKILL waits out its previous incarnation's ZooKeeper
session before it can register (engine/cluster/zk.py ``register_broker``).  It answered
Metadata meanwhile -- no brokers, no partitions -- and librdkafka (2.16) drops every broker a
Metadata answer leaves out: the power-loss scenario's producer was left with no broker at all
(docs/availability.md, "the power-loss stall").  Here the previous incarnation is a registration
made by the test with the same endpoints; a Metadata request sent while it stands must be
answered only after it is gone, naming the broker."""

from __future__ import annotations

import select
import socket
import struct
import threading
import time

from engine.cluster.registration import BrokerRegistration
from tests.serving import ServeProcess, free_port


def _metadata_v1_request(correlation_id: int) -> bytes:
    client_id = b"join-test"
    body = struct.pack(">hhih", 3, 1, correlation_id, len(client_id)) + client_id + struct.pack(">i", -1)
    return struct.pack(">i", len(body)) + body


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out
    return exactly(struct.unpack(">i", exactly(4))[0])


def _brokers_v1(frame: bytes) -> list[tuple[int, str, int]]:
    """The brokers of a Metadata v1 response (after its correlation id)."""
    pos = 4
    (n,) = struct.unpack_from(">i", frame, pos)
    pos += 4
    out = []
    for _ in range(n):
        node, hlen = struct.unpack_from(">ih", frame, pos)
        pos += 6
        host = frame[pos:pos + hlen].decode()
        pos += hlen
        (port, rlen) = struct.unpack_from(">ih", frame, pos)
        pos += 6 + max(rlen, 0)
        out.append((node, host, port))
    return out


def test_metadata_waits_for_the_registration(tmp_path, zk, zk_client):
    port = free_port()
    reg = BrokerRegistration.of([("PLAINTEXT", "PLAINTEXT", "127.0.0.1", port)])
    zk_client.ensure_path("/brokers/ids")
    zk_client.create("/brokers/ids/1", reg.to_json(), ephemeral=True)     # "the old incarnation"
    srv = ServeProcess(tmp_path / "b1", "--broker-id", "1", "--zookeeper", zk.connect,
                       "--config", "zookeeper.session.timeout.ms=6000", port=port)
    started: list[BaseException | None] = []

    def start() -> None:
        try:
            srv.start()
            started.append(None)
        except BaseException as e:   # noqa: BLE001 - reported below
            started.append(e)
    t = threading.Thread(target=start, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 30
        while "broker listening" not in (srv.log_text() if srv.proc is not None else ""):
            assert time.monotonic() < deadline, "the broker never bound its listener"
            assert not started, f"the broker stopped early: {started}"
            time.sleep(0.05)
        sock = socket.create_connection(("127.0.0.1", port), 10)
        sock.sendall(_metadata_v1_request(7))
        # the old registration stands for 3 s more (the broker waits up to its session + 5 s):
        # an answer meanwhile could only come from a broker that has not joined
        early, _, _ = select.select([sock], [], [], 3.0)
        zk_client.delete("/brokers/ids/1")   # the old session "expired"
        sock.settimeout(30)
        frame = _read_frame(sock)
        sock.close()
        brokers = _brokers_v1(frame)
        assert not early and brokers == [(1, "127.0.0.1", port)], \
            f"Metadata answered {brokers} ({'before' if early else 'after'} the broker registered)"
        t.join(30)
        assert started == [None]
    finally:
        code, log = srv.stop()
    assert "Traceback" not in log, log[-4000:]
