"""Receive buffers for large request frames, reused across requests.

A Produce request is read straight into a buffer of its exact size
(``recv_into``, no intermediate copies).  Allocating that buffer fresh for
every request costs as much CPU as the copy itself: ``bytearray(n)`` zero-fills
it, and each new page of a large allocation is a page fault.  The pool keeps
the buffers of finished requests (their pages resident) and hands them out
again, resized in place.

Ownership: ``take(n)`` returns a bytearray of length ``n`` whose contents are
undefined — the caller overwrites all of it.  ``give(buf)`` takes it back only
if nothing else can still see it: no buffer views exported (memoryviews of the
record batches a handler kept) and no other reference (checked with the
reference count the call itself adds, calibrated once at import).  Anything
else is left to the garbage collector, so a handler that keeps a view never
sees its bytes overwritten.  The pool holds at most ``max_bytes``; buffers
smaller than ``min_size`` are not worth pooling.  Broker-wide, event-loop
thread only (no locking).
"""

from __future__ import annotations

import sys

from .. import _native

__all__ = ["BufferPool"]


def _refs(buf) -> int:
    return sys.getrefcount(buf)


def _passed_on(buf) -> int:
    return _refs(buf)


def _lone_refs() -> int:
    """What give() sees for a buffer held by one local variable of give()'s caller
    (the same call shape: caller's local -> parameter -> _refs)."""
    b = bytearray(1)
    return _passed_on(b)


_LONE = _lone_refs()


class BufferPool:
    def __init__(self, max_bytes: int = 32 << 20, min_size: int = 64 << 10):
        self.max_bytes = max_bytes
        self.min_size = min_size
        self._free: list[bytearray] = []
        self._bytes = 0
        self.reused = 0        # take() calls served from the pool (tests, stats)

    @property
    def pooled_bytes(self) -> int:
        return self._bytes

    def take(self, n: int) -> bytearray:
        """A bytearray of length `n`, contents undefined."""
        best = -1
        best_cap = 0
        for i, b in enumerate(self._free):
            cap = _native.buffer_capacity(b)
            # at least half used: a resize below half the capacity would realloc
            if n <= cap < 2 * n and (best < 0 or cap < best_cap):
                best, best_cap = i, cap
        if best < 0:
            return _native.new_buffer(n)
        buf = self._free.pop(best)
        self._bytes -= best_cap
        _native.set_buffer_size(buf, n)
        self.reused += 1
        return buf

    def give(self, buf) -> bool:
        """Return `buf` (held by exactly one local variable of the caller) for reuse."""
        if _refs(buf) > _LONE or type(buf) is not bytearray or _native.buffer_exports(buf):
            return False
        cap = _native.buffer_capacity(buf)
        if cap < self.min_size or cap > self.max_bytes:
            return False
        while self._free and self._bytes + cap > self.max_bytes:
            self._bytes -= _native.buffer_capacity(self._free.pop(0))   # the oldest goes
        self._free.append(buf)
        self._bytes += cap
        return True
