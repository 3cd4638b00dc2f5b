"""D8 (kill -9 during appends) and D9 (power loss: files cut to their last
fsync'd length plus a torn tail).  10 seeds each by default; 100 with ENGINE_SLOW=1."""
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from engine.storage.manager import LogManager

from .conftest import ROOT, expected_batch, small_config

SEEDS = [pytest.param(s) for s in range(10)] + [pytest.param(s, marks=pytest.mark.slow) for s in range(10, 100)]

CHILD = r"""
import sys
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from storage.conftest import make_batch, small_config
from engine.storage.manager import LogManager
cfg = small_config(segment_bytes=8192, flush_messages={flush})
m = LogManager({d!r}, config_for=lambda t: cfg)
log = m.get_or_create_log("t", 0)
i = log.log_end_offset // 2
print("start", i, flush=True)
while True:
    info = log.append(make_batch(2, 1_000 + i, 30 + (i * 53) % 700, seed=i))
    print(i, info.last_offset, log.recovery_point, flush=True)
    i += 1
"""


def _verify_prefix(log, acked_batches: int, synced_offset: int):
    """The log is batches 0..k-1 exactly, k >= acked; the synced prefix is intact."""
    n = log.log_end_offset
    assert n % 2 == 0
    k = n // 2
    assert k >= acked_batches, (k, acked_batches)
    assert n >= synced_offset
    data = log.read(0, 10**9, max_offset=n, verify=True).read()
    want = b"".join(expected_batch(i, 2 * i) for i in range(k))
    assert data == want


@pytest.mark.parametrize("seed", SEEDS)
def test_d8_kill9_during_appends(tmp_path, seed):
    rng = random.Random(seed)
    d = str(tmp_path / "data")
    cfg = small_config(segment_bytes=8192)
    rounds = 2 if seed >= 10 else 1
    for _ in range(rounds):
        flush = 1 if rng.random() < 0.5 else 10**9  # durable (group commit) or page cache only
        code = CHILD.format(root=ROOT, tests=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            d=d, flush=flush)
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        first = p.stdout.readline()
        assert first.startswith("start"), first
        time.sleep(rng.uniform(0.02, 0.3))
        os.kill(p.pid, signal.SIGKILL)
        out = p.stdout.read()
        p.wait()
        complete = out.split("\n")[:-1]  # a line cut by the kill is not an acknowledgement
        lines = [ln.split() for ln in complete if ln.strip()]
        assert all(len(x) == 3 for x in lines)
        acked = int(lines[-1][0]) + 1 if lines else int(first.split()[1])
        synced = max((int(x[2]) for x in lines), default=0) if flush == 1 else 0
        m = LogManager(d, config_for=lambda t: cfg)
        assert not m.had_clean_shutdown
        _verify_prefix(m.get_log("t", 0), acked, synced)
        m.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_d9_power_loss_emulation(tmp_path, seed):
    rng = random.Random(1000 + seed)
    d = str(tmp_path / "data")
    cfg = small_config(segment_bytes=6000)
    next_batch = 0
    for _round in range(2):
        m = LogManager(d, config_for=lambda t: cfg)
        log = m.get_or_create_log("t", 0)
        assert log.log_end_offset == 2 * next_batch or _round > 0
        next_batch = log.log_end_offset // 2
        for _ in range(rng.randint(0, 25)):
            log.append(expected_batch(next_batch, 0))  # offsets are re-assigned by the log
            next_batch += 1
        m.flush_all()
        m.checkpoint_all()
        synced = {s.log_path: s.size for s in log.segments}
        synced_leo = log.log_end_offset
        for _ in range(rng.randint(1, 25)):
            log.append(expected_batch(next_batch, 0))
            next_batch += 1
        m._release_lock()  # power cut: nothing below happens in the dead process
        now = {s.log_path: s.size for s in log.segments}
        logs = sorted(now)
        gone = False
        for path in logs:
            if gone:
                os.unlink(path)
                continue
            if path in synced and now[path] == synced[path]:
                continue  # nothing written since its fsync: the file is exactly as synced
            if path in synced:
                keep = synced[path]
            elif rng.random() < 0.3:
                os.unlink(path)  # created after the last sync: its directory entry was lost
                gone = True
                continue
            else:
                keep = 0
            with open(path, "r+b") as f:
                f.truncate(keep)
                if rng.random() < 0.7:
                    f.seek(keep)
                    tail = rng.randint(1, 4096)
                    f.write(bytes(tail) if rng.random() < 0.5 else rng.randbytes(tail))
            stem = path[:-4]
            for suf in (".index", ".timeindex"):
                if os.path.exists(stem + suf) and path not in synced and rng.random() < 0.5:
                    with open(stem + suf, "r+b") as f:
                        f.write(rng.randbytes(rng.randint(1, 64)))
        m2 = LogManager(d, config_for=lambda t: cfg)
        log2 = m2.get_log("t", 0)
        _verify_prefix(log2, 0, synced_leo)
        next_batch = log2.log_end_offset // 2
        m2.close()
