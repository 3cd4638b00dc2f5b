# Batch-level work on RecordBatch v2 bytes (layout: consts.pxi): header
# parsing, structural + CRC validation, offset assignment in place, the
# recovery walk that rebuilds sparse index entries, and forward seeks by
# offset or timestamp.  None of it looks inside records or decompresses.
#
# Inputs are buffers (bytes, bytearray, memoryview, read-only mmap); walks run
# without the GIL.  A batch is "complete" when 12 + batchLength bytes are
# present; an incomplete tail is an expected outcome (WALK_PARTIAL), reported
# as a status, never raised.
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.string cimport memcpy
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from csrc.buffer cimport load_i16, load_u16, load_i32, load_u32, load_i64, store_i32, store_u32, store_i64, store_u16

cdef class BatchHeader:
    """The 61-byte header of one RecordBatch v2, plus where it was read."""
    cdef readonly int64_t position
    cdef readonly int64_t base_offset
    cdef readonly int32_t batch_length
    cdef readonly int32_t partition_leader_epoch
    cdef readonly int magic
    cdef readonly uint32_t crc
    cdef readonly int attributes
    cdef readonly int32_t last_offset_delta
    cdef readonly int64_t base_timestamp
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t producer_id
    cdef readonly int producer_epoch
    cdef readonly int32_t base_sequence
    cdef readonly int32_t records_count

    @property
    def size(self):
        """Bytes of the whole batch (12 + batchLength)."""
        return LOG_OVERHEAD + <int64_t>self.batch_length

    @property
    def last_offset(self):
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self):
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self):
        return self.attributes & ATTR_CODEC_MASK

    @property
    def timestamp_type(self):
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self):
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self):
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_delete_horizon(self):
        """KIP-534: baseTimestamp holds the cleaner's delete horizon."""
        return bool(self.attributes & ATTR_DELETE_HORIZON)

    def __repr__(self):
        return ("BatchHeader(position=%d, base_offset=%d, last_offset=%d, size=%d, count=%d, "
                "codec=%d, max_timestamp=%d, leader_epoch=%d)" % (
                    self.position, self.base_offset, self.last_offset, self.size,
                    self.records_count, self.codec, self.max_timestamp,
                    self.partition_leader_epoch))


cdef BatchHeader header_at(const uint8_t* p, int64_t position):
    cdef BatchHeader h = BatchHeader.__new__(BatchHeader)
    h.position = position
    h.base_offset = load_i64(p + OFF_BASE_OFFSET)
    h.batch_length = load_i32(p + OFF_BATCH_LENGTH)
    h.partition_leader_epoch = load_i32(p + OFF_LEADER_EPOCH)
    h.magic = <signed char>p[OFF_MAGIC]
    h.crc = load_u32(p + OFF_CRC)
    h.attributes = load_u16(p + OFF_ATTRIBUTES)
    h.last_offset_delta = load_i32(p + OFF_LAST_OFFSET_DELTA)
    h.base_timestamp = load_i64(p + OFF_BASE_TIMESTAMP)
    h.max_timestamp = load_i64(p + OFF_MAX_TIMESTAMP)
    h.producer_id = load_i64(p + OFF_PRODUCER_ID)
    h.producer_epoch = load_i16(p + OFF_PRODUCER_EPOCH)
    h.base_sequence = load_i32(p + OFF_BASE_SEQUENCE)
    h.records_count = load_i32(p + OFF_RECORDS_COUNT)
    return h



cdef inline bint all_zero(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] != 0:
            return False
    return True


