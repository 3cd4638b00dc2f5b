"""LogManager: every partition log under one data directory.

Directory layout::

    <data_dir>/.lock                               writer lock (flock LOCK_EX), holds "pid=… host=… started=…"
                                                   and, while a broker serves it, "listener=HOST:PORT"
    <data_dir>/.kafka_cleanshutdown               clean-shutdown marker (JSON), removed while a writer runs
    <data_dir>/recovery-point-offset-checkpoint   0 / N / "topic partition offset"
    <data_dir>/log-start-offset-checkpoint        same format
    <data_dir>/replication-offset-checkpoint      same format (high watermarks)
    <data_dir>/<topic>-<partition>/                one PartitionLog each (log.py)
    <data_dir>/<topic>-<p>.<uuid>-delete/          being deleted; removed on open

Writer protocol: take the lock (a second writer gets DataDirLockedError naming
the holder), read the marker, DELETE it, load every partition (clean ⇒ trust
indexes; unclean ⇒ recover from the recovery points), and write the marker
again only in close(), after every log is flushed and every checkpoint
written.  Checkpoints that fail to parse are treated as missing (recovery then
starts from offset 0, i.e. the whole log is re-validated) and reported.

Read-only opens take no lock and change nothing on disk; each PartitionLog
reads the writer's published high watermark (``.highwatermark``).

High watermarks at open: with ``auto_high_watermark`` (the single node: no replication, every
appended record is committed) a log's HW starts at its end offset.  Without it (cluster mode,
the replica layer moves HWs) it starts at its ``replication-offset-checkpoint`` entry, clamped to
[log start, log end] -- Kafka's rule, so a restarted leader or follower never exposes records
that were above its committed point; a partition missing from a valid checkpoint starts at its
log start (Kafka: 0).  A missing or unreadable checkpoint falls back to the log end (reported).
That file is written every ``replica.high.watermark.checkpoint.interval.ms`` (Kafka's 5000) by
``run_periodic_tasks`` and at close.

    <data_dir>/cleaner-offset-checkpoint          same format (first dirty offsets, cleaner.py)

Concurrency: ``self._lock`` guards the partition map and checkpoint writes;
each PartitionLog has its own lock.  The optional background thread calls
``run_periodic_tasks()`` every interval until ``stop_background()``;
``start_background()`` also starts the log cleaner thread (cleaner.py) when
``log.cleaner.enable`` is true; it compacts logs whose cleanup.policy
includes compact.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import socket
import threading
import time

from ..config import EngineConfig, LogConfig
from ..errors import (
    ClosedError,
    DataDirLockedError,
    ReadOnlyError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)
from . import checkpoint, files
from .cleaner import LogCleaner, checkpoint_path, update_cleaner_checkpoint
from .log import PartitionLog, RecoveryEvent

__all__ = ["LogManager", "broker_address", "lock_holder"]

_log = logging.getLogger(__name__)


def _parse_lock_info(text: str) -> dict[str, str]:
    return dict(tok.split("=", 1) for tok in text.split() if "=" in tok)


def lock_holder(data_dir: str) -> dict[str, str] | None:
    """Who holds the writer lock of ``data_dir``: the lock file's ``key=value`` fields
    (``pid``, ``host``, ``started`` and, when a broker serves the directory,
    ``listener`` = ``HOST:PORT``), or None when no writer holds it.

    This is how a second process finds the broker that owns a directory (the Spark
    sink, group members of read-only opens).  Probing takes a shared flock for an
    instant, so it also answers correctly inside the writer's own process.
    """
    path = os.path.join(os.path.abspath(data_dir), files.LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _parse_lock_info(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


_log = logging.getLogger(__name__)


def broker_address(path: str | os.PathLike[str]) -> str | None:
    """``HOST:PORT`` of the broker that owns data directory ``path``, or None when the
    directory has no writer or its writer serves no listener (an embedded writer)."""
    holder = lock_holder(os.fspath(path))
    return None if holder is None else holder.get("listener")


class LogManager:
    """Owns the partition logs of one data directory (Kafka's LogManager, one log dir)."""

    def __init__(self, data_dir: str, engine_config: EngineConfig | None = None, *,
                 read_only: bool = False, config_for=None, auto_high_watermark: bool = True):
        self.data_dir = os.path.abspath(data_dir)
        self.engine_config = engine_config or EngineConfig.from_mapping({})
        self.read_only = read_only
        self.auto_high_watermark = auto_high_watermark
        self._config_for = config_for
        self._lock = threading.RLock()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._lock_fd = -1
        self._lock_info: dict[str, str] = {}
        self._closed = False
        self._bg_thread: threading.Thread | None = None
        self._bg_stop = threading.Event()
        self.cleaner: LogCleaner | None = None
        # Kafka's LogDirFailureChannel for the background work: ``on_io_error(exc, what)`` is
        # called (from the background thread) when a periodic task hits an OSError -- a checkpoint
        # or flush on a full, read-only or failing disk; the broker (``serve``) halts on it.
        # Unset (embedded use): the error is logged and the next round tries again.
        self.on_io_error = None
        self.recovery_report: list[RecoveryEvent] = []
        self.had_clean_shutdown = False
        self._last_producer_expiry_ms = int(time.time() * 1000)
        # the first periodic round runs retention and writes checkpoints; later ones every
        # log.retention.check.interval.ms / log.flush.offset.checkpoint.interval.ms (Kafka's)
        self._last_retention_ms = 0
        self._last_checkpoint_ms = 0
        self._last_hw_checkpoint_ms = 0        # replica.high.watermark.checkpoint.interval.ms
        if read_only:
            if not os.path.isdir(self.data_dir):
                raise FileNotFoundError(self.data_dir)
        else:
            os.makedirs(self.data_dir, exist_ok=True)
            self._acquire_lock()
        try:
            self._load()
        except BaseException:
            self._release_lock()
            raise

    # -- lock ------------------------------------------------------------
    def _acquire_lock(self) -> None:
        path = os.path.join(self.data_dir, files.LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            finally:
                os.close(fd)
            raise DataDirLockedError(self.data_dir, holder) from None
        self._lock_fd = fd
        self._lock_info = {"pid": str(os.getpid()), "host": socket.gethostname(),
                           "started": time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}
        self._write_lock_info()

    def _write_lock_info(self) -> None:
        info = " ".join(f"{k}={v}" for k, v in self._lock_info.items()) + "\n"
        os.ftruncate(self._lock_fd, 0)
        os.pwrite(self._lock_fd, info.encode(), 0)

    def advertise_listener(self, address: str | None) -> None:
        """Record (or, with None, clear) the ``HOST:PORT`` of the broker serving this directory."""
        with self._lock:
            self._check_open(write=True)
            if address is None:
                self._lock_info.pop("listener", None)
            else:
                self._lock_info["listener"] = address
            self._write_lock_info()

    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            try:
                os.ftruncate(self._lock_fd, 0)
            except OSError:
                pass
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = -1

    # -- config ----------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        if self._config_for is not None:
            return self._config_for(topic)
        return self.engine_config.log_config()

    # -- load ------------------------------------------------------------
    def _read_checkpoint(self, name: str) -> dict:
        return self._read_checkpoint_or_none(name) or {}

    def _read_checkpoint_or_none(self, name: str) -> dict | None:
        """The checkpoint's entries; None when the file is missing or garbled (reported)."""
        path = os.path.join(self.data_dir, name)
        try:
            return checkpoint.read_offset_checkpoint(path)
        except checkpoint.CheckpointError as e:
            self.recovery_report.append(RecoveryEvent(path, None, 0, f"distrusted: {e.reason}; treated as missing"))
            return None

    def _load(self) -> None:
        d = self.data_dir
        marker = os.path.join(d, files.CLEAN_SHUTDOWN_FILE)
        self.had_clean_shutdown = checkpoint.read_clean_shutdown(marker) is not None
        self.was_new = not self._partition_dirs()      # nothing to recover, whatever the marker
        recovery = self._read_checkpoint(files.RECOVERY_POINT_CHECKPOINT)
        starts = self._read_checkpoint(files.LOG_START_OFFSET_CHECKPOINT)
        hws = self._read_checkpoint_or_none(files.REPLICATION_OFFSET_CHECKPOINT)
        cleaned = self._read_checkpoint(files.CLEANER_OFFSET_CHECKPOINT)
        if not self.read_only:
            if os.path.exists(marker):
                os.unlink(marker)
                checkpoint.fsync_dir(d)
        clean = self.had_clean_shutdown and bool(recovery or not self._partition_dirs())
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if files.is_delete_dir(name):
                if not self.read_only:
                    shutil.rmtree(path, ignore_errors=True)
                    self.recovery_report.append(RecoveryEvent(path, None, 0, "removed a -delete directory"))
                continue
            try:
                topic, part = files.parse_partition_dir(name)
            except ValueError:
                continue
            key = (topic, part)
            # replicated: the checkpointed HW; the log end (the old rule) when there is no
            # trustworthy checkpoint at all
            at_log_end = self.auto_high_watermark or hws is None
            log = PartitionLog(path, self.config_for(topic), topic=topic, partition=part,
                               read_only=self.read_only, auto_high_watermark=at_log_end,
                               had_clean_shutdown=clean, recovery_point=recovery.get(key, 0),
                               log_start_offset=starts.get(key, 0),
                               high_watermark=(hws or {}).get(key, None if self.read_only else 0),
                               ever_cleaned=key in cleaned)
            log.auto_high_watermark = self.auto_high_watermark
            if not self.auto_high_watermark and not self.read_only:
                if hws is None:
                    _log.warning("%s-%d: no valid %s: high watermark starts at the log end %d",
                                 topic, part, files.REPLICATION_OFFSET_CHECKPOINT, log.high_watermark)
                elif key not in hws:
                    _log.info("%s-%d: no checkpointed high watermark: it starts at the log start %d",
                              topic, part, log.high_watermark)
            self.recovery_report.extend(log.recovery_stats.events)
            self._logs[key] = log

    def _partition_dirs(self) -> list[str]:
        out = []
        for name in os.listdir(self.data_dir):
            if os.path.isdir(os.path.join(self.data_dir, name)) and not files.is_delete_dir(name):
                try:
                    files.parse_partition_dir(name)
                    out.append(name)
                except ValueError:
                    pass
        return out

    @property
    def segments_scanned(self) -> int:
        """Segments walked by recovery at open (0 after a clean shutdown)."""
        return sum(log.recovery_stats.segments_scanned for log in self._logs.values())

    # -- partitions ------------------------------------------------------
    def _check_open(self, write: bool = False) -> None:
        if self._closed:
            raise ClosedError(f"log manager for {self.data_dir} is closed")
        if write and self.read_only:
            raise ReadOnlyError(f"{self.data_dir} is open read-only")

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        self._check_open(write=True)
        name = files.partition_dir_name(topic, partition)
        with self._lock:
            if (topic, partition) in self._logs:
                raise TopicAlreadyExistsError(f"{topic}-{partition} already exists")
            path = os.path.join(self.data_dir, name)
            os.makedirs(path, exist_ok=True)
            checkpoint.fsync_dir(self.data_dir)
            log = PartitionLog(path, config or self.config_for(topic), topic=topic, partition=partition,
                               auto_high_watermark=self.auto_high_watermark)
            self._logs[(topic, partition)] = log
            return log

    def get_log(self, topic: str, partition: int) -> PartitionLog:
        self._check_open()
        try:
            return self._logs[(topic, partition)]
        except KeyError:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist") from None

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> PartitionLog:
        with self._lock:
            if (topic, partition) in self._logs:
                return self._logs[(topic, partition)]
            return self.create_log(topic, partition, config)

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        with self._lock:
            return dict(self._logs)

    def delete_log(self, topic: str, partition: int) -> None:
        """Rename to `<topic>-<p>.<uuid>-delete`, then remove the directory."""
        self._check_open(write=True)
        with self._lock:
            log = self._logs.pop((topic, partition), None)
            if log is None:
                raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist")
            log._cleaning.abort_and_pause()  # Kafka's abortCleaning: a running cleaning stops at its next check
            with log._clean_lock:            # ...and has let go of the log; none starts again (never resumed)
                log.close()
            update_cleaner_checkpoint(checkpoint_path(log), (topic, partition), None)
            target = os.path.join(self.data_dir, files.delete_dir_name(topic, partition))
            os.rename(log.dir, target)
            checkpoint.fsync_dir(self.data_dir)
            shutil.rmtree(target, ignore_errors=True)
            self.checkpoint_all()

    # -- periodic work ---------------------------------------------------
    def flush_all(self) -> None:
        self._check_open(write=True)
        for log in self.logs().values():
            log.flush()

    def checkpoint_all(self) -> None:
        """Write recovery points, log start offsets and high watermarks of every log."""
        if self.read_only or self._closed:
            return
        with self._lock:
            logs = list(self._logs.items())
            rp = {k: log.recovery_point for k, log in logs}
            ls = {k: log.log_start_offset for k, log in logs}
            hw = {k: log.high_watermark for k, log in logs}
            d = self.data_dir
            checkpoint.write_offset_checkpoint(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT), rp)
            checkpoint.write_offset_checkpoint(os.path.join(d, files.LOG_START_OFFSET_CHECKPOINT), ls)
            checkpoint.write_offset_checkpoint(os.path.join(d, files.REPLICATION_OFFSET_CHECKPOINT), hw)

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` (every log's high watermark, Kafka's format)."""
        if self.read_only or self._closed:
            return
        with self._lock:
            hw = {k: log.high_watermark for k, log in self._logs.items()}
            checkpoint.write_offset_checkpoint(os.path.join(self.data_dir, files.REPLICATION_OFFSET_CHECKPOINT), hw)

    def run_periodic_tasks(self, now_ms: int | None = None) -> None:
        """flush.ms flushes and delayed deletes (every round); retention every
        ``log.retention.check.interval.ms``; checkpoints every
        ``log.flush.offset.checkpoint.interval.ms``, the high watermarks' every
        ``replica.high.watermark.checkpoint.interval.ms``; producer expiry (see below)."""
        if self.read_only or self._closed:
            return
        now = int(time.time() * 1000) if now_ms is None else now_ms
        cfg = self.engine_config
        retention = now - self._last_retention_ms >= cfg["log.retention.check.interval.ms"]
        if retention:
            self._last_retention_ms = now
        for log in self.logs().values():
            if log.closed:
                continue
            if retention:
                log.maybe_apply_retention(now_ms)
            log.maybe_flush(now_ms)
            log.maybe_delete_pending(now_ms)
        self.maybe_expire_producers(now_ms)
        if now - self._last_checkpoint_ms >= cfg["log.flush.offset.checkpoint.interval.ms"]:
            self._last_checkpoint_ms = self._last_hw_checkpoint_ms = now
            self.checkpoint_all()
        elif now - self._last_hw_checkpoint_ms >= cfg["replica.high.watermark.checkpoint.interval.ms"]:
            self._last_hw_checkpoint_ms = now
            self.checkpoint_high_watermarks()

    def maybe_expire_producers(self, now_ms: int | None = None) -> int:
        """Every producer.id.expiration.check.interval.ms, forget producers idle for
        producer.id.expiration.ms (Kafka's removeExpiredProducers); returns how many."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        cfg = self.engine_config
        if now - self._last_producer_expiry_ms < cfg["producer.id.expiration.check.interval.ms"]:
            return 0
        self._last_producer_expiry_ms = now
        n = 0
        for log in self.logs().values():
            if not log.closed:
                n += len(log.remove_expired_producers(now, cfg["producer.id.expiration.ms"]))
        return n

    def start_background(self, interval_s: float = 1.0) -> None:
        if self.read_only:
            return
        if self._bg_thread is not None:
            return
        self._bg_stop.clear()

        def loop() -> None:
            while not self._bg_stop.wait(interval_s):
                try:
                    self.run_periodic_tasks()
                except ClosedError:
                    return
                except OSError as e:
                    hook = self.on_io_error
                    if hook is None:
                        _log.error("periodic log tasks in %s failed: %s", self.data_dir, e)
                    else:
                        hook(e, f"periodic flush/checkpoint in {self.data_dir}")

        self._bg_thread = threading.Thread(target=loop, name=f"log-manager-{self.data_dir}", daemon=True)
        self._bg_thread.start()
        cfg = self.engine_config
        if cfg["log.cleaner.enable"] and self.cleaner is None:
            self.cleaner = LogCleaner(self, cfg["log.cleaner.backoff.ms"], cfg["log.cleaner.dedupe.buffer.size"])
            self.cleaner.start()

    def stop_background(self) -> None:
        cleaner, self.cleaner = self.cleaner, None
        if cleaner is not None:
            cleaner.stop()
        t, self._bg_thread = self._bg_thread, None
        if t is not None:
            self._bg_stop.set()
            t.join()

    # -- close -----------------------------------------------------------
    def close(self) -> None:
        """Flush every log, write checkpoints and the clean-shutdown marker, unlock.

        On a full, read-only or failing disk (an OSError from a flush, snapshot or checkpoint)
        the logs are still closed and the lock released, but no clean-shutdown marker is
        written: the next open recovers the directory (nothing appended is lost by it)."""
        if self._closed:
            return
        self.stop_background()
        try:
            if not self.read_only:
                failed: OSError | None = None
                for log in self.logs().values():
                    try:
                        log.flush()
                        log.write_producer_snapshot()  # at the log end: a clean open replays nothing
                    except OSError as e:
                        failed = failed or e
                try:
                    self.checkpoint_all()
                except OSError as e:
                    failed = failed or e
                for log in self.logs().values():
                    try:
                        log.close()
                    except OSError as e:
                        failed = failed or e
                if failed is None:
                    checkpoint.write_clean_shutdown(os.path.join(self.data_dir, files.CLEAN_SHUTDOWN_FILE))
                else:
                    _log.warning("closing %s without a clean-shutdown marker (%s): the next open "
                                 "recovers it", self.data_dir, failed)
            else:
                for log in self.logs().values():
                    log.close()
        finally:
            self._closed = True
            self._release_lock()

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
