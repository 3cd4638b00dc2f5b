"""Shared test helpers: building batches by hand through the native builder."""

from __future__ import annotations

import struct

from engine import _native

CODECS = (0, 1, 2, 3, 4)


def batch(values, base_offset=0, codec=0, timestamp=1_000, **kw):
    """A batch with the given values (key None, timestamps timestamp, +1, ...)."""
    b = _native.BatchBuilder()
    for i, v in enumerate(values):
        b.append(v, timestamp=timestamp + i)
    return b.build(codec=codec, base_offset=base_offset, **kw)


def recrc(buf: bytearray, pos: int = 0) -> None:
    """Recompute the CRC of the batch at pos in a writable buffer."""
    size = struct.unpack_from(">i", buf, pos + 8)[0] + 12
    struct.pack_into(">I", buf, pos + 17, _native.crc32c(bytes(buf[pos + 21:pos + size])))


def control_batch(base_offset=0, commit=True, producer_id=7, epoch=0) -> bytes:
    """A COMMIT/ABORT transaction marker (attributes 0x30, one record)."""
    b = _native.BatchBuilder()
    b.append(struct.pack(">hi", 0, 5), key=struct.pack(">hh", 0, 1 if commit else 0), timestamp=5)
    data = bytearray(b.build(base_offset=base_offset, producer_id=producer_id, producer_epoch=epoch,
                             is_transactional=True))
    struct.pack_into(">h", data, 21, 0x30)
    recrc(data)
    return bytes(data)
