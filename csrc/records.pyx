# Record-level decoding of RecordBatch v2 (batch header: consts.pxi).  After
# the header and (for codec != 0) decompression of the payload, the records
# are laid out back to back, with no count inside the payload:
#
#   length          varint   bytes of the rest of this record
#   attributes      int8     unused, 0
#   timestampDelta  varlong  relative to baseTimestamp
#   offsetDelta     varint   relative to baseOffset
#   keyLength       varint   -1 = null key; then the key bytes
#   valueLength     varint   -1 = null value; then the value bytes
#   headersCount    varint   then per header: keyLength varint + UTF-8 key (not
#                            nullable), valueLength varint (-1 = null) + bytes
#
# varint/varlong = zigzag + LEB128 (csrc/buffer.pxd).  Worked example from
# kafka-storage-format.md §2: key "k1", value "hello", header h=x encodes as
# 22 00 00 00 04 6b31 0a 68656c6c6f 02 02 68 02 78.
#
# Invariants checked for every record: each varint ends inside the record,
# every length is >= -1 (keys of headers >= 0), the fields end exactly at
# `length`, the records end exactly at the payload end and their number equals
# recordsCount.  Any failure raises CorruptRecordError naming the batch
# position.  parse_record() is shared with the columnar scanner (scan.pyx);
# it touches no Python objects and may run without the GIL.
from libc.stdint cimport int32_t, int64_t, uint8_t
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.buffer cimport PyBUF_READ
from csrc.buffer cimport read_varint, read_varlong, load_i32, load_i64, load_u16

cdef enum:
    REC_OK = 0
    REC_TRUNCATED = 1            # a varint or a length runs past the record / payload
    REC_BAD_LENGTH = 2           # negative length, or fields not ending at `length`
    REC_BAD_UTF8 = 3             # a header key that is not UTF-8 (scanner only: Arrow strings)

ctypedef struct RecordView:
    int64_t ts_delta
    int32_t offset_delta
    const uint8_t* key
    int32_t key_len              # -1 = null
    const uint8_t* value
    int32_t value_len            # -1 = null
    int32_t headers_count
    const uint8_t* headers       # first header; they end at `end`
    const uint8_t* end           # end of this record


cdef inline int parse_record(const uint8_t* p, const uint8_t* limit, RecordView* rv) noexcept nogil:
    """Parse and bounds-check the record at p (payload ends at limit)."""
    cdef int32_t length, n32, hk, hv, i
    cdef int k
    cdef const uint8_t* end
    k = read_varint(p, limit, &length)
    if k == 0:
        return REC_TRUNCATED
    p += k
    if length < 0:
        return REC_BAD_LENGTH
    if length > limit - p:
        return REC_TRUNCATED
    end = p + length
    rv.end = end
    if p >= end:
        return REC_TRUNCATED
    p += 1                                   # attributes
    k = read_varlong(p, end, &rv.ts_delta)
    if k == 0:
        return REC_TRUNCATED
    p += k
    k = read_varint(p, end, &rv.offset_delta)
    if k == 0:
        return REC_TRUNCATED
    p += k
    # key
    k = read_varint(p, end, &n32)
    if k == 0:
        return REC_TRUNCATED
    p += k
    if n32 < -1:
        return REC_BAD_LENGTH
    rv.key = p
    rv.key_len = n32
    if n32 > 0:
        if n32 > end - p:
            return REC_TRUNCATED
        p += n32
    # value
    k = read_varint(p, end, &n32)
    if k == 0:
        return REC_TRUNCATED
    p += k
    if n32 < -1:
        return REC_BAD_LENGTH
    rv.value = p
    rv.value_len = n32
    if n32 > 0:
        if n32 > end - p:
            return REC_TRUNCATED
        p += n32
    # headers: validated here so iterating them later needs no checks
    k = read_varint(p, end, &rv.headers_count)
    if k == 0:
        return REC_TRUNCATED
    p += k
    if rv.headers_count < 0:
        return REC_BAD_LENGTH
    rv.headers = p
    for i in range(rv.headers_count):
        k = read_varint(p, end, &hk)
        if k == 0:
            return REC_TRUNCATED
        p += k
        if hk < 0:
            return REC_BAD_LENGTH
        if hk > end - p:
            return REC_TRUNCATED
        p += hk
        k = read_varint(p, end, &hv)
        if k == 0:
            return REC_TRUNCATED
        p += k
        if hv < -1:
            return REC_BAD_LENGTH
        if hv > 0:
            if hv > end - p:
                return REC_TRUNCATED
            p += hv
    if p != end:
        return REC_BAD_LENGTH
    return REC_OK


cdef inline const uint8_t* next_header(const uint8_t* p, const uint8_t** k, int32_t* klen,
                                       const uint8_t** v, int32_t* vlen) noexcept nogil:
    """Step over one header already validated by parse_record."""
    p += read_varint(p, p + 5, klen)
    k[0] = p
    p += klen[0]
    p += read_varint(p, p + 5, vlen)
    v[0] = p
    if vlen[0] > 0:
        p += vlen[0]
    return p


