"""Hypothesis state machine: PartitionLog (through LogManager) against a list of batches."""
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine.storage.manager import LogManager

from .conftest import make_batch, small_config

CFG = small_config(segment_bytes=3000, index_interval_bytes=300, retention_bytes=6000, retention_ms=-1)


class LogMachine(RuleBasedStateMachine):
    @initialize()
    def setup(self):
        self.dir = tempfile.mkdtemp(prefix="logsm-")
        self.m = LogManager(self.dir, config_for=lambda t: CFG)
        self.log = self.m.create_log("sm", 0)
        self.batches: list[tuple[int, int, bytes]] = []  # (first, last, stored bytes)
        self.start = 0
        self.seq = 0

    def teardown(self):
        if hasattr(self, "m"):
            self.m.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def _model_leo(self):
        if self.batches:
            return self.batches[-1][1] + 1
        return self._empty_leo

    _empty_leo = 0

    @rule(n=st.integers(1, 4), size=st.integers(0, 400))
    def append(self, n, size):
        b = make_batch(n, 1000 + self.seq, size, seed=self.seq)
        self.seq += 1
        info = self.log.append(b)
        assert info.first_offset == self._model_leo()
        self.batches.append((info.first_offset, info.last_offset, bytes(b)))

    @rule(data=st.data(), max_bytes=st.integers(1, 5000))
    def read(self, data, max_bytes):
        leo = self._model_leo()
        off = data.draw(st.integers(self.start, leo))
        f = self.log.read(off, max_bytes)
        got = f.read()
        if off == leo:
            assert got == b""
            return
        i = next(i for i, b in enumerate(self.batches) if b[1] >= off)
        want = b"".join(b[2] for b in self.batches[i:])
        assert len(got) >= min(max_bytes, len(self.batches[i][2])) or got == want
        assert want.startswith(got)

    @rule(data=st.data())
    def truncate(self, data):
        leo = self._model_leo()
        off = data.draw(st.integers(self.start, leo))
        new_leo = self.log.truncate_to(off)
        if off < self._model_leo():
            self.batches = [b for b in self.batches if b[1] < off]
            if not self.batches:
                self._empty_leo = self.start  # restarted empty at the log start offset
        assert new_leo == self._model_leo()

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def reopen_clean(self):
        self.m.close()
        self.m = LogManager(self.dir, config_for=lambda t: CFG)
        assert self.m.segments_scanned == 0
        self.log = self.m.get_log("sm", 0)

    @rule()
    def reopen_after_crash(self):
        self.m._release_lock()
        self.m = LogManager(self.dir, config_for=lambda t: CFG)
        assert not self.m.had_clean_shutdown
        assert not [e for e in self.m.recovery_report if e.bytes_dropped]
        self.log = self.m.get_log("sm", 0)

    @rule(more=st.integers(0, 3), torn=st.sampled_from([None, "zeros", "garbage"]), seed=st.integers(0, 99))
    def power_loss(self, more, torn, seed):
        """fsync + checkpoints, `more` unsynced appends, then every file cut to its fsync'd length."""
        import random

        self.m.flush_all()
        self.m.checkpoint_all()
        synced = {s.log_path: s.size for s in self.log.segments}
        synced_leo = self.log.log_end_offset
        for _ in range(more):
            self.append(2, 100)
        self.m._release_lock()
        rng = random.Random(seed)
        for seg in self.log.segments:
            if seg.log_path in synced and synced[seg.log_path] == seg.size:
                continue
            with open(seg.log_path, "r+b") as f:
                f.truncate(synced.get(seg.log_path, 0))
                if torn:
                    f.seek(0, 2)
                    n = rng.randint(1, 300)
                    f.write(bytes(n) if torn == "zeros" else rng.randbytes(n))
        self.m = LogManager(self.dir, config_for=lambda t: CFG)
        self.log = self.m.get_log("sm", 0)
        self.batches = [b for b in self.batches if b[1] < synced_leo]
        if not self.batches:
            self._empty_leo = synced_leo

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def delete_records(self, data):
        off = data.draw(st.integers(self.start, self._model_leo()))
        self.start = self.log.delete_records_before(off)
        assert self.start == off
        self.m.checkpoint_all()
        self._drop_below_start()

    @rule()
    def retention(self):
        visible = sum(len(b[2]) for b in self.batches)
        self.log.maybe_apply_retention()
        self.m.checkpoint_all()
        # whole segments only: retention.bytes keeps at least 6000 bytes, and deleting
        # segments below the log start offset never removes a visible batch
        assert self.log.size >= min(6000, visible)
        assert self.log.log_start_offset >= self.start
        self.start = self.log.log_start_offset
        self._drop_below_start()

    def _drop_below_start(self):
        if self.batches and self.start >= self._model_leo():
            self._empty_leo = self._model_leo()
        self.batches = [b for b in self.batches if b[1] >= self.start]

    @invariant()
    def offsets_agree(self):
        if not hasattr(self, "log"):
            return
        log = self.log
        assert log.log_end_offset == self._model_leo()
        assert log.log_start_offset == self.start or (not self.batches and log.log_start_offset >= self.start)
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
        assert log.high_watermark == log.log_end_offset
        if self.batches:
            got = log.read(log.log_start_offset, 10**9, verify=True).read()
            assert got == b"".join(b[2] for b in self.batches)


LogMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                        suppress_health_check=list(HealthCheck))
TestLogMachine = LogMachine.TestCase
