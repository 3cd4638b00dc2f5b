"""Producer state across restarts: Kafka-format ``<offset>.snapshot`` files, replay of the
batch headers above them, corrupt / missing snapshots (reliability contract D11), truncation,
log start moves and producer.id.expiration.ms."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from engine.config import EngineConfig
from engine.records import build_batch
from engine.storage import loader
from engine.storage import producer_state as ps
from engine.storage.manager import LogManager
from tests.serving import kafka_home

from .conftest import ROOT, small_config

T = "t"


def batch(pid, epoch, seq, n=3, ts=1_000):
    return bytearray(build_batch([(b"r%d" % i, None, [], ts + i) for i in range(n)], producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq))


def manager(d, **kw):
    kw.setdefault("segment_bytes", 2048)    # about 20 batches a segment: rolls, hence snapshots
    return LogManager(d, config_for=lambda t: small_config(**kw))


def fill(log, pid=7, batches=40, n=3):
    """`batches` batches of producer `pid`; returns their first offsets (one per sequence step)."""
    return [log.append(batch(pid, 0, i * n, n)).first_offset for i in range(batches)]


def snaps(log):
    return ps.list_snapshots(log.dir)


# -- format ------------------------------------------------------------------------------
def test_snapshot_round_trip_and_layout(tmp_path):
    entries = [ps.SnapshotEntry(1000, 3, 4, 9, 4, 1_700_000_000_000, -1, -1),
               ps.SnapshotEntry(2**40, 0, 2**31 - 1, 2**33, 0, -1, 5, -1)]
    path = ps.write_snapshot(str(tmp_path), 12, entries)
    assert os.path.basename(path) == "00000000000000000012.snapshot"
    raw = open(path, "rb").read()
    assert len(raw) == 10 + 46 * 2                    # version, crc, count, 46-byte entries
    assert raw[:2] == b"\x00\x01" and raw[6:10] == b"\x00\x00\x00\x02"
    assert ps.read_snapshot(path) == entries
    assert ps.decode_snapshot(ps.encode_snapshot([])) == []
    for bad in (raw[:-1], raw[:5], b"\x00\x02" + raw[2:], raw[:20] + bytes([raw[20] ^ 1]) + raw[21:]):
        with pytest.raises(ps.SnapshotError):
            ps.decode_snapshot(bad)


def test_kafka_dump_log_decodes_our_snapshot(tmp_path):
    home = kafka_home()
    if home is None:
        pytest.skip("Kafka not found (set KAFKA_HOME to a Kafka 4.0 install)")
    with manager(str(tmp_path / "d")) as m:
        log = m.create_log(T, 0)
        log.append(batch(42, 2, 0, n=5, ts=1_700_000_000_000))
        log.append(batch(43, 0, 10, n=2, ts=1_700_000_000_100))
    path = ps.snapshot_path(log.dir, 7)
    assert os.path.exists(path)
    out = subprocess.run([os.path.join(home, "bin", "kafka-dump-log.sh"), "--files", path],
                         capture_output=True, text=True, timeout=120).stdout
    lines = [ln for ln in out.splitlines() if ln.startswith("producerId")]
    assert len(lines) == 2, out
    assert ("producerId: 42 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
            "lastTimestamp: 1700000000004 firstSequence: 0 lastSequence: 4 lastOffset: 4 offsetDelta: 4") in lines[0]
    assert "producerId: 43 producerEpoch: 0" in lines[1] and "firstSequence: 10 lastSequence: 11 lastOffset: 6" \
        in lines[1]


# -- restarts ---------------------------------------------------------------------------
def test_clean_restart_dedups_without_replay(tmp_path, monkeypatch):
    d = str(tmp_path / "d")
    with manager(d) as m:
        firsts = fill(m.create_log(T, 0))
        leo = m.get_log(T, 0).log_end_offset
    calls = []
    real = loader._native

    class Counting:
        def __getattr__(self, name):
            if name == "list_batches":
                return lambda *a, **k: calls.append(a) or real.list_batches(*a, **k)
            return getattr(real, name)

    monkeypatch.setattr(loader, "_native", Counting())
    with manager(d) as m:
        log = m.get_log(T, 0)
        assert calls == []                       # the snapshot at the log end: nothing replayed
        monkeypatch.setattr(loader, "_native", real)
        for i in range(35, 40):                  # the last five batches are recognised
            a = log.append(batch(7, 0, i * 3))
            assert (a.first_offset, a.last_offset) == (firsts[i], firsts[i] + 2)
        assert log.log_end_offset == leo
        with pytest.raises(Exception) as ei:     # an older one is out of order, as in Kafka
            log.append(batch(7, 0, 3 * 30))
        assert type(ei.value).__name__ == "OutOfOrderSequenceError"
        assert log.append(batch(7, 0, 120)).first_offset == leo


_CHILD = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from engine.records import build_batch
    from engine.storage.manager import LogManager
    from tests.storage.conftest import small_config
    m = LogManager({d!r}, config_for=lambda t: small_config(segment_bytes=2048, **{kw!r}))
    log = m.get_or_create_log("t", 0)
    for i in range({n}):
        log.append(bytearray(build_batch([b"r0", b"r1", b"r2"], producer_id=7, producer_epoch=0,
                                         base_sequence=i * 3)))
        if i == {n} // 2:
            m.run_periodic_tasks()               # checkpoints (recovery point) in the middle
    print(log.log_end_offset, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.parametrize("kw", [{}, {"flush_messages": 1}], ids=["page-cache", "durable"])
def test_kill9_child_then_retries_are_recognised(tmp_path, kw):
    d = str(tmp_path / "d")
    r = subprocess.run([sys.executable, "-c", _CHILD.format(root=ROOT, d=d, n=60, kw=kw)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stderr
    leo = int(r.stdout.split()[0])
    assert leo == 180
    with manager(d, **kw) as m:
        assert not m.had_clean_shutdown
        log = m.get_log(T, 0)
        assert log.log_end_offset == 180 and len(snaps(log)) >= 1    # rolled: snapshots at roll points
        for i in range(55, 60):
            a = log.append(batch(7, 0, i * 3))
            assert (a.first_offset, a.last_offset) == (i * 3, i * 3 + 2)
        assert log.log_end_offset == 180
        assert log.append(batch(7, 0, 180)).first_offset == 180


@pytest.mark.parametrize("damage", ["bit flip", "half written", "version"])
def test_corrupt_snapshot_is_reported_and_rebuilt(tmp_path, damage):
    d = str(tmp_path / "d")
    with manager(d) as m:
        fill(m.create_log(T, 0))
    log_dir = os.path.join(d, "t-0")
    latest = ps.snapshot_path(log_dir, 120)
    raw = bytearray(open(latest, "rb").read())
    if damage == "bit flip":
        raw[20] ^= 0x40                          # one byte of an entry
    elif damage == "half written":
        raw = raw[: len(raw) // 2]
    else:
        raw[1] = 2                               # a version we do not know
    with open(latest, "wb") as f:
        f.write(raw)
    with manager(d) as m:
        events = [e for e in m.recovery_report if e.path == latest]
        expect = {"bit flip": "CRC mismatch", "half written": "CRC mismatch", "version": "unknown version 2"}
        assert len(events) == 1 and expect[damage] in events[0].reason, events
        assert "rebuilt from the log" in events[0].reason
        log = m.get_log(T, 0)
        assert not os.path.exists(latest) or ps.read_snapshot(latest)   # never left half-trusted
        a = log.append(batch(7, 0, 117))
        assert (a.first_offset, log.log_end_offset) == (117, 120)
        assert log.append(batch(7, 0, 120)).first_offset == 120


def test_missing_snapshots_are_rebuilt_from_the_log(tmp_path):
    d = str(tmp_path / "d")
    with manager(d) as m:
        fill(m.create_log(T, 0))
    log_dir = os.path.join(d, "t-0")
    for off in ps.list_snapshots(log_dir):
        os.unlink(ps.snapshot_path(log_dir, off))
    with manager(d) as m:
        log = m.get_log(T, 0)
        a = log.append(batch(7, 0, 105))
        assert (a.first_offset, log.log_end_offset) == (105, 120)
        assert [e.epoch for e in log.producer_state.active_producers()] == [0]


def test_snapshots_are_pruned_and_truncation_deletes_those_above(tmp_path):
    d = str(tmp_path / "d")
    with manager(d) as m:
        log = m.create_log(T, 0)
        fill(log, batches=200)
        bases = [s.base_offset for s in log.segments]
        assert len(bases) > 4
        assert snaps(log) == bases[-2:]          # written at each roll; the latest two kept
        cut = bases[-2] - 6                      # below the newest two snapshots
        log.truncate_to(cut)
        assert all(o <= cut for o in snaps(log))
        a = log.append(batch(7, 0, cut - 3))     # still in the log: a duplicate
        assert (a.first_offset, log.log_end_offset) == (cut - 3, cut)
        assert log.append(batch(7, 0, cut)).first_offset == cut   # truncated: written again
    with manager(d) as m:
        log = m.get_log(T, 0)
        assert snaps(log)[-1] == log.log_end_offset == cut + 3


def test_log_start_moves_drop_older_snapshots_and_state_survives(tmp_path):
    d = str(tmp_path / "d")
    with manager(d) as m:
        log = m.create_log(T, 0)
        fill(log, pid=5, batches=2)                       # seqs 0, 3 at offsets 0, 3
        fill(log, pid=7, batches=200)
        last5 = log.append(batch(5, 0, 6)).first_offset
        bases = [s.base_offset for s in log.segments]
        log.delete_records_before(bases[-1])
        assert snaps(log) == [bases[-1]]                  # the one below the log start is gone
    with manager(d) as m:
        log = m.get_log(T, 0)
        assert [e.producer_id for e in log.producer_state.active_producers()] == [5, 7]
        leo = log.log_end_offset
        assert log.append(batch(5, 0, 6)).first_offset == last5         # still a duplicate
        assert log.append(batch(7, 0, 600)).first_offset == leo
        with pytest.raises(Exception) as ei:
            log.append(batch(5, 0, 20))
        assert type(ei.value).__name__ == "OutOfOrderSequenceError"


def test_expiry_by_producer_id_expiration_ms(tmp_path):
    cfg = EngineConfig.from_mapping({})
    assert cfg["producer.id.expiration.ms"] == 86_400_000
    assert cfg["producer.id.expiration.check.interval.ms"] == 600_000
    d = str(tmp_path / "d")
    m = LogManager(d, EngineConfig.from_mapping({"producer.id.expiration.ms": 1000,
                                                 "producer.id.expiration.check.interval.ms": 10}),
                   config_for=lambda t: small_config())
    try:
        log = m.create_log(T, 0)
        log.append(batch(7, 0, 0, ts=5_000))
        log.append(batch(8, 0, 0, ts=9_000))
        assert log.remove_expired_producers(6_002, 1000) == [7]   # idle >= 1000 ms since its last timestamp
        assert [e.producer_id for e in log.producer_state.active_producers()] == [8]
        # Kafka 4.0: a producer the broker no longer knows is accepted at any sequence
        assert log.append(batch(7, 0, 1234)).first_offset == 6
        now = m._last_producer_expiry_ms
        assert m.maybe_expire_producers(now + 5) == 0             # before the check interval
        assert m.maybe_expire_producers(now + 20) == 2            # both idle since 1970
        assert len(log.producer_state) == 0
    finally:
        m.close()
