"""A broker whose disk is full or read-only, in a 3-broker cluster under an idempotent acks=all
producer (RF 3, min.insync.replicas 2).

Full (its data dir a small tmpfs, then filled by a filler file): its next append fails with
ENOSPC; it answers KAFKA_STORAGE_ERROR, closes its ZooKeeper session (its registration is gone
*before* its process ends -- no session-expiry wait) and exits 1 with one line naming the dir;
the controller moves its leaderships to the rest of the ISR and drops it from every ISR; the
producer goes on; nothing acknowledged is lost or duplicated.  With space freed it restarts,
recovers and rejoins the ISR.

Read-only (the tmpfs remounted ro after a clean stop): the broker refuses to start with one
line naming the dir, no traceback; the two others go on serving.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from tests.cluster.conftest import Cluster, controller_id, wait_for
from tests.cluster.test_replication import Load, _check, _consume_all, _create, _state
from tests.tmpfs import fill, remount, tmpfs

VICTIM = 3


class SpreadLoad(Load):
    """Load with keys spread over every partition (Load sends everything with one key)."""

    def _run(self):
        while not self._stop.is_set():
            if self.sent - len(self.acked) - len(self.errors) < self.window:
                try:
                    self.p.produce(self.topic, str(self.sent).encode(), key=str(self.sent % 97).encode(),
                                   on_delivery=self._report)
                    self.sent += 1
                except BufferError:
                    pass
            self.p.poll(0.001 if self.sent % 50 else 0)
        self.p.flush(120)


def _cluster(tmp_path, zk, mnt, *extra):
    c = Cluster(tmp_path, zk, 3, *extra)
    c.brokers[VICTIM].data = os.path.join(mnt, "data")
    return c


def _stop_all(c):
    logs = c.stop()
    for i, log in logs.items():
        assert "Traceback" not in log, f"broker {i} logged a traceback:\n{log[-4000:]}"


def _full_isr(zkc, topic, parts):
    return all(len(_state(zkc, topic, p)["isr"]) == 3 for p in range(parts))


def _create_led_by(bootstrap, topic, leader):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
    replicas = [leader] + [i for i in (1, 2, 3) if i != leader]
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas], config={"min.insync.replicas": "2"})],
                        operation_timeout=20)[topic].result(30)


@pytest.mark.parametrize("layout", ["spread", "leader"])
def test_full_disk_broker_leaves_the_isr_nothing_acked_lost(tmp_path, zk, zk_client, layout):
    """``spread``: 3 partitions, the victim leads one and follows two (its followers' appends
    usually meet the full disk first); ``leader``: 1 partition led by the victim, so the failure
    comes through a produce (answered KAFKA_STORAGE_ERROR, pending acks=all produces failed)."""
    parts = 3 if layout == "spread" else 1
    with tmpfs(tmp_path / "mnt", "16m") as mnt:
        c = _cluster(tmp_path, zk, mnt).start()
        try:
            topic = f"full-{uuid.uuid4().hex[:6]}"
            if layout == "spread":
                _create(c.brokers[1].bootstrap, topic, parts, 3, {"min.insync.replicas": "2"})
            else:
                _create_led_by(c.brokers[1].bootstrap, topic, VICTIM)
            wait_for(lambda: all(zk_client.exists(f"/brokers/topics/{topic}/partitions/{p}/state")
                                 for p in range(parts)), what="the partition states")
            load = SpreadLoad(c.bootstrap, topic).start()      # every broker leads one partition
            wait_for(lambda: len(load.acked) >= 2000, timeout=60, what="2000 acknowledged records")
            wait_for(lambda: _full_isr(zk_client, topic, parts), timeout=30, what="full ISRs")
            led = [p for p in range(parts) if _state(zk_client, topic, p)["leader"] == VICTIM]
            assert led
            epochs = {p: _state(zk_client, topic, p)["leader_epoch"] for p in range(parts)}
            b = c.brokers[VICTIM]
            t0 = time.monotonic()
            filler = fill(mnt)
            b.proc.wait(60)
            gone = zk_client.exists(f"/brokers/ids/{VICTIM}") is None     # right at its exit
            t_exit = time.monotonic() - t0
            assert b.proc.returncode == 1
            assert gone, "the broker exited without closing its ZooKeeper session"
            log = b.log_text()
            line = [x for x in log.splitlines() if "shutting down: data directory" in x]
            assert len(line) == 1 and b.data in line[0] and "No space left on device" in line[0], log[-3000:]
            assert "Traceback" not in log, log[-4000:]
            if layout == "leader":
                assert f"in append to {topic}-0)" in line[0]
            # leadership moved, the broker left every ISR
            wait_for(lambda: all(VICTIM not in _state(zk_client, topic, p)["isr"]
                                 and _state(zk_client, topic, p)["leader"] not in (VICTIM, -1)
                                 for p in range(parts)), timeout=30, what="new leaders, ISRs without it")
            for p in led:
                assert _state(zk_client, topic, p)["leader_epoch"] > epochs[p]
            before = len(load.acked)
            wait_for(lambda: len(load.acked) >= before + 2000, timeout=90, what="2000 more acknowledgements")
            # space again: it recovers, follows and rejoins every ISR
            os.unlink(filler)
            b.start()
            wait_for(lambda: _full_isr(zk_client, topic, parts), timeout=60, what="the broker back in every ISR")
            before = len(load.acked)
            wait_for(lambda: len(load.acked) >= before + 500, timeout=60, what="500 more acknowledgements")
            load.stop()
            assert load.errors == []
            print(f"\nbroker {VICTIM} (leader of {len(led)} partitions) out {t_exit:.2f} s after its disk "
                  f"filled: {line[0].split('CRITICAL ')[-1]}")
            lost, dup = _check(load, _consume_all(c.bootstrap, topic, parts))
            assert (lost, dup) == (0, 0)
        finally:
            _stop_all(c)


def test_read_only_data_dir_refuses_to_start_cluster_goes_on(tmp_path, zk, zk_client):
    with tmpfs(tmp_path / "mnt", "16m") as mnt:
        c = _cluster(tmp_path, zk, mnt).start()
        try:
            topic = f"ro-{uuid.uuid4().hex[:6]}"
            _create(c.brokers[1].bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
            wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state"),
                     what="the partition state")
            load = Load(c.bootstrap, topic).start()
            wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
            b = c.brokers[VICTIM]
            assert b.stop()[0] == 0                  # clean stop (controlled shutdown)
            remount(mnt, read_only=True)
            try:
                b.start(timeout=30)
                raise AssertionError("the broker started on a read-only data directory")
            except RuntimeError as e:
                text = str(e)
            assert b.proc.returncode not in (0, None)
            assert "Traceback" not in text, text
            errs = [x for x in text.splitlines() if x.startswith("error:")]
            assert len(errs) == 1 and b.data in errs[0] and "Read-only file system" in errs[0], text
            assert zk_client.exists(f"/brokers/ids/{VICTIM}") is None
            before = len(load.acked)
            wait_for(lambda: len(load.acked) >= before + 1000, timeout=60,
                     what="1000 more acknowledgements from the two others")
            load.stop()
            assert load.errors == []
            lost, dup = _check(load, _consume_all(c.bootstrap, topic, 1))
            assert (lost, dup) == (0, 0)
        finally:
            _stop_all(c)


def test_full_disk_at_topic_creation(tmp_path, zk, zk_client):
    """The disk is full before the topic exists: creating its local logs fails on the victim (the
    membership's worker), which halts the same way; the topic is served by the two others."""
    with tmpfs(tmp_path / "mnt", "16m") as mnt:
        # the periodic checkpoint only at start (it would meet the full disk first otherwise)
        c = _cluster(tmp_path, zk, mnt, "--config", "log.flush.offset.checkpoint.interval.ms=3600000").start()
        try:
            b = c.brokers[VICTIM]
            wait_for(lambda: os.path.exists(os.path.join(b.data, "recovery-point-offset-checkpoint")),
                     what="the victim's first checkpoint")
            filler = fill(mnt)
            topic = f"new-{uuid.uuid4().hex[:6]}"
            try:
                _create_led_by(c.brokers[1].bootstrap, topic, VICTIM)
            except Exception as e:  # noqa: BLE001 - the victim was the controller the request went to
                # it halted while answering; once another broker is controller, the topic is created
                # (again, TOPIC_ALREADY_EXISTS when the first attempt got to ZooKeeper)
                b.proc.wait(60)
                if not zk_client.exists(f"/brokers/topics/{topic}"):
                    wait_for(lambda: controller_id(zk_client) not in (None, VICTIM), what="a new controller")
                    _create_led_by(c.brokers[1].bootstrap, topic, VICTIM)
                print(f"\ncreation answered {e!r} (the victim was the controller)")
            b.proc.wait(60)
            assert b.proc.returncode == 1
            assert zk_client.exists(f"/brokers/ids/{VICTIM}") is None
            log = b.log_text()
            assert "Traceback" not in log, log[-4000:]
            line = [x for x in log.splitlines() if "shutting down: data directory" in x]
            assert len(line) == 1 and "No space left on device" in line[0], log[-3000:]
            print("\n" + line[0].split("CRITICAL ")[-1])
            wait_for(lambda: _state(zk_client, topic)["leader"] not in (VICTIM, -1)
                     and VICTIM not in _state(zk_client, topic)["isr"], timeout=30, what="a leader among the others")
            load = Load(c.bootstrap, topic).start()
            wait_for(lambda: len(load.acked) >= 500, timeout=60, what="500 acknowledged records")
            load.stop()
            assert load.errors == []
            assert _check(load, _consume_all(c.bootstrap, topic, 1)) == (0, 0)
            os.unlink(filler)
        finally:
            _stop_all(c)
