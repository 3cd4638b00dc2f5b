# Columnar scanner: RecordBatch v2 bytes (consts.pxi, records.pyx) -> column
# buffers in Arrow's layout, with no Python object per record.  Columns (the
# schema of Spark's Kafka source, engine.arrow.KAFKA_SCHEMA):
#   offset         int64
#   timestamp      int64 microseconds (ms * 1000; LOG_APPEND_TIME -> maxTimestamp)
#   timestampType  int32 (0 CreateTime, 1 LogAppendTime)
#   key, value     binary: validity bitmap (LSB first) + int32 offsets + data
#   headers        list<struct<key: string, value: binary>>: int32 list offsets,
#                  child key (offsets + data, never null), child value (nullable)
# topic and partition are constant per scanner and built at finish().
#
# Header keys must be valid UTF-8 (they become an Arrow string column); a key
# that is not raises CorruptRecordError.
# Invariants: offset buffers always start with 0 and hold rows + 1 entries;
# a batch is appended entirely or not at all (a corrupt record rolls the
# columns back to the batch start before raising); binary data per column
# stays below 2 GiB (int32 offsets) -- past that feed() stops as if max_rows
# were reached.  The buffers are pyarrow ResizableBuffers from its memory pool,
# grown by doubling and handed to the table without copying.
# With check_crc, every batch the scan consumes is CRC-checked (batches wholly
# below start_offset are skipped unread).  lz4 payloads are decoded into one
# reused scratch buffer (codec.pyx fast path), other codecs via decompress().
# Concurrency: one thread per scanner.  The per-batch record loop and the lz4
# decoder run without the GIL for payloads >= 64 KiB.
#
# Transactions: control batches (markers) never become rows.  After
# set_aborted(entries) (read_committed) the scanner also drops the batches of
# aborted transactions, as Kafka's consumer does: `entries` is the list of
# (producer_id, first_offset) a read_committed Fetch answers (or
# PartitionLog.aborted_transactions), sorted by first offset; before each
# batch of a producer the entries with first_offset <= the batch's last offset
# make their producer "aborted"; a transactional batch of an aborted producer
# is skipped; that producer's ABORT marker ends it.  The caller stops the
# range at the last stable offset (end_offset).  The state carries across
# feed() calls (segments) until the next set_aborted(); a consumer of Fetch
# responses calls set_aborted() with each response's list before feeding it
# (each list covers its fetch's range, as Kafka's consumer uses it).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, INT64_MAX
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.stdint cimport uintptr_t
from cpython.ref cimport PyObject, Py_INCREF, Py_DECREF
from csrc.buffer cimport load_i32, load_i64, load_u16, load_u32, read_varint


cdef bint batch_crc_ok(const uint8_t* batch, Py_ssize_t size) except -1:
    # Large batches go to the `crc32c` package (several interleaved streams,
    # ~3x our single-stream loop, GIL released); small ones stay inline.
    cdef uint32_t crc
    if size >= CRC_PACKAGE_THRESHOLD:
        crc = _pkg_crc32c(PyMemoryView_FromMemory(<char*>(batch + OFF_ATTRIBUTES),
                                                  size - OFF_ATTRIBUTES, PyBUF_READ))
    else:
        crc = crc_of(batch + OFF_ATTRIBUTES, size - OFF_ATTRIBUTES)
    return crc == load_u32(batch + OFF_CRC)


