# Kafka's sparse segment indexes, memory-mapped.
#
# On-disk format (no header, no checksum; rebuilt from the .log after a crash):
#   .index      8-byte entries:  relativeOffset int32 BE | position int32 BE
#               relativeOffset = offset - segment base offset; position = byte
#               position of a batch in the .log.
#   .timeindex 12-byte entries:  timestamp int64 BE | relativeOffset int32 BE
#               (T, O): the largest timestamp seen before offset O is T.
#
# Invariants (checked by sanity_check(), Kafka's AbstractIndex rules plus
# monotonicity): file length is a multiple of the entry size; offsets (and
# positions / timestamps) strictly increase; the last offset >= base offset.
# While the segment is active the file is extended to segment.index.bytes
# rounded down to the entry size, sparse (a hole reads as zeros and costs no
# disk until written, as Kafka's RandomAccessFile.setLength); resize()/trim()
# cut it to the used size on roll and close, as Kafka does.  Blocks are
# reserved with posix_fallocate a page ahead of the entries written (_reserve),
# so a full file system is an OSError(ENOSPC) at append, never a SIGBUS from a
# store into an mmap'd hole.  When an existing file is
# opened, the entry count is found by trailing-zero detection: the first
# all-zero entry past the first one marks the end.
#
# Lookups are a binary search in C over the mapped bytes; no Python object per
# probe.  Read-only opens (another process beside a writer) load a private copy
# of the file instead of sharing the mapping, so the writer's resize/rebuild
# can never fault a reader.  Concurrency: an index is NOT thread-safe.  Its owner (LogSegment,
# under PartitionLog's lock) serialises every call, including lookups, because
# resize() remaps the file.
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memset, memcpy
from posix cimport mman, unistd
from posix cimport fcntl as pfcntl
from libc.errno cimport EOPNOTSUPP, EINVAL
from posix.types cimport off_t

import os as _os

cdef Py_ssize_t _RESERVE_STEP = 4096   # posix_fallocate granularity ahead of index stores