cdef str record_reason(int status, Py_ssize_t index, Py_ssize_t at):
    if status == REC_TRUNCATED:
        what = "record %d at payload byte %d runs past its length or the batch"
    elif status == REC_BAD_UTF8:
        what = "record %d at payload byte %d has a header key that is not valid UTF-8"
    else:
        what = "record %d at payload byte %d has an invalid length field"
    return what % (index, at)


cdef class BatchPayload:
    """The record bytes of one batch: a pointer into the caller's buffer for
    uncompressed batches, or into `owner` (the decompressed bytes)."""
    cdef object owner
    cdef const uint8_t* start
    cdef const uint8_t* end


cdef BatchPayload batch_payload(const uint8_t* batch, Py_ssize_t size, Py_ssize_t max_size,
                                object path, Py_ssize_t position):
    cdef BatchPayload pl = BatchPayload.__new__(BatchPayload)
    cdef int codec = load_u16(batch + OFF_ATTRIBUTES) & ATTR_CODEC_MASK
    cdef const uint8_t[::1] out
    if codec == CODEC_NONE:
        pl.start = batch + BATCH_HEADER_SIZE
        pl.end = batch + size
        return pl
    src = PyMemoryView_FromMemory(<char*>(batch + BATCH_HEADER_SIZE), size - BATCH_HEADER_SIZE, PyBUF_READ)
    try:
        pl.owner = decompress(codec, src, max_size)
    except _errors.CorruptRecordError as e:
        raise corrupt(e.reason, path, position) from None
    except _errors.UnsupportedCompressionTypeError:
        raise corrupt("unknown compression codec %d" % codec, path, position) from None
    if len(pl.owner) == 0:
        pl.start = pl.end = NULL
        return pl
    out = pl.owner
    pl.start = &out[0]
    pl.end = pl.start + out.shape[0]
    return pl


cdef inline object _bytes_or_none(const uint8_t* p, int32_t n):
    if n < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>p, n)


cdef list _decode_headers(RecordView* rv):
    cdef list hs = []
    cdef const uint8_t* p = rv.headers
    cdef const uint8_t* k
    cdef const uint8_t* v
    cdef int32_t kl = 0, vl = -1, i
    for i in range(rv.headers_count):
        p = next_header(p, &k, &kl, &v, &vl)
        hs.append((PyUnicode_DecodeUTF8(<const char*>k, kl, "replace"), _bytes_or_none(v, vl)))
    return hs


cdef Py_ssize_t _decode_into(list out, const uint8_t* batch, Py_ssize_t size, Py_ssize_t max_size,
                             object path, Py_ssize_t position) except -1:
    """Append (offset, timestamp, key, value, headers) of every record of one
    complete, already structure-checked batch to `out`; return the count."""
    cdef int64_t base_offset = load_i64(batch + OFF_BASE_OFFSET)
    cdef int64_t base_ts = load_i64(batch + OFF_BASE_TIMESTAMP)
    cdef int64_t max_ts = load_i64(batch + OFF_MAX_TIMESTAMP)
    cdef bint log_append = (load_u16(batch + OFF_ATTRIBUTES) & ATTR_TIMESTAMP_TYPE) != 0
    cdef int32_t count = load_i32(batch + OFF_RECORDS_COUNT)
    cdef BatchPayload pl = batch_payload(batch, size, max_size, path, position)
    cdef const uint8_t* p = pl.start
    cdef RecordView rv
    cdef Py_ssize_t i = 0
    cdef int st
    cdef list empty_headers
    while p < pl.end:
        if i >= count:
            raise corrupt("more records in the payload than recordsCount %d" % count, path, position)
        st = parse_record(p, pl.end, &rv)
        if st != REC_OK:
            raise corrupt(record_reason(st, i, p - pl.start), path, position)
        out.append((base_offset + rv.offset_delta,
                    max_ts if log_append else base_ts + rv.ts_delta,
                    _bytes_or_none(rv.key, rv.key_len),
                    _bytes_or_none(rv.value, rv.value_len),
                    _decode_headers(&rv) if rv.headers_count else []))
        p = rv.end
        i += 1
    if i != count:
        raise corrupt("recordsCount is %d but the payload holds %d records" % (count, i), path, position)
    return i


def decode_batch(data, Py_ssize_t position=0, bint check_crc=True, path=None,
                 Py_ssize_t max_size=MAX_DECOMPRESSED_DEFAULT):
    """Records of the ONE batch at data[position:], decompressed.

    Returns a list of (offset, timestamp, key, value, headers) tuples: key and
    value bytes or None, headers a list of (str, bytes-or-None).  timestamp is
    baseTimestamp + delta, or maxTimestamp for a LOG_APPEND_TIME batch.
    Control batches are decoded too (check read_header(...).is_control).
    A missing, truncated or inconsistent batch raises CorruptRecordError.
    """
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t size
    cdef int st
    cdef list out = []
    if position < 0 or position > mv.shape[0]:
        raise ValueError("position outside the buffer")
    if position == mv.shape[0]:
        raise corrupt("no batch at the end of the buffer", path, position)
    st = check_batch(&mv[position], mv.shape[0] - position, check_crc, &size)
    if st != WALK_OK:
        raise corrupt(walk_reason(st), path, position)
    _decode_into(out, &mv[position], size, max_size, path, position)
    return out


