"""The Produce request body as a client writes it, and where a response's throttle time sits
(no I/O).

:func:`encode_produce` lays out ProduceRequest v3-9 (layout in ``hot_codecs``'s docstring) for
prebuilt record batches and returns it as a list of buffers -- the framing pieces with the
batches themselves between them, never copied into the request -- so the caller can hand the
list to ``sendmsg``.  Used by the clients' :class:`~engine.client.wire.WireClient` and
:class:`~engine.client.produce_pipeline.ProducePipeline`; the broker's side (parsing the
request, writing the response) is in ``hot_codecs``; :func:`produce_throttle_offset` finds
``throttle_time_ms`` in an encoded response for the quota code, which patches it in (the field
comes after every partition, and from v10 KIP-951's NodeEndpoints may follow it).  Stateless;
safe from any thread.
"""

from __future__ import annotations

from .primitives import Reader, Writer

__all__ = ["encode_produce", "produce_throttle_offset"]


def produce_throttle_offset(body, version: int) -> int:
    """The offset of ``throttle_time_ms`` (v1+) in a ProduceResponse body (no header): after the
    responses, walked (InvalidRequestError if `body` is not such a response)."""
    flex = version >= 9
    r = Reader(body)
    for _ in range(r.array_length(flex)):
        r.string_f(flex)
        for _ in range(r.array_length(flex)):
            r.int32(), r.int16(), r.int64()
            if version >= 2:
                r.int64()
            if version >= 5:
                r.int64()
            if version >= 8:
                for _ in range(r.array_length(flex)):
                    r.int32(), r.nullable_string_f(flex)
                    if flex:
                        r.tagged_fields()
                r.nullable_string_f(flex)
            if flex:
                r.tagged_fields()
        if flex:
            r.tagged_fields()
    return r.pos


def encode_produce(version: int, acks: int, timeout_ms: int, items: list,
                   transactional_id: str | None = None) -> list:
    """The body of a Produce request for [(topic, partition, [batch, ...])] as a list of
    buffers: the framing pieces and the batches themselves (not copied).  A transactional
    producer's requests carry its ``transactional.id`` (Kafka refuses its batches without it)."""
    flex = version >= 9
    by_topic: dict[str, list] = {}
    for t, p, batches in items:
        by_topic.setdefault(t, []).append((p, batches))
    w = Writer()
    w.string(transactional_id, flex)
    w.int16(acks).int32(timeout_ms)
    w.array_length(len(by_topic), flex)
    parts: list = []
    first_topic = True
    for t, plist in by_topic.items():
        if not first_topic and flex:
            w.tagged_fields()               # the previous topic's
        first_topic = False
        w.string(t, flex)
        w.array_length(len(plist), flex)
        for i, (p, batches) in enumerate(plist):
            if i and flex:
                w.tagged_fields()           # the previous partition's
            w.int32(p)
            w.bytes_length(sum(len(b) for b in batches), flex)
            parts.append(w.buf)
            parts.extend(batches)
            w = Writer()
    if flex:
        w.tagged_fields().tagged_fields().tagged_fields()
    parts.append(w.buf)
    return parts
