"""The Fetch response as a client or a follower reads it (no I/O).

:func:`parse_fetch_response` decodes FetchResponse v4-16 (layout in ``hot_codecs``'s docstring;
v12 adds the DivergingEpoch tagged field of KIP-320, v13 names each topic by its 16-byte id
instead of its name, v16's NodeEndpoints / CurrentLeader tagged fields are skipped) into one
:class:`FetchResult` per topic-partition.  The records fields stay memoryviews of the frame: no record batch is copied
or decoded here.  Used by the clients' :class:`~engine.client.wire.WireClient` and by the
broker's follower (:class:`~engine.replica.fetcher.ReplicaFetcher`); the broker's side (writing
the response) is ``hot_codecs.encode_fetch_response``.

Errors: bytes that are not such a response -- a length past the frame, an array count the
remaining bytes cannot hold, bad UTF-8, an error code Kafka does not define -- raise
:class:`~engine.errors.InvalidRequestError` (the bounds-checked
:class:`~engine.protocol.primitives.Reader`'s error); the caller drops the connection.
Stateless; safe from any thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ErrorCode, InvalidRequestError
from .primitives import Reader

__all__ = ["FetchResult", "parse_fetch_response"]


@dataclass
class FetchResult:
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview           # raw record batches (possibly a partial batch at the end)
    last_stable_offset: int = -1
    aborted_transactions: list | None = None   # read_committed: [(producer_id, first_offset)]
    diverging_epoch: tuple[int, int] | None = None   # v12+ (KIP-320): (epoch, end_offset) to truncate to


def _known_error(code: int) -> int:
    """`code` if Kafka defines it; an error code no Kafka sends means the frame is not a
    response (raised as unparseable, so the caller drops the connection)."""
    try:
        ErrorCode(code)
    except ValueError:
        raise InvalidRequestError(f"error code {code} is not one Kafka defines") from None
    return code


def parse_fetch_response(r: Reader, v: int) -> tuple[int, int, dict]:
    """FetchResponse v4-16 from `r` (positioned after the response header): (error_code,
    session_id, {(topic, partition): FetchResult}), `topic` the name before v13 and the id's
    16 bytes from v13; the records fields stay views of the frame.  With a top-level error the
    dict is empty."""
    flex = v >= 12
    r.int32()  # throttle_time_ms
    err = sid = 0
    if v >= 7:
        err = _known_error(r.int16())
        sid = r.int32()
    found = {}
    for _ in range(r.array_length(flex)):
        name = r.string_f(flex) if v < 13 else r.uuid()
        for _ in range(r.array_length(flex)):
            index = r.int32()
            perr = _known_error(r.int16())
            hw = r.int64()
            stable = r.int64()
            log_start = r.int64() if v >= 5 else -1
            n_aborted = r.array_length(flex, nullable=True)
            aborted = None if n_aborted < 0 else []
            for _ in range(max(n_aborted, 0)):
                aborted.append((r.int64(), r.int64()))   # (producer_id, first_offset)
                if flex:
                    r.tagged_fields()
            if v >= 11:
                r.int32()  # preferred_read_replica
            records = r.compact_nullable_bytes() if flex else r.nullable_bytes()
            diverging = None
            if flex:
                raw = r.tagged_fields().get(0)            # DivergingEpoch (KIP-320)
                if raw is not None:
                    t = Reader(raw)
                    diverging = (t.int32(), t.int64())
            found[(name, index)] = FetchResult(perr, hw, log_start,
                                               records if records is not None else memoryview(b""),
                                               stable, aborted, diverging)
        if flex:
            r.tagged_fields()
    if flex:
        r.tagged_fields()
    return err, sid, ({} if err else found)
