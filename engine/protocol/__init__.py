"""The Kafka wire protocol, without I/O: primitives, frames and headers, message codecs.

Bytes in, objects or bytes out — fuzzable without sockets (house rule 12).
See ``primitives`` for the encodings, ``frames`` for framing and headers,
``api_keys`` for the APIs and versions served, ``messages`` for their codecs
(``hot_codecs`` and ``schema_codec``, re-exported), ``produce`` and ``fetch``
for the clients' side of Produce and Fetch.
"""

from .api_keys import FLEXIBLE_FROM, SUPPORTED, ApiKey, is_flexible
from .frames import (
    DEFAULT_MAX_REQUEST_BYTES,
    RequestHeader,
    parse_request_header,
    response_header,
)
from .primitives import Reader, Writer

__all__ = [
    "ApiKey",
    "DEFAULT_MAX_REQUEST_BYTES",
    "FLEXIBLE_FROM",
    "Reader",
    "RequestHeader",
    "SUPPORTED",
    "Writer",
    "is_flexible",
    "parse_request_header",
    "response_header",
]
