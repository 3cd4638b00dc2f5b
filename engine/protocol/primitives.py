"""Kafka protocol primitive types: a bounds-checked reader and a bytearray writer.

Encodings (apache/kafka ``protocol/types/Type.java``), all big-endian:

    INT8/16/32/64        fixed width, signed
    UNSIGNED_VARINT      LEB128, no zigzag, at most 5 bytes (uint32)
    STRING               int16 N + UTF-8; NULLABLE_STRING: N = -1 is null
    COMPACT_STRING       uvarint N+1 + UTF-8; COMPACT_NULLABLE: 0 is null
    BYTES                int32 N + bytes; NULLABLE: -1 is null
    COMPACT_BYTES        uvarint N+1 + bytes; 0 is null
    ARRAY                int32 N; -1 null.  COMPACT_ARRAY: uvarint N+1; 0 null
    TAG_BUFFER           uvarint count, then (uvarint tag, uvarint size, bytes)
                         in strictly ascending tag order

Contract: :class:`Reader` reads inside one frame (a memoryview).  Every claimed
length is checked against the bytes that remain BEFORE anything is sliced or
allocated; array counts are checked against the remaining bytes too (every
element takes at least one byte), so a hostile count can never make us build
a huge list.  Any violation raises :class:`~engine.errors.InvalidRequestError`
(a ProtocolError).  Byte fields come back as memoryview slices of the frame
(zero copy).  No I/O here; not thread-safe (one Reader per frame).
"""

from __future__ import annotations

import struct

from ..errors import InvalidRequestError

__all__ = ["Reader", "Writer"]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")


