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
# Entry points: BatchBuilder (one batch), RecordAccumulator (one open batch
# per partition, for the embedded producer's per-record send()) and
# build_control_batch() (a transaction marker); the vectorised build_batches()
# (from Python lists or pyarrow arrays) is in columns.pyx, on these helpers.
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
