# Compression of batch payloads (the bytes after the 61-byte header; codec id
# = attributes & 0x07).  Framing (kafka-storage-format.md §10):
#   gzip (1)   RFC 1952 stream, level 6 on write (Java's default).
#   snappy (2) write: xerial/snappy-java framing = magic 82 53 4E 41 50 50 59 00,
#              int32 version 1, int32 compatible 1, then chunks of
#              [int32 BE compressed length][raw snappy block of <= 32 KiB input].
#              read: that framing OR one raw snappy block (librdkafka).
#   lz4 (3)    LZ4 frame, written with independent 64 KiB blocks and no content
#              size (Java rejects linked blocks); any valid frame is read.
#   zstd (4)   one zstd frame; read in bounded mode because librdkafka frames
#              carry no content size.
# Invariants: inputs are buffers read in place (memoryviews of mmaps are fine,
# never .tobytes()); every decompressed result is at most `max_size` bytes or
# CorruptRecordError is raised; every library failure becomes
# CorruptRecordError.  decompress() always returns a new `bytes`; the
# scanner's lz4 path (decompress_into_scratch) reuses one bytearray instead.
# Concurrency: the GIL is held while calling into the libraries, which release
# it themselves for large inputs.  zstd contexts are not thread-safe, so each
# thread gets its own (threading.local); the other codecs are stateless calls.
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t
from libc.string cimport memcpy, memcmp
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.bytearray cimport PyByteArray_AS_STRING
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.buffer cimport PyBUF_WRITE
from csrc.buffer cimport load_u32, store_u32

import threading as _threading
import zlib as _zlib
import lz4.frame as _lz4f
import cramjam as _cramjam
_cramjam_block_into = _cramjam.lz4.decompress_block_into
_CramjamError = _cramjam.DecompressionError
import zstandard as _zstd
import cramjam as _cramjam

_snappy_compress_raw = _cramjam.snappy.compress_raw
_snappy_decompress_raw_len = _cramjam.snappy.decompress_raw_len
_snappy_decompress_raw_into = _cramjam.snappy.decompress_raw_into
_lz4_compress = _lz4f.compress
_lz4_decompress = _lz4f.decompress
_LZ4_BLOCK_64K = _lz4f.BLOCKSIZE_MAX64KB
_ZstdError = _zstd.ZstdError
_zstd_frame_content_size = _zstd.frame_content_size

cdef bytes XERIAL_MAGIC = b"\x82SNAPPY\x00"

_CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
_CODEC_IDS = {"none": 0, "uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_DEFAULT_LEVELS = (0, 6, 0, 0, 3)

_tls = _threading.local()


cdef object _zstd_dctx():
    try:
        return _tls.dctx
    except AttributeError:
        _tls.dctx = _zstd.ZstdDecompressor()
        return _tls.dctx


cdef object _zstd_cctx(int level):
    cdef dict cache
    try:
        cache = _tls.cctx
    except AttributeError:
        cache = _tls.cctx = {}
    c = cache.get(level)
    if c is None:
        c = cache[level] = _zstd.ZstdCompressor(level=level)
    return c


def codec_name(int codec):
    """Kafka's name of a codec id (0 "none", 1 "gzip", 2 "snappy", 3 "lz4", 4 "zstd")."""
    if 0 <= codec <= 4:
        return _CODEC_NAMES[codec]
    raise _errors.UnsupportedCompressionTypeError("unknown compression codec id %d" % codec)


def codec_id(name):
    """Codec id of a Kafka compression.type name ("none"/"uncompressed", "gzip", "snappy", "lz4", "zstd")."""
    if isinstance(name, int):
        codec_name(name)
        return name
    try:
        return _CODEC_IDS[name.lower()]
    except (KeyError, AttributeError):
        raise _errors.UnsupportedCompressionTypeError("unknown compression type %r" % (name,)) from None


cdef bytes _xerial_compress(const uint8_t[::1] src):
    cdef Py_ssize_t n = src.shape[0], pos = 0, chunk
    cdef uint8_t lenbuf[4]
    cdef bytearray out = bytearray(XERIAL_MAGIC)
    store_u32(lenbuf, 1)
    out += lenbuf[:4]          # version
    out += lenbuf[:4]          # compatible version
    mv = memoryview(src)
    while pos < n:
        chunk = min(n - pos, <Py_ssize_t>SNAPPY_XERIAL_BLOCK)
        block = _snappy_compress_raw(mv[pos:pos + chunk])
        store_u32(lenbuf, <uint32_t>len(block))
        out += lenbuf[:4]
        out += block
        pos += chunk
    return bytes(out)


cpdef bytes compress(int codec, data, int level=-1):
    """Compress one batch payload with Kafka's framing for `codec`.

    `level` -1 means the Java client's default (gzip 6, zstd 3; ignored by
    snappy and lz4).
    """
    if codec == CODEC_NONE:
        return bytes(data)
    if codec == CODEC_GZIP:
        c = _zlib.compressobj(6 if level < 0 else level, _zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == CODEC_SNAPPY:
        return _xerial_compress(data)
    if codec == CODEC_LZ4:
        return _lz4_compress(data, block_size=_LZ4_BLOCK_64K, block_linked=False,
                             content_checksum=False, store_size=False)
    if codec == CODEC_ZSTD:
        return _zstd_cctx(3 if level < 0 else level).compress(data)
    raise _errors.UnsupportedCompressionTypeError("unknown compression codec id %d" % codec)


cdef inline object _bad(str what):
    return _errors.CorruptRecordError(what)


cdef bytes _snappy_decompress(object data, const uint8_t[::1] src, Py_ssize_t max_size):
    cdef Py_ssize_t n = src.shape[0], pos, total = 0, clen, outpos = 0, got
    cdef list blocks
    cdef bytes out
    mv = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
    try:
        if n >= SNAPPY_XERIAL_HEADER and memcmp(&src[0], <const char*>XERIAL_MAGIC, 8) == 0:
            blocks = []
            pos = SNAPPY_XERIAL_HEADER
            while pos < n:
                if pos + 4 > n:
                    raise _bad("snappy (xerial): truncated chunk length")
                clen = load_u32(&src[pos])
                pos += 4
                if clen > n - pos:
                    raise _bad("snappy (xerial): chunk runs past the payload")
                block = mv[pos:pos + clen]
                total += _snappy_decompress_raw_len(block)
                if total > max_size:
                    raise _bad("snappy: decompressed size exceeds %d bytes" % max_size)
                blocks.append(block)
                pos += clen
        else:
            block = mv
            total = _snappy_decompress_raw_len(block)
            if total > max_size:
                raise _bad("snappy: decompressed size exceeds %d bytes" % max_size)
            blocks = [block]
        # Decompress straight into the result: a fresh bytes object is not
        # shared with anyone until we return it.
        out = PyBytes_FromStringAndSize(NULL, total)
        dst = PyMemoryView_FromMemory(PyBytes_AS_STRING(out), total, PyBUF_WRITE)
        for block in blocks:
            got = _snappy_decompress_raw_into(block, dst[outpos:])
            outpos += got
        if outpos != total:
            raise _bad("snappy: block lengths disagree with their contents")
        return out
    except _errors.CorruptRecordError:
        raise
    except Exception as e:
        raise _bad("snappy: %s" % (e,)) from None


cdef bytes _lz4_decompress_checked(object data, const uint8_t[::1] src, Py_ssize_t max_size):
    # A content size in the frame header would make python-lz4 allocate it up
    # front: check it against the bound first.  Header: magic(4) FLG BD [size(8)].
    cdef uint64_t content = 0
    cdef int i
    if src.shape[0] >= 14 and (src[4] & LZ4_FLG_CONTENT_SIZE):
        for i in range(8):
            content |= (<uint64_t>src[6 + i]) << (8 * i)
        if content > <uint64_t>max_size:
            raise _bad("lz4: frame declares %d bytes, more than %d" % (content, max_size))
    try:
        out = _lz4_decompress(data)
    except Exception as e:
        raise _bad("lz4: %s" % (e,)) from None
    if len(out) > max_size:
        raise _bad("lz4: decompressed size exceeds %d bytes" % max_size)
    return out


cdef bytes _zstd_decompress(object data, Py_ssize_t n, Py_ssize_t max_size):
    cdef Py_ssize_t guess
    dctx = _zstd_dctx()
    try:
        size = _zstd_frame_content_size(data)
    except Exception as e:
        raise _bad("zstd: %s" % (e,)) from None
    if size >= 0:
        if size > max_size:
            raise _bad("zstd: frame declares %d bytes, more than %d" % (size, max_size))
        try:
            return dctx.decompress(data)
        except Exception as e:
            raise _bad("zstd: %s" % (e,)) from None
    # No content size (librdkafka): one-shot with a bounded output buffer,
    # growing the bound geometrically up to max_size.
    guess = max(n * 8, 1 << 20)
    while True:
        if guess > max_size:
            guess = max_size
        try:
            return dctx.decompress(data, max_output_size=guess)
        except _ZstdError as e:
            if guess >= max_size:
                raise _bad("zstd: %s (output bound %d bytes)" % (e, max_size)) from None
            guess *= 8


cpdef bytes decompress(int codec, data, Py_ssize_t max_size=MAX_DECOMPRESSED_DEFAULT):
    """Decompress one batch payload (any buffer), at most `max_size` bytes out.

    Accepts every framing real clients write (see the file comment); garbage,
    truncation or an output above `max_size` raise CorruptRecordError.
    """
    cdef const uint8_t[::1] src = data
    cdef Py_ssize_t n = src.shape[0]
    if codec == CODEC_NONE:
        if n > max_size:
            raise _bad("payload exceeds %d bytes" % max_size)
        return bytes(data)
    if n == 0:
        raise _bad("empty compressed payload")
    if codec == CODEC_GZIP:
        d = _zlib.decompressobj(47)          # gzip or zlib header, auto-detected
        try:
            out = d.decompress(data, max_size)
        except _zlib.error as e:
            raise _bad("gzip: %s" % (e,)) from None
        if d.unconsumed_tail:
            raise _bad("gzip: decompressed size exceeds %d bytes" % max_size)
        if not d.eof:
            raise _bad("gzip: truncated stream")
        return out
    if codec == CODEC_SNAPPY:
        return _snappy_decompress(data, src, max_size)
    if codec == CODEC_LZ4:
        return _lz4_decompress_checked(data, src, max_size)
    if codec == CODEC_ZSTD:
        return _zstd_decompress(data, n, max_size)
    raise _errors.UnsupportedCompressionTypeError("unknown compression codec id %d" % codec)


# ---------------------------------------------------------------- lz4 fast path
# The scan path's lz4: a frame with independent blocks and no dictionary
# (what Java, librdkafka, kafka-python and aiokafka all write) is decoded
# straight into a reusable buffer.  We parse only the LZ4 *frame* (magic,
# FLG/BD, block sizes, stored-block bit); each compressed *block* is decoded
# by cramjam's lz4 (decompress_block_into, bounded by the output slice it is
# given) -- compression itself always comes from a maintained package.  Block
# checksums and the content checksum are not verified (the batch CRC-32C
# already covers these bytes).  Anything unusual (linked blocks, dictionary
# id, trailing bytes) returns LZ4_FALLBACK and python-lz4 decodes it instead.

cdef enum:
    LZ4_CORRUPT = -1
    LZ4_FALLBACK = -2
    LZ4_TOO_BIG = -3


cdef inline uint32_t _le32(const uint8_t* p) noexcept nogil:
    return <uint32_t>p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


cdef Py_ssize_t lz4_frame_bound(const uint8_t* p, Py_ssize_t n, Py_ssize_t* header) noexcept nogil:
    """Upper bound of the decompressed size of an independent-block frame
    (sum of block maxima), with the header size in *header; or LZ4_FALLBACK / LZ4_CORRUPT."""
    cdef uint8_t flg, bd
    cdef Py_ssize_t pos, blockmax, bound = 0
    cdef uint32_t bsize
    if n < 7 or _le32(p) != 0x184D2204:
        return LZ4_CORRUPT
    flg = p[4]
    bd = p[5]
    if (flg >> 6) != 1 or (flg & 0x02) or (bd & 0x8F):
        return LZ4_FALLBACK
    if not (flg & LZ4_FLG_BLOCK_INDEPENDENT) or (flg & 0x01):
        return LZ4_FALLBACK                 # linked blocks or a dictionary: library path
    if ((bd >> 4) & 7) < 4:
        return LZ4_FALLBACK
    blockmax = <Py_ssize_t>1 << (8 + 2 * ((bd >> 4) & 7))
    pos = 6 + (8 if flg & LZ4_FLG_CONTENT_SIZE else 0) + 1
    header[0] = pos
    while True:
        if n - pos < 4:
            return LZ4_CORRUPT
        bsize = _le32(p + pos)
        pos += 4
        if bsize == 0:
            break
        if bsize & 0x80000000u:
            bsize &= 0x7FFFFFFF
            if bsize > <uint32_t>blockmax:
                return LZ4_CORRUPT
        if bsize > <uint32_t>(n - pos):
            return LZ4_CORRUPT
        pos += bsize + (4 if flg & 0x10 else 0)
        bound += blockmax
    pos += 4 if flg & 0x04 else 0
    if pos != n:
        return LZ4_FALLBACK
    return bound


cdef Py_ssize_t lz4_frame_decode(object src, const uint8_t* p, Py_ssize_t header,
                                 object out_obj, uint8_t* out, Py_ssize_t cap) except? -9:
    """Decode a frame already checked by lz4_frame_bound into out[0:cap].

    Each compressed block goes to cramjam's LZ4 block decoder, which writes
    into our buffer (bounded by the slice it is given); stored blocks are
    copied.  Returns bytes written, or LZ4_TOO_BIG / LZ4_CORRUPT."""
    cdef uint8_t flg = p[4]
    cdef Py_ssize_t pos = header, w = 0, r, room
    cdef Py_ssize_t blockmax = <Py_ssize_t>1 << (8 + 2 * ((p[5] >> 4) & 7))
    cdef uint32_t bsize
    cdef object src_mv = memoryview(src)
    cdef object out_mv = memoryview(out_obj)
    while True:
        bsize = _le32(p + pos)
        pos += 4
        if bsize == 0:
            return w
        room = cap - w if cap - w <= blockmax else blockmax
        if bsize & 0x80000000u:
            bsize &= 0x7FFFFFFF
            if bsize > <uint32_t>room:
                return LZ4_TOO_BIG
            memcpy(out + w, p + pos, bsize)
            r = bsize
        else:
            try:
                r = _cramjam_block_into(src_mv[pos:pos + bsize], out_mv[w:w + room])
            except _CramjamError:
                # cramjam reports an output that is too small and a malformed
                # block alike; with a whole block's room it can only be corrupt
                return LZ4_TOO_BIG if room < blockmax else LZ4_CORRUPT
        w += r
        pos += bsize + (4 if flg & 0x10 else 0)


cdef Py_ssize_t decompress_into_scratch(int codec, object src, Py_ssize_t src_len, bytearray scratch,
                                        Py_ssize_t max_size) except -1:
    """Decompress an lz4 payload into the reusable `scratch` (grown as needed,
    never beyond max_size); return the decompressed length.  Other codecs: -2
    (the caller uses decompress()).  Reusing one buffer keeps the output hot in
    cache and avoids a fresh allocation per batch on the scan path."""
    cdef const uint8_t[::1] mv
    cdef Py_ssize_t header = 0, bound, cap, r
    cdef uint8_t* out
    if codec != CODEC_LZ4:
        return -2
    mv = src
    if mv.shape[0] == 0:
        raise _bad("empty compressed payload")
    bound = lz4_frame_bound(&mv[0], mv.shape[0], &header)
    if bound == LZ4_CORRUPT:
        raise _bad("lz4: malformed frame")
    if bound == LZ4_FALLBACK:
        return _lz4_via_library(src, scratch, max_size)
    cap = bound if bound < max_size else max_size
    if len(scratch) < cap:
        scratch.extend(bytes(cap - len(scratch)))
    out = <uint8_t*>PyByteArray_AS_STRING(scratch)
    r = lz4_frame_decode(src, &mv[0], header, scratch, out, cap)
    if r == LZ4_TOO_BIG:
        raise _bad("lz4: decompressed size exceeds %d bytes" % max_size)
    if r < 0:
        raise _bad("lz4: malformed block")
    return r


cdef Py_ssize_t _lz4_via_library(object src, bytearray scratch, Py_ssize_t max_size) except -1:
    cdef bytes out = _lz4_decompress_checked(src, src, max_size)
    cdef Py_ssize_t n = len(out)
    if len(scratch) < n:
        scratch.extend(bytes(n - len(scratch)))
    memcpy(PyByteArray_AS_STRING(scratch), PyBytes_AS_STRING(out), n)
    return n


def _lz4_decode_scan_path(data, Py_ssize_t max_size=MAX_DECOMPRESSED_DEFAULT):
    """The scanner's lz4 decoder (fast path + library fallback) on its own; for tests."""
    cdef bytearray scratch = bytearray()
    cdef Py_ssize_t n = decompress_into_scratch(CODEC_LZ4, data, len(data), scratch, max_size)
    return bytes(scratch[:n])
