"""BufferPool: large request buffers are reused only when nothing else can see them."""

from __future__ import annotations

import pytest

from engine import _native
from engine.server.buffers import BufferPool


def test_take_gives_the_asked_length_and_reuses_a_returned_buffer():
    pool = BufferPool(max_bytes=8 << 20, min_size=1024)
    buf = pool.take(1 << 20)
    assert type(buf) is bytearray and len(buf) == 1 << 20
    buf[:] = b"\x01" * (1 << 20)
    assert pool.give(buf)
    buf = None
    again = pool.take(900_000)                 # fits the pooled capacity: reused, resized in place
    assert len(again) == 900_000 and pool.reused == 1
    assert again[:4] == b"\x01\x01\x01\x01"    # contents are the caller's to overwrite
    assert pool.pooled_bytes == 0
    other = pool.take(100_000)                 # far below half the capacity: a new buffer
    assert pool.reused == 1 and len(other) == 100_000


def test_a_buffer_still_referenced_or_viewed_is_not_taken_back():
    pool = BufferPool(max_bytes=8 << 20, min_size=1024)
    buf = pool.take(65536)
    view = memoryview(buf)[10:20]              # a handler kept a view of the records
    assert not pool.give(buf)
    view.release()
    keep = buf                                 # another owner
    assert not pool.give(buf)
    del keep
    assert pool.give(buf)
    assert not pool.give(bytes(65536))         # only bytearrays
    assert not pool.give(bytearray(10))        # too small to be worth pooling


def test_pool_holds_at_most_max_bytes():
    pool = BufferPool(max_bytes=3 << 20, min_size=1024)
    bufs = [pool.take(1 << 20) for _ in range(4)]
    while bufs:
        b = bufs.pop()
        pool.give(b)
        b = None
    assert pool.pooled_bytes <= 3 << 20
    huge = pool.take(4 << 20)
    assert not pool.give(huge)                 # larger than the whole pool


def test_native_helpers():
    b = _native.new_buffer(5000)
    assert len(b) == 5000 and _native.buffer_capacity(b) >= 5000
    m = memoryview(b)
    assert _native.buffer_exports(b) == 1
    with pytest.raises(BufferError):
        _native.set_buffer_size(b, 100)
    m.release()
    _native.set_buffer_size(b, 4000)
    assert len(b) == 4000 and _native.buffer_exports(b) == 0
    with pytest.raises(ValueError):
        _native.new_buffer(-1)