cdef class _MappedIndex:
    """Common part of OffsetIndex and TimeIndex: the mapping and entry bookkeeping."""
    cdef uint8_t* _map
    cdef Py_ssize_t _map_len          # bytes mapped (= file length)
    cdef int _fd
    cdef int _entry
    cdef Py_ssize_t _entries
    cdef Py_ssize_t _reserved         # bytes from 0 known to have disk blocks (writable)
    cdef readonly object path
    cdef readonly int64_t base_offset
    cdef readonly bint writable

    def __cinit__(self):
        self._map = NULL
        self._map_len = 0
        self._fd = -1
        self._entries = 0
        self._reserved = 0

    cdef int _setup(self, object path, int64_t base_offset, Py_ssize_t max_index_size,
                    bint writable) except -1:
        cdef Py_ssize_t flen, slots, data_end
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        if writable:
            fd = _os.open(path, _os.O_RDWR | _os.O_CREAT | _os.O_CLOEXEC, 0o644)
        else:
            fd = _os.open(path, _os.O_RDONLY | _os.O_CLOEXEC)
        self._fd = fd
        flen = _os.fstat(fd).st_size
        newly = flen == 0
        if writable and newly and max_index_size > 0:
            # New active segment: preallocate (zero fill) to the rounded-down size.
            self._remap(max_index_size - max_index_size % self._entry)
            self._entries = 0
        else:
            # An existing file is mapped as found (so sanity_check() sees a bad
            # length); the owner resizes it once it passed the check.
            self._remap(flen)
            slots = flen // self._entry
            if writable and flen > 0:
                # Scan only the part with blocks: entries are stored in reserved blocks, and a
                # read of a hole through a shared map allocates a page on tmpfs -- SIGBUS on a
                # full one (a preallocated index left by a crash, reopened on a full disk).
                try:
                    data_end = _os.lseek(fd, 0, _os.SEEK_HOLE)
                except OSError:
                    data_end = flen
                slots = min(slots, data_end // self._entry)
            self._entries = self._find_end(slots)
        return 0

    cdef Py_ssize_t _find_end(self, Py_ssize_t slots) noexcept:
        """Entries in use: stop at the first all-zero entry past the first one."""
        cdef Py_ssize_t i, j
        cdef const uint8_t* p
        cdef bint zero
        if slots > self._map_len // self._entry:
            slots = self._map_len // self._entry
        for i in range(slots):
            p = self._map + i * self._entry
            zero = True
            for j in range(self._entry):
                if p[j] != 0:
                    zero = False
                    break
            if zero and i > 0:
                return i
            if zero and i == 0 and self._entry == TIME_INDEX_ENTRY:
                # A time index entry (0, 0) can only be real if timestamp 0 was seen;
                # treat an all-zero first slot of a zero-filled file as empty.
                if slots == 1 or self._slot_zero(1):
                    return 0
            if zero and i == 0 and self._entry == OFFSET_INDEX_ENTRY:
                # (relative 0, position 0) is never written: the first batch is never indexed.
                return 0
        return slots

    cdef bint _slot_zero(self, Py_ssize_t i) noexcept:
        cdef Py_ssize_t j
        cdef const uint8_t* p = self._map + i * self._entry
        for j in range(self._entry):
            if p[j] != 0:
                return False
        return True

    cdef int _remap(self, Py_ssize_t new_len) except -1:
        """Set the file length to new_len (writable only) and map it again."""
        cdef void* m
        cdef int prot, rc
        if self._map != NULL:
            mman.munmap(self._map, self._map_len)
            self._map = NULL
            self._map_len = 0
        if self.writable:
            if unistd.ftruncate(self._fd, <off_t>new_len) != 0:
                raise os_error(errno, self.path)
            self._reserved = 0        # the tail may be a hole now; _reserve() before stores
        if new_len <= 0:
            return 0
        if not self.writable:
            # Read-only opens work on a private copy: a writer that trims, truncates or
            # rebuilds the file can never turn a lookup into SIGBUS here.
            m = mman.mmap(NULL, <size_t>new_len, mman.PROT_READ | mman.PROT_WRITE,
                          mman.MAP_PRIVATE | mman.MAP_ANONYMOUS, -1, 0)
            if m == mman.MAP_FAILED:
                raise os_error(errno, self.path)
            self._map = <uint8_t*>m
            self._map_len = new_len
            content = _os.pread(self._fd, new_len, 0)
            if len(content):
                memcpy(self._map, <const char*>content, len(content))
            return 0
        prot = mman.PROT_READ | (mman.PROT_WRITE if self.writable else 0)
        m = mman.mmap(NULL, <size_t>new_len, prot, mman.MAP_SHARED, self._fd, 0)
        if m == mman.MAP_FAILED:
            raise os_error(errno, self.path)
        self._map = <uint8_t*>m
        self._map_len = new_len
        return 0

    cdef int _reserve(self, Py_ssize_t upto) except -1:
        """Make sure bytes [0, upto) of the file have disk blocks before a store into the
        mapping (a page at a time, rounded up, never past the file length)."""
        cdef Py_ssize_t end
        cdef int rc
        if upto <= self._reserved:
            return 0
        end = (upto + _RESERVE_STEP - 1) // _RESERVE_STEP * _RESERVE_STEP
        if end > self._map_len:
            end = self._map_len
        rc = pfcntl.posix_fallocate(self._fd, <off_t>self._reserved, <off_t>(end - self._reserved))
        if rc != 0 and rc != EOPNOTSUPP and rc != EINVAL:
            raise os_error(rc, self.path)
        self._reserved = end
        return 0

    cdef int _check_open(self) except -1:
        if self._fd < 0:
            raise ValueError("index %s is closed" % (self.path,))
        return 0

    cdef int _check_writable(self) except -1:
        self._check_open()
        if not self.writable:
            raise _errors.ReadOnlyError("index %s is open read-only" % (self.path,))
        return 0

    @property
    def entries(self):
        """Number of entries in use."""
        return self._entries

    @property
    def max_entries(self):
        return self._map_len // self._entry

    @property
    def entry_size(self):
        return self._entry

    @property
    def size(self):
        """Bytes in use (entries * entry size)."""
        return self._entries * self._entry

    @property
    def file_size(self):
        return self._map_len

    @property
    def is_full(self):
        return self._entries >= self._map_len // self._entry

    @property
    def closed(self):
        return self._fd < 0

    def resize(self, Py_ssize_t new_size):
        """Set the file length (rounded down to whole entries, never below the used size)."""
        self._check_writable()
        new_size -= new_size % self._entry
        if new_size < self._entries * self._entry:
            new_size = self._entries * self._entry
        if new_size != self._map_len:
            self._remap(new_size)
        return self._map_len

    def trim_to_valid_size(self):
        """Cut the preallocated tail off (Kafka: on roll and close)."""
        return self.resize(self._entries * self._entry)

    def reset(self):
        """Remove every entry (zeroes the used part; the file keeps its length)."""
        self._check_writable()
        if self._entries:
            memset(self._map, 0, self._entries * self._entry)
        self._entries = 0

    def load_packed(self, const uint8_t[::1] packed):
        """Replace the content with packed entries (as produced by scan_segment)."""
        cdef Py_ssize_t n = packed.shape[0], target
        self._check_writable()
        if n % self._entry:
            raise ValueError("packed entries are not a multiple of %d bytes" % self._entry)
        target = max(n, self._map_len - self._map_len % self._entry)
        # Cut the file to 0 and extend it again: old entries and any garbage past them become
        # a hole of zeros (a memset would allocate every block of a sparse file).
        self._remap(0)
        self._remap(target)
        if n:
            self._reserve(n)
            memcpy(self._map, &packed[0], n)
        self._entries = n // self._entry
        self.sanity_check()

    def packed(self):
        """The used entries as bytes."""
        self._check_open()
        if self._entries == 0:
            return b""
        return (<char*>self._map)[:self._entries * self._entry]

    def flush(self):
        """msync the used part of the mapping."""
        self._check_open()
        if self._map != NULL and self.writable:
            with nogil:
                mman.msync(self._map, self._map_len, mman.MS_SYNC)

    def close(self):
        """Unmap and close the file (the caller trims first if it wants to)."""
        if self._map != NULL:
            mman.munmap(self._map, self._map_len)
            self._map = NULL
            self._map_len = 0
        if self._fd >= 0:
            unistd.close(self._fd)
            self._fd = -1

    def __dealloc__(self):
        if self._map != NULL:
            mman.munmap(self._map, self._map_len)
            self._map = NULL
        if self._fd >= 0:
            unistd.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


cdef class OffsetIndex(_MappedIndex):
    """Sparse offset -> .log position index (`<base>.index`, 8-byte entries)."""

    def __init__(self, path, int64_t base_offset, Py_ssize_t max_index_size=-1,
                 bint writable=True):
        self._entry = OFFSET_INDEX_ENTRY
        self._setup(path, base_offset, max_index_size, writable)

    cdef inline int32_t _rel(self, Py_ssize_t i) noexcept nogil:
        return load_i32(self._map + i * OFFSET_INDEX_ENTRY)

    cdef inline int32_t _pos(self, Py_ssize_t i) noexcept nogil:
        return load_i32(self._map + i * OFFSET_INDEX_ENTRY + 4)

    cdef Py_ssize_t _slot_le(self, int64_t target) noexcept nogil:
        """Largest slot whose offset <= target, or -1."""
        cdef int64_t rel = target - self.base_offset
        cdef Py_ssize_t lo = 0, hi = self._entries - 1, mid
        if self._entries == 0 or rel < self._rel(0):
            return -1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._rel(mid) <= rel:
                lo = mid
            else:
                hi = mid - 1
        return lo

    @property
    def last_offset(self):
        """Offset of the last entry, or the base offset when empty."""
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + self._rel(self._entries - 1)

    def entry(self, Py_ssize_t n):
        """(offset, position) of entry n."""
        self._check_open()
        if n < 0 or n >= self._entries:
            raise IndexError("entry %d outside [0, %d)" % (n, self._entries))
        return self.base_offset + self._rel(n), self._pos(n)

    def append(self, int64_t offset, int64_t position):
        """Add (offset, position); both must exceed the last entry's."""
        cdef int64_t rel = offset - self.base_offset
        self._check_writable()
        if self._entries >= self._map_len // OFFSET_INDEX_ENTRY:
            raise ValueError("offset index %s is full (%d entries)" % (self.path, self._entries))
        if rel < 0 or rel > 2147483647 or position < 0 or position > 2147483647:
            raise ValueError("entry (%d, %d) does not fit segment base %d" % (offset, position, self.base_offset))
        if self._entries > 0 and (rel <= self._rel(self._entries - 1) or position <= self._pos(self._entries - 1)):
            raise ValueError("offset index entry (%d, %d) is not above the last (%d, %d)" % (
                offset, position, self.base_offset + self._rel(self._entries - 1), self._pos(self._entries - 1)))
        self._reserve((self._entries + 1) * OFFSET_INDEX_ENTRY)
        store_i32(self._map + self._entries * OFFSET_INDEX_ENTRY, <int32_t>rel)
        store_i32(self._map + self._entries * OFFSET_INDEX_ENTRY + 4, <int32_t>position)
        self._entries += 1

    def lookup(self, int64_t target):
        """(offset, position) of the greatest entry <= target; (base_offset, 0) below the first."""
        cdef Py_ssize_t s
        self._check_open()
        s = self._slot_le(target)
        if s < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel(s), self._pos(s)

    def truncate_to(self, int64_t offset):
        """Remove every entry whose offset >= `offset`."""
        cdef Py_ssize_t s, keep
        self._check_writable()
        s = self._slot_le(offset)
        if s < 0:
            keep = 0
        elif self.base_offset + self._rel(s) == offset:
            keep = s
        else:
            keep = s + 1
        if keep < self._entries:
            memset(self._map + keep * OFFSET_INDEX_ENTRY, 0, (self._entries - keep) * OFFSET_INDEX_ENTRY)
            self._entries = keep

    def sanity_check(self, int64_t log_size=-1):
        """Raise CorruptIndexError unless the index is structurally sound."""
        cdef Py_ssize_t i
        self._check_open()
        if self._map_len % OFFSET_INDEX_ENTRY != 0:
            raise _errors.CorruptIndexError(
                "index file size %d is not a multiple of %d" % (self._map_len, OFFSET_INDEX_ENTRY),
                str(self.path), None)
        for i in range(self._entries):
            if self._rel(i) < 0 or self._pos(i) < 0:
                raise _errors.CorruptIndexError("negative entry %d" % i, str(self.path), i * OFFSET_INDEX_ENTRY)
            if i > 0 and (self._rel(i) <= self._rel(i - 1) or self._pos(i) <= self._pos(i - 1)):
                raise _errors.CorruptIndexError("entry %d does not increase" % i, str(self.path),
                                                i * OFFSET_INDEX_ENTRY)
            if log_size >= 0 and self._pos(i) >= log_size:
                raise _errors.CorruptIndexError("entry %d points past the log end (%d)" % (i, log_size),
                                                str(self.path), i * OFFSET_INDEX_ENTRY)


cdef class TimeIndex(_MappedIndex):
    """Sparse timestamp -> offset index (`<base>.timeindex`, 12-byte entries)."""

    def __init__(self, path, int64_t base_offset, Py_ssize_t max_index_size=-1,
                 bint writable=True):
        self._entry = TIME_INDEX_ENTRY
        self._setup(path, base_offset, max_index_size, writable)

    cdef inline int64_t _ts(self, Py_ssize_t i) noexcept nogil:
        return load_i64(self._map + i * TIME_INDEX_ENTRY)

    cdef inline int32_t _rel(self, Py_ssize_t i) noexcept nogil:
        return load_i32(self._map + i * TIME_INDEX_ENTRY + 8)

    cdef Py_ssize_t _slot_ts_le(self, int64_t ts) noexcept nogil:
        cdef Py_ssize_t lo = 0, hi = self._entries - 1, mid
        if self._entries == 0 or ts < self._ts(0):
            return -1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._ts(mid) <= ts:
                lo = mid
            else:
                hi = mid - 1
        return lo

    cdef Py_ssize_t _slot_off_le(self, int64_t offset) noexcept nogil:
        cdef int64_t rel = offset - self.base_offset
        cdef Py_ssize_t lo = 0, hi = self._entries - 1, mid
        if self._entries == 0 or rel < self._rel(0):
            return -1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._rel(mid) <= rel:
                lo = mid
            else:
                hi = mid - 1
        return lo

    @property
    def last_entry(self):
        """(timestamp, offset) of the last entry, or (-1, base_offset) when empty."""
        if self._entries == 0:
            return -1, self.base_offset
        return self._ts(self._entries - 1), self.base_offset + self._rel(self._entries - 1)

    def entry(self, Py_ssize_t n):
        self._check_open()
        if n < 0 or n >= self._entries:
            raise IndexError("entry %d outside [0, %d)" % (n, self._entries))
        return self._ts(n), self.base_offset + self._rel(n)

    def maybe_append(self, int64_t timestamp, int64_t offset, bint skip_full_check=False):
        """Add (timestamp, offset) if timestamp exceeds the last entry's; return whether added."""
        cdef int64_t rel = offset - self.base_offset
        self._check_writable()
        if not skip_full_check and self._entries >= self._map_len // TIME_INDEX_ENTRY:
            raise ValueError("time index %s is full (%d entries)" % (self.path, self._entries))
        if rel < 0 or rel > 2147483647:
            raise ValueError("offset %d does not fit segment base %d" % (offset, self.base_offset))
        if self._entries > 0 and rel < self._rel(self._entries - 1):
            raise ValueError("time index offset %d is below the last entry's %d" % (
                offset, self.base_offset + self._rel(self._entries - 1)))
        if self._entries > 0 and timestamp <= self._ts(self._entries - 1):
            return False
        if self._entries >= self._map_len // TIME_INDEX_ENTRY:
            return False
        self._reserve((self._entries + 1) * TIME_INDEX_ENTRY)
        store_i64(self._map + self._entries * TIME_INDEX_ENTRY, timestamp)
        store_i32(self._map + self._entries * TIME_INDEX_ENTRY + 8, <int32_t>rel)
        self._entries += 1
        return True

    def lookup(self, int64_t target_timestamp):
        """(timestamp, offset) of the greatest entry with timestamp <= target; (-1, base) below."""
        cdef Py_ssize_t s
        self._check_open()
        s = self._slot_ts_le(target_timestamp)
        if s < 0:
            return -1, self.base_offset
        return self._ts(s), self.base_offset + self._rel(s)

    def truncate_to(self, int64_t offset):
        """Remove every entry whose offset >= `offset`."""
        cdef Py_ssize_t s, keep
        self._check_writable()
        s = self._slot_off_le(offset)
        if s < 0:
            keep = 0
        elif self.base_offset + self._rel(s) == offset:
            keep = s
        else:
            keep = s + 1
        # Equal offsets cannot repeat (timestamps strictly grow per offset), so keep is exact.
        if keep < self._entries:
            memset(self._map + keep * TIME_INDEX_ENTRY, 0, (self._entries - keep) * TIME_INDEX_ENTRY)
            self._entries = keep

    def sanity_check(self, int64_t next_offset=-1):
        """Raise CorruptIndexError unless sizes, order and offsets are sound."""
        cdef Py_ssize_t i
        self._check_open()
        if self._map_len % TIME_INDEX_ENTRY != 0:
            raise _errors.CorruptIndexError(
                "time index file size %d is not a multiple of %d" % (self._map_len, TIME_INDEX_ENTRY),
                str(self.path), None)
        for i in range(self._entries):
            if self._rel(i) < 0:
                raise _errors.CorruptIndexError("negative offset in entry %d" % i, str(self.path),
                                                i * TIME_INDEX_ENTRY)
            if i > 0 and (self._ts(i) <= self._ts(i - 1) or self._rel(i) < self._rel(i - 1)):
                raise _errors.CorruptIndexError("entry %d does not increase" % i, str(self.path),
                                                i * TIME_INDEX_ENTRY)
            if next_offset >= 0 and self.base_offset + self._rel(i) >= next_offset:
                raise _errors.CorruptIndexError("entry %d points past the log end offset %d" % (i, next_offset),
                                                str(self.path), i * TIME_INDEX_ENTRY)
