"""Fuzz the live broker with mutated copies of what real clients send (reliability row B18).

A recording TCP proxy (127.0.0.1) sits between the broker and a short session of
confluent-kafka, kafka-python and aiokafka (produce with keys, a consumer group, commit, admin
metadata); the broker advertises the proxy, so every request of the session passes through it
and is kept as a frame.  Then mutated copies are replayed, one per new connection, against the
same broker process:

* truncated: the body cut short with the size prefix made to match (a complete, short frame),
  or the original prefix with bytes missing and the write side shut (EOF mid-frame);
* extended: random bytes after the body, prefix adjusted — Kafka ignores bytes after a
  complete body, so it must be answered like the original (read-only APIs: the same bytes);
* bit-flipped: 1-3 bits anywhere after the size prefix.

Asserted: 0 crashes (the process lives; no traceback or ERROR line in its log), 0 hangs (each
connection is answered or closed within ~1 s, except requests that may wait by their own
fields: Fetch max_wait, JoinGroup rebalance, Produce acks=0 — those must not stall a fresh
connection), bounded RSS, and a valid request on a new connection still works after every bad
one.  Seeds are fixed (FUZZ_SEED to change).
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import socket
import struct
import threading
import time

import pytest

from tests.serving import ServeProcess

from .conftest import recv_frame

# APIs whose answer depends only on state that replaying does not change: an extended frame
# must get exactly the original's answer bytes.
_READ_ONLY = {2, 3, 9, 10, 15, 16, 18, 32, 60}
# Requests that may legitimately stay unanswered past a second (their own fields say so).
_MAY_WAIT = {0, 1, 11}
_DEADLINE = 1.0


class RecordingProxy:
    """Forwards 127.0.0.1:port to the broker and keeps every client->broker frame."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.target: int | None = None
        self.frames: list[bytes] = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _requests(self, src, dst):
        buf = bytearray()
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                buf += data
                while len(buf) >= 4:
                    (n,) = struct.unpack_from(">i", buf)
                    if len(buf) < 4 + n:
                        break
                    with self.lock:
                        self.frames.append(bytes(buf[4:4 + n]))
                    del buf[:4 + n]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.closed = True
        self.sock.close()


def _session(bootstrap: str) -> None:
    """A short session of each client: produce with keys, consume in a group, commit, admin."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(5):
        p.produce("fz", b"ck-%d" % i, key=b"k%d" % i, headers=[("h", b"1")])
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fz-ck", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "session.timeout.ms": 6000})
    c.subscribe(["fz"])
    got = 0
    deadline = time.monotonic() + 20
    while got < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    c.commit(asynchronous=False)
    c.close()
    assert got >= 5
    AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)

    from kafka import KafkaConsumer, KafkaProducer
    kp = KafkaProducer(bootstrap_servers=bootstrap)
    kp.send("fz", b"kp", key=b"kpk").get(15)
    kp.close()
    kc = KafkaConsumer("fz", bootstrap_servers=bootstrap, group_id="fz-kp",
                       auto_offset_reset="earliest", consumer_timeout_ms=3000,
                       enable_auto_commit=False)
    kc.topics()        # see tests/conformance/test_kafka_python.py: kafka-python's lost rejoin
    assert any(True for _ in kc)
    kc.commit()
    kc.close()

    async def aio():
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        ap = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await ap.start()
        await ap.send_and_wait("fz", b"aio", key=b"ak")
        await ap.stop()
        ac = AIOKafkaConsumer("fz", bootstrap_servers=bootstrap, group_id="fz-aio",
                              auto_offset_reset="earliest", enable_auto_commit=False)
        await ac.start()
        await asyncio.wait_for(ac.getone(), 20)
        await ac.commit()
        await ac.stop()
    asyncio.run(aio())


def _exchange(port: int, payload: bytes, shut: bool = False, deadline: float = _DEADLINE):
    """Send raw bytes on a new connection; ('answer', frame) | ('closed', None) | ('open', None)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(payload)
        if shut:
            s.shutdown(socket.SHUT_WR)
        s.settimeout(deadline)
        try:
            head = s.recv(4, socket.MSG_PEEK)
        except TimeoutError:
            return "open", None
        except ConnectionResetError:
            return "closed", None
        if not head:
            return "closed", None
        s.settimeout(5)
        try:
            return "answer", recv_frame(s)
        except (EOFError, ConnectionResetError):
            return "closed", None


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def _api_versions(port: int) -> bool:
    frame = struct.pack(">hhih", 18, 0, 7, 2) + b"ok"
    kind, resp = _exchange(port, struct.pack(">i", len(frame)) + frame, deadline=5)
    return kind == "answer" and struct.unpack_from(">ih", resp) == (7, 0)


