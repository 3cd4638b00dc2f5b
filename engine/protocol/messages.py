"""Request and response codecs for the APIs the broker serves (no I/O), under one name.

The broker's handlers and the clients import the codecs from here (``from ..protocol import
messages as m``); each job lives in its own module, re-exported here unchanged (the same
objects, so ``m.parse_produce_request`` costs what it did):

* ``api_keys`` — the tables: :class:`ApiKey`, ``API_NAMES``, the versions served
  (``SUPPORTED``), the first flexible versions (``FLEXIBLE_FROM``, :func:`is_flexible`), and
  :func:`ignore_trailing` for bytes after a request body.
* ``hot_codecs`` — hand-written, for the hot paths and the bootstrap: ApiVersions, the Produce
  request and response, the Fetch response (their layouts are in its docstring).
* ``schema_codec`` — kio-backed (Kafka's JSON schemas as dataclasses) for the control plane:
  :func:`decode`, :func:`encode`, :func:`read_struct`.

Stateless; safe from any thread.
"""

from __future__ import annotations

from .api_keys import API_NAMES, FLEXIBLE_FROM, SUPPORTED, ApiKey, ignore_trailing, is_flexible
from .hot_codecs import (
    FINALIZED_FEATURES,
    FINALIZED_FEATURES_EPOCH,
    SUPPORTED_FEATURES,
    FetchPartitionData,
    ProducePartition,
    ProduceRequest,
    encode_api_versions_response,
    encode_fetch_response,
    encode_produce_response,
    parse_api_versions_request,
    parse_produce_request,
)
from .schema_codec import _build as _build
from .schema_codec import _entity as _entity
from .schema_codec import decode, encode, read_struct

__all__ = [
    "API_NAMES",
    "ApiKey",
    "FINALIZED_FEATURES",
    "FINALIZED_FEATURES_EPOCH",
    "FLEXIBLE_FROM",
    "FetchPartitionData",
    "ProducePartition",
    "ProduceRequest",
    "SUPPORTED",
    "SUPPORTED_FEATURES",
    "decode",
    "encode",
    "encode_api_versions_response",
    "encode_fetch_response",
    "encode_produce_response",
    "ignore_trailing",
    "is_flexible",
    "parse_api_versions_request",
    "parse_produce_request",
    "read_struct",
]