cdef int check_batch(const uint8_t* p, Py_ssize_t avail, bint check_crc,
                     Py_ssize_t* size_out) noexcept nogil:
    """Structural (and optionally CRC) check of the batch at p; WALK_* status."""
    cdef int32_t blen
    cdef int32_t last_delta, count
    size_out[0] = 0
    if avail < HEADER_SIZE_UP_TO_MAGIC:
        if avail > 0 and all_zero(p, avail):
            return WALK_ZERO_TAIL
        return WALK_PARTIAL
    blen = load_i32(p + OFF_BATCH_LENGTH)
    if blen == 0 and all_zero(p, HEADER_SIZE_UP_TO_MAGIC):
        return WALK_ZERO_TAIL
    if blen < MIN_BATCH_LENGTH:
        return WALK_BAD_LENGTH
    if <int64_t>blen + LOG_OVERHEAD > avail:
        return WALK_PARTIAL
    size_out[0] = blen + LOG_OVERHEAD
    if p[OFF_MAGIC] != CURRENT_MAGIC:
        return WALK_BAD_MAGIC
    last_delta = load_i32(p + OFF_LAST_OFFSET_DELTA)
    count = load_i32(p + OFF_RECORDS_COUNT)
    if last_delta < 0 or count < 0 or <int64_t>count > <int64_t>last_delta + 1:
        return WALK_BAD_OFFSETS
    if check_crc and load_u32(p + OFF_CRC) != crc_of(p + OFF_ATTRIBUTES, blen + LOG_OVERHEAD - OFF_ATTRIBUTES):
        return WALK_BAD_CRC
    return WALK_OK


cdef inline Py_ssize_t resolve_end(Py_ssize_t n, Py_ssize_t start, Py_ssize_t end) except -1:
    if end < 0 or end > n:
        end = n
    if start < 0 or start > end:
        raise ValueError("start %d outside [0, %d]" % (start, end))
    return end


def read_header(data, Py_ssize_t position=0):
    """Parse the batch header at `position`; CorruptRecordError if it is not a v2 header."""
    cdef const uint8_t[::1] mv = data
    if position < 0 or position + BATCH_HEADER_SIZE > mv.shape[0]:
        raise corrupt("fewer than 61 bytes for a batch header", None, position)
    if mv[position + OFF_MAGIC] != CURRENT_MAGIC:
        raise corrupt("magic byte is %d, expected 2" % mv[position + OFF_MAGIC], None, position)
    return header_at(&mv[position], position)


# Single-field peeks for hot paths that must not build a BatchHeader (the
# produce path checks every request's first batch).  They take the buffer
# without a typed memoryview (cheaper to acquire) and never raise for short
# or foreign bytes: they answer "no" / -1 and leave the verdict to the walk.

cdef inline const uint8_t* v2_header(Py_buffer* view, Py_ssize_t position) noexcept:
    """The complete v2 header at `position` of view, or NULL."""
    if position < 0 or view.len - position < BATCH_HEADER_SIZE:
        return NULL
    cdef const uint8_t* p = <const uint8_t*>view.buf + position
    if p[OFF_MAGIC] != CURRENT_MAGIC:
        return NULL
    return p


def batch_is_transactional(data, Py_ssize_t position=0):
    """Whether the batch at `position` has the transactional attribute; False when no
    complete v2 header is there."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef bint r
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    p = v2_header(&view, position)
    r = p != NULL and (load_u16(p + OFF_ATTRIBUTES) & ATTR_TRANSACTIONAL) != 0
    PyBuffer_Release(&view)
    return r


def batch_producer_id(data, Py_ssize_t position=0):
    """producerId of the batch at `position` (-1, as for a non-idempotent batch, when
    no complete v2 header is there)."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef int64_t r = -1
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    p = v2_header(&view, position)
    if p != NULL:
        r = load_i64(p + OFF_PRODUCER_ID)
    PyBuffer_Release(&view)
    return r


