# Building RecordBatch v2 bytes from columns (the Arrow-native path), and Kafka's
# key partitioner over a column.  build_batches() encodes whole columns (pyarrow
# binary/string arrays read straight from their buffers, or Python lists) into
# batches with the OpenBatch helpers of builder.pyx; partition_keys() hashes a key
# column with Kafka's murmur2 (Java DefaultPartitioner) without a Python object
# per key.  Included after builder.pyx (see _native.pyx).
# Concurrency: no shared state but the cached pyarrow module; the GIL is held.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uintptr_t
from libc.stdlib cimport free
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Resize

# ---------------------------------------------------------------- build_batches

cdef enum:
    COL_NONE = 0         # column absent: all null
    COL_ARROW32 = 1      # Arrow binary/string: validity + int32 offsets + data
    COL_ARROW64 = 2      # Arrow large_binary/large_string: int64 offsets
    COL_LIST = 3         # Python sequence of bytes-like / str / None

ctypedef struct BinCol:
    int kind
    const uint8_t* validity
    int64_t bit0
    const int32_t* off32
    const int64_t* off64
    const uint8_t* data


cdef inline const uint8_t* _buf_addr(object buf, int64_t skip):
    if buf is None:
        return NULL
    return <const uint8_t*><uintptr_t>buf.address + skip


cdef object bincol_init(object arr, BinCol* c, Py_ssize_t n, str what):
    """Fill `c` for `arr`; returns the object to keep alive while `c` is used."""
    c.kind = COL_NONE
    c.validity = NULL
    if arr is None:
        return None
    if _pa is not None and isinstance(arr, (_pa.Array, _pa.ChunkedArray)):
        if isinstance(arr, _pa.ChunkedArray):
            arr = arr.combine_chunks()
        if len(arr) != n:
            raise ValueError("%s has %d rows, values have %d" % (what, len(arr), n))
        t = arr.type
        if _pa.types.is_binary(t) or _pa.types.is_string(t):
            c.kind = COL_ARROW32
            width = 4
        elif _pa.types.is_large_binary(t) or _pa.types.is_large_string(t):
            c.kind = COL_ARROW64
            width = 8
        else:
            raise TypeError("%s: unsupported Arrow type %s (binary/string expected)" % (what, t))
        bufs = arr.buffers()
        c.bit0 = arr.offset
        if arr.null_count:
            c.validity = _buf_addr(bufs[0], 0)
        c.off32 = <const int32_t*>_buf_addr(bufs[1], arr.offset * width)
        c.off64 = <const int64_t*>c.off32
        c.data = _buf_addr(bufs[2], 0)
        return arr
    if not isinstance(arr, list):
        arr = list(arr)
    if len(arr) != n:
        raise ValueError("%s has %d rows, values have %d" % (what, len(arr), n))
    c.kind = COL_LIST
    return arr


cdef inline bint bincol_get(BinCol* c, Py_ssize_t i, const uint8_t** p, Py_ssize_t* n) noexcept:
    """Pointer/length of row i of an Arrow column (n = -1 for null)."""
    cdef int64_t j
    if c.validity != NULL:
        j = c.bit0 + i
        if not (c.validity[j >> 3] >> (j & 7)) & 1:
            n[0] = -1
            return True
    if c.kind == COL_ARROW32:
        p[0] = c.data + c.off32[i]
        n[0] = c.off32[i + 1] - c.off32[i]
    else:
        p[0] = c.data + c.off64[i]
        n[0] = c.off64[i + 1] - c.off64[i]
    return True


_pa = None
_TS_SCALE = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1000000)}


