"""In-process reads through the replica layer (engine/replica/local_read.py): the embedded
consumer and read_arrow read a local replica up to its high watermark, a read never makes a
replica leader (a replicated directory opened without its cluster keeps its checkpointed HW),
and a read-only open's consumer placed between the published HW and the log end waits there
(Kafka's empty fetch) instead of being reset."""

from __future__ import annotations

import engine
from engine._native import BatchBuilder
from engine.storage.manager import LogManager

T = "t"


def _written(d: str, hw: int, leo: int) -> None:
    """A replicated data directory: one log of `leo` one-record batches whose HW is `hw`."""
    m = LogManager(d, auto_high_watermark=False)
    log = m.create_log(T, 0)
    for i in range(leo):
        b = BatchBuilder()
        b.append(b"v%d" % i)
        log.append(bytes(b.build()), leader_epoch=1)
    log.update_high_watermark(hw)
    m.close()


def test_reads_stop_at_the_high_watermark_and_change_no_role(tmp_path):
    d = str(tmp_path / "d")
    _written(d, 3, 9)
    with engine.open(d, {"zookeeper.connect": "127.0.0.1:1"}, background=False) as eng:
        c = eng.consumer(auto_offset_reset="earliest")
        c.assign([(T, 0)])
        assert [r.value for r in c.poll(timeout_ms=0)] == [b"v0", b"v1", b"v2"]
        assert c.end_offsets([(T, 0)]) == {(T, 0): 3}
        assert eng.read_arrow(T, 0).num_rows == 3
        o = eng.replicas.local.local_offsets(T, 0)
        assert (o.log_start_offset, o.high_watermark, o.log_end_offset) == (0, 3, 9)
        # reading made no partition leader here (that would take the log end as committed)
        assert eng.replicas.partitions() == []
        assert eng.replicas.local.local_offsets(T, 0).high_watermark == 3


def test_read_only_consumer_above_the_published_high_watermark_waits(tmp_path):
    d = str(tmp_path / "d")
    _written(d, 3, 9)
    with engine.open(d, read_only=True, background=False) as ro:
        c = ro.consumer(auto_offset_reset="latest")
        c.assign([(T, 0)])
        c.seek((T, 0), 5)                       # between the writer's HW (3) and its log end (9)
        assert c.poll(timeout_ms=0) == []
        assert c.position((T, 0)) == 5          # not reset to "latest" (3)
        c.seek((T, 0), 1)
        assert [r.offset for r in c.poll(timeout_ms=0)] == [1, 2]
