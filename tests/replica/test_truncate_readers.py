"""An unclean election makes the old leader truncate below its own high watermark: a reader in
another process that mapped those batches (Spark's in-place reader, ``engine.open(read_only=True)``
and ``read_arrow``) must keep reading them, not die of SIGBUS (segment.py's truncate_to cuts such
a segment in a new file; tests/storage/test_truncate_mapped.py covers the storage rule)."""

from __future__ import annotations

import os
import subprocess
import sys

from .conftest import produce, wait_until
from .test_replication import values_of

T = "t"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

READER = """
import sys, engine
from engine.arrow import iter_log_batches
eng = engine.open(sys.argv[1], read_only=True, background=False)
it = iter_log_batches(eng.log("t", 0), "t", 0, max_rows=100)   # resumes past page 1
rows = next(it).num_rows
print("mapped", flush=True)
sys.stdin.readline()
rows += sum(b.num_rows for b in it)
print(rows, flush=True)
"""


def test_old_leader_truncating_below_its_hw_after_an_unclean_election_spares_a_mapping_reader(cluster):
    c = cluster(2, {"replica.lag.time.max.ms": 30000})
    c.create(T, [0, 1], epoch=1)
    n0 = c.nodes[0]
    assert produce(n0.address, T, [b"c1", b"c2", b"c3"], acks=-1) == (0, 0)
    wait_until(lambda: c.nodes[1].log(T).high_watermark == 3, what="follower HW 3")
    c.stop(1)
    c.elect(T, 0, 2, [0, 1], isr=[0], partition_epoch=1)            # the ISR shrinks to the leader
    for i in range(20):                                               # ~800 KB, committed on broker 0
        assert produce(n0.address, T, [b"%d" % i * 4000] * 10, acks=-1) == (0, 3 + 10 * i)
    assert n0.log(T).high_watermark == 203
    reader = subprocess.Popen([sys.executable, "-c", READER, n0.path], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert reader.stdout.readline().strip() == "mapped", reader.stderr.read()
        n1 = c.start(1)                                               # unclean: broker 1 was out of the ISR
        c.view.set_partition(T, 0, 1, 3, [0, 1], [1], 2)
        n1.rm.become_leader(T, 0, 3, [0, 1], [1], 2)
        assert produce(n1.address, T, [b"u1"], acks=-1) == (0, 3)
        n0.rm.become_follower(T, 0, 1, 3, [0, 1], 2)
        wait_until(lambda: values_of(n0, T) == [b"c1", b"c2", b"c3", b"u1"], what="old leader truncated")
        out, err = reader.communicate("go\n", timeout=60)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, f"reader died (signal {-reader.returncode}): {err[-2000:]}"
    assert out.split() == ["203"]                 # the batches it had mapped, as they were
