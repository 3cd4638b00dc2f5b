"""In-process reads of this node's local replicas: the ReplicaManager's read side for readers
in the same process (the embedded consumer, ``Engine.read_arrow``, the group tools, the web
console), as Kafka's ``ReplicaManager.readFromLocalLog`` serves a consumer's Fetch.

::

    info = rm.local.read_from_local_log(topic, p, offset, max_bytes, isolation_level=0)   # FetchInfo
    r = rm.local.read_local_batches(topic, p, start, end, isolation_level=1)   # whole batches [start, end)
    o = rm.local.local_offsets(topic, p)           # LocalOffsets(log start, HW, LSO, log end)
    hit = rm.local.local_offset_for_timestamp(topic, p, timestamp, isolation_level=0)

``rm.local`` is a :class:`LocalReads` the manager owns, given its ``local_copy(topic,
partition)`` (the log of this node's copy of a partition, below).

The bound is a consumer's (Kafka's FetchIsolation): the high watermark, or the last stable
offset under read_committed (``isolation_level`` 1); never the log end offset.  The answer is
the partition log's own ``FileSlice`` s (zero-copy: the readers map or ``sendfile`` them).

Which copy answers: this node's local replica whatever its role, as a consumer may fetch from a
follower (KIP-392) -- the leader's, a follower's (up to its own high watermark), or a replica on
disk not (yet) hosted by this manager (up to the high watermark its log has: on a replicated
node the checkpointed one).  A read never changes a role: it does not make a node alone the
leader of a partition (``partition`` does that for writes; a replicated directory opened without
its cluster would otherwise take its log end as committed).  A read-only node
(``engine.open(..., read_only=True)``) reads through here too and hosts nothing: its logs bound
every read by the high watermark / LSO the writing process publishes in ``.highwatermark``.
Only ``spark_udfs`` tasks, in other processes, read segment files without a node (a file reader
by design).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ..errors import OffsetOutOfRangeError
from .partition import offset_for_timestamp

__all__ = ["LocalBatches", "LocalLogInfo", "LocalOffsets", "LocalReads"]


class LocalOffsets(NamedTuple):
    """A local replica's offsets as an in-process consumer sees them."""

    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    log_end_offset: int

    def end(self, isolation_level: int = 0) -> int:
        """Where a consumer's reading ends: the LSO under read_committed, else the HW."""
        return self.last_stable_offset if isolation_level == 1 else self.high_watermark


class LocalBatches(NamedTuple):
    """Whole batches holding offsets [start, end) (see :meth:`LocalReads.read_local_batches`)."""

    start: int
    end: int
    slices: list                        # FileSlice per segment, batch-aligned
    aborted_transactions: list | None   # read_committed: [(producer_id, first_offset)] of [start, end)


class LocalLogInfo(NamedTuple):
    """A local replica's log as a directory holds it (Kafka's DescribeLogDirs per partition)."""

    offsets: LocalOffsets
    size: int                           # bytes of its segments
    segments: int


class LocalReads:
    """The in-process read operations of a :class:`~engine.replica.manager.ReplicaManager`
    (its ``local``), over its ``local_copy(topic, partition)``: the log of this node's replica
    of the partition (module docstring: which copy), UNKNOWN_TOPIC_OR_PARTITION when there is
    none here, KAFKA_STORAGE_ERROR when the broker's replicas are offline."""

    def __init__(self, local_copy: Callable[[str, int], Any]) -> None:
        self._local_copy = local_copy

    def read_from_local_log(self, topic: str, partition: int, offset: int, max_bytes: int, *,
                            isolation_level: int = 0, min_one_batch: bool = True):
        """An in-process consumer's fetch (Kafka's readFromLocalLog for a consumer): slices from
        the batch holding `offset`, about `max_bytes` long, below the high watermark (the LSO
        with ``isolation_level`` 1, which also lists the range's aborted transactions).
        Returns the log's FetchInfo; OFFSET_OUT_OF_RANGE outside [log start, log end] (a
        read-only open: [log start, high watermark])."""
        return self._local_copy(topic, partition).read(offset, max_bytes, min_one_batch=min_one_batch,
                                                       isolation_level=isolation_level)

    def read_local_batches(self, topic: str, partition: int, start: int | None = None,
                           end: int | None = None, *, isolation_level: int = 0) -> LocalBatches:
        """The whole batches holding offsets [start, end), one slice per segment, for the Arrow
        scanner: `start` defaults to the log start offset (OFFSET_OUT_OF_RANGE outside [log
        start, high watermark]), `end` to -- and is capped at -- the high watermark, the LSO with
        ``isolation_level`` 1 (then with the aborted transactions of the range)."""
        plog = self._local_copy(topic, partition)
        plog.refresh()                  # a read-only open: the writer's published high watermark
        hw, log_start = plog.high_watermark, plog.log_start_offset
        start = log_start if start is None else start
        if start < log_start or start > hw:
            raise OffsetOutOfRangeError(
                f"start offset {start} is outside [{log_start}, {hw}] of {topic}-{partition}")
        upper = plog.last_stable_offset if isolation_level == 1 else hw
        end = max(start, upper if end is None else min(end, upper))
        if start >= end:
            return LocalBatches(start, end, [], [] if isolation_level == 1 else None)
        slices = plog.segments_for_range(start, end)
        aborted = plog.aborted_transactions(start, end) if isolation_level == 1 else None
        return LocalBatches(start, end, slices, aborted)

    def local_offsets(self, topic: str, partition: int) -> LocalOffsets:
        """Log start, high watermark, last stable offset and log end of the local replica."""
        plog = self._local_copy(topic, partition)
        lso = plog.last_stable_offset   # first: a read-only open refreshes what its writer published
        return LocalOffsets(plog.log_start_offset, plog.high_watermark, lso, plog.log_end_offset)

    def describe_local_log(self, topic: str, partition: int) -> LocalLogInfo:
        """The local replica's offsets, size in bytes and segment count (describing a data
        directory: Kafka's ReplicaManager.describeLogDirs)."""
        plog = self._local_copy(topic, partition)
        return LocalLogInfo(self.local_offsets(topic, partition), plog.size, len(plog.segments))

    def local_offset_for_timestamp(self, topic: str, partition: int, timestamp: int, *,
                                   isolation_level: int = 0) -> tuple[int, int] | None:
        """A consumer's ListOffsets on the local replica: (offset, timestamp) or None, with the
        rules of Partition.offset_for_timestamp (-2 log start, -1 the HW / the LSO)."""
        return offset_for_timestamp(self._local_copy(topic, partition), timestamp, isolation_level)