def batch_size(data, Py_ssize_t position=0, bint strict=False):
    """Bytes of the batch at `position`: 12 + batchLength, unchecked (the walks judge
    it); -1 when fewer than 12 bytes are there.  With strict, Kafka's check of a
    batch's first 17 bytes (FileLogInputStream.nextBatch): -1 when fewer are there,
    0 when they do not start a v2 batch (batchLength below an empty batch's, or a
    magic other than 2)."""
    cdef Py_buffer view
    cdef const uint8_t* p
    cdef int64_t r = -1
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    if position >= 0 and view.len - position >= (HEADER_SIZE_UP_TO_MAGIC if strict else LOG_OVERHEAD):
        p = <const uint8_t*>view.buf + position
        r = LOG_OVERHEAD + <int64_t>load_i32(p + OFF_BATCH_LENGTH)
        if strict and (r < BATCH_HEADER_SIZE or p[OFF_MAGIC] != CURRENT_MAGIC):
            r = 0
    PyBuffer_Release(&view)
    return r


def verify_batch(data, Py_ssize_t position=0, path=None):
    """Check the batch at `position` completely (structure + CRC); return its header.

    Raises CorruptRecordError naming `path` and the position on any failure,
    including a batch that runs past the end of `data`.
    """
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t size
    cdef int st
    if position < 0 or position > mv.shape[0]:
        raise ValueError("position outside the buffer")
    with nogil:
        st = check_batch(&mv[0] + position, mv.shape[0] - position, True, &size)
    if st != WALK_OK:
        raise corrupt(walk_reason(st), path, position)
    return header_at(&mv[position], position)


def list_batches(data, Py_ssize_t start=0, Py_ssize_t end=-1, bint check_crc=False,
                 path=None, Py_ssize_t base_position=0, Py_ssize_t max_batches=-1):
    """Headers of the complete batches in data[start:end].

    Stops quietly at a partial or zero-filled tail; raises CorruptRecordError
    (position = base_position + offset in data) on a bad batch.  Returns
    (headers, end_position) where end_position is after the last complete batch.
    """
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t pos, size
    cdef int st
    cdef list out = []
    end = resolve_end(mv.shape[0], start, end)
    pos = start
    while pos < end and (max_batches < 0 or len(out) < max_batches):
        st = check_batch(&mv[0] + pos, end - pos, check_crc, &size)
        if st == WALK_PARTIAL or st == WALK_ZERO_TAIL:
            break
        if st != WALK_OK:
            raise corrupt(walk_reason(st), path, base_position + pos)
        out.append(header_at(&mv[pos], base_position + pos))
        pos += size
    return out, pos


def seek_offset(data, int64_t target, Py_ssize_t start=0, Py_ssize_t end=-1):
    """Position of the first complete batch in data[start:end] whose last offset >= target.

    Returns (position, base_offset, last_offset), or (end_of_complete, -1, -1)
    when every batch ends below target.  Header checks only (no CRC).
    """
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t pos, size
    cdef int st
    cdef int64_t base, last
    end = resolve_end(mv.shape[0], start, end)
    pos = start
    cdef bint found = False
    with nogil:
        while pos < end:
            st = check_batch(&mv[0] + pos, end - pos, False, &size)
            if st != WALK_OK:
                break
            base = load_i64(&mv[0] + pos)
            last = base + load_i32(&mv[0] + pos + OFF_LAST_OFFSET_DELTA)
            if last >= target:
                found = True
                break
            pos += size
    if found:
        return pos, base, last
    return pos, -1, -1


def seek_timestamp(data, int64_t target_ts, Py_ssize_t start=0, Py_ssize_t end=-1):
    """Position of the first complete batch whose maxTimestamp >= target_ts.

    Returns (position, base_offset, last_offset) or (end_of_complete, -1, -1).
    """
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t pos, size
    cdef int st
    cdef int64_t base
    end = resolve_end(mv.shape[0], start, end)
    pos = start
    cdef bint found = False
    with nogil:
        while pos < end:
            st = check_batch(&mv[0] + pos, end - pos, False, &size)
            if st != WALK_OK:
                break
            if load_i64(&mv[0] + pos + OFF_MAX_TIMESTAMP) >= target_ts:
                found = True
                break
            pos += size
    if found:
        base = load_i64(&mv[0] + pos)
        return pos, base, base + load_i32(&mv[0] + pos + OFF_LAST_OFFSET_DELTA)
    return pos, -1, -1