class Reader:
    """A cursor over one frame; every read is bounds-checked (see module docstring)."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf, pos: int = 0, end: int | None = None):
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        if self.buf.ndim != 1 or self.buf.itemsize != 1:
            self.buf = self.buf.cast("B")
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        if n < 0 or n > self.end - self.pos:
            raise InvalidRequestError(
                f"{what}: needs {n} bytes at position {self.pos}, {self.end - self.pos} remain")
        p = self.pos
        self.pos = p + n
        return p

    # -- fixed width -----------------------------------------------------
    def int8(self) -> int:
        return _I8.unpack_from(self.buf, self._need(1, "int8"))[0]

    def boolean(self) -> bool:
        return self.int8() != 0

    def int16(self) -> int:
        return _I16.unpack_from(self.buf, self._need(2, "int16"))[0]

    def int32(self) -> int:
        return _I32.unpack_from(self.buf, self._need(4, "int32"))[0]

    def uint32(self) -> int:
        return _U32.unpack_from(self.buf, self._need(4, "uint32"))[0]

    def int64(self) -> int:
        return _I64.unpack_from(self.buf, self._need(8, "int64"))[0]

    def float64(self) -> float:
        return _F64.unpack_from(self.buf, self._need(8, "float64"))[0]

    def uuid(self) -> bytes:
        p = self._need(16, "uuid")
        return bytes(self.buf[p:p + 16])

    # -- varints -----------------------------------------------------------
    def uvarint(self) -> int:
        """Unsigned LEB128, at most 5 bytes / 32 bits."""
        result = 0
        shift = 0
        buf, pos, end = self.buf, self.pos, self.end
        while True:
            if pos >= end:
                raise InvalidRequestError(f"unsigned varint runs past the frame at {self.pos}")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise InvalidRequestError(f"unsigned varint longer than 5 bytes at {self.pos}")
        if result > 0xFFFFFFFF:
            raise InvalidRequestError(f"unsigned varint {result} exceeds 32 bits")
        self.pos = pos
        return result

    # -- strings -----------------------------------------------------------
    def _text(self, n: int, what: str) -> str:
        p = self._need(n, what)
        try:
            return str(self.buf[p:p + n], "utf-8")
        except UnicodeDecodeError as e:
            raise InvalidRequestError(f"{what} is not valid UTF-8") from e

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise InvalidRequestError(f"non-nullable string with length {n}")
        return self._text(n, "string")

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise InvalidRequestError(f"string length {n}")
        return self._text(n, "nullable string")

    def compact_string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise InvalidRequestError("null in a non-nullable compact string")
        return self._text(n - 1, "compact string")

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._text(n - 1, "compact nullable string")

    # -- bytes (zero-copy views) -------------------------------------------
    def _view(self, n: int, what: str) -> memoryview:
        p = self._need(n, what)
        return self.buf[p:p + n]

    def nullable_bytes(self) -> memoryview | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise InvalidRequestError(f"bytes length {n}")
        return self._view(n, "bytes")

    def compact_nullable_bytes(self) -> memoryview | None:
        n = self.uvarint()
        return None if n == 0 else self._view(n - 1, "compact bytes")

    def bytes_(self, flexible: bool) -> memoryview:
        v = self.compact_nullable_bytes() if flexible else self.nullable_bytes()
        if v is None:
            raise InvalidRequestError("null in a non-nullable bytes field")
        return v

    # -- arrays --------------------------------------------------------------
    def array_length(self, flexible: bool, nullable: bool = False, min_item: int = 1) -> int:
        """Element count of an ARRAY / COMPACT_ARRAY; -1 for null (when allowed).

        The count is refused when count * min_item exceeds the remaining bytes.
        """
        if flexible:
            n = self.uvarint() - 1
        else:
            n = self.int32()
        if n < 0:
            if n == -1 and nullable:
                return -1
            raise InvalidRequestError(f"array length {n}")
        if n * min_item > self.end - self.pos:
            raise InvalidRequestError(
                f"array claims {n} elements but only {self.end - self.pos} bytes remain")
        return n

    def string_f(self, flexible: bool) -> str:
        return self.compact_string() if flexible else self.string()

    def nullable_string_f(self, flexible: bool) -> str | None:
        return self.compact_nullable_string() if flexible else self.nullable_string()

    # -- tagged fields -------------------------------------------------------
    def tagged_fields(self) -> dict[int, memoryview]:
        """Read a TAG_BUFFER; returns {tag: raw bytes}.  Tags must ascend strictly."""
        count = self.uvarint()
        if count > self.end - self.pos:
            raise InvalidRequestError(f"{count} tagged fields claimed, {self.end - self.pos} bytes remain")
        out: dict[int, memoryview] = {}
        last = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= last:
                raise InvalidRequestError(f"tagged field {tag} after {last}: tags must ascend")
            last = tag
            size = self.uvarint()
            out[tag] = self._view(size, f"tagged field {tag}")
        return out

    def done(self) -> None:
        """Trailing bytes after a struct whose size was given (a tagged field, a stored record)
        are an error."""
        if self.pos != self.end:
            raise InvalidRequestError(f"{self.end - self.pos} unexpected bytes after the request body")

    def rest(self) -> int:
        """Bytes left after a complete request body.  Kafka parses a request from its header
        to the end of the body's schema and ignores what follows (librdkafka 2.16 sends one
        byte after a Metadata v9 body), so callers log this count and go on."""
        return self.end - self.pos


class Writer:
    """Appends Kafka primitives to a bytearray (``buf``)."""

    __slots__ = ("buf",)

    def __init__(self, buf: bytearray | None = None):
        self.buf = bytearray() if buf is None else buf

    def int8(self, v: int) -> Writer:
        self.buf += _I8.pack(v)
        return self

    def boolean(self, v: bool) -> Writer:
        self.buf.append(1 if v else 0)
        return self

    def int16(self, v: int) -> Writer:
        self.buf += _I16.pack(v)
        return self

    def int32(self, v: int) -> Writer:
        self.buf += _I32.pack(v)
        return self

    def int64(self, v: int) -> Writer:
        self.buf += _I64.pack(v)
        return self

    def uuid(self, v: bytes) -> Writer:
        if len(v) != 16:
            raise ValueError("a uuid is 16 bytes")
        self.buf += v
        return self

    def uvarint(self, v: int) -> Writer:
        if v < 0:
            raise ValueError("unsigned varint must be >= 0")
        buf = self.buf
        while v > 0x7F:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)
        return self

    def string(self, v: str | None, flexible: bool) -> Writer:
        """STRING / NULLABLE_STRING, or their compact forms when `flexible`."""
        if v is None:
            return self.uvarint(0) if flexible else self.int16(-1)
        data = v.encode("utf-8")
        if flexible:
            self.uvarint(len(data) + 1)
        else:
            self.int16(len(data))
        self.buf += data
        return self

    def bytes_(self, v, flexible: bool) -> Writer:
        """BYTES / NULLABLE_BYTES (compact when `flexible`); v may be any buffer or None."""
        if v is None:
            return self.uvarint(0) if flexible else self.int32(-1)
        n = len(v) if not isinstance(v, memoryview) else v.nbytes
        if flexible:
            self.uvarint(n + 1)
        else:
            self.int32(n)
        self.buf += v
        return self

    def bytes_length(self, n: int | None, flexible: bool) -> Writer:
        """Only the length prefix of a (nullable) bytes field whose body follows elsewhere."""
        if n is None:
            return self.uvarint(0) if flexible else self.int32(-1)
        return self.uvarint(n + 1) if flexible else self.int32(n)

    def array_length(self, n: int | None, flexible: bool) -> Writer:
        if n is None:
            return self.uvarint(0) if flexible else self.int32(-1)
        return self.uvarint(n + 1) if flexible else self.int32(n)

    def tagged_fields(self, fields: dict[int, bytes] | None = None) -> Writer:
        if not fields:
            self.buf.append(0)
            return self
        self.uvarint(len(fields))
        for tag in sorted(fields):
            data = fields[tag]
            self.uvarint(tag).uvarint(len(data))
            self.buf += data
        return self
