# Building RecordBatch v2 bytes (header layout: consts.pxi; record layout:
# records.pyx).  Records are encoded straight into a growable malloc'd buffer
# whose first 61 bytes are reserved for the batch header; build() fills the
# header, compresses the record region as one stream when codec != 0 and
# writes the CRC-32C over [21, end).
#
# Timestamps are stored relative to the first record of the batch
# (baseTimestamp = first timestamp, deltas may be negative, maxTimestamp =
# largest); offset deltas are 0..count-1, so lastOffsetDelta = count - 1.
# baseOffset is written as given (0 by default): the log stamps the real one.
#
# Three entry points: BatchBuilder (one batch), RecordAccumulator (one open
# batch per partition, for the embedded producer's per-record send()), and
# build_batches() (vectorised, from Python lists or pyarrow arrays).
# Concurrency: every object here must be used by one thread at a time (no
# internal locking); the GIL is held throughout (the work per call is small).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy
from posix.time cimport clock_gettime, timespec, CLOCK_REALTIME
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.bytearray cimport (PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_CheckExact,
                                PyByteArray_FromStringAndSize, PyByteArray_Resize)
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_Check
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.buffer cimport PyBUF_READ
from csrc.buffer cimport (write_varint, write_varlong, varint_size, varlong_size,
                          store_i32, store_i64, store_u16, store_u32, load_i32)

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL


cdef inline int64_t now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


# ---------------------------------------------------------------- buffers

ctypedef struct OpenBatch:
    uint8_t* data        # [0, 61) reserved for the header, records after
    Py_ssize_t len
    Py_ssize_t cap
    int32_t count
    int64_t base_ts
    int64_t max_ts
    PyObject* owner      # NULL: data is malloc'd; else the bytearray data lives in (build_batches)


cdef int ob_init(OpenBatch* ob, Py_ssize_t cap) except -1:
    if cap < BATCH_HEADER_SIZE + 64:
        cap = BATCH_HEADER_SIZE + 64
    ob.data = <uint8_t*>malloc(cap)
    if ob.data == NULL:
        raise MemoryError()
    ob.cap = cap
    ob.len = BATCH_HEADER_SIZE
    ob.count = 0
    ob.base_ts = -1
    ob.max_ts = -1
    ob.owner = NULL
    return 0


cdef bytearray ob_init_in(OpenBatch* ob, Py_ssize_t cap):
    """Point `ob` at a new bytearray of `cap` bytes (records are written straight into
    the batch that will be returned: no copy at build time); the bytearray."""
    cdef bytearray out
    if cap < BATCH_HEADER_SIZE + 64:
        cap = BATCH_HEADER_SIZE + 64
    out = PyByteArray_FromStringAndSize(NULL, cap)
    ob.data = <uint8_t*>PyByteArray_AS_STRING(out)
    ob.cap = cap
    ob.len = BATCH_HEADER_SIZE
    ob.count = 0
    ob.base_ts = -1
    ob.max_ts = -1
    ob.owner = <PyObject*>out
    return out


cdef inline void ob_reset(OpenBatch* ob) noexcept nogil:
    ob.len = BATCH_HEADER_SIZE
    ob.count = 0
    ob.base_ts = -1
    ob.max_ts = -1


