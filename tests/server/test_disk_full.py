"""``python -m engine serve`` (single node, no ZooKeeper) whose data directory fills up (a real
tmpfs, filled by a filler file) or is read-only.

Kafka's broker with one log dir halts when that dir fails ("Shutdown broker because all log dirs
in ... have failed"); ours does the same: the produce whose append failed is answered
KAFKA_STORAGE_ERROR (56) and never acknowledged, the process exits 1 with one line naming the
directory, and a restart (space freed) recovers everything acknowledged before."""

from __future__ import annotations

import os
import time
import uuid

from tests.serving import ServeProcess
from tests.tmpfs import fill, remount, tmpfs

# the periodic checkpoint runs at start and then hourly: only the produce meets the full disk
_ARGS = ("--config", "log.flush.offset.checkpoint.interval.ms=3600000",
         "--config", "group.initial.rebalance.delay.ms=0")


def _produce(bootstrap, topic, values, **conf):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "broker.address.family": "v4", "acks": "all",
                  "linger.ms": 2, **conf})
    acked, errors = [], []

    def report(err, msg):
        (errors.append(err) if err is not None else acked.append(msg.value()))
    for v in values:
        p.produce(topic, v, on_delivery=report)
        p.poll(0)
    p.flush(60)
    return acked, errors


def _consume(bootstrap, topic, end):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                  "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 60
    while len(got) < end and time.monotonic() < deadline:
        got += [m.value() for m in c.consume(1000, 1.0) if m.error() is None]
    c.close()
    return got


def test_serve_enospc_answers_storage_error_and_halts(tmp_path):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewTopic
    with tmpfs(tmp_path / "mnt", "6m") as mnt:
        srv = ServeProcess(tmp_path / "broker", *_ARGS)
        srv.data = os.path.join(mnt, "data")
        srv.start()
        try:
            topic = "full"
            admin = AdminClient({"bootstrap.servers": srv.bootstrap, "broker.address.family": "v4"})
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
            values = [f"v{i}".encode() * 10 for i in range(2000)]
            acked, errors = _produce(srv.bootstrap, topic, values, **{"enable.idempotence": True})
            assert errors == [] and len(acked) == 2000
            filler = fill(mnt)
            # no retries: the answer itself reaches the delivery report
            big = [b"x" * 200_000]
            acked2, errors2 = _produce(srv.bootstrap, topic, big, retries=0, **{"enable.idempotence": False})
            assert acked2 == [] and [e.code() for e in errors2] == [KafkaError.KAFKA_STORAGE_ERROR]
            srv.proc.wait(30)
            assert srv.proc.returncode == 1
            log = srv.log_text()
            assert "Traceback" not in log, log[-4000:]
            line = [x for x in log.splitlines() if "shutting down: data directory" in x]
            assert len(line) == 1 and srv.data in line[0] and "No space left on device" in line[0], log[-3000:]
            print(line[0])
            os.unlink(filler)
            srv.start()                      # recovery after the unclean stop: all acknowledged
            got = _consume(srv.bootstrap, topic, len(acked))
            assert got == acked
            assert "recovered" in srv.log_text()
        finally:
            code, log = srv.stop()
        assert "Traceback" not in log, log[-4000:]


def test_serve_refuses_a_read_only_data_dir(tmp_path):
    with tmpfs(tmp_path / "mnt", "4m") as mnt:
        srv = ServeProcess(tmp_path / "broker", *_ARGS)
        srv.data = os.path.join(mnt, "data")
        srv.start()
        assert srv.stop()[0] == 0
        remount(mnt, read_only=True)
        try:
            srv.start(timeout=30)
            raise AssertionError("the broker started on a read-only data directory")
        except RuntimeError as e:
            text = str(e)
        assert srv.proc.returncode not in (0, None)
        assert "Traceback" not in text
        errs = [x for x in text.splitlines() if x.startswith("error:")]
        assert errs == [f"error: cannot open data directory {srv.data} for writing: Read-only file system "
                        f"({srv.data}/.lock)"], text