def decode_batches(data, Py_ssize_t start=0, Py_ssize_t end=-1, bint check_crc=True,
                   bint skip_control=True, path=None, Py_ssize_t base_position=0,
                   Py_ssize_t max_size=MAX_DECOMPRESSED_DEFAULT):
    """Records of every complete batch in data[start:end] (see decode_batch).

    Stops quietly at a partial or zero-filled tail; control batches are
    skipped unless skip_control is False.  Returns (records, end_position),
    end_position being just after the last complete batch.  Error positions
    are base_position + the position in `data`.
    """
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t pos, size
    cdef int st
    cdef list out = []
    end = resolve_end(mv.shape[0], start, end)
    pos = start
    while pos < end:
        st = check_batch(&mv[pos], end - pos, check_crc, &size)
        if st == WALK_PARTIAL or st == WALK_ZERO_TAIL:
            break
        if st != WALK_OK:
            raise corrupt(walk_reason(st), path, base_position + pos)
        if not (skip_control and (load_u16(&mv[pos] + OFF_ATTRIBUTES) & ATTR_CONTROL)):
            _decode_into(out, &mv[pos], size, max_size, path, base_position + pos)
        pos += size
    return out, pos


def first_record_at_or_after(data, Py_ssize_t position, int64_t target_ts, int64_t min_offset=0,
                             path=None, Py_ssize_t max_size=MAX_DECOMPRESSED_DEFAULT):
    """(offset, timestamp) of the first record of the batch at `position` with
    timestamp >= target_ts and offset >= min_offset, or None (Kafka's
    LogSegment.findOffsetByTimestamp looks at records, not only maxTimestamp).

    A LOG_APPEND_TIME batch gives every record maxTimestamp, so its first
    record at or after min_offset answers; otherwise the records are walked in
    place (decompressed first when the batch is compressed).  No CRC check; a
    missing, truncated or malformed batch or record raises CorruptRecordError.
    """
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b
    cdef Py_ssize_t size
    cdef int st
    cdef int64_t base_offset, base_ts, max_ts, off
    cdef BatchPayload pl
    cdef const uint8_t* p
    cdef RecordView rv
    cdef Py_ssize_t i = 0
    if position < 0 or position > mv.shape[0]:
        raise ValueError("position outside the buffer")
    if position == mv.shape[0]:
        raise corrupt("no batch at the end of the buffer", path, position)
    b = &mv[position]
    st = check_batch(b, mv.shape[0] - position, False, &size)
    if st != WALK_OK:
        raise corrupt(walk_reason(st), path, position)
    base_offset = load_i64(b + OFF_BASE_OFFSET)
    base_ts = load_i64(b + OFF_BASE_TIMESTAMP)
    max_ts = load_i64(b + OFF_MAX_TIMESTAMP)
    if max_ts < target_ts or base_offset + load_i32(b + OFF_LAST_OFFSET_DELTA) < min_offset:
        return None
    if load_u16(b + OFF_ATTRIBUTES) & ATTR_TIMESTAMP_TYPE:
        return max(base_offset, min_offset), max_ts
    pl = batch_payload(b, size, max_size, path, position)
    p = pl.start
    while p < pl.end:
        st = parse_record(p, pl.end, &rv)
        if st != REC_OK:
            raise corrupt(record_reason(st, i, p - pl.start), path, position)
        off = base_offset + rv.offset_delta
        if base_ts + rv.ts_delta >= target_ts and off >= min_offset:
            return off, base_ts + rv.ts_delta
        p = rv.end
        i += 1
    return None


def read_control_record(data, Py_ssize_t position=0):
    """(type, coordinator_epoch) of the control batch at `position`.

    type: 0 = ABORT, 1 = COMMIT (Kafka's ControlRecordType), -1 = unknown or
    unreadable (an empty batch, a short key); coordinator_epoch -1 when the
    value is not an EndTransactionMarker.  The batch must be complete.
    """
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t n = mv.shape[0]
    cdef const uint8_t* b
    cdef int32_t size
    cdef RecordView rv
    cdef BatchPayload pl
    cdef int ctype = -1
    cdef int32_t coord = -1
    if position < 0 or position + BATCH_HEADER_SIZE > n:
        raise corrupt("control batch header runs past the data", None, position)
    b = &mv[0] + position
    size = load_i32(b + OFF_BATCH_LENGTH) + LOG_OVERHEAD
    if size < BATCH_HEADER_SIZE or position + size > n:
        raise corrupt("control batch runs past the data", None, position)
    pl = batch_payload(b, size, MAX_DECOMPRESSED_DEFAULT, None, position)
    if pl.start == NULL or pl.start >= pl.end:
        return -1, -1
    if parse_record(pl.start, pl.end, &rv) != REC_OK:
        return -1, -1
    if rv.key_len >= 4:
        ctype = <int>load_u16(rv.key + 2)
        if ctype > 1:
            ctype = -1
    if rv.value_len >= 6:
        coord = load_i32(rv.value + 2)
    return ctype, coord
