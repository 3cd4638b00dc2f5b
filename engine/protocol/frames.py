"""Frames and headers of the Kafka protocol (no I/O).

Every request and response is ``int32 size`` + header + body, size counting
what follows it.  Request headers (``RequestHeader.json``)::

    v1  api_key int16, api_version int16, correlation_id int32,
        client_id NULLABLE_STRING (int16 length)
    v2  v1 + TAG_BUFFER   (client_id keeps its int16 length)

(v0, without client_id, is only ControlledShutdown v0, which we do not serve.)
Response headers: v0 = correlation_id int32; v1 = v0 + TAG_BUFFER.  The header
version follows the API version's flexibility, except that every ApiVersions
response uses header v0 (KIP-511).

Framing a byte stream is the connection's (engine/server/connection.py: small
frames through a scratch buffer, large ones received in place); it refuses a
size prefix that is negative, smaller than the smallest header, or larger than
``max_request_bytes`` (Kafka's ``socket.request.max.bytes``) with
:func:`check_frame_size` as soon as the 4 prefix bytes arrive — before any body
byte is buffered, and without ever allocating from the claimed size.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import InvalidRequestError
from .primitives import Reader, Writer

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "RequestHeader",
    "check_frame_size",
    "parse_request_header",
    "response_header",
]

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024   # socket.request.max.bytes
MIN_HEADER_SIZE = 10                             # api_key, api_version, correlation_id, client_id length
_SIZE = struct.Struct(">i")
_CORR = struct.Struct(">ii")


def check_frame_size(size: int, max_request_bytes: int) -> None:
    """Refuse a size prefix that is smaller than the smallest header or larger than
    ``max_request_bytes`` (InvalidRequestError: the connection must close)."""
    if size < MIN_HEADER_SIZE or size > max_request_bytes:
        raise InvalidRequestError(f"request size {size} outside [{MIN_HEADER_SIZE}, {max_request_bytes}]")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def peek_header(frame) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame (at least 8 bytes, checked)."""
    if len(frame) < 8:
        raise InvalidRequestError("frame shorter than a request header")
    key, ver = struct.unpack_from(">hh", frame, 0)
    corr = _SIZE.unpack_from(frame, 4)[0]
    return key, ver, corr


def parse_request_header(frame, flexible: bool) -> tuple[RequestHeader, Reader]:
    """Parse header v1 (or v2 when `flexible`); returns it and a Reader positioned at the body."""
    r = Reader(frame)
    key = r.int16()
    ver = r.int16()
    corr = r.int32()
    client_id = r.nullable_string()
    if flexible:
        r.tagged_fields()
    return RequestHeader(key, ver, corr, client_id, 2 if flexible else 1), r


def response_header(correlation_id: int, flexible: bool) -> bytearray:
    """Response header v0 (or v1 with an empty tag buffer when `flexible`), without the size prefix."""
    w = Writer()
    w.int32(correlation_id)
    if flexible:
        w.tagged_fields()
    return w.buf