cdef class ScanResult:
    """What a recovery walk over one segment found (see scan_segment)."""
    cdef readonly int status
    cdef readonly Py_ssize_t error_position   # where the walk stopped on a bad batch, else -1
    cdef readonly Py_ssize_t valid_end        # byte position after the last valid batch
    cdef readonly int64_t next_offset         # last offset + 1 of the last valid batch, or -1
    cdef readonly int64_t batches
    cdef readonly int64_t records
    cdef readonly int64_t max_timestamp
    cdef readonly int64_t offset_of_max_timestamp
    cdef readonly bytes offset_index          # packed 8-byte entries (relative offset, position)
    cdef readonly bytes time_index            # packed 12-byte entries (timestamp, relative offset)
    cdef readonly list epochs                 # [(leader_epoch, start_offset)] where the epoch changes
    cdef readonly int64_t bytes_since_index   # counter to continue the sparse-index rule

    @property
    def reason(self):
        return walk_reason(self.status)

    @property
    def ok(self):
        return self.status == WALK_OK or self.status == WALK_PARTIAL or self.status == WALK_ZERO_TAIL


def scan_segment(data, int64_t base_offset, Py_ssize_t start=0, Py_ssize_t end=-1,
                 int64_t index_interval=4096, int64_t min_next_offset=-1,
                 bint check_crc=True, int32_t last_epoch=-1, int64_t bytes_since_index=0,
                 int64_t max_timestamp=-1, int64_t offset_of_max_timestamp=-1,
                 int64_t last_time_entry=-1, bint strict=False):
    """Walk the batches of one segment's .log bytes, as Kafka's recovery does.

    Validates structure and (optionally) CRC of every batch from `start`,
    checks that offsets increase (base >= min_next_offset, base >= base_offset,
    relative offsets fit int32), and rebuilds the sparse offset and time index
    entries with Kafka's rule (an entry whenever more than `index_interval`
    bytes passed since the last one; the first batch is never indexed).  Stops
    at the first partial, zero-filled or invalid batch; `status` says which.
    Never raises for bad data.

    With `strict` (a log that is never compacted) offsets must be contiguous
    (each baseOffset == previous lastOffset + 1, the first == max(base_offset,
    min_next_offset)) and partitionLeaderEpoch must not decrease: baseOffset
    and the epoch are outside the CRC, so this is what catches their corruption.
    """
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t pos, size
    cdef int st = WALK_OK
    cdef int64_t base, last, maxts, nrec = 0, nb = 0
    cdef int64_t next_off = min_next_offset
    cdef int32_t epoch
    cdef bytearray oidx = bytearray()
    cdef bytearray tidx = bytearray()
    cdef uint8_t entry[12]
    cdef list epochs = []
    cdef ScanResult r = ScanResult.__new__(ScanResult)
    end = resolve_end(mv.shape[0], start, end)
    pos = start
    if next_off < base_offset:
        next_off = base_offset
    while pos < end:
        with nogil:
            st = check_batch(&mv[0] + pos, end - pos, check_crc, &size)
        if st != WALK_OK:
            break
        base = load_i64(&mv[0] + pos)
        last = base + load_i32(&mv[0] + pos + OFF_LAST_OFFSET_DELTA)
        if base < next_off or last - base_offset > 2147483647 or (strict and base != next_off):
            st = WALK_BAD_OFFSETS
            break
        if strict and <int32_t>load_i32(&mv[0] + pos + OFF_LEADER_EPOCH) < last_epoch:
            st = WALK_BAD_OFFSETS
            break
        maxts = load_i64(&mv[0] + pos + OFF_MAX_TIMESTAMP)
        if maxts > max_timestamp:
            max_timestamp = maxts
            offset_of_max_timestamp = last
        epoch = load_i32(&mv[0] + pos + OFF_LEADER_EPOCH)
        if epoch >= 0 and epoch > last_epoch:
            epochs.append((epoch, base))
            last_epoch = epoch
        if bytes_since_index > index_interval:
            store_i32(entry, <int32_t>(last - base_offset))
            store_i32(entry + 4, <int32_t>pos)
            oidx += entry[:8]
            if max_timestamp > last_time_entry:
                store_i64(entry, max_timestamp)
                store_i32(entry + 8, <int32_t>(offset_of_max_timestamp - base_offset))
                tidx += entry[:12]
                last_time_entry = max_timestamp
            bytes_since_index = 0
        bytes_since_index += size
        nrec += load_i32(&mv[0] + pos + OFF_RECORDS_COUNT)
        nb += 1
        next_off = last + 1
        pos += size
    if pos >= end:
        st = WALK_OK
    r.status = st
    r.error_position = pos if (st != WALK_OK and st != WALK_PARTIAL and st != WALK_ZERO_TAIL) else -1
    r.valid_end = pos
    r.next_offset = next_off if nb > 0 else min_next_offset
    r.batches = nb
    r.records = nrec
    r.max_timestamp = max_timestamp
    r.offset_of_max_timestamp = offset_of_max_timestamp
    r.offset_index = bytes(oidx)
    r.time_index = bytes(tidx)
    r.epochs = epochs
    r.bytes_since_index = bytes_since_index
    return r


