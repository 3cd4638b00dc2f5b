"""End-to-end broker throughput on loopback, with raw protocol clients (no client library cost).

    python -m bench.broker_loopback [--mb 256] [--batch-kb 64]

Produce: pipelined Produce v3 requests (acks=1), each one pre-built v2 batch.
Fetch: Fetch v4 requests reading the whole partition back, once with
sendfile and once with the buffered-copy fallback (``Broker(use_sendfile=False)``).
Prints MB/s for each; numbers are for the machine it runs on.
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _str16(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def _frame(key: int, ver: int, corr: int, body: bytes) -> bytes:
    msg = struct.pack(">hhih", key, ver, corr, 5) + b"bench" + body
    return struct.pack(">i", len(msg)) + msg


def _recv_frame(s: socket.socket, buf: bytearray) -> int:
    """Read one response frame into buf (reused); returns its size."""
    head = s.recv(4, socket.MSG_WAITALL)
    (n,) = struct.unpack(">i", head)
    if len(buf) < n:
        buf.extend(bytes(n - len(buf)))
    view = memoryview(buf)
    got = 0
    while got < n:
        r = s.recv_into(view[got:n])
        if not r:
            raise EOFError
        got += r
    return n


def run(total_mb: int, batch_kb: int, use_sendfile: bool, data_dir: str, produce: bool) -> dict:
    from engine.records import build_batch
    from tests.server.conftest import BrokerThread

    b = BrokerThread(data_dir, use_sendfile=use_sendfile)
    out = {}
    try:
        b.call(lambda: b.engine.ensure_topic("bench"))
        s = socket.create_connection(("127.0.0.1", b.port))
        buf = bytearray()
        if produce:
            value = os.urandom(1000)
            batch = build_batch([value] * max(1, batch_kb))
            n = total_mb * 1024 * 1024 // len(batch)
            body = (struct.pack(">hhi", -1, 1, 30000) + struct.pack(">i", 1) + _str16("bench")
                    + struct.pack(">ii", 1, 0) + struct.pack(">i", len(batch)) + batch)
            t0 = time.perf_counter()
            window = 8
            sent = recvd = 0
            while recvd < n:
                while sent < n and sent - recvd < window:
                    s.sendall(_frame(0, 3, sent, body))
                    sent += 1
                _recv_frame(s, buf)
                recvd += 1
            dt = time.perf_counter() - t0
            out["produce_MBps"] = n * len(batch) / dt / 1e6
        end = b.call(lambda: b.engine.log("bench", 0).log_end_offset)
        offset = 0
        fetched = 0
        t0 = time.perf_counter()
        corr = 0
        while offset < end:
            body = (struct.pack(">iiiib", -1, 0, 1, 64 << 20, 0) + struct.pack(">i", 1) + _str16("bench")
                    + struct.pack(">iiqi", 1, 0, offset, 16 << 20))
            s.sendall(_frame(1, 4, corr, body))
            corr += 1
            size = _recv_frame(s, buf)
            fetched += size
            # walk the batches at the end of the response to find the next offset
            pos = 4 + 4 + 4 + 2 + 5 + 4 + 4 + 2 + 8 + 8 + 4  # corr .. aborted_transactions
            (rlen,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            stop = pos + rlen
            last = offset
            while pos + 61 <= stop:
                base, blen = struct.unpack_from(">qi", buf, pos)
                if pos + 12 + blen > stop:
                    break
                (lod,) = struct.unpack_from(">i", buf, pos + 23)
                last = base + lod + 1
                pos += 12 + blen
            if last == offset:
                raise RuntimeError("fetch made no progress")
            offset = last
        dt = time.perf_counter() - t0
        out["fetch_MBps"] = fetched / dt / 1e6
        s.close()
    finally:
        b.stop()
    return out


def loopback_ceiling(total_mb: int) -> float:
    """MB/s of plain sendall() of an in-memory 1 MiB buffer to a recv_into() sink on
    127.0.0.1: the most any fetch over loopback can reach on this machine."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    total = total_mb << 20

    def sink() -> None:
        conn, _ = srv.accept()
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        got = 0
        while got < total:
            n = conn.recv_into(view)
            if not n:
                break
            got += n
        conn.close()

    t = threading.Thread(target=sink)
    t.start()
    chunk = os.urandom(1 << 20)
    with socket.create_connection(("127.0.0.1", srv.getsockname()[1])) as s:
        t0 = time.perf_counter()
        for _ in range(total_mb):
            s.sendall(chunk)
        t.join()
        dt = time.perf_counter() - t0
    srv.close()
    return total_mb * 1.048576 / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--batch-kb", type=int, default=64)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        r1 = run(args.mb, args.batch_kb, True, d, produce=True)
        # alternate the two write paths over a warm page cache; report the best of 3 each
        fetch = {True: [], False: []}
        ceiling = []
        for _ in range(3):
            ceiling.append(loopback_ceiling(args.mb))
            for sf in (False, True):
                fetch[sf].append(run(args.mb, args.batch_kb, sf, d, produce=False)["fetch_MBps"])
    print(f"produce (acks=1, {args.batch_kb} KiB batches, 8 in flight): {r1['produce_MBps']:.0f} MB/s")
    print(f"fetch with sendfile:     {max(fetch[True]):.0f} MB/s  (runs: "
          + ", ".join(f"{x:.0f}" for x in fetch[True]) + ")")
    print(f"fetch with read() copy:  {max(fetch[False]):.0f} MB/s  (runs: "
          + ", ".join(f"{x:.0f}" for x in fetch[False]) + ")")
    top = max(ceiling)
    print(f"loopback send() ceiling: {top:.0f} MB/s  (runs: " + ", ".join(f"{x:.0f}" for x in ceiling)
          + f"); fetch/ceiling: sendfile {max(fetch[True]) / top:.2f}, copy {max(fetch[False]) / top:.2f}")


if __name__ == "__main__":
    main()
