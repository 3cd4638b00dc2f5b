"""Reliability-contract rows D1-D7, D10-D12 (D8/D9: test_crash.py)."""
import glob
import json
import os
import random
import struct
import subprocess
import sys

import pytest

from engine.errors import CorruptRecordError
from engine.storage import files
from engine.storage.manager import LogManager

from .conftest import ROOT, make_batch, small_config

T = "topic-a"


def _cfg(t=None):
    return small_config()


def build(tmp_path, n=60, flush=True, **cfgkw):
    d = str(tmp_path / "data")
    cfg = small_config(**cfgkw)
    m = LogManager(d, config_for=lambda t: cfg)
    log = m.create_log(T, 0)
    stored = []
    for i in range(n):
        b = make_batch(1 + i % 4, 1_000 + 10 * i, 100 + (i * 37) % 200, seed=i)
        info = log.append(b)
        stored.append((info.first_offset, info.last_offset, bytes(b), info.max_timestamp))
    if flush:
        m.flush_all()
        m.checkpoint_all()
    return d, m, log, stored, cfg


def crash(m):
    """Abandon the manager like a killed process: no flush, no marker; the lock goes away."""
    m._release_lock()


def reopen(d, cfg):
    return LogManager(d, config_for=lambda t: cfg)


def check_prefix(log, stored, n):
    """The log holds exactly stored[:n], byte for byte."""
    assert log.log_end_offset == (stored[n - 1][1] + 1 if n else 0)
    data = log.read(0, 10**9, max_offset=log.log_end_offset, verify=True).read() if n else b""
    assert data == b"".join(s[2] for s in stored[:n])


def check_lookups(log, stored):
    for first, last, b, maxts in stored:
        for o in (first, last):
            f = log.read(o, 1)
            assert f.slices[0].read(), o
            assert bytes(f.slices[0].view()) == b
        assert log.offset_for_timestamp(maxts)[0] <= last


def test_d1_garbage_indexes_rebuilt(tmp_path):
    d, m, log, stored, cfg = build(tmp_path)
    rng = random.Random(1)
    idx = glob.glob(os.path.join(log.dir, "*.index")) + glob.glob(os.path.join(log.dir, "*.timeindex"))
    assert len(idx) >= 6
    crash(m)
    for p in idx:
        with open(p, "wb") as f:
            f.write(rng.randbytes(rng.randint(1, 4096)))
    m2 = reopen(d, cfg)
    log2 = m2.get_log(T, 0)
    check_prefix(log2, stored, len(stored))
    check_lookups(log2, stored)
    assert any("index" in e.reason for e in m2.recovery_report)
    m2.close()
    # the rebuilt indexes are Kafka's: a clean reopen trusts them and scans nothing
    m3 = reopen(d, cfg)
    assert m3.segments_scanned == 0
    check_lookups(m3.get_log(T, 0), stored)
    m3.close()


@pytest.mark.parametrize("seed", range(10))
def test_d2_random_bytes_appended_to_active_segment(tmp_path, seed):
    d, m, log, stored, cfg = build(tmp_path, n=30, flush=False)
    rng = random.Random(seed)
    seg = log.active_segment
    crash(m)
    for p in (seg.log_path, seg.index_path, seg.time_index_path):
        with open(p, "ab") as f:
            f.write(rng.randbytes(rng.randint(1, 1024)))
    m2 = reopen(d, cfg)
    log2 = m2.get_log(T, 0)
    check_prefix(log2, stored, len(stored))
    dropped = [e for e in m2.recovery_report if e.bytes_dropped]
    assert dropped and dropped[0].path == seg.log_path
    m2.close()


@pytest.mark.parametrize("seed", range(6))
def test_d3_garbage_from_inside_a_record(tmp_path, seed):
    d, m, log, stored, cfg = build(tmp_path, n=40, flush=False)
    rng = random.Random(seed)
    crash(m)
    # choose a batch, a point inside it, overwrite from there to the end of its segment
    k = rng.randrange(len(stored))
    first = stored[k][0]
    seg = [s for s in log.segments if s.base_offset <= first][-1]
    pos = seg.translate_offset(first)[0]
    cut = pos + rng.randrange(1, len(stored[k][2]))
    size = os.path.getsize(seg.log_path)
    with open(seg.log_path, "r+b") as f:
        f.seek(cut)
        f.write(rng.randbytes(size - cut + rng.randint(0, 200)))
    m2 = reopen(d, cfg)
    log2 = m2.get_log(T, 0)
    check_prefix(log2, stored, k)
    m2.close()


