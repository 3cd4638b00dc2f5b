"""The log cleaner against truncation (Kafka's abortAndPauseCleaning): a truncation that reaches
below the active segment (a follower after an unclean election, truncate_fully_and_start_at)
aborts a running cleaning of the partition, waits for it to stop and pauses cleaning until it is
done, so the cleaner never swaps in a segment cleaned from bytes the truncation removed, nor
writes a cleaner checkpoint above what the truncation left (nor does a cleaning stopped between
its groups).  The cleaner is held between its phases with ``clean_log``'s ``_on_step`` hook
(cleaner.py); real files, a real PartitionLog."""

from __future__ import annotations

import threading
import time

import pytest

from engine import _native
from engine.storage import cleaner as cl
from engine.storage.cleaner_state import CleaningState

from .conftest import small_config
from .test_compaction import NOW, open_log, read_all

KEY_VALUES = [(b"k1", b"one-a"), (b"k1", b"one-b"), (b"k2", b"old-X"), (b"k3", b"old-Y")]


def ccfg(**kw):
    return small_config(**{"cleanup.policy": "compact", "segment.bytes": 4096, "file.delete.delay.ms": 0, **kw})


def one(key, value):
    bb = _native.BatchBuilder()
    bb.append(value, key=key, timestamp=NOW)
    return bb.build()


class HeldCleaning:
    """A cleaning in a thread, held at its first ``step`` (cleaner.py's ``_on_step``) until released."""

    def __init__(self, log, step="cleaned"):
        self.log, self.step = log, step
        self.at_step, self.go = threading.Event(), threading.Event()
        self.stats = self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _hook(self, name):
        if name == self.step and not self.at_step.is_set():
            self.at_step.set()
            assert self.go.wait(30), "never released"

    def _run(self):
        try:
            self.stats = self.log.clean(now_ms=NOW, _on_step=self._hook)
        except BaseException as e:  # noqa: BLE001 -- reported by finish()
            self.error = e

    def __enter__(self):
        self.thread.start()
        assert self.at_step.wait(30), "the cleaning never reached " + self.step
        return self

    def finish(self):
        self.go.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error
        return self.stats

    def __exit__(self, *exc):
        self.go.set()
        self.thread.join(30)


def in_thread(fn, *args):
    """Run fn in a thread; returns (thread, result dict)."""
    out: dict = {}

    def run():
        try:
            out["result"] = fn(*args)
        except BaseException as e:  # noqa: BLE001
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def wait_blocked_or_done(t, state: CleaningState, timeout=30.0):
    """Until `t` ended or asked the cleaning to abort (it then waits for the cleaner)."""
    deadline = time.monotonic() + timeout
    while t.is_alive() and state.state != "aborted":
        assert time.monotonic() < deadline, "truncation neither finished nor asked the cleaning to abort"
        time.sleep(0.005)


def two_sealed_segments(path):
    """S0 = k1 twice (offsets 0, 1), S1 = k2, k3 (2, 3), an empty active segment at 4: the
    cleaning removes offset 0 and writes one segment for [S0, S1] (4 KiB hold both)."""
    log = open_log(path, ccfg())
    for i, (k, v) in enumerate(KEY_VALUES):
        log.append(one(k, v))
        if i in (1, 3):
            log.roll()
    assert [s.base_offset for s in log.segments] == [0, 2, 4] and log.high_watermark == 4
    return log


def test_truncated_and_regrown_segment_is_not_replaced_by_its_cleaned_old_bytes(tmp_path):
    """The cleaner has written [S0, S1] cleaned when a follower truncates to 3 (old-Y goes), takes
    new-Y from its new leader at offset 3 (a batch of the same size) and rolls: S1 is the same
    segment object with the same size again.  Swapping the cleaned copy in then would bring back
    old-Y and lose new-Y; with the abort the truncation waits for the cleaning to stop instead."""
    log = two_sealed_segments(str(tmp_path / "t-0"))
    assert len(one(b"k3", b"new-Y")) == len(one(b"k3", b"old-Y"))
    with HeldCleaning(log) as held:
        t, out = in_thread(log.truncate_to, 3)
        wait_blocked_or_done(t, log._cleaning)
        if t.is_alive():
            assert log._cleaning.state == "aborted"
            stats = held.finish()                 # the cleaner sees the abort before its swap
            t.join(30)
            assert stats.reason == "aborted" and not stats.cleaned
        assert out == {"result": 3}
        log.append(one(b"k3", b"new-Y"))          # the new leader's record at 3
        log.roll()
        assert [s.base_offset for s in log.segments] == [0, 2, 4]
        held.finish()
    got = {o: (k, v) for o, k, v in read_all(log)}
    assert got[3] == (b"k3", b"new-Y")
    assert got[2] == (b"k2", b"old-X")
    assert log._cleaning.state == "idle"          # resumed after the truncation
    st = log.clean(now_ms=NOW)                    # and cleans again
    assert st.cleaned
    assert read_all(log) == [(1, b"k1", b"one-b"), (2, b"k2", b"old-X"), (3, b"k3", b"new-Y")]
    log.close()