def assign_offsets(buf, int64_t next_offset, int32_t leader_epoch=-1,
                   int64_t log_append_time=-1, bint allow_control=False,
                   int64_t max_batch_bytes=-1, bint keep_offsets=False):
    """Validate a producer's batches and stamp offsets and the leader epoch in place.

    `buf` (writable) must hold one or more complete v2 batches and nothing
    else.  Every batch is checked first (magic, length, CRC, count > 0,
    lastOffsetDelta == count - 1, no control batch unless allow_control, size
    <= max_batch_bytes); only if all pass is anything patched, so a rejected
    append leaves `buf` untouched.  With log_append_time >= 0 the maxTimestamp
    is set to it, the timestamp-type bit is set and the CRC recomputed.  With
    keep_offsets (a follower's append) offsets are checked to start at
    next_offset or later and to increase, and left as they are.

    Returns (first_offset, last_offset, max_timestamp, offset_of_max_timestamp,
    batches, records).
    """
    cdef uint8_t[::1] mv = buf
    cdef Py_ssize_t n = mv.shape[0]
    cdef Py_ssize_t pos = 0, size
    cdef int st
    cdef int32_t count, delta
    cdef int attrs
    cdef int64_t off = next_offset, first = -1, last = -1, maxts = -1, maxts_off = -1, ts
    cdef int64_t nrec = 0, nb = 0, base
    if n == 0:
        raise invalid_record("no record batches in the append")
    # Pass 1: validate everything.
    while pos < n:
        st = check_batch(&mv[0] + pos, n - pos, True, &size)
        if st == WALK_PARTIAL or st == WALK_ZERO_TAIL:
            raise corrupt("batchLength does not match the bytes sent", None, pos)
        if st != WALK_OK:
            raise corrupt(walk_reason(st), None, pos)
        count = load_i32(&mv[0] + pos + OFF_RECORDS_COUNT)
        delta = load_i32(&mv[0] + pos + OFF_LAST_OFFSET_DELTA)
        attrs = load_u16(&mv[0] + pos + OFF_ATTRIBUTES)
        if max_batch_bytes >= 0 and size > max_batch_bytes:
            raise _errors.RecordTooLargeError(
                "batch of %d bytes is larger than max.message.bytes (%d)" % (size, max_batch_bytes))
        if (attrs & ATTR_CONTROL) and not allow_control:
            raise invalid_record("control batches cannot be produced by clients")
        if keep_offsets:
            base = load_i64(&mv[0] + pos)
            if base < off:
                raise invalid_record("batch base offset %d is below the expected %d" % (base, off))
            off = base + delta + 1
        else:
            if count <= 0:
                raise invalid_record("batch has %d records" % count)
            if delta != count - 1:
                raise invalid_record("lastOffsetDelta %d does not match %d records" % (delta, count))
        pos += size
    # Pass 2: patch.
    pos = 0
    off = next_offset
    while pos < n:
        size = load_i32(&mv[0] + pos + OFF_BATCH_LENGTH) + LOG_OVERHEAD
        delta = load_i32(&mv[0] + pos + OFF_LAST_OFFSET_DELTA)
        if keep_offsets:
            off = load_i64(&mv[0] + pos)
        else:
            store_i64(&mv[0] + pos, off)
        store_i32(&mv[0] + pos + OFF_LEADER_EPOCH, leader_epoch)
        if log_append_time >= 0:
            attrs = load_u16(&mv[0] + pos + OFF_ATTRIBUTES) | ATTR_TIMESTAMP_TYPE
            store_u16(&mv[0] + pos + OFF_ATTRIBUTES, <unsigned short>attrs)
            store_i64(&mv[0] + pos + OFF_MAX_TIMESTAMP, log_append_time)
            store_u32(&mv[0] + pos + OFF_CRC,
                      crc_of(&mv[0] + pos + OFF_ATTRIBUTES, size - OFF_ATTRIBUTES))
        ts = load_i64(&mv[0] + pos + OFF_MAX_TIMESTAMP)
        if first < 0:
            first = off
        last = off + delta
        if ts > maxts:
            maxts = ts
            maxts_off = last
        nrec += load_i32(&mv[0] + pos + OFF_RECORDS_COUNT)
        nb += 1
        off = last + 1
        pos += size
    return first, last, maxts, maxts_off, nb, nrec