cdef bint utf8_valid(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF)."""
    cdef Py_ssize_t i = 0
    cdef uint8_t c, c1
    while i < n:
        c = p[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2 or c > 0xF4:
            return False
        if c < 0xE0:
            if i + 1 >= n or (p[i + 1] & 0xC0) != 0x80:
                return False
            i += 2
            continue
        if i + 2 >= n or (p[i + 2] & 0xC0) != 0x80:
            return False
        c1 = p[i + 1]
        if c < 0xF0:
            if (c1 & 0xC0) != 0x80 or (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 > 0x9F):
                return False
            i += 3
            continue
        if i + 3 >= n or (p[i + 3] & 0xC0) != 0x80:
            return False
        if (c1 & 0xC0) != 0x80 or (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 > 0x8F):
            return False
        i += 4
    return True


ctypedef struct Grow:
    uint8_t* data
    Py_ssize_t len
    Py_ssize_t cap
    PyObject* buf        # owned reference to a pyarrow ResizableBuffer, or NULL


cdef int grow_slow(Grow* g, Py_ssize_t need) noexcept nogil:
    # Column memory comes from pyarrow's pool (mimalloc): the finished table
    # owns it without a copy, and the pool hands the same pages back to the
    # next scan, so a steady stream of scans does not pay fresh page faults
    # (measured here: 200 MB fresh ~190-700 ms, reused from the pool ~8 ms).
    cdef Py_ssize_t cap = g.cap * 2
    if cap < need:
        cap = need
    if cap < 4096:
        cap = 4096
    with gil:
        try:
            if g.buf == NULL:
                b = _pa_mod().allocate_buffer(cap, resizable=True)
                Py_INCREF(b)
                g.buf = <PyObject*>b
            else:
                b = <object>g.buf
                b.resize(cap)
            g.data = <uint8_t*><uintptr_t>b.address
            g.cap = cap
            return 0
        except BaseException:
            return -1


cdef inline int grow_reserve(Grow* g, Py_ssize_t extra) noexcept nogil:
    if g.len + extra <= g.cap:
        return 0
    return grow_slow(g, g.len + extra)


cdef void grow_free(Grow* g) noexcept:
    if g.buf != NULL:
        Py_DECREF(<object>g.buf)
        g.buf = NULL
    g.data = NULL
    g.len = g.cap = 0


cdef object grow_take(Grow* g):
    """Hand the bytes written so far to the caller as a pyarrow Buffer."""
    if g.buf == NULL:
        return _pa_mod().allocate_buffer(0)
    b = <object>g.buf
    b.resize(g.len, shrink_to_fit=False)
    grow_free(g)
    return b


cdef object _pa_mod():
    global _pa
    if _pa is None:
        import pyarrow
        _pa = pyarrow
    return _pa


cdef inline int grow_i32(Grow* g, int32_t v) noexcept nogil:
    if grow_reserve(g, 4) < 0:
        return -1
    (<int32_t*>(g.data + g.len))[0] = v
    g.len += 4
    return 0


cdef inline int grow_i64(Grow* g, int64_t v) noexcept nogil:
    if grow_reserve(g, 8) < 0:
        return -1
    (<int64_t*>(g.data + g.len))[0] = v
    g.len += 8
    return 0


cdef inline int grow_bytes(Grow* g, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    if n <= 0:
        return 0
    if grow_reserve(g, n) < 0:
        return -1
    memcpy(g.data + g.len, p, n)
    g.len += n
    return 0


# A nullable (or not) binary column: validity bitmap + int32 offsets + data.
ctypedef struct BinBuilder:
    Grow valid
    Grow offs
    Grow data
    int64_t rows
    int64_t nulls


cdef inline int bin_append(BinBuilder* b, const uint8_t* p, int32_t n) noexcept nogil:
    cdef int64_t r = b.rows
    if (r & 7) == 0:
        if grow_reserve(&b.valid, 1) < 0:
            return -1
        b.valid.data[b.valid.len] = 0
        b.valid.len += 1
    if n < 0:
        b.nulls += 1
    else:
        b.valid.data[r >> 3] |= <uint8_t>(1 << (r & 7))
        if grow_bytes(&b.data, p, n) < 0:
            return -1
    b.rows += 1
    return grow_i32(&b.offs, <int32_t>b.data.len)


cdef int bin_init(BinBuilder* b) noexcept nogil:
    b.valid.len = 0
    b.offs.len = 0
    b.data.len = 0
    b.rows = 0
    b.nulls = 0
    return grow_i32(&b.offs, 0)


cdef void bin_free(BinBuilder* b) noexcept:
    grow_free(&b.valid); grow_free(&b.offs); grow_free(&b.data)


ctypedef struct BinMark:
    Py_ssize_t valid, offs, data
    int64_t rows, nulls


cdef inline void bin_mark(BinBuilder* b, BinMark* m) noexcept nogil:
    m.valid = b.valid.len; m.offs = b.offs.len; m.data = b.data.len
    m.rows = b.rows; m.nulls = b.nulls


cdef inline void bin_rollback(BinBuilder* b, BinMark* m) noexcept nogil:
    cdef int64_t r
    b.valid.len = m.valid; b.offs.len = m.offs; b.data.len = m.data
    b.rows = m.rows; b.nulls = m.nulls
    r = b.rows
    if r & 7:      # clear the bits of rolled-back rows in the last byte
        b.valid.data[r >> 3] &= <uint8_t>((1 << (r & 7)) - 1)


cdef enum:
    SCAN_OK = 0
    SCAN_STOP_ROWS = 1          # max_rows reached (or an int32 column limit)
    SCAN_STOP_OFFSET = 2        # reached end_offset
    SCAN_NOMEM = 3
    SCAN_BAD_RECORD = 4
    SCAN_COUNT_MISMATCH = 5
    BIN_LIMIT = 2147483647
    NOGIL_PAYLOAD = 65536


ctypedef struct BatchCtx:
    int64_t base_offset
    int64_t base_ts
    int64_t max_ts
    bint log_append
    int32_t count
    int64_t start_offset
    int64_t end_offset
    int64_t max_rows            # < 0: unlimited
    # out
    int64_t next_offset         # first offset not consumed when stopped
    int rec_status
    Py_ssize_t rec_index
    Py_ssize_t rec_at


cdef int control_type(const uint8_t* batch, Py_ssize_t size) noexcept nogil:
    """0 ABORT / 1 COMMIT of an uncompressed control batch's first record, -1 otherwise."""
    cdef RecordView rv
    if (load_u16(batch + OFF_ATTRIBUTES) & ATTR_CODEC_MASK) != CODEC_NONE or size <= BATCH_HEADER_SIZE:
        return -1
    if parse_record(batch + BATCH_HEADER_SIZE, batch + size, &rv) != REC_OK or rv.key_len < 4:
        return -1
    return load_u16(rv.key + 2) if load_u16(rv.key + 2) <= 1 else -1


