"""SegmentFile and FileSlice: the file handles segment reads hand out.

SegmentFile is an open ``.log`` descriptor closed when its last reference
goes; FileSlice is an immutable byte range of one, the value object every
read returns (sendfile, ``read()``, zero-copy ``view()``).  A slice may be
read from any thread after PartitionLog's lock is released: it keeps its
file descriptor alive by reference, so a slice of a segment deleted by
retention still reads its bytes.  ``cut_to_new_file`` is the writer's
truncation for bytes a reader may have mapped (segment.py's ``truncate_to``).
Used by segment.py (re-exported there).
"""

from __future__ import annotations

import errno
import mmap
import os

from .checkpoint import fsync_dir

__all__ = ["FileSlice", "SegmentFile", "cut_to_new_file"]

_PAGE = mmap.ALLOCATIONGRANULARITY


class SegmentFile:
    """An open `.log` file descriptor, closed when the last reference goes away.

    LogSegment and every FileSlice of it hold a reference, so a reader never
    sees its fd closed (or worse, reused) under it.
    """

    __slots__ = ("fd", "path", "__weakref__")

    def __init__(self, path: str, writable: bool):
        flags = (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY
        self.path = path
        self.fd = os.open(path, flags | os.O_CLOEXEC, 0o644)

    def close(self) -> None:
        fd, self.fd = getattr(self, "fd", -1), -1  # -1 too when os.open failed in __init__
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        try:
            self.close()
        except OSError:
            pass


class FileSlice:
    """``size`` bytes of a segment's `.log` starting at ``position``.

    The value object reads return: the broker can ``sendfile(fd, position,
    size)`` it, a consumer ``read()``s it, the Arrow scanner ``view()``s it
    zero-copy.  ``end_offset`` is one past the last offset of the last
    complete batch in the slice when known (-1 otherwise).
    """

    __slots__ = ("_file", "path", "position", "size", "start_offset", "end_offset")

    def __init__(self, file: SegmentFile, position: int, size: int,
                 start_offset: int = -1, end_offset: int = -1):
        if position < 0 or size < 0:
            raise ValueError("negative position or size")
        self._file = file
        self.path = file.path
        self.position = position
        self.size = size
        self.start_offset = start_offset
        self.end_offset = end_offset

    @property
    def fd(self) -> int:
        return self._file.fd

    def read(self) -> bytes:
        """The bytes (os.pread, may be fewer if the file was truncated since)."""
        if self.size == 0:
            return b""
        out = os.pread(self._file.fd, self.size, self.position)
        if len(out) < self.size:
            parts = [out]
            got = len(out)
            while got < self.size:
                chunk = os.pread(self._file.fd, self.size - got, self.position + got)
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
            out = b"".join(parts)
        return out

    def view(self) -> memoryview:
        """A read-only memoryview of exactly this range over a fresh mmap (zero-copy).

        Only for batches below the high watermark (every reader's bound): a
        page past the file's end is SIGBUS, not an exception, and the writer
        cuts below the high watermark only into a new file (``cut_to_new_file``),
        which leaves this mapping whole.  Bytes above it may be cut in place at
        any time: read those with ``read()``.
        """
        if self.size == 0:
            return memoryview(b"")
        start = self.position - self.position % _PAGE
        m = mmap.mmap(self._file.fd, self.position + self.size - start, mmap.MAP_SHARED,
                      mmap.PROT_READ, offset=start)
        return memoryview(m)[self.position - start:]

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return (f"FileSlice({os.path.basename(self.path)!r}, position={self.position}, "
                f"size={self.size}, offsets=[{self.start_offset}, {self.end_offset}))")


def cut_to_new_file(old: SegmentFile, length: int) -> SegmentFile:
    """The first `length` bytes of `old` in a new file renamed over its path, opened writable.

    How the writer truncates a segment whose cut bytes a reader may have
    mapped (``view()``, here or in another process): ``ftruncate`` under a
    mapping makes the reader's next touch of a cut page SIGBUS, while the old
    inode, still open or mapped, stays whole like a deleted segment's.  The
    copy is fdatasync'd before the rename and the directory after it, so the cut
    survives a power loss (an old inode coming back would bring back the bytes a
    diverged follower or recovery removed).  On an OSError before the rename
    nothing has changed (the temporary ``.tmp`` is removed; a crash leaves one
    the loader removes); one from the directory's fsync after it is the disk's
    failure, raised as any other.
    """
    tmp = old.path + ".tmp"
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    new = SegmentFile(tmp, True)
    try:
        done = 0
        while done < length:
            n = _copy_range(old.fd, new.fd, length - done, done)
            if n <= 0:
                raise OSError(errno.EIO, f"{old.path} ended at byte {done} of {length} while copying")
            done += n
        os.fdatasync(new.fd)
        os.replace(tmp, old.path)
        fsync_dir(os.path.dirname(os.path.abspath(old.path)))
    except BaseException:
        new.close()
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    new.path = old.path
    return new


def _copy_range(src: int, dst: int, n: int, pos: int) -> int:
    try:
        return os.copy_file_range(src, dst, n, pos, pos)
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    return os.pwrite(dst, os.pread(src, min(n, 1 << 20), pos), pos)
