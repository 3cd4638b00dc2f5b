# Record-level work of log compaction (engine/storage/cleaner.py holds the
# policy).
#
#   OffsetMap      Kafka's SkimpyOffsetMap: key -> latest offset, keyed by a
#                  128-bit hash of the key (MurmurHash3 x64-128, our own code from
#                  the published algorithm), 24 bytes a slot (hash 16 + offset 8),
#                  open addressing with linear probing, at most 90 % full (Kafka's
#                  load factor).  The table starts small and doubles up to the
#                  byte budget (log.cleaner.dedupe.buffer.size).  Two keys sharing
#                  a 128-bit hash would be taken for one (as in Kafka).  Batches are RecordBatch v2 (header: consts.pxi, records:
# records.pyx); compressed payloads are decompressed with codec.pyx and a
# rewritten batch is recompressed with the SAME codec.
#
#   index_keys     the offset map: key -> offset of its latest record, over the
#                  "dirty" section (control batches skipped, null keys skipped)
#   compact_batch  filter one batch against the map; keeps baseOffset,
#                  lastOffsetDelta (so the producer's last sequence survives, as
#                  Kafka's overrideLastOffset), producer id/epoch/sequence,
#                  leader epoch, timestamp type and codec.  A kept tombstone in
#                  a batch without a delete horizon gets one (KIP-534: attribute
#                  0x40, baseTimestamp = now + delete.retention.ms, record
#                  timestamp deltas re-based so absolute timestamps are kept); a
#                  tombstone in a batch whose horizon has passed is dropped.
#   check_keys     append-time check for compacted topics: every record of a
#                  non-control batch has a key (else InvalidRecordError, 87).
#   empty_batch    a batch's header alone (Kafka's RETAIN_EMPTY), for the
#                  cleaner's aborted-transaction and marker removal.
#   with_delete_horizon  a copy of an uncompressed batch (a transaction
#                  marker) with the KIP-534 delete horizon set, timestamps kept.
#
# Inputs are complete, structure-checked batches; a record that fails to parse
# raises CorruptRecordError.
from libc.stdint cimport uint16_t, uint64_t
from cpython.bytearray cimport PyByteArray_FromStringAndSize, PyByteArray_AS_STRING, PyByteArray_Resize
from libc.stdlib cimport malloc, calloc, free


cdef inline uint64_t _rotl64(uint64_t x, int r) noexcept nogil:
    return (x << r) | (x >> (64 - r))


cdef inline uint64_t _fmix64(uint64_t k) noexcept nogil:
    k ^= k >> 33
    k *= <uint64_t>0xff51afd7ed558ccd
    k ^= k >> 33
    k *= <uint64_t>0xc4ceb9fe1a85ec53
    k ^= k >> 33
    return k


cdef inline uint64_t _le64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int j
    for j in range(8):
        v |= (<uint64_t>p[j]) << (8 * j)
    return v


cdef void murmur3_128(const uint8_t* data, Py_ssize_t n, uint64_t* out1, uint64_t* out2) noexcept nogil:
    cdef uint64_t h1 = 0x9368e53c2f6af274, h2 = 0x586dcd208f7cd3fd  # fixed seeds
    cdef uint64_t c1 = 0x87c37b91114253d5, c2 = 0x4cf5ad432745937f
    cdef uint64_t k1, k2
    cdef Py_ssize_t i, nblocks = n // 16
    cdef const uint8_t* tail
    cdef int rem, j
    for i in range(nblocks):
        k1 = _le64(data + 16 * i)
        k2 = _le64(data + 16 * i + 8)
        k1 *= c1
        k1 = _rotl64(k1, 31)
        k1 *= c2
        h1 ^= k1
        h1 = _rotl64(h1, 27)
        h1 += h2
        h1 = h1 * 5 + 0x52dce729
        k2 *= c2
        k2 = _rotl64(k2, 33)
        k2 *= c1
        h2 ^= k2
        h2 = _rotl64(h2, 31)
        h2 += h1
        h2 = h2 * 5 + 0x38495ab5
    tail = data + nblocks * 16
    rem = <int>(n & 15)
    k1 = 0
    k2 = 0
    if rem > 8:
        for j in range(rem - 1, 7, -1):
            k2 ^= (<uint64_t>tail[j]) << (8 * (j - 8))
        k2 *= c2
        k2 = _rotl64(k2, 33)
        k2 *= c1
        h2 ^= k2
    if rem > 0:
        for j in range(min(rem, 8) - 1, -1, -1):
            k1 ^= (<uint64_t>tail[j]) << (8 * j)
        k1 *= c1
        k1 = _rotl64(k1, 31)
        k1 *= c2
        h1 ^= k1
    h1 ^= <uint64_t>n
    h2 ^= <uint64_t>n
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    h2 += h1
    out1[0] = h1
    out2[0] = h2


