"""pytest-benchmark micro suites: each engine figure beside its reference, same run.

Run: ``python -m pytest bench/ --benchmark-columns=min,median,ops`` (not part of
the test suite; the end-to-end table is ``python -m engine bench``).  Each
group holds the engine function and its reference, so pytest-benchmark's
group table shows the ratio directly.
"""

import os
import zlib

import crc32c as crc32c_pkg
import lz4.frame
import pytest

from engine import _native

MiB = 1 << 20


@pytest.fixture(scope="module")
def one_mib():
    return os.urandom(MiB)


@pytest.mark.benchmark(group="crc32c 1 MiB")
def test_crc_own_sse42_1m(benchmark, one_mib):
    assert _native.crc32c_native(one_mib) == crc32c_pkg.crc32c(one_mib)
    benchmark(_native.crc32c_native, one_mib)


@pytest.mark.benchmark(group="crc32c 1 MiB")
def test_crc_package_1m(benchmark, one_mib):
    benchmark(crc32c_pkg.crc32c, one_mib)


@pytest.mark.benchmark(group="crc32c 1 MiB")
def test_crc_zlib_reference_1m(benchmark, one_mib):
    benchmark(zlib.crc32, one_mib)


@pytest.mark.benchmark(group="crc32c 16 KiB")
def test_crc_engine_16k(benchmark, one_mib):
    mv = memoryview(one_mib)[:16384]
    assert _native.crc32c(mv) == crc32c_pkg.crc32c(mv)
    benchmark(_native.crc32c, mv)


@pytest.mark.benchmark(group="crc32c 16 KiB")
def test_crc_package_16k(benchmark, one_mib):
    benchmark(crc32c_pkg.crc32c, memoryview(one_mib)[:16384])


@pytest.mark.benchmark(group="crc32c 16 KiB")
def test_crc_zlib_reference_16k(benchmark, one_mib):
    benchmark(zlib.crc32, memoryview(one_mib)[:16384])


@pytest.fixture(scope="module")
def segment_bytes():
    b = _native.BatchBuilder()
    for i in range(100):
        b.append(os.urandom(100), None, None, 1_700_000_000_000 + i)
    one = b.build(0)
    return one * (32 * MiB // len(one))


@pytest.mark.benchmark(group="walk 32 MiB of batches")
def test_scan_segment_with_crc(benchmark, segment_bytes):
    # offsets repeat in this synthetic buffer, so walk without the offset-order check
    def run():
        return _native.list_batches(segment_bytes, 0, -1, True)

    headers, end = benchmark(run)
    assert end == len(segment_bytes)


@pytest.mark.benchmark(group="walk 32 MiB of batches")
def test_memcpy_reference(benchmark, segment_bytes):
    benchmark(bytearray, segment_bytes)


@pytest.mark.benchmark(group="lz4 batch 1 MiB")
def test_decode_lz4_batch(benchmark):
    b = _native.BatchBuilder()
    for i in range(1000):
        b.append(os.urandom(512).hex().encode(), None, None, i)
    data = b.build(3)
    benchmark(_native.decode_batch, data, 0, True)


@pytest.mark.benchmark(group="lz4 batch 1 MiB")
def test_lz4_decompress_reference(benchmark):
    b = _native.BatchBuilder()
    for i in range(1000):
        b.append(os.urandom(512).hex().encode(), None, None, i)
    data = b.build(3)
    benchmark(lz4.frame.decompress, memoryview(data)[61:])
