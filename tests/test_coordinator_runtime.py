"""The coordinator runtime drives any CoordinatorShard (engine/coordinator/shard.py), as Kafka
4.0's CoordinatorRuntime does: a key-value shard of the test's own on a real node, its
internal topic created, written, unloaded and replayed by the runtime; and the group and
transaction coordinators each own a runtime instead of being one."""

from __future__ import annotations

import engine
from engine.coordinator.runtime import CoordinatorRuntime
from engine.coordinator.shard import internal_topic_config

T = 10


class KeyValueShard:
    """The latest value per key; a tombstone deletes.  Records which hooks ran, in order."""

    def __init__(self) -> None:
        self.table: dict[bytes, bytes] = {}
        self.calls: list = []

    def new_load_state(self) -> dict:
        return {}

    def replay_batch(self, header, records, state) -> None:
        for _off, _ts, key, value, _headers in records:
            state[bytes(key)] = None if value is None else bytes(value)

    def apply_loaded(self, partition: int, state) -> None:
        self.calls.append(("loaded", partition))
        self.table.update({k: v for k, v in state.items() if v is not None})

    def forget_partition(self, partition: int) -> None:
        self.calls.append(("forgotten", partition))
        self.table.clear()

    def start_timers(self) -> None:
        self.calls.append("start")

    def cancel_timers(self) -> None:
        self.calls.append("cancel")


def test_a_runtime_drives_a_shard_of_its_own(tmp_path):
    with engine.open(tmp_path) as eng:
        shard = KeyValueShard()
        rt = CoordinatorRuntime(eng.node, topic="__kv_state", name="kv-coordinator", partitions=1,
                                topic_config=internal_topic_config("producer"))
        rt.start(shard)
        try:
            rt.call(rt.ensure_topic, timeout=T)
            rt.wait_loaded(T, partitions=1)
            assert eng.node.topic_metadata("__kv_state").config["cleanup.policy"] == "compact"
            assert rt.call(rt.route, "any key", timeout=T) == (0, 0)
            assert rt.call(rt.append, 0, [(b"a", b"1"), (b"b", b"2")], timeout=T)
            assert rt.call(rt.append, 0, [(b"a", None)], timeout=T)
            rt.call(rt.unload_partition, 0, timeout=T)
            assert rt.call(rt.route, "any key", timeout=T)[0] == 16       # NOT_COORDINATOR
            rt.call(rt.load_partition, 0, timeout=T)
            assert shard.table == {b"b": b"2"}
            assert shard.calls == ["start", ("loaded", 0), ("forgotten", 0), ("loaded", 0)]
        finally:
            rt.stop()
        assert shard.calls[-2:] == ["cancel", ("forgotten", 0)]
        assert not rt.running


def test_the_coordinators_own_their_runtime(tmp_path):
    with engine.open(tmp_path) as eng:
        for coord in (eng.group_coordinator, eng.transaction_coordinator):
            assert not isinstance(coord, CoordinatorRuntime)
            assert isinstance(coord.runtime, CoordinatorRuntime) and coord.runtime.running
            assert coord.running and not coord.on_current_loop
