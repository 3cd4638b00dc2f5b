"""The schema-driven codec for the control plane (no I/O): every API without a hand-written
codec (``hot_codecs``) — Metadata, the Fetch request, ListOffsets, CreateTopics, the group,
admin, transaction, SASL and quota APIs.

kio holds Kafka's JSON schemas as dataclasses.  :func:`decode` walks kio's dataclass schema
with our bounds-checked :class:`~engine.protocol.primitives.Reader` (kio's own native reader
trusts claimed lengths, see ``decode``) and builds kio's entity; :func:`read_struct` is the
same walk returning plain dicts (how the clients read responses).  :func:`encode` builds the
entity of the right version from plain dicts (extra keys ignored, so one handler serves all
versions) and writes it with kio's writer.  The per-class plans, type hints and writers are
cached on first use (a benign race: two threads may build the same entry).
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid as _uuid

from ..errors import InvalidRequestError
from .api_keys import API_NAMES, ignore_trailing
from .primitives import Reader

__all__ = ["decode", "encode", "read_struct"]


_REQUEST_ENTITIES: dict[tuple[int, int], type] = {}
_RESPONSE_ENTITIES: dict[tuple[int, int], type] = {}
_WRITERS: dict[type, typing.Callable] = {}


def _entity(key: int, version: int, response: bool) -> type:
    cache = _RESPONSE_ENTITIES if response else _REQUEST_ENTITIES
    cls = cache.get((key, version))
    if cls is None:
        from kio import index
        load = index.load_response_schema if response else index.load_request_schema
        cls = cache[(key, version)] = load(key, version)
    return cls


def decode(api_key: int, version: int, body) -> typing.Any:
    """Decode a request body (bytes after the header) into kio's entity for that version.

    The walk over the schema is ours, on a bounds-checked :class:`Reader`:
    kio's native reader allocates from claimed array lengths (a 5-byte
    CreateTopics body made it abort the process trying to allocate 126 GB).
    Unknown tagged fields are skipped and bytes after the body ignored, as Kafka
    does.  InvalidRequestError on any malformed input.
    """
    cls = _entity(api_key, version, False)
    r = Reader(body)
    try:
        entity = _read_entity(cls, r)
    except InvalidRequestError as e:
        raise InvalidRequestError(f"{API_NAMES.get(api_key, api_key)} v{version}: {e}") from None
    except (ValueError, TypeError, OverflowError) as e:   # a kio phantom type refused a value
        raise InvalidRequestError(f"{API_NAMES.get(api_key, api_key)} v{version}: {e}") from e
    ignore_trailing(r, api_key, version)
    return entity


_PLAN: dict[type, list] = {}


def _plan(cls: type) -> list:
    """Per field: (name, kind, is_array, nullable, tag, nested class) from kio's dataclass."""
    plan = _PLAN.get(cls)
    if plan is None:
        hints = _HINTS.get(cls)
        if hints is None:
            hints = _HINTS[cls] = typing.get_type_hints(cls)
        plan = []
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            nullable = _strip_optional(tp) is not tp
            tp = _strip_optional(tp)
            is_array = typing.get_origin(tp) is tuple
            item = typing.get_args(tp)[0] if is_array else tp
            nested = item if dataclasses.is_dataclass(item) else None
            kind = f.metadata.get("kafka_type")
            if nested is None and kind is None:
                raise TypeError(f"{cls.__name__}.{f.name}: no kafka_type")
            plan.append((f.name, kind, is_array, nullable, f.metadata.get("tag"), nested))
        _PLAN[cls] = plan
    return plan


def _read_scalar(r: Reader, kind: str, nullable: bool, flex: bool, raw: bool = False):
    if kind == "int32":
        return r.int32()
    if kind in ("int64", "datetime_i64"):
        return r.int64()
    if kind in ("int16", "error_code"):
        return r.int16()
    if kind == "int8":
        return r.int8()
    if kind == "bool":
        return r.boolean()
    if kind == "string":
        return r.nullable_string_f(flex) if nullable else r.string_f(flex)
    if kind == "timedelta_i32":
        ms = r.int32()
        return ms if raw else datetime.timedelta(milliseconds=ms)
    if kind == "timedelta_i64":
        ms = r.int64()
        return ms if raw else datetime.timedelta(milliseconds=ms)
    if kind == "uuid":
        raw = r.uuid()
        return None if (nullable and not any(raw)) else _uuid.UUID(bytes=raw)
    if kind == "float64":
        return r.float64()
    if kind in ("bytes", "records"):
        v = r.compact_nullable_bytes() if flex else r.nullable_bytes()
        if v is None and not nullable:
            raise InvalidRequestError("null in a non-nullable bytes field")
        return None if v is None else bytes(v)
    if kind == "uint16":
        v = r.int16()
        return v & 0xFFFF
    raise InvalidRequestError(f"field type {kind} is not supported by the decoder")


