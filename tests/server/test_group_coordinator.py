"""The GroupCoordinator's own API (what the broker and in-process consumers call).

- ``unload_partition`` / ``load_partition`` (the seam for moving a partition's
  leadership): while unloaded, requests for its groups get NOT_COORDINATOR and a
  parked JoinGroup is answered NOT_COORDINATOR; loading again restores the groups
  from the log.
- ``group.max.size``; the thread-safe facade used from many threads at once.
"""

from __future__ import annotations

import concurrent.futures

import engine

NOT_COORDINATOR, GROUP_MAX_SIZE_REACHED, MEMBER_ID_REQUIRED = 16, 81, 79


def _join(coord, group, member="", **kw):
    return coord.submit(coord.join_group, group, member, protocol_type="consumer",
                        protocols=[("range", b"m")], session_timeout_ms=10_000, **kw)


def test_unload_and_load_partition(tmp_path):
    cfg = {"offsets.topic.num.partitions": 3, "group.initial.rebalance.delay.ms": 60_000}
    with engine.open(str(tmp_path / "d"), cfg, background=False) as eng:
        eng.create_topic("t", 1)
        coord = eng.group_coordinator
        assert coord.call(coord.commit_offsets, "g", {("t", 0): 42}, timeout=10) == {("t", 0): 0}
        p = coord.partition_for("g")
        parked = _join(coord, "g", require_known_member_id=False)   # waits in the initial delay
        coord.call(coord.unload_partition, p, timeout=10)
        assert parked.result(10).error_code == NOT_COORDINATOR
        assert coord.call(coord.commit_offsets, "g", {("t", 0): 7}, timeout=10) == {("t", 0): NOT_COORDINATOR}
        assert coord.call(coord.fetch_offsets, "g", timeout=10)[0] == NOT_COORDINATOR
        assert coord.call(coord.heartbeat, "g", 1, "m", timeout=10) == NOT_COORDINATOR
        other = next(g for g in (f"o{i}" for i in range(100)) if coord.partition_for(g) != p)
        assert coord.call(coord.commit_offsets, other, {("t", 0): 1}, timeout=10) == {("t", 0): 0}
        coord.call(coord.load_partition, p, timeout=10)
        err, offsets = coord.call(coord.fetch_offsets, "g", timeout=10)
        assert err == 0 and offsets[("t", 0)].offset == 42


def test_group_max_size_and_concurrent_callers(tmp_path):
    cfg = {"offsets.topic.num.partitions": 1, "group.initial.rebalance.delay.ms": 0, "group.max.size": 2}
    with engine.open(str(tmp_path / "d"), cfg, background=False) as eng:
        eng.create_topic("t", 8)
        coord = eng.group_coordinator
        first = [_join(coord, "full").result(10) for _ in range(3)]
        assert [r.error_code for r in first] == [MEMBER_ID_REQUIRED, MEMBER_ID_REQUIRED, GROUP_MAX_SIZE_REACHED]

        # 8 threads committing to 8 groups at once through the blocking facade
        def work(i):
            for n in range(20):
                res = coord.call(coord.commit_offsets, f"c{i}", {("t", i): n}, timeout=10)
                assert res == {("t", i): 0}
            return coord.call(coord.fetch_offsets, f"c{i}", timeout=10)[1][("t", i)].offset

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            assert list(ex.map(work, range(8))) == [19] * 8