@pytest.fixture
def recorded(tmp_path):
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("kafka")
    pytest.importorskip("aiokafka")
    proxy = RecordingProxy()
    srv = ServeProcess(tmp_path, "--advertised", f"127.0.0.1:{proxy.port}",
                       "--config", "group.initial.rebalance.delay.ms=0",
                       "--config", "num.partitions=2")
    srv.start()
    proxy.target = srv.port
    try:
        _session(f"127.0.0.1:{proxy.port}")
        time.sleep(0.3)
        with proxy.lock:
            frames = list(dict.fromkeys(proxy.frames))     # distinct, in order
        yield srv, frames
    finally:
        proxy.close()
        code, log = srv.stop()


def test_mutated_client_frames(recorded):
    srv, frames = recorded
    keys = {struct.unpack_from(">h", f)[0] for f in frames}
    # the session reached the APIs real clients use
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 18} <= keys, sorted(keys)
    rnd = random.Random(int(os.environ.get("FUZZ_SEED", "20261124")))
    rss0 = _rss_kb(srv.proc.pid)
    stats = {"answer": 0, "closed": 0, "waiting": 0, "same": 0}
    hangs, differ = [], []
    t0 = time.monotonic()
    budget = float(os.environ.get("FUZZ_SECONDS", "30"))
    rounds = 0
    while time.monotonic() - t0 < budget and rounds < int(os.environ.get("FUZZ_ROUNDS", "25")):
        rounds += 1
        for frame in frames:
            key = struct.unpack_from(">h", frame)[0]
            kind = rnd.choice(("cut", "eof", "extend", "flip", "flip"))
            if kind == "cut":
                body = frame[:rnd.randrange(0, len(frame))]
                payload, shut = struct.pack(">i", len(body)) + body, False
            elif kind == "eof":
                payload = struct.pack(">i", len(frame)) + frame[:rnd.randrange(0, len(frame))]
                shut = True
            elif kind == "extend":
                body = frame + bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 64)))
                payload, shut = struct.pack(">i", len(body)) + body, False
            else:
                body = bytearray(frame)
                for _ in range(rnd.randint(1, 3)):
                    body[rnd.randrange(len(body))] ^= 1 << rnd.randrange(8)
                payload, shut = struct.pack(">i", len(body)) + bytes(body), False
            outcome, resp = _exchange(srv.port, payload, shut)
            if outcome == "open":
                if kind == "flip" and key in _MAY_WAIT:
                    stats["waiting"] += 1        # a flipped max_wait / acks=0 / rebalance wait
                else:
                    hangs.append((kind, key, payload[:64]))
            else:
                stats[outcome] += 1
            if kind == "eof":
                assert outcome == "closed", (key, payload[:64])
            if kind == "extend":
                assert outcome in ("answer", "open"), (key, outcome)
                if key in _READ_ONLY and outcome == "answer":
                    again, orig = _exchange(srv.port, struct.pack(">i", len(frame)) + frame)
                    if orig == resp:
                        stats["same"] += 1
                    else:
                        differ.append((key, resp[:80], orig and orig[:80]))
            assert srv.running, "the broker died"
            assert _api_versions(srv.port), f"no answer on a new connection after {kind} {key}"
    log = srv.log_text()
    assert "Traceback" not in log, log[-4000:]
    assert " ERROR " not in log, [line for line in log.splitlines() if " ERROR " in line][:5]
    assert not hangs, hangs[:5]
    assert not differ, differ[:3]
    assert stats["answer"] > 20 and stats["closed"] > 20 and stats["same"] > 5, stats
    assert _rss_kb(srv.proc.pid) - rss0 < 150_000, (rss0, _rss_kb(srv.proc.pid))
