# Inline big-endian readers/writers over raw pointers; no allocation, no
# bounds checks (callers check lengths first).
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef inline uint16_t load_u16(const uint8_t* p) noexcept nogil:
    return (<uint16_t>p[0] << 8) | p[1]

cdef inline int16_t load_i16(const uint8_t* p) noexcept nogil:
    return <int16_t>load_u16(p)

cdef inline uint32_t load_u32(const uint8_t* p) noexcept nogil:
    return ((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) |
            (<uint32_t>p[2] << 8) | <uint32_t>p[3])

cdef inline int32_t load_i32(const uint8_t* p) noexcept nogil:
    return <int32_t>load_u32(p)

cdef inline int64_t load_i64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t>load_u32(p) << 32) | <uint64_t>load_u32(p + 4))

cdef inline void store_u16(uint8_t* p, uint16_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8); p[1] = <uint8_t>v

cdef inline void store_u32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = <uint8_t>(v >> 24); p[1] = <uint8_t>(v >> 16)
    p[2] = <uint8_t>(v >> 8); p[3] = <uint8_t>v

cdef inline void store_i32(uint8_t* p, int32_t v) noexcept nogil:
    store_u32(p, <uint32_t>v)

cdef inline void store_i64(uint8_t* p, int64_t v) noexcept nogil:
    store_u32(p, <uint32_t>(<uint64_t>v >> 32)); store_u32(p + 4, <uint32_t><uint64_t>v)

# Kafka varints: zigzag then LEB128.  Returns bytes consumed, 0 on overrun or
# an over-long encoding.
cdef inline int read_varint(const uint8_t* p, const uint8_t* end, int32_t* out) noexcept nogil:
    cdef uint32_t raw = 0
    cdef int shift = 0
    cdef int n = 0
    cdef uint8_t b
    while p + n < end and n < 5:
        b = p[n]
        raw |= <uint32_t>(b & 0x7F) << shift
        n += 1
        if not (b & 0x80):
            out[0] = <int32_t>((raw >> 1) ^ (-(<int32_t>(raw & 1))))
            return n
        shift += 7
    return 0

cdef inline int read_varlong(const uint8_t* p, const uint8_t* end, int64_t* out) noexcept nogil:
    cdef uint64_t raw = 0
    cdef int shift = 0
    cdef int n = 0
    cdef uint8_t b
    while p + n < end and n < 10:
        b = p[n]
        raw |= <uint64_t>(b & 0x7F) << shift
        n += 1
        if not (b & 0x80):
            out[0] = <int64_t>((raw >> 1) ^ (-(<int64_t>(raw & 1))))
            return n
        shift += 7
    return 0

# Writes zigzag-LEB128 of v at p (room for 5 / 10 bytes must exist); returns length.
cdef inline int write_varint(uint8_t* p, int32_t v) noexcept nogil:
    cdef uint32_t z = (<uint32_t>v << 1) ^ <uint32_t>(v >> 31)
    cdef int n = 0
    while z >= 0x80:
        p[n] = <uint8_t>(z | 0x80)
        z >>= 7
        n += 1
    p[n] = <uint8_t>z
    return n + 1

cdef inline int write_varlong(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef int n = 0
    while z >= 0x80:
        p[n] = <uint8_t>(z | 0x80)
        z >>= 7
        n += 1
    p[n] = <uint8_t>z
    return n + 1

cdef inline int varint_size(int32_t v) noexcept nogil:
    cdef uint32_t z = (<uint32_t>v << 1) ^ <uint32_t>(v >> 31)
    cdef int n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n

cdef inline int varlong_size(int64_t v) noexcept nogil:
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    cdef int n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n