def test_serve_halts_when_a_checkpoint_meets_the_full_disk(tmp_path):
    """No produce at all: the periodic checkpoint (every 500 ms here) is what meets the full disk;
    the broker halts the same way (LogManager.on_io_error)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    with tmpfs(tmp_path / "mnt", "4m") as mnt:
        srv = ServeProcess(tmp_path / "broker", "--config", "log.flush.offset.checkpoint.interval.ms=500")
        srv.data = os.path.join(mnt, "data")
        srv.start()
        try:
            admin = AdminClient({"bootstrap.servers": srv.bootstrap, "broker.address.family": "v4"})
            admin.create_topics([NewTopic("idle", 2, 1)])["idle"].result(30)
            fill(mnt)
            srv.proc.wait(30)
            assert srv.proc.returncode == 1
            log = srv.log_text()
            assert "Traceback" not in log, log[-4000:]
            line = [x for x in log.splitlines() if "shutting down: data directory" in x]
            assert len(line) == 1 and "No space left on device" in line[0] and "checkpoint" in line[0], log[-3000:]
        finally:
            srv.stop()


def _commit(w, offsets: dict[int, int]) -> list[int]:
    """One OffsetCommit v8 of group "g" (a simple consumer: no generation), its error codes; raw,
    so no client retries it against a broker that went away."""
    from engine.protocol.messages import ApiKey
    for _ in range(100):                 # the coordinator loads __consumer_offsets first
        r = w._call(None, ApiKey.OFFSET_COMMIT, {
            "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": "t", "partitions": [
                {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                 "committed_metadata": ""} for p, o in offsets.items()]}]}, 8)
        codes = [p["error_code"] for p in r["topics"][0]["partitions"]]
        if not set(codes) & {14, 15, 16}:
            return codes
        time.sleep(0.1)
    return codes


def test_serve_halts_when_an_offset_commit_meets_the_full_disk(tmp_path):
    """The group coordinator's own append (__consumer_offsets) on the full disk halts the broker
    the same way; the commit is not acknowledged, the ones before are there after the restart."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from engine.client.wire import KafkaConnectionError, WireClient
    from engine.protocol.messages import ApiKey
    with tmpfs(tmp_path / "mnt", "32m") as mnt:
        srv = ServeProcess(tmp_path / "broker", *_ARGS)
        srv.data = os.path.join(mnt, "data")
        srv.start()
        try:
            done = os.path.join(srv.data, "recovery-point-offset-checkpoint")
            deadline = time.monotonic() + 30
            while not os.path.exists(done) and time.monotonic() < deadline:
                time.sleep(0.05)                  # the start's checkpoint round is done
            admin = AdminClient({"bootstrap.servers": srv.bootstrap, "broker.address.family": "v4"})
            admin.create_topics([NewTopic("t", 100, 1)])["t"].result(30)
            with WireClient(srv.bootstrap, request_timeout_ms=10_000) as w:
                w._call(None, ApiKey.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": ["g"]}, 4)
                assert _commit(w, {0: 2}) == [0]
                filler = fill(mnt)
                try:       # 100 offsets (~6 KB): more than the free end of the segment's last page
                    codes = _commit(w, {p: 3 for p in range(100)})
                except KafkaConnectionError:
                    codes = None                  # the broker was gone before it answered
                assert codes is None or 0 not in codes, codes
            srv.proc.wait(30)
            assert srv.proc.returncode == 1
            log = srv.log_text()
            assert "Traceback" not in log, log[-4000:]
            line = [x for x in log.splitlines() if "shutting down: data directory" in x]
            assert len(line) == 1 and "in append to __consumer_offsets-" in line[0], log[-3000:]
            os.unlink(filler)
            srv.start()
            with WireClient(srv.bootstrap, request_timeout_ms=10_000) as w:
                for _ in range(100):
                    r = w._call(None, ApiKey.OFFSET_FETCH, {"group_id": "g", "topics": [
                        {"name": "t", "partition_indexes": [0, 1]}], "require_stable": False}, 7)
                    if r["error_code"] not in (14, 15, 16):
                        break
                    time.sleep(0.1)
                got = {p["partition_index"]: p["committed_offset"] for p in r["topics"][0]["partitions"]}
            assert got == {0: 2, 1: -1}
        finally:
            code, log = srv.stop()
        assert "Traceback" not in log, log[-4000:]
