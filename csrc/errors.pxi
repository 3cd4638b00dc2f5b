# The only raise path of the native core.  Corruption becomes the engine's
# CorruptRecordError / InvalidRecordError (with file and position where the
# caller knows them); errno becomes the builtin OSError subclass via
# PyErr_SetFromErrno semantics (OSError(errno, strerror)).
from libc.errno cimport errno
from libc.string cimport strerror

import engine.errors as _errors

_WALK_REASONS = (
    "ok",
    "batch extends past the end of the data",
    "magic byte is not 2",
    "batchLength out of bounds",
    "CRC-32C mismatch",
    "offsets not increasing or lastOffsetDelta inconsistent",
    "zero-filled bytes where a batch should start",
)


cdef inline str walk_reason(int status):
    if 0 <= status <= 6:
        return _WALK_REASONS[status]
    return "unknown status %d" % status


cdef object corrupt(str reason, object path, Py_ssize_t position):
    return _errors.CorruptRecordError(reason, path, position if position >= 0 else None)


cdef object invalid_record(str reason):
    return _errors.InvalidRecordError(reason)


cdef object os_error(int err, object path=None):
    if path is None:
        return OSError(err, strerror(err).decode("utf-8", "replace"))
    return OSError(err, strerror(err).decode("utf-8", "replace"), path)
