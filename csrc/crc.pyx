# CRC-32C.  The native walkers call engine_crc32c_update() (csrc/crc32c.c:
# SSE4.2 with a table fallback) on raw pointers without the GIL.  From Python,
# crc32c() takes any buffer; above 64 KiB it hands the work to the PyPI
# `crc32c` package (hardware, several streams interleaved, releases the GIL),
# which is faster than our single-stream loop on large inputs.
from libc.stdint cimport uint8_t, uint32_t

cdef extern from "csrc/crc32c.h" nogil:
    uint32_t engine_crc32c_update(uint32_t crc, const uint8_t *data, size_t len)
    uint32_t engine_crc32c_sw(uint32_t crc, const uint8_t *data, size_t len)
    int engine_crc32c_has_hw()

import crc32c as _crc32c_pkg
_pkg_crc32c = _crc32c_pkg.crc32c

cdef enum:
    CRC_PACKAGE_THRESHOLD = 65536


cdef inline uint32_t crc_of(const uint8_t* p, size_t n) noexcept nogil:
    return engine_crc32c_update(0, p, n)


def crc32c(data, uint32_t crc=0):
    """CRC-32C of a buffer (bytes, bytearray, memoryview, mmap), continuing from `crc`."""
    cdef const uint8_t[::1] mv = data
    cdef size_t n = mv.shape[0]
    if n == 0:
        return crc
    if n >= CRC_PACKAGE_THRESHOLD:
        return _pkg_crc32c(data, crc)
    return engine_crc32c_update(crc, &mv[0], n)


def crc32c_software(data, uint32_t crc=0):
    """CRC-32C through the portable table path (for tests and benchmarks)."""
    cdef const uint8_t[::1] mv = data
    if mv.shape[0] == 0:
        return crc
    return engine_crc32c_sw(crc, &mv[0], mv.shape[0])


def crc32c_has_hw():
    """True when the SSE4.2 instruction path is in use."""
    return bool(engine_crc32c_has_hw())


def crc32c_native(data, uint32_t crc=0):
    """CRC-32C through our own dispatch (SSE4.2 three-stream loop or table), any size."""
    cdef const uint8_t[::1] mv = data
    cdef size_t n = mv.shape[0]
    cdef uint32_t r
    if n == 0:
        return crc
    with nogil:
        r = engine_crc32c_update(crc, &mv[0], n)
    return r
