"""A Fetch answer's FileSlice whose segment got shorter before it went out (a truncation, or a
deleted segment's cut): sendfile returns short, and the connection must neither hang nor break
the framing it announced -- the rest goes out as zeros (a partial batch the client drops)."""

from __future__ import annotations

import asyncio
import os
import socket
import threading

import pytest

from engine.server.connection import Connection
from engine.storage.fileslice import FileSlice, SegmentFile


@pytest.mark.parametrize("use_sendfile", [True, False])
def test_a_slice_of_a_file_cut_under_it_goes_out_whole_with_zeros(tmp_path, use_sendfile):
    path = str(tmp_path / "00000000000000000000.log")
    data = os.urandom(300_000)
    with open(path, "wb") as f:
        f.write(data)
    fs = FileSlice(SegmentFile(path, False), 1000, 250_000)
    os.truncate(path, 20_000)                              # cut after the slice was handed out
    a, b = socket.socketpair()
    got = bytearray()

    def drain():
        while len(got) < 4 + 250_000:
            chunk = b.recv(1 << 16)
            if not chunk:
                break
            got.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()

    async def send():
        conn = Connection.__new__(Connection)             # only the writing half of a connection
        conn.sock, conn.loop, conn.use_sendfile, conn.tls = a, asyncio.get_running_loop(), use_sendfile, None
        a.setblocking(False)
        await asyncio.wait_for(conn._send(b"", [fs]), 10)

    try:
        asyncio.run(send())
        reader.join(10)
    finally:
        a.close()
        b.close()
    assert int.from_bytes(got[:4], "big") == 250_000 and len(got) == 4 + 250_000
    assert got[4:4 + 19_000] == data[1000:20_000] and got[4 + 19_000:] == bytes(231_000)
