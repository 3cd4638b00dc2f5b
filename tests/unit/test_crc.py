import os
import random

import crc32c as crc32c_pkg
import pytest

from engine import _native

VECTORS = [
    (b"123456789", 0xE3069283),
    (b"\x00" * 32, 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]


@pytest.mark.parametrize("fn", [_native.crc32c, _native.crc32c_software])
@pytest.mark.parametrize("data,expected", VECTORS)
def test_rfc3720_vectors(fn, data, expected):
    assert fn(data) == expected
    assert fn(memoryview(data)) == expected
    assert fn(bytearray(data)) == expected


@pytest.mark.parametrize("fn", [_native.crc32c, _native.crc32c_software])
def test_random_buffers_match_package(fn):
    rnd = random.Random(7)
    for n in [0, 1, 3, 7, 8, 15, 16, 63, 64, 255, 1000, 4096, 65535, 65536, 200_000]:
        data = os.urandom(n)
        start = rnd.randrange(0, 8) if n > 8 else 0
        mv = memoryview(data)[start:]
        assert fn(mv) == crc32c_pkg.crc32c(mv), n


def test_continuation():
    data = os.urandom(5000)
    assert _native.crc32c(data[3000:], _native.crc32c(data[:3000])) == crc32c_pkg.crc32c(data)
    assert _native.crc32c_software(data[10:], _native.crc32c_software(data[:10])) == crc32c_pkg.crc32c(data)


def test_hw_flag_is_bool():
    assert _native.crc32c_has_hw() in (True, False)