def build_batches(values, keys=None, timestamps=None, headers=None, int codec=0,
                  Py_ssize_t max_batch_bytes=1048576, int level=-1, int64_t producer_id=-1,
                  int producer_epoch=-1, int32_t base_sequence=-1, Py_ssize_t start=0,
                  Py_ssize_t max_batches=0):
    """Encode many records into v2 batches of at most max_batch_bytes (uncompressed) each.

    values/keys: Python sequences (bytes-like, str, None) or pyarrow
    Binary/LargeBinary/String/LargeString arrays (read from their buffers);
    timestamps: sequence of ms (None = now) or an Int64/Timestamp array (any
    unit, converted to ms; null = now); headers: sequence of per-record header
    lists (or None).  A single record larger than max_batch_bytes gets a batch
    of its own.  Returns a list of batch bytes with baseOffset 0.

    Idempotent producers: producer_id/producer_epoch go into every batch and
    base_sequence >= 0 numbers them (each batch's base sequence is base_sequence
    plus the records before it, mod 2**31), the CRC written once.  Incremental
    building: from record `start`, at most `max_batches` batches (0: all); the
    next start is `start` plus their records_count.  Uncompressed batches are
    encoded straight into the bytearray returned (no copy of the records).
    """
    global _pa
    cdef Py_ssize_t n, i
    cdef BinCol vc, kc
    cdef const uint8_t* vp = NULL
    cdef const uint8_t* kp = NULL
    cdef Py_ssize_t vn = -1, kn = -1
    cdef const int64_t* tsv = NULL
    cdef const uint8_t* tsvalid = NULL
    cdef int64_t tsbit0 = 0, tsmul = 1, tsdiv = 1, ts, now
    cdef list tslist = None, hlist = None
    cdef OpenBatch ob
    cdef bytearray cur = None
    cdef Py_ssize_t cap, done = 0
    cdef int64_t seq = base_sequence
    cdef bint inplace = codec == CODEC_NONE
    cdef Field kf, vf
    cdef list out = []
    cdef object h = None
    if _pa is None:
        import pyarrow
        _pa = pyarrow
    codec_name(codec)
    n = len(values)
    keep_v = bincol_init(values, &vc, n, "values")
    keep_k = bincol_init(keys, &kc, n, "keys")
    keep_t = None
    if timestamps is not None:
        if isinstance(timestamps, (_pa.Array, _pa.ChunkedArray)):
            if isinstance(timestamps, _pa.ChunkedArray):
                timestamps = timestamps.combine_chunks()
            if len(timestamps) != n:
                raise ValueError("timestamps has %d rows, values have %d" % (len(timestamps), n))
            t = timestamps.type
            if _pa.types.is_timestamp(t):
                tsmul, tsdiv = _TS_SCALE[t.unit]
            elif not _pa.types.is_int64(t):
                raise TypeError("timestamps: unsupported Arrow type %s" % t)
            bufs = timestamps.buffers()
            tsbit0 = timestamps.offset
            if timestamps.null_count:
                tsvalid = _buf_addr(bufs[0], 0)
            tsv = <const int64_t*>_buf_addr(bufs[1], timestamps.offset * 8)
            keep_t = timestamps
        else:
            tslist = timestamps if isinstance(timestamps, list) else list(timestamps)
            if len(tslist) != n:
                raise ValueError("timestamps has %d rows, values have %d" % (len(tslist), n))
    if headers is not None:
        hlist = headers if isinstance(headers, list) else list(headers)
        if len(hlist) != n:
            raise ValueError("headers has %d rows, values have %d" % (len(hlist), n))
    if start < 0 or start > n:
        raise ValueError("start %d is outside the %d records" % (start, n))
    now = now_ms()
    cap = min(max_batch_bytes, 64 * 1024 * 1024) + 1024
    if inplace:
        ob.data = NULL
        cur = ob_init_in(&ob, cap)
    else:
        ob_init(&ob, cap)
    try:
        for i in range(start, n):
            if tsv != NULL:
                if tsvalid != NULL and not (tsvalid[(tsbit0 + i) >> 3] >> ((tsbit0 + i) & 7)) & 1:
                    ts = now
                else:
                    ts = tsv[i] * tsmul // tsdiv
            elif tslist is not None:
                t = <object>PyList_GET_ITEM(tslist, i)
                ts = now if t is None else <int64_t>t
            else:
                ts = now
            if hlist is not None:
                h = <object>PyList_GET_ITEM(hlist, i)
                if h is not None and type(h) is not list:
                    h = list(h)
            kf.release = False
            vf.release = False
            try:
                if kc.kind == COL_LIST:
                    field_get(<object>PyList_GET_ITEM(keep_k, i), &kf)
                    kp = kf.p; kn = kf.n
                elif kc.kind == COL_NONE:
                    kp = NULL; kn = -1
                else:
                    bincol_get(&kc, i, &kp, &kn)
                if vc.kind == COL_LIST:
                    field_get(<object>PyList_GET_ITEM(keep_v, i), &vf)
                    vp = vf.p; vn = vf.n
                else:
                    bincol_get(&vc, i, &vp, &vn)
                if encode_record(&ob, ts, kp, kn, vp, vn, h, max_batch_bytes) == ENC_FULL:
                    out.append(_emit(&ob, cur, codec, producer_id, producer_epoch, seq, level))
                    if seq >= 0:
                        seq = (seq + ob.count) & 0x7FFFFFFF
                    done += 1
                    if done == max_batches:
                        return out
                    if inplace:
                        cur = ob_init_in(&ob, cap)
                    else:
                        ob_reset(&ob)
                    encode_record(&ob, ts, kp, kn, vp, vn, h, 0)
            finally:
                field_release(&kf)
                field_release(&vf)
        if ob.count:
            out.append(_emit(&ob, cur, codec, producer_id, producer_epoch, seq, level))
    finally:
        if not inplace:
            free(ob.data)
    return out


