# What Cython's own posix/ package lacks (see ../shared style notes):
# sendfile(2) and Linux fallocate(2) with its FALLOC_FL_* flags.
# fdatasync, posix_fadvise and posix_fallocate are cimported from posix.*.
from posix.types cimport off_t

cdef extern from "<sys/sendfile.h>" nogil:
    ssize_t sendfile(int out_fd, int in_fd, off_t *offset, size_t count)

cdef extern from "<fcntl.h>" nogil:
    int fallocate(int fd, int mode, off_t offset, off_t len)
    enum:
        FALLOC_FL_KEEP_SIZE
        FALLOC_FL_PUNCH_HOLE
        FALLOC_FL_ZERO_RANGE
