"""Connection behaviour: ordering under pipelining, fetch size limits, sendfile vs copy, the CLI."""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time

from engine.records import build_batch

from .conftest import api_versions_ok, connect, recv_frame, request_frame
from .test_bad_input import fetch_v9, parse_fetch_v9, produce_v3

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_pipelined_requests_answered_in_order(broker):
    broker.call(lambda: broker.engine.create_topic("order", 1))
    batch = bytes(build_batch([b"x" * 100]))
    frames = []
    for i in range(200):
        if i % 3 == 0:
            frames.append(request_frame(1, 9, i, fetch_v9("order", 0, 0)))
        elif i % 3 == 1:
            frames.append(request_frame(0, 3, i, produce_v3("order", 0, batch)))
        else:
            frames.append(request_frame(18, 0, i, b""))
    with connect(broker.port) as s:
        s.sendall(b"".join(frames))        # far more than max_inflight: backpressure, not loss
        got = [struct.unpack_from(">i", recv_frame(s))[0] for _ in range(200)]
    assert got == list(range(200))
    assert broker.call(lambda: broker.engine.log("order", 0).log_end_offset) == 67


def _fetch_many(topic_parts, max_bytes, part_max, version=4):
    body = struct.pack(">iiiib", -1, 0, 1, max_bytes, 0) + struct.pack(">i", 1)
    body += struct.pack(">h", 2) + b"mb" + struct.pack(">i", len(topic_parts))
    for p in topic_parts:
        body += struct.pack(">iqi", p, 0, part_max)
    return body


