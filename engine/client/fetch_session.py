"""Client side of Kafka fetch sessions (KIP-227) for :class:`engine.client.wire.WireClient`.

One :class:`FetchSession` per broker.  The first Fetch is a full one asking for a new
session (``session_id`` 0, ``session_epoch`` 0).  A broker that serves sessions answers
a non-zero ``session_id``; later Fetches are incremental: they carry that id and the
next epoch, only the partitions whose fetch offset, ``partition_max_bytes`` or current leader epoch changed
since the last request, and the partitions no longer wanted in ``forgotten_topics_data``.
The broker then answers only the partitions with something new (records, an error, a
moved high watermark); the others are simply absent from the response.

A broker that answers ``session_id`` 0 (ours does: it keeps no sessions) leaves the
client sessionless: every Fetch stays a full one.  FETCH_SESSION_ID_NOT_FOUND (70),
INVALID_FETCH_SESSION_EPOCH (71), any other top-level error and a lost connection
drop the session: the next Fetch is a full one asking for a new session, as Kafka's
``FetchSessionHandler`` does.
"""

from __future__ import annotations

__all__ = ["FetchSession"]

_INITIAL_EPOCH = 0
_INT32_MAX = 2**31 - 1


class FetchSession:
    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = _INITIAL_EPOCH
        # what the broker's session holds:
        # {(topic, partition): (fetch_offset, partition_max_bytes, current_leader_epoch)}
        self.partitions: dict[tuple[str, int], tuple[int, int]] = {}
        self._pending: tuple | None = None       # (full, wanted) of the request in flight
        self.full_fetches = 0            # answered without error (for tests and metrics)
        self.incremental_fetches = 0

    @property
    def active(self) -> bool:
        return self.session_id != 0

    def build(self, wanted: dict[tuple[str, int], tuple[int, int]]):
        """(session_id, epoch, to_send, forgotten) for the next Fetch of `wanted`
        ({(topic, partition): (fetch_offset, partition_max_bytes, current_leader_epoch)}): `to_send` the
        partitions to name in the request, `forgotten` [(topic, partition)] to drop."""
        if not self.active:
            self._pending = (True, dict(wanted))
            return 0, _INITIAL_EPOCH, dict(wanted), []
        to_send = {tp: v for tp, v in wanted.items() if self.partitions.get(tp) != v}
        forgotten = [tp for tp in self.partitions if tp not in wanted]
        self._pending = (False, dict(wanted))
        return self.session_id, self.epoch, to_send, forgotten

    def handle_response(self, error_code: int, session_id: int) -> None:
        """Update the session from a Fetch response's top-level error and session id."""
        full, wanted = self._pending if self._pending is not None else (True, {})
        self._pending = None
        if error_code:
            self.reset()
            return
        if full:
            self.full_fetches += 1
            self.session_id = session_id
            self.epoch = 1 if session_id else _INITIAL_EPOCH
            self.partitions = wanted if session_id else {}
            return
        if session_id != self.session_id:    # the broker ended or replaced it: start over
            self.reset()
            return
        self.incremental_fetches += 1
        self.partitions = wanted
        self.epoch = 1 if self.epoch >= _INT32_MAX else self.epoch + 1

    def reset(self) -> None:
        """Forget the session: the next Fetch is a full one asking for a new session."""
        self.session_id = 0
        self.epoch = _INITIAL_EPOCH
        self.partitions = {}
        self._pending = None
