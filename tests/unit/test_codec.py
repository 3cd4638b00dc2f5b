import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard

from engine import _native
from engine.errors import CorruptRecordError, UnsupportedCompressionTypeError

from .helpers import CODECS


def payload(n=250_000):
    words = [b"alpha", b"beta", b"gamma", b"delta", os.urandom(4).hex().encode()]
    out = bytearray()
    i = 0
    while len(out) < n:
        out += words[i % 5] + b" " + str(i).encode() + b"\n"
        i += 1
    return bytes(out[:n])


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("n", [0, 1, 100, 70_000, 250_000])
def test_round_trip(codec, n):
    data = payload(n) if n else b""
    c = _native.compress(codec, memoryview(data))
    if codec and n:
        assert _native.decompress(codec, memoryview(c)) == data
        assert _native.decompress(codec, c) == data
    elif codec == 0:
        assert c == data and _native.decompress(0, c) == data


def test_lz4_block_independence_and_no_content_size():
    c = _native.compress(3, payload())
    assert c[:4] == b"\x04\x22\x4d\x18"
    flg = c[4]
    assert flg >> 6 == 1                 # version 01
    assert flg & 0x20                    # block independence
    assert not flg & 0x08                # no content size (Java's framing)
    assert (c[5] >> 4) & 7 == 4          # 64 KiB blocks
    info = lz4.frame.get_frame_info(c)
    assert info["block_linked"] is False


def test_lz4_third_party_frames():
    data = payload()
    for kw in ({}, {"block_linked": False, "store_size": True},
               {"block_linked": False, "content_checksum": True}):
        assert _native.decompress(3, lz4.frame.compress(data, **kw)) == data
    # block checksums (what aiokafka's cramjam writer sets)
    assert _native.decompress(3, bytes(cramjam.lz4.compress(data))) == data


def test_gzip_is_gzip_and_stdlib_interoperates():
    data = payload()
    c = _native.compress(1, data)
    assert c[:2] == b"\x1f\x8b"
    assert gzip.decompress(c) == data
    assert _native.decompress(1, gzip.compress(data, 1)) == data


def test_snappy_xerial_framing_written():
    data = payload(100_000)
    c = _native.compress(2, data)
    assert c[:8] == b"\x82SNAPPY\x00"
    assert struct.unpack_from(">ii", c, 8) == (1, 1)
    # chunks of 32 KiB input: walk them and decompress each raw block
    pos, out, chunks = 16, b"", 0
    while pos < len(c):
        (n,) = struct.unpack_from(">i", c, pos)
        block = bytes(cramjam.snappy.decompress_raw(c[pos + 4:pos + 4 + n]))
        assert len(block) <= 32768
        out += block
        pos += 4 + n
        chunks += 1
    assert out == data and chunks == 4


def test_snappy_raw_block_and_xerial_decode():
    data = payload(100_000)
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert _native.decompress(2, raw) == data
    assert _native.decompress(2, memoryview(raw)) == data
    # xerial written by someone else (empty trailing data allowed; one chunk)
    xer = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw)) + raw
    assert _native.decompress(2, xer) == data


def test_zstd_without_content_size():
    data = payload()
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert zstandard.frame_content_size(frame) == -1
    assert _native.decompress(4, frame) == data
    big = payload(3_000_000)                 # more than the first output guess
    frame = zstandard.ZstdCompressor(write_content_size=False, level=19).compress(big)
    assert _native.decompress(4, frame) == big


def test_zstd_bomb_is_bounded():
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(b"\x00" * 5_000_000)
    with pytest.raises(CorruptRecordError):
        _native.decompress(4, bomb, max_size=1_000_000)
    declared = zstandard.ZstdCompressor().compress(b"\x00" * 5_000_000)
    with pytest.raises(CorruptRecordError, match="declares"):
        _native.decompress(4, declared, max_size=1_000_000)
    assert len(_native.decompress(4, bomb, max_size=5_000_000)) == 5_000_000


@pytest.mark.parametrize("codec", [1, 2, 3])
def test_other_bombs_are_bounded(codec):
    c = _native.compress(codec, b"\x00" * 2_000_000)
    with pytest.raises(CorruptRecordError):
        _native.decompress(codec, c, max_size=100_000)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
@pytest.mark.parametrize("junk", [b"garbage!garbage!garbage", b"\x00" * 40, b"\xff"])
def test_garbage(codec, junk):
    with pytest.raises(CorruptRecordError):
        _native.decompress(codec, junk)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated(codec):
    c = _native.compress(codec, payload(50_000))
    with pytest.raises(CorruptRecordError):
        _native.decompress(codec, c[: len(c) // 2])


def test_names():
    for i, name in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
        assert _native.codec_name(i) == name
        assert _native.codec_id(name) == i
        assert _native.codec_id(name.upper()) == i
    assert _native.codec_id("uncompressed") == 0
    with pytest.raises(UnsupportedCompressionTypeError):
        _native.codec_id("brotli")
    with pytest.raises(UnsupportedCompressionTypeError):
        _native.codec_name(5)
    with pytest.raises(UnsupportedCompressionTypeError):
        _native.compress(6, b"x")


def _samples(rnd):
    yield b""
    yield b"a"
    yield os.urandom(70_000)
    yield bytes(rnd.randrange(3) for _ in range(20_000))
    yield (os.urandom(7) * 50_000)[:300_000]
    yield b"\x00" * 1_000_000
    yield payload(600_000)


def test_scan_path_lz4_decoder_matches_library():
    import random

    rnd = random.Random(9)
    for data in _samples(rnd):
        for bs in (lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB,
                   lz4.frame.BLOCKSIZE_MAX1MB, lz4.frame.BLOCKSIZE_MAX4MB):
            for kw in ({"block_linked": False}, {"block_linked": False, "store_size": False,
                                                 "content_checksum": True},
                       {"block_linked": True}, {"compression_level": 9, "block_linked": False}):
                frame = lz4.frame.compress(data, block_size=bs, **kw)
                assert _native._lz4_decode_scan_path(frame) == data
        assert _native._lz4_decode_scan_path(bytes(cramjam.lz4.compress(data))) == data
        assert _native._lz4_decode_scan_path(_native.compress(3, data)) == data


def test_scan_path_lz4_decoder_bounds_and_fuzz():
    import random

    frame = _native.compress(3, b"\x00" * 1_000_000)
    with pytest.raises(CorruptRecordError, match="exceeds"):
        _native._lz4_decode_scan_path(frame, max_size=500_000)
    rnd = random.Random(21)
    base = [_native.compress(3, payload(n)) for n in (100, 5000, 70_000)]
    base.append(_native.compress(3, os.urandom(3000)))
    for _i in range(1500):
        c = bytearray(rnd.choice(base))
        for _ in range(rnd.randint(1, 4)):
            c[rnd.randrange(len(c))] = rnd.randrange(256)
        if rnd.random() < 0.3:
            c = c[: rnd.randrange(1, len(c))]
        try:
            out = _native._lz4_decode_scan_path(bytes(c), max_size=1 << 20)
        except CorruptRecordError:
            continue
        assert len(out) <= 1 << 20