@pytest.mark.parametrize("how", ["truncate_to", "truncate_fully_and_start_at"])
def test_aborted_cleaning_leaves_the_checkpoint_to_the_truncation(tmp_path, how):
    """A cleaning held before its swap when the log is cut to 3 and grows back differently: the
    cleaner checkpoint (its first dirty offset) must not end above 3, or the records the log got
    since count as clean without ever being cleaned (k1@0, superseded by k1@1, would stay)."""
    log = two_sealed_segments(str(tmp_path / "t-0"))
    with HeldCleaning(log) as held:
        t, out = in_thread(getattr(log, how), 3)
        wait_blocked_or_done(t, log._cleaning)
        if t.is_alive():
            assert held.finish().reason == "aborted"
            t.join(30)
        assert "error" not in out and log.log_end_offset == 3
        log.append(one(b"k3", b"new-Y, longer"))
        log.roll()
        held.finish()
    ck = cl.read_cleaner_checkpoint(cl.checkpoint_path(log)).get(("t", 0))
    assert ck is None or ck <= 3
    log.clean(now_ms=NOW)
    if how == "truncate_to":
        assert read_all(log) == [(1, b"k1", b"one-b"), (2, b"k2", b"old-X"), (3, b"k3", b"new-Y, longer")]
    else:
        assert read_all(log) == [(3, b"k3", b"new-Y, longer")]
    log.close()


def test_truncation_inside_the_active_segment_leaves_a_cleaning_alone(tmp_path):
    """Kafka pauses cleaning only for a truncation below the active segment: a follower's usual
    cut of its uncommitted tail neither waits for nor aborts a cleaning of the sealed segments."""
    log = two_sealed_segments(str(tmp_path / "t-0"))
    log.append(one(b"k4", b"a"))
    log.append(one(b"k4", b"b"))                  # offsets 4, 5 in the active segment
    with HeldCleaning(log) as held:
        t, out = in_thread(log.truncate_to, 5)
        t.join(30)
        assert not t.is_alive() and out == {"result": 5}
        assert log._cleaning.state == "in_progress"
        st = held.finish()
    assert st.cleaned and st.segments_written == 1 and st.end_offset == 4
    assert read_all(log) == [(1, b"k1", b"one-b"), (2, b"k2", b"old-X"), (3, b"k3", b"old-Y"), (4, b"k4", b"a")]
    log.close()


def test_paused_log_is_not_cleaned_until_resumed(tmp_path):
    log = two_sealed_segments(str(tmp_path / "t-0"))
    log._cleaning.abort_and_pause()
    log._cleaning.abort_and_pause()               # pauses nest, as Kafka's LogCleaningPaused(n)
    assert cl.cleanable(log, NOW) == (False, 0.0)
    st = log.clean(now_ms=NOW)
    assert not st.cleaned and "paused" in st.reason
    log._cleaning.resume()
    assert log._cleaning.state == "paused" and not log.clean(now_ms=NOW).cleaned
    log._cleaning.resume()
    assert log._cleaning.state == "idle" and cl.cleanable(log, NOW)[0]
    assert log.clean(now_ms=NOW).cleaned
    log.close()


def test_deleting_a_partition_aborts_its_cleaning(tmp_path):
    """LogManager.delete_log (Kafka's abortCleaning): a running cleaning stops at its next check
    instead of being waited for, and swaps nothing into the directory being removed."""
    from engine.storage.manager import LogManager

    with LogManager(str(tmp_path / "data")) as mgr:
        log = mgr.create_log("t", 0, ccfg())
        for i, (k, v) in enumerate(KEY_VALUES):
            log.append(one(k, v))
            if i in (1, 3):
                log.roll()
        with HeldCleaning(log) as held:
            t, out = in_thread(mgr.delete_log, "t", 0)
            wait_blocked_or_done(t, log._cleaning)
            assert t.is_alive() and log._cleaning.state == "aborted"
            assert held.finish().reason == "aborted"
            t.join(30)
        assert out == {"result": None} and log.closed
        assert ("t", 0) not in mgr.logs() and not (tmp_path / "data" / "t-0").exists()


def test_cleaning_stopped_between_groups_writes_no_checkpoint(tmp_path):
    """The cleaner thread stopped (LogCleaner.stop, a shutdown) after its first group: the groups
    left were indexed but not filtered, so the checkpoint must not move past them, or what they
    hold that is superseded (k2@2 by k2@3) would count as clean and stay."""
    log = open_log(str(tmp_path / "t-0"), ccfg(**{"segment.bytes": 200}))   # one group a segment
    for i, (k, v) in enumerate([(b"k1", b"one-a"), (b"k1", b"one-b"), (b"k2", b"two-a"), (b"k2", b"two-b")]):
        log.append(one(k, v))
        if i in (1, 3):
            log.roll()
    stop = threading.Event()
    st = log.clean(now_ms=NOW, stop=stop, _on_step=lambda step: step == "final" and stop.set())
    assert st.reason == "stopped" and st.segments_written == 1
    assert cl.read_cleaner_checkpoint(cl.checkpoint_path(log)).get(("t", 0)) is None
    assert log.clean(now_ms=NOW).cleaned
    assert read_all(log) == [(1, b"k1", b"one-b"), (3, b"k2", b"two-b")]
    log.close()
