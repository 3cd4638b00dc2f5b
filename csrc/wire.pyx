# The broker's two hot protocol paths, with no per-record work:
#
# * parse_produce(): a ProduceRequest body (v0-v9; flexible from v9):
#     transactional_id NULLABLE_STRING (v3+), acks INT16, timeout_ms INT32,
#     [topic: name STRING, [partition: index INT32, records NULLABLE_BYTES]]
#   (COMPACT_* forms and TAG_BUFFERs after each struct when flexible).  The
#   records come back as views into the request frame -- the log stamps
#   offsets into them in place, so a produced batch is never copied.
# * fetch_response(): a FetchResponse body (v4-v16; flexible from v12; topic ids
#   instead of names from v13; KIP-951's NodeEndpoints from v16) as parts:
#   bytearray runs of header fields interleaved with each partition's
#   FileSlices, so the connection can sendfile() the records.
#
# Every read is bounds-checked against the frame; a claimed count is refused
# when count * (minimum item size) exceeds the bytes left, so nothing is
# allocated from a hostile length.  Errors raise InvalidRequestError (the
# connection then closes).  GIL held: the work per request is small.
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from csrc.buffer cimport load_i16, load_i32, store_i32, store_i64, store_u16


cdef object _bad_request(str what, Py_ssize_t pos):
    return _errors.InvalidRequestError("%s at position %d" % (what, pos))


cdef struct Cursor:
    const uint8_t* p
    Py_ssize_t pos
    Py_ssize_t end


cdef inline int need(Cursor* c, Py_ssize_t n, str what) except -1:
    if n < 0 or n > c.end - c.pos:
        raise _bad_request("%s: needs %d bytes, %d remain" % (what, n, c.end - c.pos), c.pos)
    return 0


cdef int64_t uvarint(Cursor* c) except? -1:
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        need(c, 1, "varint")
        b = c.p[c.pos]
        c.pos += 1
        if shift == 28 and (b & 0xF0):
            raise _bad_request("unsigned varint longer than 5 bytes", c.pos)
        v |= <uint64_t>(b & 0x7F) << shift
        if not (b & 0x80):
            return <int64_t>v
        shift += 7


cdef int16_t rd_i16(Cursor* c) except? -1:
    need(c, 2, "int16")
    c.pos += 2
    return load_i16(c.p + c.pos - 2)


cdef int32_t rd_i32(Cursor* c) except? -1:
    need(c, 4, "int32")
    c.pos += 4
    return load_i32(c.p + c.pos - 4)


cdef object rd_string(Cursor* c, bint flex, bint nullable):
    cdef int64_t n
    if flex:
        n = uvarint(c) - 1
    else:
        n = rd_i16(c)
    if n < 0:
        if n == -1 and nullable:
            return None
        raise _bad_request("string length %d" % n, c.pos)
    need(c, n, "string")
    c.pos += n
    try:
        return (<const char*>c.p)[c.pos - n:c.pos].decode("utf-8")
    except UnicodeDecodeError:
        raise _bad_request("string is not UTF-8", c.pos - n) from None


cdef Py_ssize_t rd_array_len(Cursor* c, bint flex, Py_ssize_t min_item) except -2:
    cdef int64_t n
    if flex:
        n = uvarint(c) - 1
    else:
        n = rd_i32(c)
    if n < 0:
        raise _bad_request("array length %d" % n, c.pos)
    if n * min_item > c.end - c.pos:
        raise _bad_request("array claims %d elements but only %d bytes remain" % (n, c.end - c.pos), c.pos)
    return n


cdef int skip_tags(Cursor* c) except -1:
    cdef int64_t count = uvarint(c), tag, last = -1, size
    cdef int64_t i
    if count > c.end - c.pos:
        raise _bad_request("%d tagged fields claimed, %d bytes remain" % (count, c.end - c.pos), c.pos)
    for i in range(count):
        tag = uvarint(c)
        if tag <= last:
            raise _bad_request("tagged field %d after %d: tags must ascend" % (tag, last), c.pos)
        last = tag
        size = uvarint(c)
        need(c, size, "tagged field %d" % tag)
        c.pos += size
    return 0


def parse_produce(buf, Py_ssize_t pos, Py_ssize_t end, int version):
    """Parse a ProduceRequest body in buf[pos:end] (v0-v2 have no transactional_id).

    Returns (transactional_id, acks, timeout_ms, topics, end_position) with
    topics = [(name, [(partition_index, records memoryview or None), ...]), ...];
    the record views are slices of `buf` (writable when buf is).
    """
    cdef const uint8_t[::1] mv = buf
    cdef Cursor c
    cdef bint flex = version >= 9
    cdef Py_ssize_t nt, np_, i, j
    cdef int64_t n
    cdef int16_t acks
    cdef int32_t timeout, index
    if end < 0 or end > mv.shape[0] or pos < 0 or pos > end:
        raise ValueError("bad bounds")
    c.p = &mv[0] if mv.shape[0] else NULL
    c.pos = pos
    c.end = end
    view = memoryview(buf)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    txn = rd_string(&c, flex, True) if version >= 3 else None
    acks = rd_i16(&c)
    timeout = rd_i32(&c)
    topics = []
    nt = rd_array_len(&c, flex, 2)
    for i in range(nt):
        name = rd_string(&c, flex, False)
        parts = []
        np_ = rd_array_len(&c, flex, 5)
        for j in range(np_):
            index = rd_i32(&c)
            if flex:
                n = uvarint(&c) - 1
            else:
                n = rd_i32(&c)
            if n < -1:
                raise _bad_request("records length %d" % n, c.pos)
            if n == -1:
                records = None
            else:
                need(&c, n, "records")
                records = view[c.pos:c.pos + n]
                c.pos += n
            if flex:
                skip_tags(&c)
            parts.append((index, records))
        if flex:
            skip_tags(&c)
        topics.append((name, parts))
    if flex:
        skip_tags(&c)
    # bytes after the body are the caller's to ignore (as Kafka does), not an error
    return txn, acks, timeout, topics, c.pos


