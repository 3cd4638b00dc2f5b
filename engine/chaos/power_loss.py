"""A power loss on one broker of a :class:`~engine.chaos.cluster.PartitionCluster`
(issue 20's ``power-loss`` scenario): SIGKILL its process, then make its data directory look as
it would after the machine lost power, then start it again on the same ports.

What a power loss keeps is what was fsync'd.  The broker keeps its synced positions in memory
(engine/storage/log_flush.py); on disk the lower bound is its ``recovery-point-offset-checkpoint``
(written atomically with fsync, so it survives, as do the other checkpoints, the leader-epoch
checkpoints and the producer snapshots: engine/storage/checkpoint.py), which says every offset
below it was flushed.  So, per partition directory of the dead broker (as
tests/storage/test_crash.py's D9 does with exact synced sizes):

* a segment wholly below the recovery point is kept as it is;
* the segment holding the recovery point is cut at a random byte at or after the recovery
  point's batch (what the page cache had not yet written back);
* a segment above it is deleted (its directory entry never synced; then every later one too) or
  cut at a random byte;
* a cut file gets a torn tail 70% of the time: zeros or random bytes (a sector half written).

::

    info = power_loss(c.brokers[n], rnd)      # {partition dir: (bytes before, bytes after)}
    c.brokers[n].start()
"""

from __future__ import annotations

import os
import random
import signal
import struct

from ..storage.checkpoint import read_offset_checkpoint
from ..storage.files import RECOVERY_POINT_CHECKPOINT
from .cluster import ProxiedBroker

__all__ = ["kill", "power_loss"]


def kill(b: ProxiedBroker) -> None:
    """SIGKILL broker `b`'s process group (its proxies stay: it comes back on the same address)."""
    if b.proc is not None and b.proc.poll() is None:
        os.killpg(b.proc.pid, signal.SIGKILL)
        b.proc.wait(10)


def _batch_starts(data: bytes) -> list[tuple[int, int]]:
    """(byte position, base offset) of every whole RecordBatch in a segment's bytes."""
    out, pos = [], 0
    while pos + 27 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        out.append((pos, base))
        pos += 12 + length
    return out


def _cut(path: str, keep: int, rnd: random.Random) -> int:
    with open(path, "r+b") as f:
        f.truncate(keep)
        if rnd.random() < 0.7:
            tail = rnd.randint(1, 4096)
            f.seek(keep)
            f.write(bytes(tail) if rnd.random() < 0.5 else rnd.randbytes(tail))
    return os.path.getsize(path)


def drop_unsynced(data_dir: str, rnd: random.Random) -> dict[str, tuple[int, int]]:
    """Cut every partition log under `data_dir` to what its recovery point says was synced (the
    module's text); {partition dir name: (log bytes before, log bytes after)} of those changed."""
    points = read_offset_checkpoint(os.path.join(data_dir, RECOVERY_POINT_CHECKPOINT)) or {}
    changed: dict[str, tuple[int, int]] = {}
    for name in sorted(os.listdir(data_dir)):
        d = os.path.join(data_dir, name)
        topic, _, part = name.rpartition("-")
        if not os.path.isdir(d) or not part.isdigit() or name.endswith("-delete"):
            continue
        rp = points.get((topic, int(part)), 0)
        segs = sorted(n for n in os.listdir(d) if n.endswith(".log"))
        bases = [int(n[:-4]) for n in segs]
        before = after = 0
        gone = False
        for i, seg in enumerate(segs):
            path = os.path.join(d, seg)
            size = os.path.getsize(path)
            before += size
            if i + 1 < len(segs) and bases[i + 1] <= rp:
                after += size                                  # wholly below the recovery point
                continue
            if gone or (bases[i] > rp and i > 0 and rnd.random() < 0.3):
                os.unlink(path)                                # (its index files: rebuilt or stray)
                gone = True
                continue
            with open(path, "rb") as f:
                starts = _batch_starts(f.read())
            synced = next((p for p, base in starts if base >= rp), size) if bases[i] <= rp else 0
            after += _cut(path, rnd.randint(synced, size), rnd)
        if after != before:
            changed[name] = (before, after)
    return changed


def power_loss(b: ProxiedBroker, rnd: random.Random) -> dict[str, tuple[int, int]]:
    """SIGKILL `b`, then :func:`drop_unsynced` on its data directory (not restarted)."""
    kill(b)
    return drop_unsynced(b.data, rnd)
