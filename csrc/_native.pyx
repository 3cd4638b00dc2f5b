# cython: language_level=3
# The engine's native core, one extension module (engine._native).  The
# subsystems are `include`d in dependency order; each file opens with the
# byte layout it handles and its concurrency rule.  Boundary: bytes and file
# descriptors here; policy and concurrency in engine/ (Python).
include "consts.pxi"
include "errors.pxi"
include "crc.pyx"
include "batch.pyx"
include "codec.pyx"
include "records.pyx"
include "builder.pyx"
include "columns.pyx"
include "scan.pyx"
include "producer.pyx"
include "wire.pyx"
include "index.pyx"
include "fileio.pyx"
include "compact.pyx"