cdef bytearray _emit(OpenBatch* ob, bytearray cur, int codec, int64_t producer_id,
                     int producer_epoch, int64_t seq, int level):
    """The finished batch of `ob`: `cur` itself (trimmed, header and CRC written) when the
    records were encoded into it, else a built (compressed) copy."""
    if cur is None:
        return ob_build(ob, codec, 0, producer_id, producer_epoch, <int32_t>seq, False, -1, level)
    PyByteArray_Resize(cur, ob.len)
    ob_header(ob, <uint8_t*>PyByteArray_AS_STRING(cur), ob.len, codec, 0, producer_id,
              producer_epoch, <int32_t>seq, -1)
    ob.owner = NULL
    ob.data = NULL
    return cur


# ---------------------------------------------------------------- partitioner

cdef inline int32_t murmur2_of(const uint8_t* data, Py_ssize_t length) noexcept nogil:
    """Kafka's murmur2 (Java Utils.murmur2): seed 0x9747b28c, little-endian words."""
    cdef uint32_t m = 0x5bd1e995
    cdef uint32_t h = (<uint32_t>0x9747b28cU) ^ <uint32_t>length
    cdef uint32_t k
    cdef Py_ssize_t i, n4 = length // 4, tail = length & ~3
    for i in range(n4):
        k = (<uint32_t>data[4 * i] | (<uint32_t>data[4 * i + 1] << 8) |
             (<uint32_t>data[4 * i + 2] << 16) | (<uint32_t>data[4 * i + 3] << 24))
        k *= m
        k ^= k >> 24
        k *= m
        h *= m
        h ^= k
    i = length & 3
    if i == 3:
        h ^= <uint32_t>data[tail + 2] << 16
    if i >= 2:
        h ^= <uint32_t>data[tail + 1] << 8
    if i >= 1:
        h ^= <uint32_t>data[tail]
        h *= m
    h ^= h >> 13
    h *= m
    h ^= h >> 15
    return <int32_t>h


def murmur2(key):
    """Kafka's murmur2 hash of a bytes-like key, as a signed int32 (Java's Utils.murmur2)."""
    cdef const uint8_t[::1] mv = key
    if mv.shape[0] == 0:
        return murmur2_of(<const uint8_t*>"", 0)
    return murmur2_of(&mv[0], mv.shape[0])


def default_partition(key, int num_partitions):
    """Java DefaultPartitioner for a non-null key: (murmur2(key) & 0x7fffffff) % num_partitions."""
    cdef const uint8_t[::1] mv = key
    cdef int32_t h
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    h = murmur2_of(&mv[0] if mv.shape[0] else <const uint8_t*>"", mv.shape[0])
    return (h & 0x7fffffff) % num_partitions


def partition_keys(keys, int num_partitions, int null_partition=0):
    """Java DefaultPartitioner over a column of keys: a bytearray of native int32
    partitions, (murmur2(key) & 0x7fffffff) % num_partitions per key and
    `null_partition` (the sticky one) for a null key.  `keys` is an Arrow
    binary/string/large_binary/large_string array (or ChunkedArray): hashed straight
    from its buffers, no Python object per key; or a list of bytes-like/str/None."""
    global _pa
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    if _pa is None:
        try:
            import pyarrow
            _pa = pyarrow
        except ImportError:
            pass
    cdef Py_ssize_t n = len(keys)
    cdef BinCol c
    keep = bincol_init(keys, &c, n, "keys")
    out = bytearray(4 * n)
    cdef int32_t* dst = <int32_t*><char*>out if n else NULL
    cdef Py_ssize_t i, ln
    cdef const uint8_t* p
    cdef const uint8_t[::1] mv
    if c.kind == COL_ARROW32 or c.kind == COL_ARROW64:
        for i in range(n):
            bincol_get(&c, i, &p, &ln)
            if ln < 0:
                dst[i] = null_partition
            else:
                dst[i] = (murmur2_of(p if ln else <const uint8_t*>"", ln) & 0x7fffffff) % num_partitions
    elif c.kind == COL_LIST:
        for i in range(n):
            k = keep[i]
            if k is None:
                dst[i] = null_partition
                continue
            if isinstance(k, str):
                k = (<str>k).encode()
            mv = k
            ln = mv.shape[0]
            dst[i] = (murmur2_of(&mv[0] if ln else <const uint8_t*>"", ln) & 0x7fffffff) % num_partitions
    return out