cdef int ob_grow(OpenBatch* ob, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap = ob.cap * 2
    cdef uint8_t* p
    if cap < need:
        cap = need
    if ob.owner != NULL:
        PyByteArray_Resize(<object>ob.owner, cap)
        ob.data = <uint8_t*>PyByteArray_AS_STRING(<object>ob.owner)
        ob.cap = cap
        return 0
    p = <uint8_t*>realloc(ob.data, cap)
    if p == NULL:
        raise MemoryError()
    ob.data = p
    ob.cap = cap
    return 0


# A key/value/header field taken from a Python object: bytes, bytearray, str
# (UTF-8), None (length -1) or any other buffer (released after encoding).
ctypedef struct Field:
    const uint8_t* p
    Py_ssize_t n
    bint release
    Py_buffer view


cdef inline int field_get(object o, Field* f) except -1:
    f.release = False
    if o is None:
        f.p = NULL
        f.n = -1
    elif PyBytes_CheckExact(o):
        f.p = <const uint8_t*>PyBytes_AS_STRING(o)
        f.n = PyBytes_GET_SIZE(o)
    elif PyUnicode_Check(o):
        f.p = <const uint8_t*>PyUnicode_AsUTF8AndSize(o, &f.n)
    elif PyByteArray_CheckExact(o):
        f.p = <const uint8_t*>PyByteArray_AS_STRING(o)
        f.n = PyByteArray_GET_SIZE(o)
    else:
        PyObject_GetBuffer(o, &f.view, PyBUF_SIMPLE)
        f.release = True
        f.p = <const uint8_t*>f.view.buf
        f.n = f.view.len
    if f.n > 0x7FFFFFFF:
        field_release(f)
        raise ValueError("a key, value or header is larger than 2 GiB")
    return 0


cdef inline void field_release(Field* f) noexcept:
    if f.release:
        PyBuffer_Release(&f.view)
        f.release = False


cdef inline Py_ssize_t field_size(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    if n < 0:
        return 1
    return varint_size(<int32_t>n) + n


cdef inline uint8_t* put_field(uint8_t* w, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    w += write_varint(w, <int32_t>n)
    if n > 0:
        memcpy(w, p, n)
        w += n
    return w


cdef Py_ssize_t headers_size(object headers) except -1:
    """Encoded size of the headers field (count varint + pairs)."""
    cdef Py_ssize_t size, i, n
    cdef Field k, v
    if headers is None:
        return 1
    if type(headers) is not list:
        headers = list(headers)
    n = PyList_GET_SIZE(headers)
    size = varint_size(<int32_t>n)
    for i in range(n):
        hk, hv = <object>PyList_GET_ITEM(headers, i)
        if hk is None:
            raise TypeError("header keys cannot be None")
        field_get(hk, &k)
        size += field_size(k.p, k.n)
        field_release(&k)
        field_get(hv, &v)
        size += field_size(v.p, v.n)
        field_release(&v)
    return size


cdef uint8_t* put_headers(uint8_t* w, object headers) except NULL:
    cdef Py_ssize_t i, n
    cdef Field k, v
    if headers is None:
        w[0] = 0
        return w + 1
    if type(headers) is not list:
        headers = list(headers)
    n = PyList_GET_SIZE(headers)
    w += write_varint(w, <int32_t>n)
    for i in range(n):
        hk, hv = <object>PyList_GET_ITEM(headers, i)
        field_get(hk, &k)
        w = put_field(w, k.p, k.n)
        field_release(&k)
        field_get(hv, &v)
        w = put_field(w, v.p, v.n)
        field_release(&v)
    return w


cdef enum:
    ENC_WRITTEN = 0
    ENC_FULL = 1         # the record would push a non-empty batch past its limit


cdef int encode_record(OpenBatch* ob, int64_t ts, const uint8_t* kp, Py_ssize_t kn,
                       const uint8_t* vp, Py_ssize_t vn, object headers,
                       Py_ssize_t limit) except -1:
    """Append one record to `ob`; ENC_FULL (nothing written) when `limit` > 0,
    the batch is not empty and the record would make it larger than `limit`."""
    cdef int64_t delta
    cdef Py_ssize_t body, hsize
    cdef uint8_t* w
    if headers is not None and type(headers) is not list:
        headers = list(headers)            # iterate once: sized, then written
    if ob.count == 0:
        ob.base_ts = ts
        ob.max_ts = ts
    delta = ts - ob.base_ts
    hsize = 1 if headers is None else headers_size(headers)
    body = (1 + varlong_size(delta) + varint_size(ob.count) + field_size(kp, kn)
            + field_size(vp, vn) + hsize)
    if limit > 0 and ob.count > 0 and ob.len + body + varint_size(<int32_t>body) > limit:
        return ENC_FULL
    if ob.len + body + 5 > ob.cap:
        ob_grow(ob, ob.len + body + 5)
    w = ob.data + ob.len
    w += write_varint(w, <int32_t>body)
    w[0] = 0
    w += 1
    w += write_varlong(w, delta)
    w += write_varint(w, ob.count)
    w = put_field(w, kp, kn)
    w = put_field(w, vp, vn)
    w = put_headers(w, headers)
    ob.len = w - ob.data
    if ts > ob.max_ts:
        ob.max_ts = ts
    ob.count += 1
    return ENC_WRITTEN


cdef int encode_objects(OpenBatch* ob, object value, object key, object headers,
                        int64_t ts, Py_ssize_t limit) except -1:
    cdef Field k, v
    cdef int r
    field_get(key, &k)
    try:
        field_get(value, &v)
        try:
            r = encode_record(ob, ts, k.p, k.n, v.p, v.n, headers, limit)
        finally:
            field_release(&v)
    finally:
        field_release(&k)
    return r


cdef int ob_header(OpenBatch* ob, uint8_t* h, Py_ssize_t total, int attrs, int64_t base_offset,
                   int64_t producer_id, int producer_epoch, int32_t base_sequence,
                   int32_t partition_leader_epoch) except -1:
    """Fill the v2 header of the `total`-byte batch at `h` holding ob's records; the CRC last."""
    if total - LOG_OVERHEAD > 0x7FFFFFFF:
        raise ValueError("batch larger than 2 GiB")
    store_i64(h + OFF_BASE_OFFSET, base_offset)
    store_i32(h + OFF_BATCH_LENGTH, <int32_t>(total - LOG_OVERHEAD))
    store_i32(h + OFF_LEADER_EPOCH, partition_leader_epoch)
    h[OFF_MAGIC] = CURRENT_MAGIC
    store_u16(h + OFF_ATTRIBUTES, <unsigned short>attrs)
    store_i32(h + OFF_LAST_OFFSET_DELTA, ob.count - 1)
    store_i64(h + OFF_BASE_TIMESTAMP, ob.base_ts)
    store_i64(h + OFF_MAX_TIMESTAMP, ob.max_ts)
    store_i64(h + OFF_PRODUCER_ID, producer_id)
    store_u16(h + OFF_PRODUCER_EPOCH, <unsigned short>producer_epoch)
    store_i32(h + OFF_BASE_SEQUENCE, base_sequence)
    store_i32(h + OFF_RECORDS_COUNT, ob.count)
    store_u32(h + OFF_CRC, crc_of(h + OFF_ATTRIBUTES, total - OFF_ATTRIBUTES))
    return 0


cdef bytearray ob_build(OpenBatch* ob, int codec, int64_t base_offset, int64_t producer_id,
                        int producer_epoch, int32_t base_sequence, bint is_transactional,
                        int32_t partition_leader_epoch, int level):
    """The complete batch for the records in `ob` (ob is left unchanged).

    A bytearray: the log stamps baseOffset and the leader epoch into it in
    place, so appending a built batch copies nothing."""
    cdef bytearray out
    cdef uint8_t* h
    cdef Py_ssize_t total
    cdef int attrs = codec | (ATTR_TRANSACTIONAL if is_transactional else 0)
    if ob.count == 0:
        raise ValueError("cannot build a batch without records")
    if codec == CODEC_NONE:
        total = ob.len
        out = PyByteArray_FromStringAndSize(<const char*>ob.data, total)
    else:
        src = PyMemoryView_FromMemory(<char*>(ob.data + BATCH_HEADER_SIZE),
                                      ob.len - BATCH_HEADER_SIZE, PyBUF_READ)
        payload = compress(codec, src, level)
        del src
        total = BATCH_HEADER_SIZE + len(payload)
        out = PyByteArray_FromStringAndSize(NULL, total)
        memcpy(PyByteArray_AS_STRING(out) + BATCH_HEADER_SIZE, PyBytes_AS_STRING(payload), len(payload))
    ob_header(ob, <uint8_t*>PyByteArray_AS_STRING(out), total, attrs, base_offset, producer_id,
              producer_epoch, base_sequence, partition_leader_epoch)
    return out


cdef inline int64_t ts_of(object timestamp) except? -1:
    if timestamp is None:
        return now_ms()
    return timestamp


# ---------------------------------------------------------------- BatchBuilder

cdef class BatchBuilder:
    """Encodes records of one batch; build() returns the complete v2 batch.

    append() encodes immediately (nothing of the arguments is kept).  The
    builder can be built several times and reset() for reuse.
    """
    cdef OpenBatch ob

    def __cinit__(self, Py_ssize_t initial_capacity=4096):
        ob_init(&self.ob, initial_capacity)

    def __dealloc__(self):
        free(self.ob.data)

    cpdef int append(self, value, key=None, headers=None, timestamp=None) except -1:
        """Add one record; return its index (offset delta) in the batch.

        value/key: bytes-like, str (UTF-8) or None; headers: iterable of
        (str|bytes key, bytes|None value); timestamp: ms, None = now.
        """
        encode_objects(&self.ob, value, key, headers, ts_of(timestamp), 0)
        return self.ob.count - 1

    @property
    def size_in_bytes(self):
        """Uncompressed size of the batch so far (header included)."""
        return self.ob.len

    def __len__(self):
        return self.ob.count

    def reset(self):
        ob_reset(&self.ob)

    def build(self, int codec=0, int64_t base_offset=0, int64_t producer_id=-1,
              int producer_epoch=-1, int32_t base_sequence=-1, bint is_transactional=False,
              int32_t partition_leader_epoch=-1, int level=-1):
        """The complete batch as bytes (records compressed as one stream if codec != 0)."""
        return ob_build(&self.ob, codec, base_offset, producer_id, producer_epoch,
                        base_sequence, is_transactional, partition_leader_epoch, level)


# ---------------------------------------------------------------- RecordAccumulator

cdef class RecordAccumulator:
    """One open batch per partition for a per-record producer API.

    append(partition, value, key, headers, timestamp) encodes the record
    straight into the partition's open batch and returns its *sequence since
    the last drain* (0, 1, 2, ...).  When a record would push a non-empty open
    batch past `batch_size`, that batch is closed (built and compressed) first
    and kept pending.  drain(partition) closes the open batch and returns
    (bytes, count): the concatenated pending batches, whose records are, in
    order, exactly the `count` records appended since the previous drain.  After
    the log stamps offsets starting at `first`, record number i of that drain
    has offset first + i -- that is how a Producer resolves its futures.
    ready() lists partitions with a closed batch or an open batch >= batch_size.
    Batches carry the accumulator's producer_id/epoch; drain() can stamp
    baseSequence (and override producer id/epoch) for an idempotent producer.
    """
    cdef OpenBatch* obs
    cdef Py_ssize_t nparts
    cdef readonly int codec
    cdef readonly Py_ssize_t batch_size
    cdef int64_t producer_id
    cdef int producer_epoch
    cdef int32_t* seq            # records appended since the last drain
    cdef list pending            # per partition: list of built batches

    def __cinit__(self, Py_ssize_t num_partitions, int codec=0, Py_ssize_t batch_size=1048576,
                  int64_t producer_id=-1, int producer_epoch=-1):
        cdef Py_ssize_t i
        if num_partitions <= 0:
            raise ValueError("num_partitions must be positive")
        codec_name(codec)
        self.nparts = num_partitions
        self.codec = codec
        self.batch_size = batch_size
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.obs = <OpenBatch*>malloc(num_partitions * sizeof(OpenBatch))
        self.seq = <int32_t*>malloc(num_partitions * sizeof(int32_t))
        if self.obs == NULL or self.seq == NULL:
            raise MemoryError()
        for i in range(num_partitions):
            self.obs[i].data = NULL
            self.seq[i] = 0
        self.pending = [[] for i in range(num_partitions)]

    def __dealloc__(self):
        cdef Py_ssize_t i
        if self.obs != NULL:
            for i in range(self.nparts):
                free(self.obs[i].data)
            free(self.obs)
        free(self.seq)

    @property
    def num_partitions(self):
        return self.nparts

    cdef inline OpenBatch* _open(self, Py_ssize_t partition) except NULL:
        cdef OpenBatch* ob
        if partition < 0 or partition >= self.nparts:
            raise IndexError("partition index %d outside [0, %d)" % (partition, self.nparts))
        ob = &self.obs[partition]
        if ob.data == NULL:
            ob_init(ob, 65536 if self.batch_size > 65536 else self.batch_size + 1024)
        return ob

    cdef int _close(self, Py_ssize_t partition) except -1:
        cdef OpenBatch* ob = &self.obs[partition]
        if ob.data != NULL and ob.count > 0:
            (<list>self.pending[partition]).append(
                ob_build(ob, self.codec, 0, self.producer_id, self.producer_epoch, -1, False, -1, -1))
            ob_reset(ob)
        return 0

    cpdef int append(self, Py_ssize_t partition, value, key=None, headers=None,
                     timestamp=None) except -1:
        """Encode one record into `partition`'s open batch; return its sequence since the last drain."""
        cdef OpenBatch* ob = self._open(partition)
        cdef int64_t ts = ts_of(timestamp)
        if headers is not None and type(headers) is not list:
            headers = list(headers)        # may be encoded twice (ENC_FULL): iterate once
        if encode_objects(ob, value, key, headers, ts, self.batch_size) == ENC_FULL:
            self._close(partition)
            encode_objects(ob, value, key, headers, ts, 0)
        self.seq[partition] += 1
        return self.seq[partition] - 1

    def drain(self, Py_ssize_t partition, int32_t base_sequence=-1, producer_id=None,
              producer_epoch=None):
        """Close the open batch; return (bytearray of all batches since the last drain, record count).

        With base_sequence >= 0 (an idempotent producer) each batch gets its
        baseSequence (the first batch base_sequence, the next one that plus the
        records before it, wrapping from INT32_MAX to 0), and producer_id /
        producer_epoch when given override the accumulator's; CRCs are
        recomputed.  Returns (b"", 0) when nothing was appended.
        """
        cdef int32_t n
        cdef bytearray data
        cdef uint8_t* p
        cdef Py_ssize_t pos, size, total
        cdef int64_t seq
        self._open(partition)
        self._close(partition)
        n = self.seq[partition]
        self.seq[partition] = 0
        batches = self.pending[partition]
        self.pending[partition] = []
        if not batches:
            return b"", 0
        if len(batches) == 1:
            data = batches[0]
        else:
            data = bytearray().join(batches)
        if base_sequence >= 0 or producer_id is not None or producer_epoch is not None:
            # `data` is a fresh object nobody else has seen yet: patch it in place.
            p = <uint8_t*>PyByteArray_AS_STRING(data)
            total = PyByteArray_GET_SIZE(data)
            pos = 0
            seq = base_sequence
            while pos < total:
                size = load_i32(p + pos + OFF_BATCH_LENGTH) + LOG_OVERHEAD
                if producer_id is not None:
                    store_i64(p + pos + OFF_PRODUCER_ID, <int64_t>producer_id)
                if producer_epoch is not None:
                    store_u16(p + pos + OFF_PRODUCER_EPOCH, <unsigned short><int>producer_epoch)
                if base_sequence >= 0:
                    store_i32(p + pos + OFF_BASE_SEQUENCE, <int32_t>seq)
                    seq = (seq + load_i32(p + pos + OFF_RECORDS_COUNT)) % 2147483648
                store_u32(p + pos + OFF_CRC, crc_of(p + pos + OFF_ATTRIBUTES, size - OFF_ATTRIBUTES))
                pos += size
        return data, n

    def records(self, Py_ssize_t partition):
        """Records appended to `partition` since its last drain."""
        self._open(partition)
        return self.seq[partition]

    def size_in_bytes(self, Py_ssize_t partition):
        """Uncompressed bytes of the open batch plus built bytes pending."""
        cdef OpenBatch* ob = self._open(partition)
        cdef Py_ssize_t n = ob.len - BATCH_HEADER_SIZE if ob.count else 0
        for b in self.pending[partition]:
            n += len(b)
        return n

    def ready(self):
        """Partitions with a closed batch pending or an open batch of >= batch_size bytes."""
        cdef Py_ssize_t i
        cdef list out = []
        for i in range(self.nparts):
            if self.pending[i] or (self.obs[i].data != NULL and self.obs[i].count > 0
                                   and self.obs[i].len >= self.batch_size):
                out.append(i)
        return out

    def nonempty(self):
        """Partitions with any record since their last drain."""
        cdef Py_ssize_t i
        return [i for i in range(self.nparts) if self.seq[i] > 0]


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


# ---------------------------------------------------------------- control batches
#
# A transaction marker (Kafka's EndTransactionMarker, ControlRecordType):
# one batch with attributes transactional 0x10 | control 0x20, the producer id
# and epoch of the transaction, baseSequence -1, and one record whose
#   key   = version int16 (0) + type int16 (0 = ABORT, 1 = COMMIT)
#   value = version int16 (0) + coordinatorEpoch int32
# (big-endian), no headers.  78 bytes in all.

def build_control_batch(int64_t producer_id, int producer_epoch, bint commit,
                        int32_t coordinator_epoch, timestamp=None,
                        int32_t partition_leader_epoch=-1):
    """The v2 control batch of a COMMIT (commit=True) or ABORT marker (a bytearray)."""
    cdef OpenBatch ob
    cdef uint8_t key[4]
    cdef uint8_t value[6]
    cdef bytearray out
    cdef uint8_t* h
    cdef Py_ssize_t total
    store_u16(key, 0)
    store_u16(key + 2, 1 if commit else 0)
    store_u16(value, 0)
    store_i32(value + 2, coordinator_epoch)
    ob_init(&ob, BATCH_HEADER_SIZE + 64)
    try:
        encode_record(&ob, ts_of(timestamp), key, 4, value, 6, None, 0)
        out = ob_build(&ob, CODEC_NONE, 0, producer_id, producer_epoch, -1, True,
                       partition_leader_epoch, -1)
    finally:
        free(ob.data)
    total = PyByteArray_GET_SIZE(out)
    h = <uint8_t*>PyByteArray_AS_STRING(out)
    store_u16(h + OFF_ATTRIBUTES, <unsigned short>(ATTR_TRANSACTIONAL | ATTR_CONTROL))
    store_u32(h + OFF_CRC, crc_of(h + OFF_ATTRIBUTES, total - OFF_ATTRIBUTES))
    return out
