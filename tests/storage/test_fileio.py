import errno
import mmap
import os
import socket

import pytest

from engine import _native


def test_pwrite_all_and_sync(tmp_path):
    p = tmp_path / "f"
    fd = os.open(p, os.O_RDWR | os.O_CREAT)
    try:
        assert _native.pwrite_all(fd, b"hello", 0) == 5
        assert _native.pwrite_all(fd, bytearray(b"world"), 10) == 5
        assert _native.pwrite_all(fd, memoryview(b"xx"), 5) == 2
        _native.fdatasync(fd)
        _native.fsync(fd)
        assert p.read_bytes() == b"helloxx\x00\x00\x00world"
        _native.fallocate(fd, 0, 4096)
        assert os.path.getsize(p) == 4096
        _native.posix_fadvise(fd, 0, 0, _native.POSIX_FADV_SEQUENTIAL)
    finally:
        os.close(fd)
    with pytest.raises(OSError) as ei:
        _native.fdatasync(fd)
    assert ei.value.errno == errno.EBADF
    with pytest.raises(OSError) as ei:
        _native.pwrite_all(fd, b"x", 0)
    assert ei.value.errno == errno.EBADF


def test_sendfile_nonblocking(tmp_path):
    p = tmp_path / "f"
    data = os.urandom(3 << 20)
    p.write_bytes(data)
    a, b = socket.socketpair()
    a.setblocking(False)
    fd = os.open(p, os.O_RDONLY)
    try:
        sent = _native.sendfile_nonblocking(a.fileno(), fd, 100, len(data))
        assert 0 < sent < len(data)  # the socket buffer fills up
        again = _native.sendfile_nonblocking(a.fileno(), fd, 100 + sent, len(data))
        assert again == -errno.EAGAIN
        got = bytearray()
        while len(got) < sent:
            got += b.recv(1 << 20)
        assert bytes(got) == data[100:100 + sent]
        assert _native.sendfile_nonblocking(a.fileno(), fd, len(data), 10) == 0
    finally:
        os.close(fd)
        a.close()
        b.close()


def test_atomic_i64():
    m = mmap.mmap(-1, 64)
    _native.store_i64_atomic(m, 8, -5)
    assert _native.load_i64_atomic(m, 8) == -5
    with pytest.raises(ValueError):
        _native.store_i64_atomic(m, 4, 1)
