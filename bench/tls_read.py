"""The broker's TLS read path alone: CPU per 100 MB of Produce-sized frames, TLS vs plaintext.

    python -m bench.tls_read [--mb 200] [--records 1100,16384] [--rounds 3]

A forked sender writes prepared bytes to a loopback socket as fast as it can; the receiver reads
them into 1 MiB frames the way a connection does (engine/server/connection.py): plaintext with
``sock.recv_into``, TLS through a TlsChannel (engine/server/tls_channel.py) with ``read_nowait``,
waiting in ``select`` when nothing is there.  The TLS bytes are encrypted before the clock starts
(a TLS 1.3 session set up in memory with the certificates tests/security/certs.py makes), in TLS
records of each ``--records`` size: 16384 is the largest a record holds (what Python's ssl and
Java clients send for a large request); ~1.1 KiB is what most of confluent-kafka's records are
when it produces 1 KiB records (measured on the broker side, 2026-11-27: ~47,000 TLS records per
100,000 records produced).  Printed: the receiver thread's CPU seconds per 100 MB (best of
``--rounds``), no client CPU, no storage: the cost the TLS listener adds per byte received.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import socket
import ssl
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from engine.server.tls_channel import TlsChannel  # noqa: E402

_FRAME = 1 << 20


def _contexts() -> tuple[ssl.SSLContext, ssl.SSLContext]:
    from tests.security.certs import make_pki
    pki = make_pki(tempfile.mkdtemp(prefix="bench-tls-read-"))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pki.path("server.pem"))
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(pki.path("ca.pem"))
    client.check_hostname = False
    return server, client


def _pair() -> tuple[socket.socket, socket.socket]:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        sender = socket.create_connection(srv.getsockname())
        receiver, _ = srv.accept()
    receiver.setblocking(False)
    return sender, receiver


def _send_forked(sender: socket.socket, receiver: socket.socket, data: bytes | bytearray) -> int:
    pid = os.fork()
    if pid == 0:                       # the sender: no Python work beyond sendall
        receiver.close()
        sender.sendall(data)
        sender.close()
        os._exit(0)
    sender.close()
    return pid


def plaintext_round(mb: int) -> float:
    """CPU seconds per 100 MB to recv_into 1 MiB frames."""
    sender, receiver = _pair()
    pid = _send_forked(sender, receiver, os.urandom(_FRAME) * mb)
    view = memoryview(bytearray(_FRAME))
    got, t0 = 0, time.thread_time()
    while True:
        try:
            n = receiver.recv_into(view)
        except BlockingIOError:
            select.select([receiver], [], [])
            continue
        if not n:
            break
        got += n
    dt = time.thread_time() - t0
    os.waitpid(pid, 0)
    receiver.close()
    return dt * 1e8 / got


async def _tls_round(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, mb: int, record: int) -> float:
    sender, receiver = _pair()
    channel = TlsChannel(server_ctx, receiver)
    c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out)
    for _ in range(10):                 # the handshake, in memory, before the clock
        for end in (client, channel.obj):
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                pass
        if c_out.pending:
            channel._in.write(c_out.read())
        if channel._out.pending:
            c_in.write(channel._out.read())
    frame = os.urandom(_FRAME)
    wire = bytearray()
    for _ in range(mb):
        for i in range(0, _FRAME, record):
            client.write(frame[i:i + record])
        wire += c_out.read()
    pid = _send_forked(sender, receiver, wire)
    view = memoryview(bytearray(_FRAME))
    got, t0, done = 0, time.thread_time(), False
    while not done:
        total = 0
        while total < _FRAME:
            n = channel.read_nowait(view[total:])
            if n is None:
                select.select([receiver], [], [])
                continue
            if not n:
                done = True
                break
            total += n
        got += total
    dt = time.thread_time() - t0
    os.waitpid(pid, 0)
    receiver.close()
    if got != mb * _FRAME:
        raise RuntimeError(f"read {got} bytes of {mb * _FRAME}")
    return dt * 1e8 / got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--records", default="1100,16384", help="TLS record sizes, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    server_ctx, client_ctx = _contexts()
    sizes = [int(x) for x in args.records.split(",")]
    best: dict = {}
    for _ in range(args.rounds):                 # interleaved: the machine's noise falls on all
        best["plaintext"] = min(best.get("plaintext", float("inf")), plaintext_round(args.mb))
        for size in sizes:
            cost = asyncio.run(_tls_round(server_ctx, client_ctx, args.mb, size))
            best[size] = min(best.get(size, float("inf")), cost)
    print(f"{args.mb} MiB in 1 MiB frames, best of {args.rounds} rounds; receiver CPU s per 100 MB")
    print("| read path | TLS record size | CPU s / 100 MB | vs plaintext |")
    print("|---|---|---|---|")
    base = best["plaintext"]
    print(f"| plaintext (recv_into) | - | {base:.3f} | 1.0 |")
    for size in sizes:
        print(f"| TLS (read_nowait) | {size:,} B | {best[size]:.3f} | {best[size] / base:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