def _read_field(r: Reader, kind, is_array, nullable, nested, flex, as_dict=False):
    if is_array:
        n = r.array_length(flex, nullable=nullable)
        if n < 0:
            return None
        if nested is not None:
            return [_read_entity(nested, r, as_dict) for _ in range(n)] if as_dict else \
                tuple(_read_entity(nested, r) for _ in range(n))
        return tuple(_read_scalar(r, kind, False, flex, as_dict) for _ in range(n))
    if nested is not None:
        if nullable:
            present = r.int8()
            if present < 0:
                return None
        return _read_entity(nested, r, as_dict)
    return _read_scalar(r, kind, nullable, flex, as_dict)


def _read_entity(cls: type, r: Reader, as_dict: bool = False):
    """One struct of kio's schema `cls` from `r`: a kio entity, or with ``as_dict`` a plain
    dict of plain values (durations as ms ints) — how the client reads responses."""
    flex = cls.__flexible__
    kwargs = {}
    tagged = {}
    for name, kind, is_array, nullable, tag, nested in _plan(cls):
        if tag is not None:
            tagged[tag] = (name, kind, is_array, nullable, nested)
            continue
        kwargs[name] = _read_field(r, kind, is_array, nullable, nested, flex, as_dict)
    if flex:
        for tag, raw in r.tagged_fields().items():
            spec = tagged.get(tag)
            if spec is None:
                continue                      # unknown tag: skipped (KIP-482)
            name, kind, is_array, nullable, nested = spec
            sub = Reader(raw)
            kwargs[name] = _read_field(sub, kind, is_array, nullable, nested, True, as_dict)
            sub.done()
    return kwargs if as_dict else cls(**kwargs)


def read_struct(cls: type, r: Reader) -> dict:
    """A struct of kio's schema `cls` (e.g. a response entity) read from `r` as a plain dict."""
    return _read_entity(cls, r, as_dict=True)


def encode(api_key: int, version: int, data: dict, response: bool = True) -> bytes:
    """Encode a response body (no header) of `version` from plain Python values (keys the
    version lacks are ignored); ``response=False`` encodes a request body (the client's)."""
    import io

    from kio.serial import entity_writer
    cls = _entity(api_key, version, response)
    writer = _WRITERS.get(cls)
    if writer is None:
        writer = _WRITERS[cls] = entity_writer(cls)
    out = io.BytesIO()
    writer(out, _build(cls, data))
    return out.getvalue()


_HINTS: dict[type, dict] = {}


def _build(cls: type, data: dict):
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValueError(f"{cls.__name__}.{f.name} is required")
            continue
        kwargs[f.name] = _convert(hints[f.name], f.metadata.get("kafka_type"), data[f.name])
    return cls(**kwargs)


def _strip_optional(tp):
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _convert(tp, kafka_type, value):
    if value is None:
        return None
    tp = _strip_optional(tp)
    if typing.get_origin(tp) is tuple:
        item = typing.get_args(tp)[0]
        return tuple(_convert(item, kafka_type, v) for v in value)
    if dataclasses.is_dataclass(tp):
        return value if isinstance(value, tp) else _build(tp, value)
    if kafka_type == "error_code":
        from kio.schema.errors import ErrorCode
        try:
            return ErrorCode(value)
        except ValueError:
            return ErrorCode.unknown_server_error
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return value if isinstance(value, datetime.timedelta) else datetime.timedelta(milliseconds=value)
    if kafka_type == "uuid":
        if isinstance(value, _uuid.UUID):
            return value
        return _uuid.UUID(bytes=bytes(value))
    return value
