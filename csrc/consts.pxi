# Constants of Kafka's on-disk format (RecordBatch v2, magic 2) and of our
# index files.  The byte layout is written down once, here and in batch.pyx.
#
# RecordBatch v2 header, all integers big-endian:
#   off size field
#     0    8 baseOffset            (not covered by the CRC; patched on append)
#     8    4 batchLength           (bytes after this field; batch = 12 + batchLength)
#    12    4 partitionLeaderEpoch  (not covered by the CRC; patched on append)
#    16    1 magic = 2
#    17    4 crc                   CRC-32C over [21, end of batch)
#    21    2 attributes            codec 0x07, tsType 0x08, txn 0x10, control 0x20, deleteHorizon 0x40
#    23    4 lastOffsetDelta
#    27    8 baseTimestamp
#    35    8 maxTimestamp
#    43    8 producerId
#    51    2 producerEpoch
#    53    4 baseSequence
#    57    4 recordsCount          (never compressed)
#    61    … records (plain, or one compressed stream holding all of them)

cdef enum:
    OFF_BASE_OFFSET = 0
    OFF_BATCH_LENGTH = 8
    OFF_LEADER_EPOCH = 12
    OFF_MAGIC = 16
    OFF_CRC = 17
    OFF_ATTRIBUTES = 21
    OFF_LAST_OFFSET_DELTA = 23
    OFF_BASE_TIMESTAMP = 27
    OFF_MAX_TIMESTAMP = 35
    OFF_PRODUCER_ID = 43
    OFF_PRODUCER_EPOCH = 51
    OFF_BASE_SEQUENCE = 53
    OFF_RECORDS_COUNT = 57
    LOG_OVERHEAD = 12            # baseOffset + batchLength
    HEADER_SIZE_UP_TO_MAGIC = 17 # a tail shorter than this is a partial batch
    MIN_BATCH_LENGTH = 49        # batchLength of an empty batch (61 - 12)
    CURRENT_MAGIC = 2

# The one header constant Python sees (engine._native.BATCH_HEADER_SIZE), for
# code that sizes whole batches; the field offsets above stay native: Python
# reads fields through BatchHeader or the batch_* peeks (batch.pyx).
cpdef enum:
    BATCH_HEADER_SIZE = 61

cdef enum:
    ATTR_CODEC_MASK = 0x07
    ATTR_TIMESTAMP_TYPE = 0x08
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40

cdef enum:
    CODEC_NONE = 0
    CODEC_GZIP = 1
    CODEC_SNAPPY = 2
    CODEC_LZ4 = 3
    CODEC_ZSTD = 4

cdef enum:
    OFFSET_INDEX_ENTRY = 8       # relativeOffset int32, position int32
    TIME_INDEX_ENTRY = 12        # timestamp int64, relativeOffset int32

# Outcomes of walking a buffer of batches; expected outcomes are codes, not
# exceptions (a short read at the tail is normal).
cdef enum:
    WALK_OK = 0
    WALK_PARTIAL = 1             # fewer bytes left than the batch claims: a torn or live tail
    WALK_BAD_MAGIC = 2
    WALK_BAD_LENGTH = 3
    WALK_BAD_CRC = 4
    WALK_BAD_OFFSETS = 5         # offsets not increasing, lastOffsetDelta < 0, count mismatch
    WALK_ZERO_TAIL = 6           # zero-filled bytes (preallocated or power-lost tail)

# Compression (codec.pyx).  A decompressed batch payload larger than this is
# treated as corrupt unless the caller passes its own bound: it stops a
# hostile frame (zstd/lz4/gzip "bomb") from allocating without limit.
cdef enum:
    MAX_DECOMPRESSED_DEFAULT = 268435456      # 256 MiB
    SNAPPY_XERIAL_BLOCK = 32768               # what snappy-java / the Java client write
    SNAPPY_XERIAL_HEADER = 16                 # magic 8 + version 4 + compatible 4
    LZ4_FLG_BLOCK_INDEPENDENT = 0x20
    LZ4_FLG_CONTENT_SIZE = 0x08

# Record layout (records.pyx, builder.pyx, scan.pyx); see records.pyx.
cdef enum:
    MAX_RECORD_OVERHEAD = 21                  # length 5 + attributes 1 + tsDelta 10 + offsetDelta 5