cdef inline void put_uvarint(bytearray out, uint64_t v):
    while v >= 0x80:
        out.append(<uint8_t>((v & 0x7F) | 0x80))
        v >>= 7
    out.append(<uint8_t>v)


cdef inline void put_i16(bytearray out, int16_t v):
    cdef uint8_t b[2]
    store_u16(b, <unsigned short>v)
    out += b[:2]


cdef inline void put_i32(bytearray out, int32_t v):
    cdef uint8_t b[4]
    store_i32(b, v)
    out += b[:4]


cdef inline void put_i64(bytearray out, int64_t v):
    cdef uint8_t b[8]
    store_i64(b, v)
    out += b[:8]


cdef inline void put_compact_str(bytearray out, str value):
    cdef bytes b
    if value is None:
        out.append(0)
        return
    b = value.encode("utf-8")
    put_uvarint(out, len(b) + 1)
    out += b


def fetch_response(int version, topics, int error_code=0, int session_id=0, node_endpoints=None):
    """The body of a FetchResponse (v4-v16) as (parts, total size).

    `topics`: [(topic, [partition, ...])] where topic is the name (a str) up to v12 and the
    topic id's 16 bytes from v13, and each partition has
    partition_index, error_code, high_watermark, last_stable_offset,
    log_start_offset, slices (objects with len(), e.g. FileSlices, or
    bytes) and optionally aborted_transactions ([(producer_id, first_offset)],
    None = null as for read_uncommitted), diverging_epoch ((epoch, end_offset), v12+:
    the DivergingEpoch tagged field, tag 0) and current_leader ((leader_id, leader_epoch), v12+:
    the CurrentLeader tagged field, tag 1, KIP-951); None = absent.  `node_endpoints` (v16+,
    the top-level NodeEndpoints tagged field, tag 0): [(node_id, host, port, rack)], written
    when not empty.  Parts are bytearray runs and the non-empty slices, in wire order.
    """
    cdef bint flex = version >= 12
    cdef bint ids = version >= 13
    cdef bytearray w = bytearray()
    cdef bytearray t
    cdef list parts = []
    cdef Py_ssize_t total = 0, size
    cdef int ntags
    put_i32(w, 0)                              # throttle_time_ms
    if version >= 7:
        put_i16(w, error_code)
        put_i32(w, session_id)
    if flex:
        put_uvarint(w, len(topics) + 1)
    else:
        put_i32(w, len(topics))
    for name, partitions in topics:
        if ids:                                # v13+: the topic id, 16 bytes
            if len(name) != 16:
                raise ValueError("a topic id is 16 bytes")
            w += name
        else:
            bname = (<str>name).encode("utf-8")
            if flex:
                put_uvarint(w, len(bname) + 1)
            else:
                put_i16(w, len(bname))
            w += bname
        if flex:
            put_uvarint(w, len(partitions) + 1)
        else:
            put_i32(w, len(partitions))
        for p in partitions:
            put_i32(w, p.partition_index)
            put_i16(w, p.error_code)
            put_i64(w, p.high_watermark)
            put_i64(w, p.last_stable_offset)
            if version >= 5:
                put_i64(w, p.log_start_offset)
            aborted = getattr(p, "aborted_transactions", None)
            if aborted is None:                # read_uncommitted: null
                if flex:
                    w.append(0)
                else:
                    put_i32(w, -1)
            else:                              # read_committed: [(producer_id, first_offset)]
                if flex:
                    put_uvarint(w, len(aborted) + 1)
                else:
                    put_i32(w, len(aborted))
                for pid, first in aborted:
                    put_i64(w, pid)
                    put_i64(w, first)
                    if flex:
                        w.append(0)            # the entry's tagged fields
            if version >= 11:
                put_i32(w, -1)                 # preferred_read_replica
            slices = p.slices
            size = 0
            if slices:
                for s in slices:
                    size += len(s)
            if flex:
                put_uvarint(w, size + 1)
            else:
                put_i32(w, size)
            if size:
                total += len(w)
                parts.append(w)
                for s in slices:
                    if len(s):
                        parts.append(s)
                total += size
                w = bytearray()
            if flex:
                diverging = getattr(p, "diverging_epoch", None)
                leader = getattr(p, "current_leader", None)
                ntags = (diverging is not None) + (leader is not None)
                w.append(ntags)
                if diverging is not None:      # KIP-320, DivergingEpoch (tag 0): epoch INT32,
                    w += b"\x00\x0d"           # end_offset INT64, its tagged fields
                    put_i32(w, diverging[0])
                    put_i64(w, diverging[1])
                    w.append(0)
                if leader is not None:         # KIP-951, CurrentLeader (tag 1): leader_id INT32,
                    w += b"\x01\x09"           # leader_epoch INT32, its tagged fields
                    put_i32(w, leader[0])
                    put_i32(w, leader[1])
                    w.append(0)
        if flex:
            w.append(0)
    if flex:
        if version >= 16 and node_endpoints:   # KIP-951, NodeEndpoints (tag 0)
            t = bytearray()
            put_uvarint(t, len(node_endpoints) + 1)
            for node_id, host, port, rack in node_endpoints:
                put_i32(t, node_id)
                put_compact_str(t, host)
                put_i32(t, port)
                put_compact_str(t, rack)
                t.append(0)
            w += b"\x01\x00"
            put_uvarint(w, len(t))
            w += t
        else:
            w.append(0)
    total += len(w)
    parts.append(w)
    return parts, total