def test_d4_bit_flip_in_sealed_segment_detected_on_read(tmp_path):
    d, m, log, stored, cfg = build(tmp_path, n=60)
    m.close()
    sealed = sorted(glob.glob(os.path.join(d, f"{T}-0", "*.log")))[1]
    base = files.offset_from_filename(os.path.basename(sealed))
    rng = random.Random(4)
    for _trial in range(8):
        raw = bytearray(open(sealed, "rb").read())
        bit = rng.randrange(len(raw) * 8)
        raw[bit // 8] ^= 1 << (bit % 8)
        with open(sealed, "wb") as f:
            f.write(raw)
        m2 = reopen(d, cfg)  # clean: no scan, so only the read path can catch it
        assert m2.segments_scanned == 0
        log2 = m2.get_log(T, 0)
        flipped_batch = [s for s in stored if s[0] >= base]
        with pytest.raises(CorruptRecordError) as ei:
            off = base
            while off < log2.log_end_offset:
                f = log2.read(off, 10**9, verify=True)
                got = f.read()
                # whatever is served is byte-equal to what was appended
                i = [s[0] for s in stored].index(f.slices[0].start_offset)
                assert got == b"".join(s[2] for s in stored[i:])[:len(got)]
                off = _next_after(stored, got, i)
        assert ei.value.path == sealed and ei.value.position is not None
        assert 0 <= ei.value.position < len(raw)
        problems = log2.scrub()  # the scrubber finds it too, without a consumer
        assert [p.path for p in problems] == [sealed]
        m2.close()
        raw[bit // 8] ^= 1 << (bit % 8)  # repair for the next trial
        with open(sealed, "wb") as f:
            f.write(raw)
        assert flipped_batch


def _next_after(stored, got, i):
    n = 0
    j = i
    while j < len(stored) and n + len(stored[j][2]) <= len(got):
        n += len(stored[j][2])
        j += 1
    if j == i:
        raise AssertionError("no progress")
    return stored[j][0] if j < len(stored) else stored[-1][1] + 1


@pytest.mark.parametrize("field,value", [
    ("base_offset", 7), ("base_offset", 10**12), ("base_offset", 0),
    ("batch_length", 20), ("batch_length", 10**6), ("batch_length", 300),
    ("leader_epoch", -7), ("magic", 1),
])
def test_d5_corrupt_non_crc_fields(tmp_path, field, value):
    d, m, log, stored, cfg = build(tmp_path, n=40, flush=False)
    log.close()
    crash(m)
    k = 25
    first = stored[k][0]
    seg = [s for s in log.segments if s.base_offset <= first][-1]
    # position of batch k in its segment, from the stored sizes
    pos = sum(len(s[2]) for s in stored if seg.base_offset <= s[0] < first)
    with open(seg.log_path, "r+b") as f:
        if field == "base_offset":
            f.seek(pos)
            f.write(struct.pack(">q", value))
        elif field == "batch_length":
            f.seek(pos + 8)
            f.write(struct.pack(">i", value))
        elif field == "leader_epoch":
            f.seek(pos + 12)
            f.write(struct.pack(">i", value))
        else:
            f.seek(pos + 16)
            f.write(bytes([value]))
    m2 = reopen(d, cfg)
    log2 = m2.get_log(T, 0)
    # exactly the batches before k survive: no phantom, reordered or skipped offsets
    check_prefix(log2, stored, k)
    assert [e for e in m2.recovery_report if e.bytes_dropped]
    m2.close()


def test_d6_zero_filled_tail(tmp_path):
    d, m, log, stored, cfg = build(tmp_path, n=30, flush=False)
    seg = log.active_segment
    crash(m)
    with open(seg.log_path, "ab") as f:
        f.write(b"\x00" * 10_000)
    m2 = reopen(d, cfg)
    check_prefix(m2.get_log(T, 0), stored, len(stored))
    assert os.path.getsize(seg.log_path) == seg.size
    m2.close()
    # zeros in place of the last batches (a preallocated, power-lost tail)
    d, m, log, stored, cfg = build(tmp_path / "b", n=30, flush=False)
    seg = log.active_segment
    crash(m)
    k = [i for i, s in enumerate(stored) if s[0] >= seg.base_offset][1]
    pos = sum(len(s[2]) for s in stored if seg.base_offset <= s[0] < stored[k][0])
    with open(seg.log_path, "r+b") as f:
        f.seek(pos)
        f.write(b"\x00" * (os.path.getsize(seg.log_path) - pos + 4096))
    m2 = reopen(d, cfg)
    check_prefix(m2.get_log(T, 0), stored, k)
    m2.close()


def test_d7_leftovers_and_orphans(tmp_path):
    d, m, log, stored, cfg = build(tmp_path, n=30)
    m.close()
    pdir = os.path.join(d, f"{T}-0")
    extra = {
        "00000000000000099999.index": b"\x00" * 16,            # orphan
        "00000000000000099999.timeindex": b"\x00" * 24,        # orphan
        "00000000000000000000.log.deleted": b"junk",
        "00000000000000000005.index.cleaned": b"junk",
        "00000000000000000007.timeindex.swap": b"junk",
        "leader-epoch-checkpoint.tmp": b"0\n",
    }
    for name, data in extra.items():
        with open(os.path.join(pdir, name), "wb") as f:
            f.write(data)
    os.makedirs(os.path.join(d, f"{T}-1.{'a' * 32}-delete"))
    # a completed-but-unrenamed swap of the first segment (same content)
    first_log = os.path.join(pdir, "00000000000000000000.log")
    with open(first_log, "rb") as f:
        content = f.read()
    with open(first_log + ".swap", "wb") as f:
        f.write(content)
    m2 = reopen(d, cfg)
    names = set(os.listdir(pdir))
    assert not names & set(extra) and not any(n.endswith(".swap") for n in names)
    assert not any(n.endswith("-delete") for n in os.listdir(d))
    check_prefix(m2.get_log(T, 0), stored, len(stored))
    reasons = " ".join(e.reason for e in m2.recovery_report)
    assert "orphan" in reasons and ".swap" in reasons and "deleted" in reasons
    m2.close()


def test_d10_clean_marker_controls_scanning(tmp_path):
    d, m, log, stored, cfg = build(tmp_path, n=60)
    nseg = len(log.segments)
    m.close()
    marker = os.path.join(d, files.CLEAN_SHUTDOWN_FILE)
    assert json.load(open(marker))["version"] == 0
    m2 = reopen(d, cfg)
    assert m2.had_clean_shutdown and m2.segments_scanned == 0
    assert not os.path.exists(marker)  # removed while a writer runs
    check_prefix(m2.get_log(T, 0), stored, len(stored))
    crash(m2)
    m3 = reopen(d, cfg)
    # unclean: only segments at or above the recovery point are re-validated
    assert not m3.had_clean_shutdown and 1 <= m3.segments_scanned < nseg
    m3.close()
    os.unlink(os.path.join(d, files.RECOVERY_POINT_CHECKPOINT))
    os.unlink(os.path.join(d, files.CLEAN_SHUTDOWN_FILE))
    m4 = reopen(d, cfg)
    assert m4.segments_scanned == nseg  # no recovery point: everything
    m4.close()


@pytest.mark.parametrize("damage", ["truncate", "count", "version", "garbage"])
def test_d11_bad_checkpoints_detected_and_rebuilt(tmp_path, damage):
    d, m, log, stored, cfg = build(tmp_path, n=60)
    for e in range(2, 5):
        log.append(make_batch(2, 5000, 50), leader_epoch=e)
    epochs = list(log.leader_epoch_cache.entries)
    leo = log.log_end_offset
    m.close()
    paths = [os.path.join(d, n) for n in (files.RECOVERY_POINT_CHECKPOINT, files.LOG_START_OFFSET_CHECKPOINT,
                                          files.REPLICATION_OFFSET_CHECKPOINT)]
    paths.append(os.path.join(d, f"{T}-0", files.LEADER_EPOCH_CHECKPOINT))
    for p in paths:
        text = open(p).read()
        if damage == "truncate":
            text = text[: len(text) // 2 + 1].rstrip("\n")
        elif damage == "count":
            lines = text.split("\n")
            lines[1] = str(int(lines[1]) + 1)
            text = "\n".join(lines)
        elif damage == "version":
            text = "7" + text[1:]
        else:
            text = text.replace(" ", "x", 1) if " " in text else "zz\n"
        with open(p, "w") as f:
            f.write(text)
    os.unlink(os.path.join(d, files.CLEAN_SHUTDOWN_FILE))
    m2 = reopen(d, cfg)
    log2 = m2.get_log(T, 0)
    distrusted = [e for e in m2.recovery_report if "distrusted" in e.reason]
    assert len(distrusted) == 4
    assert m2.segments_scanned == len(log2.segments)  # recovery point unknown: all re-validated
    assert log2.log_end_offset == leo and log2.leader_epoch_cache.entries == epochs
    m2.close()


def test_d12_efbig_mid_append_no_half_batch(tmp_path):
    """RLIMIT_FSIZE in a child: the write fails part-way (EFBIG), like ENOSPC."""
    d = str(tmp_path / "data")
    code = f"""
import sys, resource, signal, json
sys.path.insert(0, {ROOT!r}); sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})
from storage.conftest import make_batch, small_config
from engine.storage.manager import LogManager
from engine.errors import KafkaStorageError
cfg = small_config(segment_bytes=10**6)
m = LogManager({d!r}, config_for=lambda t: cfg)
log = m.create_log("t", 0)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
n = 0
try:
    while True:
        log.append(make_batch(3, 1000, 333, seed=n)); n += 1
except KafkaStorageError as e:
    err = e.errno
print(json.dumps({{"n": n, "leo": log.log_end_offset, "errno": err, "size": log.size}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["errno"] == 27  # EFBIG
    seglog = os.path.join(d, "t-0", "00000000000000000000.log")
    assert os.path.getsize(seglog) == res["size"] < 20_000  # cut back: no half batch
    cfg = small_config(segment_bytes=10**6)
    m = reopen(d, cfg)
    log = m.get_log("t", 0)
    assert log.log_end_offset == res["leo"] == 3 * res["n"]
    assert not [e for e in m.recovery_report if e.bytes_dropped]
    stored = [(3 * i, 3 * i + 2, None, None) for i in range(res["n"])]
    data = log.read(0, 10**9, verify=True).read()
    assert len(data) == res["size"]
    assert stored
    m.close()


def _can_mount_tmpfs():
    try:
        r = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, timeout=10)
        return r.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs unshare -Urm and tmpfs")
def test_d12_real_enospc_on_tiny_tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    code = f"""
import sys, json, os
sys.path.insert(0, {ROOT!r}); sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})
from storage.conftest import make_batch, small_config
from engine.storage.manager import LogManager
from engine.errors import KafkaStorageError
cfg = small_config(segment_bytes=10**6, segment_index_bytes=1024)
d = {str(mnt)!r} + "/data"
m = LogManager(d, config_for=lambda t: cfg)
log = m.create_log("t", 0)
n = 0
try:
    while True:
        log.append(make_batch(3, 1000, 777, seed=n)); n += 1
except KafkaStorageError as e:
    err = e.errno
size = log.size
fsize = os.path.getsize(log.active_segment.log_path)
m._release_lock()  # crash
m2 = LogManager(d, config_for=lambda t: cfg)
log2 = m2.get_log("t", 0)
ok = log2.read(0, 10**9, verify=True).size
print(json.dumps(dict(n=n, errno=err, size=size, fsize=fsize, leo=log2.log_end_offset, ok=ok,
                      dropped=sum(e.bytes_dropped for e in m2.recovery_report))))
"""
    script = f"mount -t tmpfs -o size=96k tmpfs {mnt} && exec {sys.executable} -c \"$CODE\""
    out = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "CODE": code})
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["errno"] == 28  # ENOSPC
    assert res["fsize"] == res["size"] == res["ok"]
    assert res["leo"] == 3 * res["n"] and res["dropped"] == 0


def test_clean_marker_but_torn_active_tail_is_recovered(tmp_path):
    d, m, log, stored, cfg = build(tmp_path, n=30)
    seg = log.active_segment
    m.close()
    with open(seg.log_path, "ab") as f:
        f.write(make_batch(3, 1, 100)[:150])  # half a batch after a "clean" shutdown
    m2 = reopen(d, cfg)
    assert m2.had_clean_shutdown
    check_prefix(m2.get_log(T, 0), stored, len(stored))
    assert [e for e in m2.recovery_report if e.bytes_dropped == 150]
    m2.close()


def test_read_only_open_from_another_process(tmp_path):
    d, m, log, stored, cfg = build(tmp_path, n=40)
    log.update_high_watermark(stored[20][0])
    code = f"""
import sys, json
sys.path.insert(0, {ROOT!r})
from engine.storage.manager import LogManager
r = LogManager({d!r}, read_only=True)
log = r.get_log({T!r}, 0)
print(json.dumps([log.high_watermark, len(log.read(0, 10**9).read())]))
r.close()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    hw, n = json.loads(out.stdout.strip().splitlines()[-1])
    assert hw == stored[20][0] and n == sum(len(s[2]) for s in stored[:20])
    m.close()