def _partition_sizes(resp: bytes) -> list[tuple[int, int, int]]:
    """[(partition, error, records size)] of a Fetch v4 response for topic 'mb'."""
    pos = 4 + 4 + 4 + 2 + 2
    (n,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    out = []
    for _ in range(n):
        p, err, _hw, _lso, naborted, size = struct.unpack_from(">ihqqii", resp, pos)
        assert naborted == -1
        pos += 4 + 2 + 8 + 8 + 4 + 4 + size
        out.append((p, err, size))
    assert pos == len(resp)
    return out


def test_fetch_respects_max_bytes_and_partition_max_bytes(broker):
    broker.call(lambda: broker.engine.create_topic("mb", 3))
    batch = bytearray(build_batch([b"y" * 1000]))        # ~1.07 KB per batch
    size = len(batch)
    for p in range(3):
        for _ in range(4):
            broker.call(lambda p=p: broker.engine.log("mb", p).append(bytearray(batch)))
    with connect(broker.port) as s:
        # partition_max_bytes 2.5 batches: two whole batches and a partial third per partition
        frame = request_frame(1, 4, 1, _fetch_many([0, 1, 2], 1 << 20, int(size * 2.5)))
        sizes = _partition_sizes(recv_frame_after(s, frame))
        assert [x[2] for x in sizes] == [int(size * 2.5)] * 3
        # max_bytes 1.5 batches in total: the first partition gets them, the others nothing
        frame = request_frame(1, 4, 2, _fetch_many([0, 1, 2], int(size * 1.5), 1 << 20))
        sizes = _partition_sizes(recv_frame_after(s, frame))
        assert [x[2] for x in sizes] == [int(size * 1.5), 0, 0]
        # limits below one batch still return the first batch whole (KIP-74)
        sizes = _partition_sizes(recv_frame_after(s, request_frame(1, 4, 3, _fetch_many([1, 2], 10, 10))))
        assert [x[2] for x in sizes] == [size, 0]


def recv_frame_after(s: socket.socket, frame: bytes) -> bytes:
    s.sendall(frame)
    return recv_frame(s)


def test_sendfile_and_copy_paths_send_identical_bytes(make_broker):
    responses = []
    for use_sendfile in (True, False):
        b = make_broker(use_sendfile=use_sendfile)
        b.call(lambda b=b: b.engine.create_topic("sf", 1))
        for i in range(50):
            b.call(lambda b=b, i=i: b.engine.log("sf", 0).append(
                bytearray(build_batch([(b"v%d" % i * 500, b"k", [], 1000 + i)]))))
        with connect(b.port) as s:
            responses.append(recv_frame_after(s, request_frame(1, 9, 5, fetch_v9("sf", 0, 0))))
    assert responses[0] == responses[1]
    error, hw, size = parse_fetch_v9(responses[0])
    assert (error, hw) == (0, 50) and size > 50 * 1000


def test_serve_subcommand(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", "--data-dir", str(tmp_path / "d"),
                             "--listen", f"127.0.0.1:{port}", "--log-level", "warning"],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if api_versions_ok(port):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        from kafka import KafkaProducer
        p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", enable_idempotence=False)
        assert p.send("cli", b"hello", partition=0).get(10).offset == 0
        p.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    import engine
    with engine.open(str(tmp_path / "d"), read_only=True) as eng:
        assert eng.log("cli", 0).read(0, 1 << 20).size > 0


def test_queued_bytes_are_bounded(make_broker):
    """Pipelined frames beyond max_queued_bytes wait in the socket, and all get answered."""
    b = make_broker(max_queued_bytes=50_000)
    b.call(lambda: b.engine.create_topic("q", 1))
    batch = bytes(build_batch([b"z" * 20_000]))
    frames = b"".join(request_frame(0, 3, i, produce_v3("q", 0, batch)) for i in range(30))
    peak = []

    def watch():
        conns = list(b.broker._connections)
        peak.append(max((c.queued_bytes for c in conns), default=0))

    with connect(b.port) as s:
        s.sendall(frames)
        got = []
        for _ in range(30):
            got.append(struct.unpack_from(">i", recv_frame(s))[0])
            b.call(watch)
    assert got == list(range(30))
    assert max(peak) <= 50_000
    assert b.call(lambda: b.engine.log("q", 0).log_end_offset) == 30


def test_malformed_frame_behind_a_full_queue_frees_the_connection(make_broker):
    """Many pipelined frames, one malformed in the middle: answers up to it, then close,
    and the connection's resources are released (no task stuck on a full queue)."""
    b = make_broker(max_inflight=2)
    frames = [request_frame(18, 0, i, b"") for i in range(5)]
    frames.append(request_frame(3, 1, 5, struct.pack(">i", 0x7FFFFFFF)))
    frames += [request_frame(18, 0, i, b"") for i in range(6, 40)]
    with connect(b.port) as s:
        s.sendall(b"".join(frames))
        got = [struct.unpack_from(">i", recv_frame(s))[0] for _ in range(5)]
        assert got == list(range(5))
        assert s.recv(1) == b""
    deadline = time.monotonic() + 5
    while b.broker.connection_count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert b.broker.connection_count == 0


def test_embedded_append_wakes_a_waiting_fetch_at_once(make_broker):
    """A fetch long-polling with max_wait 5 s returns right after an in-process producer appends
    (through the Engine's append listener), not at the next broker poll or the timeout."""
    import threading

    from .test_bad_input import fetch_v9, parse_fetch_v9

    b = make_broker(poll_interval=30.0)  # no backstop poll within the test's time
    b.call(lambda: b.engine.create_topic("w", 1))
    with connect(b.port) as s:
        def append_later():
            time.sleep(0.3)
            with b.engine.producer(linger_ms=0) as p:  # appends from this thread, not the loop
                p.send("w", b"wake", partition=0)

        th = threading.Thread(target=append_later)
        th.start()
        t0 = time.monotonic()
        s.sendall(request_frame(1, 9, 5, fetch_v9("w", 0, 0, max_wait_ms=5000)))
        error, hw, size = parse_fetch_v9(recv_frame(s))
        waited = time.monotonic() - t0
        th.join()
    assert (error, hw) == (0, 1) and size > 0
    assert waited < 3.0, f"the fetch waited {waited:.1f} s"


def test_broker_address_is_found_through_the_data_dir(tmp_path):
    """A broker records its listener in the directory's lock file while it serves;
    an embedded writer or no writer at all gives None."""
    import engine
    from engine.storage.manager import lock_holder

    from .conftest import BrokerThread

    path = str(tmp_path / "d")
    with engine.open(path):
        assert engine.broker_address(path) is None          # embedded writer: no listener
    assert engine.broker_address(path) is None              # no writer
    b = BrokerThread(path)
    try:
        assert engine.broker_address(path) == b.bootstrap
        assert lock_holder(path)["pid"] == str(os.getpid())
    finally:
        b.stop()
    assert engine.broker_address(path) is None


def test_engine_closed_on_the_broker_loop_without_stopping_the_broker(tmp_path):
    """The broker hosts the group coordinator on its loop; closing the Engine from that loop
    (an owner that forgot broker.stop()) still closes cleanly, and a late stop() is harmless."""
    import asyncio

    import engine
    from engine.server import Broker

    path = str(tmp_path / "d")

    async def main():
        eng = engine.open(path, {"offsets.topic.num.partitions": 1})
        broker = Broker(eng.node, "127.0.0.1", 0)
        await broker.start()
        assert eng.group_coordinator.on_current_loop
        eng.close()
        await broker.stop()

    asyncio.run(main())
    assert os.path.exists(os.path.join(path, ".kafka_cleanshutdown"))


def test_large_requests_in_any_pieces_are_stored_intact(broker):
    """Large frames are read in place into pooled buffers: whatever the TCP pieces
    (size prefix split, body dribbled, several frames and small requests in one
    send), every batch is stored byte for byte and reusing a buffer corrupts nothing."""
    from engine.records import build_batch
    broker.call(lambda: broker.engine.create_topic("big", 1))
    batches = [bytes(build_batch([bytes([65 + i]) * 1000 + str(j).encode() for j in range(200)]))
               for i in range(6)]
    frames = [request_frame(0, 3, i, produce_v3("big", 0, b)) for i, b in enumerate(batches)]
    small = request_frame(18, 0, 100, b"")
    with connect(broker.port) as s:
        s.sendall(frames[0])
        assert struct.unpack_from(">i", recv_frame(s))[0] == 0
        f = frames[1]                           # prefix split, body in small pieces
        s.sendall(f[:2])
        time.sleep(0.05)
        for i in range(2, len(f), 7000):
            s.sendall(f[i:i + 7000])
            time.sleep(0.001)
        assert struct.unpack_from(">i", recv_frame(s))[0] == 1
        s.sendall(small + frames[2] + small + frames[3] + frames[4][:5000])
        s.sendall(frames[4][5000:] + frames[5] + small)
        got = [struct.unpack_from(">i", recv_frame(s))[0] for _ in range(7)]
    assert got == [100, 2, 100, 3, 4, 5, 100]
    assert broker.broker.buffers.reused >= 1

    def stored():
        plog = broker.engine.log("big", 0)
        return b"".join(sl.read() for sl in plog.read(0, 1 << 30).slices)
    data = broker.call(stored)
    pos = 0
    for b in batches:
        (n,) = struct.unpack_from(">i", data, pos + 8)
        assert n + 12 == len(b)
        assert data[pos + 16:pos + 12 + n] == b[16:]   # all but base offset, length, leader epoch
        pos += 12 + n
    assert pos == len(data)
