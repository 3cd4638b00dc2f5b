"""A reader's mmap of a segment must survive the writer truncating that segment.

``FileSlice.view()`` maps the `.log` (zero-copy: the Arrow scanner, the embedded consumer's
``poll_batches``, Spark's in-place reader).  A page of a mapping past the file's end is SIGBUS,
which kills the reading process (a broker, a Spark executor) -- not an exception.  Readers map
only batches below the high watermark, and a normal follower truncation cuts only above it; but
an unclean election (or a follower whose log end is above its new leader's) cuts below it.  The
writer then cuts the segment in a new file (copy + rename) instead of ``ftruncate`` in place, so
every existing mapping keeps its bytes (segment.py, ``LogSegment.truncate_to``).

Each reader runs in a subprocess: a SIGBUS there is a failed assertion here, not a dead pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys

import engine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 300                       # records of 4 KiB: ~1.2 MB in one segment, hundreds of pages


def _writer(path):
    eng = engine.open(str(path), {"log.segment.bytes": 64 << 20}, background=False)
    eng.create_topic("t", 1)
    with eng.producer(linger_ms=0) as p:
        for i in range(N):
            p.send("t", bytes([i % 251]) * 4096, key=b"k%d" % i)
    plog = eng.log("t", 0)
    assert plog.high_watermark == plog.log_end_offset == N and len(plog.segments) == 1
    return eng, plog


def _run(code: str, path, *, stdin: str | None = None):
    return subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


READER = """
import sys, engine
from engine.arrow import iter_log_batches
eng = engine.open(sys.argv[1], read_only=True, background=False)
it = iter_log_batches(eng.log("t", 0), "t", 0, max_rows=10)   # the segment is mapped once
rows = next(it).num_rows                                      # its first pages touched
print("mapped", flush=True)
sys.stdin.readline()                                          # the writer truncates meanwhile
rows += sum(b.num_rows for b in it)                           # the rest of the mapping
print(rows, flush=True)
sys.stdin.readline()                                          # the writer appended since
t = eng.read_arrow("t", 0)                                    # the same open: the new files
print(t.num_rows, t.column("value")[-1].as_py().decode(), flush=True)
"""


def test_read_only_reader_in_another_process_survives_truncation_below_the_hw(tmp_path):
    eng, plog = _writer(tmp_path / "d")
    try:
        proc = _run(READER, tmp_path / "d")
        assert proc.stdout.readline().strip() == "mapped", proc.stderr.read()
        assert plog.truncate_to(5) <= 5                  # what a follower does after an unclean election
        assert os.path.getsize(plog.segments[-1].log_path) < 4096 * 6
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().split() == [str(N)], proc.stderr.read()   # the bytes it had mapped
        with eng.producer(linger_ms=0) as p:
            p.send("t", b"after the cut")
        out, err = proc.communicate("go\n", timeout=60)
        assert proc.returncode == 0, f"reader died (signal {-proc.returncode}): {err[-2000:]}"
        assert out.split("\n")[0] == f"{plog.log_end_offset} after the cut"      # and then the new log
    finally:
        eng.close()


IN_PROCESS = f"""
import sys, engine
N = {N}
eng = engine.open(sys.argv[1], background=False)
plog = eng.log("t", 0)
c = eng.consumer(auto_offset_reset="earliest")
c.assign([("t", 0)])
held = c.poll_batches(timeout_ms=1000, max_bytes=1 << 22)    # memoryviews of a mapping
assert held and held[-1].last_offset == N - 1, held[-1:]
plog.truncate_to(5)
print(sum(len(bytes(b.data)) for b in held), plog.log_end_offset, flush=True)
eng.close()
"""


def test_embedded_consumer_batches_held_across_a_truncation_in_the_same_process(tmp_path):
    eng, _plog = _writer(tmp_path / "d")
    eng.close()
    proc = _run(IN_PROCESS, tmp_path / "d")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, f"died (signal {-proc.returncode}): {err[-2000:]}"
    size, leo = map(int, out.split())
    assert size > N * 4096 and leo <= 5


def test_read_only_index_copy_ignores_entries_the_writer_cut_above_the_hw_and_rewrote(tmp_path):
    """A follower's uncommitted tail is cut in place (above the HW: no reader maps it) and
    replaced by the leader's batches, laid out differently; a read-only open that copied the
    index while those entries were there must not seek by them (it read nothing for offsets
    5-9 below the new HW: a mid-batch position taken for a batch start)."""
    from engine.arrow import read_log_arrow
    from engine.storage.log import PartitionLog

    from .conftest import make_batch, small_config

    d = str(tmp_path / "t-0")
    cfg = small_config(**{"segment.bytes": 1 << 20, "index.interval.bytes": 100})
    w = PartitionLog(d, cfg, auto_high_watermark=False)
    for i in range(10):                                   # offsets 0..9, ~150 B batches, indexed
        w.append(make_batch(1, 1000 + i, 80, seed=i))
    w.update_high_watermark(2)
    ro = PartitionLog(d, cfg, read_only=True)
    try:
        assert ro.segments[0].index.entries >= 8            # entries for offsets above the HW
        w.truncate_to(2)
        w.append(make_batch(40, 2000, 60, seed=99))         # offsets 2..41 in one batch over them
        w.update_high_watermark(w.log_end_offset)
        assert read_log_arrow(ro, "t", 0, 5, 10).column("offset").to_pylist() == [5, 6, 7, 8, 9]
        assert ro.read(5, 1 << 20).slices[0].position == ro.segments[0].index.entry(1)[1]
    finally:
        ro.close()
        w.close()


def test_recovery_cutting_a_bad_batch_below_the_hw_spares_a_mapping_reader(tmp_path):
    """After an unclean shutdown the loader cuts a segment after its last valid batch; a bad
    batch below the published HW (a bit flip) makes that cut reach batches readers mapped.  Cut
    in place, this reader's scan ended at the zeros past the new end of the page (150 rows): a
    page wholly past it would have been SIGBUS."""
    from engine.storage.log import PartitionLog

    from .conftest import small_config

    eng, plog = _writer(tmp_path / "d")
    pos = plog.segments[0].translate_offset(150)[0]
    log_path, log_dir = plog.segments[0].log_path, plog.dir
    eng.close()
    with open(log_path, "r+b") as f:                 # flip a CRC byte of the batch holding 150
        f.seek(pos + 17)
        byte = f.read(1)
        f.seek(pos + 17)
        f.write(bytes([byte[0] ^ 0xFF]))
    proc = _run(READER.replace("max_rows=10)", "max_rows=10, check_crc=False)"), tmp_path / "d")
    try:
        assert proc.stdout.readline().strip() == "mapped", proc.stderr.read()
        w = PartitionLog(log_dir, small_config(**{"segment.bytes": 64 << 20}), had_clean_shutdown=False)
        assert 0 < w.log_end_offset <= 150 and w.recovery_stats.events
        proc.stdin.write("go\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        w.close()
        out, err = proc.communicate("go\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode >= 0, f"reader died (signal {-proc.returncode}): {err[-2000:]}"
    assert line.split() == [str(N)]                  # the bytes it had mapped, as they were
