# Thin system-call wrappers for the storage layer: file descriptors and
# buffers in, byte counts out.  Failures raise OSError(errno) through
# errors.pxi's os_error; EINTR is retried; short writes are continued.
# "Would block" on a non-blocking socket is a return code (-EAGAIN), not an
# exception.  Every call releases the GIL around the system call, so appenders
# and the group-commit sync leader of engine/storage/log.py run in parallel.
# Concurrency: stateless; positional I/O needs no shared file offset.
from libc.errno cimport EINTR, EAGAIN
from posix cimport unistd
from posix cimport fcntl as pfcntl
from posix.types cimport off_t
from bindings cimport sysio


def pwrite_all(int fd, buf, int64_t position):
    """Write all of `buf` at `position` (retrying EINTR and short writes); return bytes written."""
    cdef const uint8_t[::1] mv = buf
    cdef Py_ssize_t n = mv.shape[0], done = 0
    cdef ssize_t w
    cdef int err = 0
    if position < 0:
        raise ValueError("negative file position")
    if n == 0:
        return 0
    with nogil:
        while done < n:
            w = unistd.pwrite(fd, &mv[0] + done, <size_t>(n - done), <off_t>(position + done))
            if w < 0:
                if errno == EINTR:
                    continue
                err = errno
                break
            if w == 0:
                err = 28  # ENOSPC: a zero-byte write means no room
                break
            done += w
    if err:
        raise os_error(err)
    return done


def fdatasync(int fd):
    """fdatasync(2), GIL released."""
    cdef int rc
    with nogil:
        rc = unistd.fdatasync(fd)
    if rc != 0:
        raise os_error(errno)


def fsync(int fd):
    """fsync(2), GIL released (directories, metadata)."""
    cdef int rc
    with nogil:
        rc = unistd.fsync(fd)
    if rc != 0:
        raise os_error(errno)


def fallocate(int fd, int64_t offset, int64_t length, int mode=0):
    """Linux fallocate(2) (mode 0 reserves blocks and extends the file)."""
    cdef int rc
    with nogil:
        rc = sysio.fallocate(fd, mode, <off_t>offset, <off_t>length)
    if rc != 0:
        raise os_error(errno)


FALLOC_FL_KEEP_SIZE = sysio.FALLOC_FL_KEEP_SIZE
FALLOC_FL_PUNCH_HOLE = sysio.FALLOC_FL_PUNCH_HOLE
POSIX_FADV_SEQUENTIAL = pfcntl.POSIX_FADV_SEQUENTIAL
POSIX_FADV_WILLNEED = pfcntl.POSIX_FADV_WILLNEED
POSIX_FADV_DONTNEED = pfcntl.POSIX_FADV_DONTNEED
POSIX_FADV_RANDOM = pfcntl.POSIX_FADV_RANDOM


def posix_fadvise(int fd, int64_t offset, int64_t length, int advice):
    """posix_fadvise(2); it returns the error number instead of setting errno."""
    cdef int rc
    with nogil:
        rc = pfcntl.posix_fadvise(fd, <off_t>offset, <off_t>length, advice)
    if rc != 0:
        raise os_error(rc)


def sendfile_nonblocking(int out_fd, int in_fd, int64_t offset, int64_t count):
    """One sendfile(2) of up to `count` bytes from in_fd at `offset`.

    Returns the bytes sent (0 at end of file), or -EAGAIN when a non-blocking
    out_fd cannot take any bytes now.  EINTR is retried; other errors raise.
    """
    cdef off_t off = <off_t>offset
    cdef ssize_t n
    cdef int err = 0
    if count < 0 or offset < 0:
        raise ValueError("negative offset or count")
    with nogil:
        while True:
            n = sysio.sendfile(out_fd, in_fd, &off, <size_t>count)
            if n < 0:
                if errno == EINTR:
                    continue
                err = errno
            break
    if n < 0:
        if err == EAGAIN:
            return -EAGAIN
        raise os_error(err)
    return n


# Aligned 8-byte atomic load/store on a shared mapping (the published high
# watermark, see engine/storage/log.py): one store, never torn for a reader
# in another process mapping the same file.
cdef extern from *:
    """
    static inline void engine_store_i64(void *p, long long v) {
        __atomic_store_n((long long *)p, v, __ATOMIC_RELEASE);
    }
    static inline long long engine_load_i64(const void *p) {
        return __atomic_load_n((const long long *)p, __ATOMIC_ACQUIRE);
    }
    """
    void engine_store_i64(void* p, long long v) nogil
    long long engine_load_i64(const void* p) nogil


def store_i64_atomic(buf, Py_ssize_t offset, long long value):
    """Store a native-endian int64 at an 8-byte aligned `offset` of a writable buffer, atomically."""
    cdef uint8_t[::1] mv = buf
    if offset < 0 or offset % 8 or offset + 8 > mv.shape[0]:
        raise ValueError("offset must be 8-byte aligned and inside the buffer")
    engine_store_i64(&mv[0] + offset, value)


def load_i64_atomic(buf, Py_ssize_t offset):
    """Load a native-endian int64 at an 8-byte aligned `offset`, atomically (read-only buffers accepted)."""
    cdef const uint8_t[::1] mv = buf
    if offset < 0 or offset % 8 or offset + 8 > mv.shape[0]:
        raise ValueError("offset must be 8-byte aligned and inside the buffer")
    return engine_load_i64(&mv[0] + offset)


# Receive buffers for request frames (engine/server/buffers.py): a bytearray
# allocated without the zero fill of bytearray(n), so its pages are touched
# only when recv() writes them, and resized in place for reuse (no copy, no
# realloc while the new length fits its capacity).  Event-loop thread only.
from cpython.bytearray cimport PyByteArray_Resize

cdef extern from "Python.h":
    ctypedef struct PyByteArrayObject:
        Py_ssize_t ob_alloc
        Py_ssize_t ob_exports
        char* ob_bytes
        char* ob_start


def new_buffer(Py_ssize_t n):
    """A bytearray of length `n` with undefined contents (the caller overwrites all of it)."""
    if n < 0:
        raise ValueError("negative size")
    return PyByteArray_FromStringAndSize(NULL, n)


def buffer_capacity(bytearray b):
    """The longest length `b` can take without a realloc."""
    cdef PyByteArrayObject* o = <PyByteArrayObject*>b
    if o.ob_alloc == 0:
        return 0
    return o.ob_alloc - (o.ob_start - o.ob_bytes) - 1   # less the trailing NUL


def buffer_exports(bytearray b):
    """How many buffer views (memoryviews, Cython views) of `b` are alive."""
    return (<PyByteArrayObject*>b).ob_exports


def set_buffer_size(bytearray b, Py_ssize_t n):
    """Set len(b) to `n` in place; bytes past the old length are undefined.  BufferError if viewed."""
    if n < 0:
        raise ValueError("negative size")
    if PyByteArray_Resize(b, n) < 0:
        raise MemoryError()  # not reached: PyByteArray_Resize raised already
