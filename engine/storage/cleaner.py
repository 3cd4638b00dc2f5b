"""Log compaction: Kafka's LogCleaner for topics with ``cleanup.policy`` compact (or compact,delete).

Terms (Kafka's): the log below the active segment splits at the *first dirty
offset* (the cleaner checkpoint) into the *clean* part, already compacted,
and the *dirty* part.  A log is cleanable when dirty / (clean + dirty) bytes
>= ``min.cleanable.dirty.ratio``, or when a dirty segment is older than
``max.compaction.lag.ms``, or when a tombstone's delete horizon has passed.
Segments whose newest record is younger than ``min.compaction.lag.ms``, the
active segment and anything at or above the high watermark are never
cleaned (the *first uncleanable offset* is the lowest of those bounds).

One cleaning of a log:

1. **Offset map** (``_native.OffsetMap``, ``_native.index_keys``): key ->
   offset of its latest record over the dirty segments, 24 bytes a key
   (128-bit key hash + offset, Kafka's SkimpyOffsetMap) within
   ``log.cleaner.dedupe.buffer.size``; when it fills, the cleaning stops at
   the last fully indexed segment: its end is the *end offset*.
2. **Groups**: the segments from the log start to the end offset, cut into
   runs of consecutive segments whose total size fits ``segment.bytes`` (and
   whose offsets fit one segment's int32 relative offsets).
3. **Filter** each group into ``<base>.log.cleaned`` (+ ``.index.cleaned``,
   ``.timeindex.cleaned``; ``_native.compact_batch``): a record survives when
   it has a key and no later offset of that key is in the map.  Tombstones
   (null value) survive until their batch's delete horizon
   (``delete.retention.ms`` after the cleaning that first kept them, KIP-534
   attribute 0x40 + baseTimestamp); control batches are kept as they are; a
   batch left empty is dropped unless it is the last batch of an active
   idempotent producer (kept as an empty batch so its last sequence stays in
   the log).  Kept batches keep their offsets, timestamps, codec and
   producer fields; offset gaps are normal in a compacted log.
   Transactions (cleaner_txn.py, Kafka's rules): aborted transactions' batches
   are removed (and left out of the offset map), markers whose transaction
   has no data left get a delete horizon and go after it; retained ABORT
   markers keep their ``.txnindex`` entry in the cleaned segment.  Nothing at
   or above the last stable offset is cleaned.
4. **Swap** (crash-safe, Kafka's file steps): fsync the cleaned files; under
   the log lock check the group's segments are still in the log, unchanged;
   rename ``.cleaned`` -> ``.swap``; replace the group in the segment list;
   rename the old segments to ``.deleted`` (unlinked after
   ``file.delete.delay.ms``, like retention: open FileSlices keep reading the
   old inode); rename ``.swap`` -> final names.  The directory is fsync'd after
   each step.  After a crash the loader (loader.py) deletes ``.cleaned``,
   completes a ``.swap`` (deleting the old segments its offset range covers)
   and deletes ``.deleted``.
5. The checkpoint ``<data dir>/cleaner-offset-checkpoint`` (Kafka's text
   format: ``0`` / N / ``topic partition offset``; atomic write) moves to the
   end offset (cleaner_checkpoint.py).

Concurrency: a cleaning reads sealed segments with ``pread`` and writes the
cleaned files without the log lock; appends and reads go on.  The lock is
held only for the snapshot at the start and for the swap.  Only one cleaning
of a log runs at a time (``PartitionLog._clean_lock``).  A truncation below the
active segment or a deletion aborts it and pauses cleaning until done
(``PartitionLog._cleaning``, cleaner_state.py).  Retention and DeleteRecords
remove leading segments only, which the swap's check sees.  Readers in another
process (read-only opens) never list ``.cleaned`` files and take a ``.swap``
as the replacement of the segments it covers (loader.py).

Modules, one job each (this one is the background thread, ``LogCleaner``, and
re-exports the rest): cleaner_plan.py (what is cleanable, the dirty ratio),
cleaner_pass.py (one cleaning: ``clean_log``, steps 1, 2 and 5),
cleaner_copy.py (step 3), cleaner_swap.py (step 4), cleaner_txn.py
(transactions), cleaner_state.py (abort and pause), cleaner_checkpoint.py
(the checkpoint file), cleaner_types.py (CleanStats and the like).
"""

from __future__ import annotations

import logging
import threading

from ..errors import ClosedError
from .cleaner_checkpoint import checkpoint_path, read_cleaner_checkpoint, truncate_checkpoint, update_cleaner_checkpoint
from .cleaner_pass import DEFAULT_DEDUPE_BUFFER_SIZE, clean_log
from .cleaner_plan import cleanable
from .cleaner_types import CleanStats, SimulatedCrash

__all__ = ["DEFAULT_DEDUPE_BUFFER_SIZE", "CleanStats", "LogCleaner", "SimulatedCrash", "checkpoint_path",
           "clean_log", "cleanable", "read_cleaner_checkpoint", "truncate_checkpoint", "update_cleaner_checkpoint"]

_logger = logging.getLogger(__name__)


# -- the background cleaner ----------------------------------------------------
class LogCleaner:
    """One background thread cleaning the compacted logs of a LogManager (Kafka's LogCleaner).

    Each round picks the cleanable log with the highest dirty ratio (logs
    that ``max.compaction.lag.ms`` or a passed delete horizon force come
    first) and cleans it; when none is cleanable it waits
    ``log.cleaner.backoff.ms``.  A log whose cleaning failed on corrupt data is
    skipped until the next start (Kafka's "uncleanable" partitions).
    """

    def __init__(self, manager, backoff_ms: int = 15000,
                 dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE):
        self.manager = manager
        self.backoff_ms = backoff_ms
        self.dedupe_buffer_size = dedupe_buffer_size
        self.uncleanable: dict[tuple[str, int], str] = {}
        self.last_stats: CleanStats | None = None
        self.rounds = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def clean_once(self, now_ms: int | None = None) -> CleanStats | None:
        """One round: clean the dirtiest cleanable log, if any; returns its stats."""
        best = None
        for key, log in self.manager.logs().items():
            if key in self.uncleanable or log.closed:
                continue
            try:
                ok, ratio = cleanable(log, now_ms)
            except ClosedError:
                continue
            if ok and (best is None or ratio > best[0]):
                best = (ratio, key, log)
        if best is None:
            return None
        _ratio, key, log = best
        try:
            stats = clean_log(log, now_ms, force=True, dedupe_buffer_size=self.dedupe_buffer_size,
                              stop=self._stop)
        except ClosedError:
            return None
        except Exception as e:  # corrupt data, I/O error: skip this log, keep the thread alive
            _logger.error("cleaning %s-%d failed, marked uncleanable: %s", key[0], key[1], e)
            self.uncleanable[key] = str(e)
            hook = getattr(self.manager, "on_io_error", None)
            if isinstance(e, OSError) and hook is not None:     # Kafka: the log dir goes offline
                hook(e, f"cleaning {key[0]}-{key[1]}")
            return None
        self.last_stats = stats
        self.rounds += 1
        return stats

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    stats = self.clean_once()
                except ClosedError:
                    return
                if stats is None or not stats.cleaned:
                    self._wake.wait(self.backoff_ms / 1000.0)
                    self._wake.clear()

        self._thread = threading.Thread(target=loop, name=f"log-cleaner-{self.manager.data_dir}", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        t, self._thread = self._thread, None
        if t is not None:
            self._stop.set()
            self._wake.set()
            t.join()