ctypedef struct MapSlot:
    uint64_t h1
    uint64_t h2
    int64_t offset_plus_one      # 0 = empty slot


cdef class OffsetMap:
    """key -> latest offset for one cleaning (see the file comment); at most `max_bytes` of slots."""
    cdef MapSlot* slots
    cdef Py_ssize_t nslots
    cdef Py_ssize_t max_slots
    cdef readonly Py_ssize_t size
    cdef readonly int64_t latest_offset

    def __cinit__(self, Py_ssize_t max_bytes=134217728, Py_ssize_t initial_slots=4096):
        self.max_slots = max(16, max_bytes // sizeof(MapSlot))
        self.nslots = min(max(16, initial_slots), self.max_slots)
        self.slots = <MapSlot*>calloc(self.nslots, sizeof(MapSlot))
        if self.slots == NULL:
            raise MemoryError()
        self.size = 0
        self.latest_offset = -1

    def __dealloc__(self):
        free(self.slots)

    @property
    def capacity(self):
        """Keys the map can hold at its full byte budget (90 % of the slots)."""
        return self.max_slots * 9 // 10

    @property
    def full(self):
        return self.size >= self.max_slots * 9 // 10

    @property
    def bytes_used(self):
        return self.nslots * sizeof(MapSlot)

    def __len__(self):
        return self.size

    cdef int _grow(self) except -1:
        cdef Py_ssize_t n = min(self.nslots * 2, self.max_slots), i, idx
        cdef MapSlot* new = <MapSlot*>calloc(n, sizeof(MapSlot))
        if new == NULL:
            raise MemoryError()
        for i in range(self.nslots):
            if self.slots[i].offset_plus_one:
                idx = <Py_ssize_t>(self.slots[i].h1 % <uint64_t>n)
                while new[idx].offset_plus_one:
                    idx += 1
                    if idx == n:
                        idx = 0
                new[idx] = self.slots[i]
        free(self.slots)
        self.slots = new
        self.nslots = n
        return 0

    cdef int put_raw(self, const uint8_t* key, Py_ssize_t n, int64_t offset) except -1:
        """1 = stored, 0 = a new key and the map is full (nothing stored)."""
        cdef uint64_t h1, h2
        cdef Py_ssize_t idx
        murmur3_128(key, n, &h1, &h2)
        if (self.size + 1) * 10 > self.nslots * 9 and self.nslots < self.max_slots:
            self._grow()
        idx = <Py_ssize_t>(h1 % <uint64_t>self.nslots)
        while self.slots[idx].offset_plus_one:
            if self.slots[idx].h1 == h1 and self.slots[idx].h2 == h2:
                self.slots[idx].offset_plus_one = offset + 1
                if offset > self.latest_offset:
                    self.latest_offset = offset
                return 1
            idx += 1
            if idx == self.nslots:
                idx = 0
        if self.size >= self.max_slots * 9 // 10:
            return 0
        self.slots[idx].h1 = h1
        self.slots[idx].h2 = h2
        self.slots[idx].offset_plus_one = offset + 1
        self.size += 1
        if offset > self.latest_offset:
            self.latest_offset = offset
        return 1

    cdef inline int64_t get_raw(self, const uint8_t* key, Py_ssize_t n) noexcept nogil:
        """The offset stored for the key, -1 if none."""
        cdef uint64_t h1, h2
        cdef Py_ssize_t idx
        murmur3_128(key, n, &h1, &h2)
        idx = <Py_ssize_t>(h1 % <uint64_t>self.nslots)
        while self.slots[idx].offset_plus_one:
            if self.slots[idx].h1 == h1 and self.slots[idx].h2 == h2:
                return self.slots[idx].offset_plus_one - 1
            idx += 1
            if idx == self.nslots:
                idx = 0
        return -1

    def put(self, key, int64_t offset):
        """Store key -> offset; False if the key is new and the map is full."""
        cdef const uint8_t[::1] k = key
        if offset < 0:
            raise ValueError("negative offset")
        return self.put_raw(&k[0] if k.shape[0] else <const uint8_t*>b"", k.shape[0], offset) == 1

    def get(self, key):
        """The offset stored for `key`, or -1."""
        cdef const uint8_t[::1] k = key
        return self.get_raw(&k[0] if k.shape[0] else <const uint8_t*>b"", k.shape[0])


def index_keys(data, Py_ssize_t start, Py_ssize_t end, OffsetMap offset_map, int64_t max_offset,
               path=None, Py_ssize_t base_position=0, Py_ssize_t max_size=MAX_DECOMPRESSED_DEFAULT,
               skip=None):
    """offset_map[key] = offset for every keyed record below `max_offset` in data[start:end].

    Walks complete batches only (stops at a partial tail, or as soon as a new
    key does not fit).  `skip`: a set of base offsets of batches to leave out
    (aborted transactions' batches: their keys must not hide older records).
    Returns (records_seen, end_position, last_offset_seen, stopped_full).
    """
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t pos, size
    cdef int st, i
    cdef int64_t base, off, last_seen = -1
    cdef int32_t count
    cdef BatchPayload pl
    cdef const uint8_t* p
    cdef RecordView rv
    cdef Py_ssize_t nrec = 0
    end = resolve_end(mv.shape[0], start, end)
    pos = start
    while pos < end:
        st = check_batch(&mv[pos], end - pos, False, &size)
        if st == WALK_PARTIAL or st == WALK_ZERO_TAIL:
            break
        if st != WALK_OK:
            raise corrupt(walk_reason(st), path, base_position + pos)
        base = load_i64(&mv[pos] + OFF_BASE_OFFSET)
        if base >= max_offset:
            break
        if skip is not None and base in skip:
            pos += size
            continue
        if not (load_u16(&mv[pos] + OFF_ATTRIBUTES) & ATTR_CONTROL):
            count = load_i32(&mv[pos] + OFF_RECORDS_COUNT)
            pl = batch_payload(&mv[pos], size, max_size, path, base_position + pos)
            p = pl.start
            i = 0
            while p < pl.end:
                st = parse_record(p, pl.end, &rv)
                if st != REC_OK or i >= count:
                    raise corrupt(record_reason(st, i, p - pl.start), path, base_position + pos)
                off = base + rv.offset_delta
                if off >= max_offset:
                    break
                if rv.key_len >= 0 and not offset_map.put_raw(rv.key, rv.key_len, off):
                    return nrec, pos, last_seen, True
                last_seen = off
                nrec += 1
                p = rv.end
                i += 1
        pos += size
    return nrec, pos, last_seen, False


def check_keys(buf, topic_partition=None, Py_ssize_t max_size=MAX_DECOMPRESSED_DEFAULT):
    """Raise InvalidRecordError if a record of a non-control batch in `buf` has a null key."""
    cdef const uint8_t[::1] mv = buf
    cdef Py_ssize_t pos = 0, n = mv.shape[0], size
    cdef int st, i
    cdef BatchPayload pl
    cdef const uint8_t* p
    cdef RecordView rv
    while pos < n:
        st = check_batch(&mv[pos], n - pos, False, &size)
        if st != WALK_OK:
            raise corrupt(walk_reason(st), None, pos)
        if not (load_u16(&mv[pos] + OFF_ATTRIBUTES) & ATTR_CONTROL):
            pl = batch_payload(&mv[pos], size, max_size, None, pos)
            p = pl.start
            i = 0
            while p < pl.end:
                st = parse_record(p, pl.end, &rv)
                if st != REC_OK:
                    raise corrupt(record_reason(st, i, p - pl.start), None, pos)
                if rv.key_len < 0:
                    raise invalid_record(
                        "Compacted topic cannot accept message without key in topic partition %s"
                        % (topic_partition if topic_partition is not None else "?"))
                p = rv.end
                i += 1
        pos += size


cdef inline Py_ssize_t _rebase_record(const uint8_t* p, const uint8_t* rec_end, int64_t base_ts,
                                      int64_t new_base_ts, uint8_t* w) noexcept nogil:
    """Write the (parsed, valid) record [p, rec_end) to `w` with its timestampDelta re-based from
    `base_ts` to `new_base_ts`; the bytes written.  Record: length varint | attributes |
    timestampDelta varlong | rest."""
    cdef int32_t old_len
    cdef int64_t ts_delta
    cdef int k = read_varint(p, rec_end, &old_len)
    cdef uint8_t attr_byte = p[k]
    cdef const uint8_t* q = p + k + 1
    q += read_varlong(q, rec_end, &ts_delta)
    cdef Py_ssize_t rest = rec_end - q
    ts_delta = base_ts + ts_delta - new_base_ts
    cdef Py_ssize_t n = write_varint(w, <int32_t>(1 + varlong_size(ts_delta) + rest))
    w[n] = attr_byte
    n += 1
    n += write_varlong(w + n, ts_delta)
    memcpy(w + n, q, rest)
    return n + rest


cdef bytearray _empty_batch(const uint8_t* src, int64_t timestamp):
    """Kafka's writeEmptyHeader: the header alone, no records, same last offset and producer fields."""
    cdef bytearray out = PyByteArray_FromStringAndSize(<const char*>src, BATCH_HEADER_SIZE)
    cdef uint8_t* w = <uint8_t*>PyByteArray_AS_STRING(out)
    cdef uint16_t attrs = load_u16(src + OFF_ATTRIBUTES) & ~(<uint16_t>(ATTR_CODEC_MASK | ATTR_DELETE_HORIZON))
    store_i32(w + OFF_BATCH_LENGTH, MIN_BATCH_LENGTH)
    store_u16(w + OFF_ATTRIBUTES, attrs)
    store_i64(w + OFF_BASE_TIMESTAMP, timestamp)
    store_i64(w + OFF_MAX_TIMESTAMP, timestamp)
    store_i32(w + OFF_RECORDS_COUNT, 0)
    store_u32(w + OFF_CRC, crc_of(w + OFF_ATTRIBUTES, BATCH_HEADER_SIZE - OFF_ATTRIBUTES))
    return out


def compact_batch(data, Py_ssize_t position, OffsetMap offset_map, int64_t now_ms,
                  int64_t delete_retention_ms, bint retain_empty=False, path=None,
                  Py_ssize_t max_size=MAX_DECOMPRESSED_DEFAULT):
    """Filter the batch at data[position:] against `offset_map` (see the file comment).

    A record is kept when it has a key, no later offset of that key is in the
    map, and it is not a tombstone past its batch's delete horizon.  Returns
    (out, kept, removed, tombstones_removed, tombstones_kept) where `out` is None (keep the
    batch byte for byte), b"" (drop it) or a bytearray (the rewritten batch).
    With `retain_empty` a batch left without records becomes an empty batch
    (header only) instead of being dropped.
    """
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* b
    cdef Py_ssize_t size
    cdef int st
    cdef uint16_t attrs
    cdef int32_t count
    cdef BatchPayload pl
    cdef char* keep_flags = NULL
    if position < 0 or position >= mv.shape[0]:
        raise ValueError("position outside the buffer")
    st = check_batch(&mv[position], mv.shape[0] - position, False, &size)
    if st != WALK_OK:
        raise corrupt(walk_reason(st), path, position)
    b = &mv[position]
    attrs = load_u16(b + OFF_ATTRIBUTES)
    if attrs & ATTR_CONTROL:
        return None, 0, 0, 0, 0
    count = load_i32(b + OFF_RECORDS_COUNT)
    if count == 0:
        return None, 0, 0, 0, 0
    pl = batch_payload(b, size, max_size, path, position)
    keep_flags = <char*>malloc(count + 1)
    if keep_flags == NULL:
        raise MemoryError()
    try:
        return _compact_payload(b, size, pl, keep_flags, count, offset_map, now_ms, delete_retention_ms,
                                retain_empty, path, position)
    finally:
        free(keep_flags)


cdef object _compact_payload(const uint8_t* b, Py_ssize_t size, BatchPayload pl, char* keep_flags,
                             int32_t count, OffsetMap offset_map, int64_t now_ms, int64_t delete_retention_ms,
                             bint retain_empty, object path, Py_ssize_t position):
    cdef Py_ssize_t i
    cdef int st
    cdef uint16_t attrs = load_u16(b + OFF_ATTRIBUTES)
    cdef int64_t base = load_i64(b + OFF_BASE_OFFSET)
    cdef int64_t base_ts = load_i64(b + OFF_BASE_TIMESTAMP)
    cdef int64_t horizon = -1, new_base_ts, off, ts, max_ts = -1
    cdef int32_t kept = 0, removed = 0, tomb_removed = 0, tomb_kept = 0
    cdef bint has_horizon = (attrs & ATTR_DELETE_HORIZON) != 0
    cdef bint set_horizon = False, keep
    cdef bint log_append = (attrs & ATTR_TIMESTAMP_TYPE) != 0
    cdef const uint8_t* p
    cdef RecordView rv
    cdef int64_t found
    cdef bytearray payload, out
    cdef uint8_t* w
    cdef Py_ssize_t wpos
    if has_horizon:
        horizon = base_ts
    # Pass 1: decide.
    p = pl.start
    i = 0
    while p < pl.end:
        st = parse_record(p, pl.end, &rv)
        if st != REC_OK or i >= count:
            raise corrupt(record_reason(st, i, p - pl.start), path, position)
        off = base + rv.offset_delta
        keep = rv.key_len >= 0
        if keep:
            found = offset_map.get_raw(rv.key, rv.key_len)
            if found >= 0 and off < found:
                keep = False
        if keep and rv.value_len < 0:
            if has_horizon:
                if now_ms >= horizon:
                    keep = False
                    tomb_removed += 1
            else:
                set_horizon = True
            if keep:
                tomb_kept += 1
        if keep:
            kept += 1
            ts = base_ts + rv.ts_delta
            if ts > max_ts:
                max_ts = ts
        else:
            removed += 1
        keep_flags[i] = keep
        p = rv.end
        i += 1
    if i != count:
        raise corrupt("recordsCount is %d but the payload holds %d records" % (count, i), path, position)
    if removed == 0 and not set_horizon:
        return None, kept, 0, 0, tomb_kept
    if kept == 0:
        if retain_empty:
            return _empty_batch(b, load_i64(b + OFF_MAX_TIMESTAMP)), 0, removed, tomb_removed, 0
        return b"", 0, removed, tomb_removed, 0
    # Pass 2: the kept records, re-based on the horizon when one is set now.
    new_base_ts = base_ts
    if set_horizon:
        horizon = now_ms + delete_retention_ms
        new_base_ts = horizon
    elif has_horizon:
        new_base_ts = horizon
    payload = PyByteArray_FromStringAndSize(NULL, (pl.end - pl.start) + 16 * <Py_ssize_t>kept)
    w = <uint8_t*>PyByteArray_AS_STRING(payload)
    wpos = 0
    p = pl.start
    i = 0
    while p < pl.end:
        parse_record(p, pl.end, &rv)
        if keep_flags[i]:
            if new_base_ts == base_ts:
                memcpy(w + wpos, p, rv.end - p)
                wpos += rv.end - p
            else:
                wpos += _rebase_record(p, rv.end, base_ts, new_base_ts, w + wpos)
        p = rv.end
        i += 1
    PyByteArray_Resize(payload, wpos)
    codec = attrs & ATTR_CODEC_MASK
    if codec != CODEC_NONE:
        body = compress(codec, payload)
    else:
        body = payload
    out = PyByteArray_FromStringAndSize(NULL, BATCH_HEADER_SIZE + len(body))
    w = <uint8_t*>PyByteArray_AS_STRING(out)
    memcpy(w, b, BATCH_HEADER_SIZE)
    memcpy(w + BATCH_HEADER_SIZE, PyByteArray_AS_STRING(body) if codec == CODEC_NONE
           else PyBytes_AS_STRING(body), len(body))
    store_i32(w + OFF_BATCH_LENGTH, <int32_t>(BATCH_HEADER_SIZE - LOG_OVERHEAD + len(body)))
    if set_horizon or has_horizon:
        attrs |= ATTR_DELETE_HORIZON
    store_u16(w + OFF_ATTRIBUTES, attrs)
    store_i64(w + OFF_BASE_TIMESTAMP, new_base_ts)
    if not log_append:
        store_i64(w + OFF_MAX_TIMESTAMP, max_ts)
    store_i32(w + OFF_RECORDS_COUNT, kept)
    store_u32(w + OFF_CRC, crc_of(w + OFF_ATTRIBUTES, len(out) - OFF_ATTRIBUTES))
    return out, kept, removed, tomb_removed, tomb_kept


def empty_batch(data, Py_ssize_t position=0):
    """The header alone of the batch at `position` (no records, same offsets and producer fields)."""
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t size
    if position < 0 or position >= mv.shape[0]:
        raise ValueError("position outside the buffer")
    if check_batch(&mv[position], mv.shape[0] - position, False, &size) != WALK_OK:
        raise corrupt("not a complete batch", None, position)
    return _empty_batch(&mv[position], load_i64(&mv[position] + OFF_MAX_TIMESTAMP))


def with_delete_horizon(data, Py_ssize_t position, int64_t horizon_ms):
    """A copy of the uncompressed batch at `position` with the delete horizon (attribute 0x40,
    baseTimestamp = `horizon_ms`) set and record timestamp deltas re-based, or None when the
    batch is compressed or already has a horizon."""
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t size, wpos
    cdef const uint8_t* b
    cdef const uint8_t* p
    cdef const uint8_t* end
    cdef uint16_t attrs
    cdef int64_t base_ts
    cdef int st
    cdef RecordView rv
    cdef bytearray out
    cdef uint8_t* w
    if position < 0 or position >= mv.shape[0]:
        raise ValueError("position outside the buffer")
    if check_batch(&mv[position], mv.shape[0] - position, False, &size) != WALK_OK:
        raise corrupt("not a complete batch", None, position)
    b = &mv[position]
    attrs = load_u16(b + OFF_ATTRIBUTES)
    if (attrs & ATTR_CODEC_MASK) != CODEC_NONE or (attrs & ATTR_DELETE_HORIZON):
        return None
    base_ts = load_i64(b + OFF_BASE_TIMESTAMP)
    out = PyByteArray_FromStringAndSize(NULL, size + 16 * <Py_ssize_t>load_i32(b + OFF_RECORDS_COUNT) + 16)
    w = <uint8_t*>PyByteArray_AS_STRING(out)
    memcpy(w, b, BATCH_HEADER_SIZE)
    wpos = BATCH_HEADER_SIZE
    p = b + BATCH_HEADER_SIZE
    end = b + size
    while p < end:
        st = parse_record(p, end, &rv)
        if st != REC_OK:
            raise corrupt(record_reason(st, 0, p - b), None, position)
        wpos += _rebase_record(p, rv.end, base_ts, horizon_ms, w + wpos)
        p = rv.end
    PyByteArray_Resize(out, wpos)
    w = <uint8_t*>PyByteArray_AS_STRING(out)
    store_i32(w + OFF_BATCH_LENGTH, <int32_t>(wpos - LOG_OVERHEAD))
    store_u16(w + OFF_ATTRIBUTES, attrs | ATTR_DELETE_HORIZON)
    store_i64(w + OFF_BASE_TIMESTAMP, horizon_ms)
    store_u32(w + OFF_CRC, crc_of(w + OFF_ATTRIBUTES, wpos - OFF_ATTRIBUTES))
    return out