cdef class ColumnScanner:
    """Appends the records of v2 batches to Arrow-layout column buffers.

    feed() any number of buffer ranges (segments, fetch responses), then
    finish(topic, partition) returns a pyarrow Table with KAFKA_SCHEMA and
    empties the scanner.  Control batches and records outside
    [start_offset, end_offset) are skipped; a partial tail ends the feed
    quietly.  With check_crc each batch's CRC-32C is verified.
    set_aborted() switches to read_committed filtering (module comment).
    """
    cdef Grow offsets, timestamps, ts_types, hdr_offs
    cdef BinBuilder keys, values, hkeys, hvalues
    cdef readonly int64_t num_rows
    cdef readonly bint check_crc
    cdef Py_ssize_t max_size
    cdef bytearray scratch      # reused lz4 output buffer
    # read_committed: aborted transactions (sorted by first offset) and the producers aborted now
    cdef readonly bint read_committed
    cdef int64_t* ab_pid
    cdef int64_t* ab_first
    cdef Py_ssize_t ab_n, ab_next
    cdef int64_t* active
    cdef Py_ssize_t n_active
    cdef readonly int64_t skipped_aborted   # records dropped as aborted since set_aborted()

    def __cinit__(self, bint check_crc=True, Py_ssize_t max_size=MAX_DECOMPRESSED_DEFAULT):
        self.check_crc = check_crc
        self.max_size = max_size
        self.scratch = bytearray()
        self.ab_pid = self.ab_first = self.active = NULL
        self._init()

    def set_aborted(self, aborted=None):
        """read_committed from now on: `aborted` = [(producer_id, first_offset)] (any order; None =
        read_uncommitted again).  Entries whose first offset is below what was fed already
        still apply to later batches of their producer."""
        cdef Py_ssize_t i, n
        free(self.ab_pid); free(self.ab_first); free(self.active)
        self.ab_pid = self.ab_first = self.active = NULL
        self.ab_n = self.ab_next = self.n_active = 0
        self.skipped_aborted = 0
        self.read_committed = aborted is not None
        if not aborted:
            return
        entries = sorted((int(f), int(p)) for p, f in aborted)
        n = len(entries)
        self.ab_pid = <int64_t*>malloc(n * sizeof(int64_t))
        self.ab_first = <int64_t*>malloc(n * sizeof(int64_t))
        self.active = <int64_t*>malloc(n * sizeof(int64_t))
        if self.ab_pid == NULL or self.ab_first == NULL or self.active == NULL:
            raise MemoryError()
        for i in range(n):
            self.ab_first[i] = entries[i][0]
            self.ab_pid[i] = entries[i][1]
        self.ab_n = n

    cdef inline bint _is_active(self, int64_t pid) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(self.n_active):
            if self.active[i] == pid:
                return True
        return False

    cdef inline void _consume_aborted(self, int64_t last_offset) noexcept nogil:
        cdef int64_t pid
        while self.ab_next < self.ab_n and self.ab_first[self.ab_next] <= last_offset:
            pid = self.ab_pid[self.ab_next]
            self.ab_next += 1
            if not self._is_active(pid):
                self.active[self.n_active] = pid
                self.n_active += 1

    cdef inline void _end_aborted(self, int64_t pid) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(self.n_active):
            if self.active[i] == pid:
                self.n_active -= 1
                self.active[i] = self.active[self.n_active]
                return

    def __dealloc__(self):
        free(self.ab_pid); free(self.ab_first); free(self.active)
        grow_free(&self.offsets); grow_free(&self.timestamps)
        grow_free(&self.ts_types); grow_free(&self.hdr_offs)
        bin_free(&self.keys); bin_free(&self.values)
        bin_free(&self.hkeys); bin_free(&self.hvalues)

    cdef int _init(self) except -1:
        self.num_rows = 0
        self.offsets.len = 0
        self.timestamps.len = 0
        self.ts_types.len = 0
        self.hdr_offs.len = 0
        if (grow_i32(&self.hdr_offs, 0) < 0 or bin_init(&self.keys) < 0 or bin_init(&self.values) < 0
                or bin_init(&self.hkeys) < 0 or bin_init(&self.hvalues) < 0):
            raise MemoryError()
        return 0

    def reset(self):
        """Drop every row fed so far."""
        self._init()

    cdef int _records(self, const uint8_t* p, const uint8_t* end, BatchCtx* c) noexcept nogil:
        cdef RecordView rv
        cdef int st
        cdef int64_t off, ts
        cdef int32_t i, hi, kl = 0, vl = -1
        cdef int32_t ts_type = 1 if c.log_append else 0
        cdef const uint8_t* hp
        cdef const uint8_t* k
        cdef const uint8_t* v
        cdef const uint8_t* start = p
        c.rec_index = 0
        while p < end:
            if c.rec_index >= c.count:
                return SCAN_COUNT_MISMATCH
            st = parse_record(p, end, &rv)
            if st != REC_OK:
                c.rec_status = st
                c.rec_at = p - start
                return SCAN_BAD_RECORD
            off = c.base_offset + rv.offset_delta
            if off >= c.end_offset:
                c.next_offset = off
                return SCAN_STOP_OFFSET
            if off >= c.start_offset:
                if c.max_rows >= 0 and self.num_rows >= c.max_rows:
                    c.next_offset = off
                    return SCAN_STOP_ROWS
                if (self.keys.data.len + rv.key_len > BIN_LIMIT or self.values.data.len + rv.value_len > BIN_LIMIT
                        or self.hkeys.data.len + (rv.end - rv.headers) > BIN_LIMIT
                        or self.hvalues.data.len + (rv.end - rv.headers) > BIN_LIMIT):
                    if self.num_rows == 0:
                        c.rec_status = REC_BAD_LENGTH
                        c.rec_at = p - start
                        return SCAN_BAD_RECORD
                    c.next_offset = off
                    return SCAN_STOP_ROWS
                ts = c.max_ts if c.log_append else c.base_ts + rv.ts_delta
                if (grow_i64(&self.offsets, off) < 0 or grow_i64(&self.timestamps, ts * 1000) < 0
                        or grow_i32(&self.ts_types, ts_type) < 0
                        or bin_append(&self.keys, rv.key, rv.key_len) < 0
                        or bin_append(&self.values, rv.value, rv.value_len) < 0):
                    return SCAN_NOMEM
                hp = rv.headers
                for hi in range(rv.headers_count):
                    hp = next_header(hp, &k, &kl, &v, &vl)
                    if not utf8_valid(k, kl):
                        c.rec_status = REC_BAD_UTF8
                        c.rec_at = p - start
                        return SCAN_BAD_RECORD
                    if bin_append(&self.hkeys, k, kl) < 0 or bin_append(&self.hvalues, v, vl) < 0:
                        return SCAN_NOMEM
                if grow_i32(&self.hdr_offs, <int32_t>self.hkeys.rows) < 0:
                    return SCAN_NOMEM
                self.num_rows += 1
            p = rv.end
            c.rec_index += 1
        if c.rec_index != c.count:
            return SCAN_COUNT_MISMATCH
        return SCAN_OK

    cdef void _mark(self, Py_ssize_t* lens, BinMark* marks) noexcept nogil:
        lens[0] = self.offsets.len; lens[1] = self.timestamps.len
        lens[2] = self.ts_types.len; lens[3] = self.hdr_offs.len; lens[4] = self.num_rows
        bin_mark(&self.keys, &marks[0]); bin_mark(&self.values, &marks[1])
        bin_mark(&self.hkeys, &marks[2]); bin_mark(&self.hvalues, &marks[3])

    cdef void _rollback(self, Py_ssize_t* lens, BinMark* marks) noexcept nogil:
        self.offsets.len = lens[0]; self.timestamps.len = lens[1]
        self.ts_types.len = lens[2]; self.hdr_offs.len = lens[3]; self.num_rows = lens[4]
        bin_rollback(&self.keys, &marks[0]); bin_rollback(&self.values, &marks[1])
        bin_rollback(&self.hkeys, &marks[2]); bin_rollback(&self.hvalues, &marks[3])

    cdef BatchPayload _payload(self, const uint8_t* batch, Py_ssize_t size, object path,
                               Py_ssize_t position):
        cdef int codec = load_u16(batch + OFF_ATTRIBUTES) & ATTR_CODEC_MASK
        cdef Py_ssize_t n
        cdef BatchPayload pl
        cdef const uint8_t[::1] out
        if codec != CODEC_LZ4:
            return batch_payload(batch, size, self.max_size, path, position)
        src = PyMemoryView_FromMemory(<char*>(batch + BATCH_HEADER_SIZE), size - BATCH_HEADER_SIZE, PyBUF_READ)
        try:
            n = decompress_into_scratch(codec, src, size - BATCH_HEADER_SIZE, self.scratch, self.max_size)
        except _errors.CorruptRecordError as e:
            raise corrupt(e.reason, path, position) from None
        pl = BatchPayload.__new__(BatchPayload)
        pl.owner = self.scratch
        out = self.scratch
        pl.start = &out[0]
        pl.end = pl.start + n
        return pl

    def feed(self, buf, Py_ssize_t start_pos=0, Py_ssize_t end_pos=-1, int64_t start_offset=0,
             int64_t end_offset=INT64_MAX, path=None, Py_ssize_t max_rows=-1,
             Py_ssize_t base_position=0):
        """Append the records of the batches in buf[start_pos:end_pos] with
        start_offset <= offset < end_offset.

        Stops at a partial/zero tail, at end_offset, or when the scanner holds
        max_rows rows (max_rows < 0: no limit).  Returns (next_offset,
        stopped_at_position): the first offset not consumed and the position
        to resume from (feed again with start_pos=stopped_at_position,
        start_offset=next_offset).  A bad batch raises CorruptRecordError at
        base_position + its position; rows of that batch are not kept.
        """
        cdef const uint8_t[::1] mv = buf
        cdef Py_ssize_t pos, size
        cdef Py_ssize_t lens[5]
        cdef BinMark marks[4]
        cdef int st
        cdef int attrs
        cdef int64_t last, pid, next_offset = start_offset
        cdef BatchCtx c
        cdef BatchPayload pl
        end_pos = resolve_end(mv.shape[0], start_pos, end_pos)
        c.start_offset = start_offset
        c.end_offset = end_offset
        c.max_rows = max_rows
        pos = start_pos
        cdef bint reserved = False
        cdef double ratio
        while pos < end_pos:
            st = check_batch(&mv[pos], end_pos - pos, False, &size)
            if st == WALK_PARTIAL or st == WALK_ZERO_TAIL:
                break
            if st != WALK_OK:
                raise corrupt(walk_reason(st), path, base_position + pos)
            c.base_offset = load_i64(&mv[pos])
            last = c.base_offset + load_i32(&mv[pos] + OFF_LAST_OFFSET_DELTA)
            if last < start_offset:
                pos += size
                continue
            if self.check_crc and not batch_crc_ok(&mv[pos], size):
                raise corrupt(walk_reason(WALK_BAD_CRC), path, base_position + pos)
            if c.base_offset >= end_offset:
                next_offset = c.base_offset
                break
            attrs = load_u16(&mv[pos] + OFF_ATTRIBUTES)
            if self.read_committed:
                pid = load_i64(&mv[pos] + OFF_PRODUCER_ID)
                if pid >= 0:
                    self._consume_aborted(last)
                    if attrs & ATTR_CONTROL:
                        if control_type(&mv[pos], size) == 0:
                            self._end_aborted(pid)
                    elif (attrs & ATTR_TRANSACTIONAL) and self._is_active(pid):
                        self.skipped_aborted += load_i32(&mv[pos] + OFF_RECORDS_COUNT)
                        next_offset = last + 1
                        pos += size
                        continue
            if attrs & ATTR_CONTROL:
                next_offset = last + 1
                pos += size
                continue
            if max_rows >= 0 and self.num_rows >= max_rows:
                next_offset = c.base_offset if c.base_offset > start_offset else start_offset
                break
            c.base_ts = load_i64(&mv[pos] + OFF_BASE_TIMESTAMP)
            c.max_ts = load_i64(&mv[pos] + OFF_MAX_TIMESTAMP)
            c.log_append = (attrs & ATTR_TIMESTAMP_TYPE) != 0
            c.count = load_i32(&mv[pos] + OFF_RECORDS_COUNT)
            pl = self._payload(&mv[pos], size, path, base_position + pos)
            if not reserved:
                # Values dominate the bytes: reserve what the rest of the range
                # will need, extrapolated from the first batch's compression
                # ratio, while the buffer is still small -- growing later would
                # copy everything written so far into fresh (page-faulting) memory.
                ratio = <double>(pl.end - pl.start) / <double>(size - BATCH_HEADER_SIZE)
                if grow_reserve(&self.values.data,
                                <Py_ssize_t>((end_pos - pos) * ratio * 1.05) + 4096) < 0:
                    raise MemoryError()
                reserved = True
            self._mark(lens, marks)
            if pl.end - pl.start >= NOGIL_PAYLOAD:
                with nogil:
                    st = self._records(pl.start, pl.end, &c)
            else:
                st = self._records(pl.start, pl.end, &c)
            if st == SCAN_OK:
                next_offset = last + 1
                pos += size
                continue
            if st == SCAN_STOP_ROWS or st == SCAN_STOP_OFFSET:
                next_offset = c.next_offset
                break
            self._rollback(lens, marks)
            if st == SCAN_NOMEM:
                raise MemoryError()
            if st == SCAN_COUNT_MISMATCH:
                raise corrupt("recordsCount %d does not match the records in the payload" % c.count,
                              path, base_position + pos)
            raise corrupt(record_reason(c.rec_status, c.rec_index, c.rec_at), path, base_position + pos)
        return next_offset, pos

    cdef object _take(self, Grow* g):
        return grow_take(g)

    cdef object _bin_array(self, BinBuilder* b, object typ):
        validity = self._take(&b.valid) if b.nulls else None
        offs = self._take(&b.offs)
        data = self._take(&b.data)
        return _pa.Array.from_buffers(typ, b.rows, [validity, offs, data], null_count=b.nulls)

    def finish(self, str topic, int partition, bint as_table=True):
        """Everything fed so far as a pyarrow Table (or RecordBatch) with
        engine.arrow.KAFKA_SCHEMA; the scanner is emptied for the next feed."""
        global _pa
        if _pa is None:
            import pyarrow
            _pa = pyarrow
        from engine.arrow import KAFKA_SCHEMA
        cdef int64_t n = self.num_rows
        key = self._bin_array(&self.keys, _pa.binary())
        value = self._bin_array(&self.values, _pa.binary())
        offset = _pa.Array.from_buffers(_pa.int64(), n, [None, self._take(&self.offsets)])
        ts = _pa.Array.from_buffers(KAFKA_SCHEMA.field("timestamp").type, n,
                                    [None, self._take(&self.timestamps)])
        ts_type = _pa.Array.from_buffers(_pa.int32(), n, [None, self._take(&self.ts_types)])
        hk = self._bin_array(&self.hkeys, _pa.string())
        hv = self._bin_array(&self.hvalues, _pa.binary())
        htype = KAFKA_SCHEMA.field("headers").type
        hstruct = _pa.StructArray.from_arrays([hk, hv], fields=list(htype.value_type))
        headers = _pa.Array.from_buffers(htype, n, [None, self._take(&self.hdr_offs)],
                                         children=[hstruct])
        topic_col = _pa.repeat(_pa.scalar(topic, _pa.string()), n)
        part_col = _pa.repeat(_pa.scalar(partition, _pa.int32()), n)
        self._init()
        cols = [key, value, topic_col, part_col, offset, ts, ts_type, headers]
        if as_table:
            return _pa.Table.from_arrays(cols, schema=KAFKA_SCHEMA)
        return _pa.RecordBatch.from_arrays(cols, schema=KAFKA_SCHEMA)