def set_leader_epoch(buf, int32_t leader_epoch):
    """Stamp partitionLeaderEpoch on every complete batch of a writable buffer."""
    cdef uint8_t[::1] mv = buf
    cdef Py_ssize_t pos = 0, n = mv.shape[0], size
    while pos + LOG_OVERHEAD <= n:
        size = load_i32(&mv[0] + pos + OFF_BATCH_LENGTH) + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE or pos + size > n:
            break
        store_i32(&mv[0] + pos + OFF_LEADER_EPOCH, leader_epoch)
        pos += size


def stamp_producer(buf, int64_t producer_id, int producer_epoch, int32_t base_sequence,
                   bint transactional=False):
    """A client's stamp on its built batches: producerId, producerEpoch and
    baseSequence written into every batch of a writable buffer of whole batches
    (the k-th gets base_sequence + the records before it, wrapping at INT32_MAX
    to 0; a negative base_sequence writes -1, no sequence), the transactional
    attribute set when asked, each CRC recomputed.  Returns the records stamped.
    Raises CorruptRecordError (nothing patched) unless buf holds whole v2 batches.
    """
    cdef uint8_t[::1] mv = buf
    cdef Py_ssize_t pos = 0, n = mv.shape[0], size
    cdef int st
    cdef int64_t total = 0
    cdef uint8_t* p
    while pos < n:
        st = check_batch(&mv[0] + pos, n - pos, False, &size)
        if st != WALK_OK:
            raise corrupt(walk_reason(st), None, pos)
        pos += size
    pos = 0
    while pos < n:
        p = &mv[0] + pos
        size = load_i32(p + OFF_BATCH_LENGTH) + LOG_OVERHEAD
        if transactional:
            store_u16(p + OFF_ATTRIBUTES, <uint16_t>(load_u16(p + OFF_ATTRIBUTES) | ATTR_TRANSACTIONAL))
        store_i64(p + OFF_PRODUCER_ID, producer_id)
        store_u16(p + OFF_PRODUCER_EPOCH, <uint16_t><int16_t>producer_epoch)
        store_i32(p + OFF_BASE_SEQUENCE,
                  -1 if base_sequence < 0 else <int32_t>((base_sequence + total) % 2147483648))
        store_u32(p + OFF_CRC, crc_of(p + OFF_ATTRIBUTES, size - OFF_ATTRIBUTES))
        total += load_i32(p + OFF_RECORDS_COUNT)
        pos += size
    return total
