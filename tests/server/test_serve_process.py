"""`python -m engine serve server.properties` as a user runs it: a real process,
real librdkafka clients, SIGKILL and SIGTERM.

- kill -9 of the broker, restart: every record acknowledged with acks=1 is there
  (the page cache survives a process crash; power loss is the storage tests' job).
- SIGTERM: clean shutdown, `.kafka_cleanshutdown` written, the next start does no
  recovery scan.
- Default limits: a 900 KiB message is accepted, a 2 MiB one is refused by the
  broker with MESSAGE_TOO_LARGE (librdkafka: MSG_SIZE_TOO_LARGE).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.serving import kafka_home

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ServeProcess:
    def __init__(self, tmp_path, name="server.properties", extra=""):
        self.data = str(tmp_path / "data")
        self.props = str(tmp_path / name)
        with open(self.props, "w") as f:
            f.write("# written by the test\n"
                    f"log.dirs={self.data}\n"
                    "listeners=PLAINTEXT://127.0.0.1:0\n"
                    "num.partitions=3\n"
                    "auto.create.topics.enable=true\n" + extra)

    def start(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "engine", "serve", self.props,
                                      "--log-level", "warning"],
                                     cwd=ROOT, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        seen = []
        while True:
            line = self.proc.stderr.readline()
            seen.append(line)
            m = re.search(r"serving .* on [\d.]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self.bootstrap = f"127.0.0.1:{self.port}"
                return self
            if not line and self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("broker did not start: " + "".join(seen))

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(20)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


def produce_acked(bootstrap, topic, n, size=100, **conf):
    acked = []
    errors = []

    def cb(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            errors.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, **conf})
    for i in range(n):
        p.produce(topic, value=(b"%08d" % i) * (size // 8), key=b"k%d" % (i % 17), on_delivery=cb)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(30)
    return acked, errors


def consume_all(bootstrap, topic, partitions, expected):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        for msg in c.consume(1000, timeout=0.5):
            if msg.error() is None:
                got.append((msg.partition(), msg.offset(), msg.value()))
    c.close()
    return got


def test_kill9_keeps_every_acked_record_and_sigterm_is_clean(tmp_path):
    srv = ServeProcess(tmp_path).start()
    try:
        acked, errors = produce_acked(srv.bootstrap, "events", 5000)
        assert not errors and len(acked) == 5000
    finally:
        srv.kill9()
    assert not os.path.exists(os.path.join(srv.data, ".kafka_cleanshutdown"))
    srv.start()  # recovers after the unclean stop
    try:
        got = consume_all(srv.bootstrap, "events", 3, len(acked))
        assert sorted(got) == sorted(acked)
    finally:
        code, err = srv.stop()
    assert code == 0, err
    assert "stopped cleanly" in err
    assert os.path.exists(os.path.join(srv.data, ".kafka_cleanshutdown"))
    import engine
    with engine.open(srv.data, background=False) as eng:  # after SIGTERM: nothing to recover
        assert eng.recovery_report == []
        assert eng.logs.segments_scanned == 0


def test_message_size_limits_at_defaults(tmp_path):
    srv = ServeProcess(tmp_path).start()
    try:
        ok, errors = produce_acked(srv.bootstrap, "big", 1, size=900 * 1024)
        assert not errors and len(ok) == 1
        # let the client send it, so that the broker is the one refusing
        _, errors = produce_acked(srv.bootstrap, "big", 1, size=2 * 1024 * 1024,
                                  **{"message.max.bytes": 4 * 1024 * 1024})
        assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
        got = consume_all(srv.bootstrap, "big", 3, 1)
        assert len(got) == 1 and len(got[0][2]) == 900 * 1024
    finally:
        code, err = srv.stop()
    assert code == 0, err


def test_unknown_key_in_properties_is_a_clear_error(tmp_path):
    srv = ServeProcess(tmp_path, extra="log.segmnet.bytes=1000\n")
    with pytest.raises(RuntimeError, match="log.segmnet.bytes"):
        srv.start()


def test_kafkas_own_server_properties_starts_the_broker_with_only_warnings(tmp_path):
    """Apache Kafka 4.0's sample config/server.properties, unchanged: keys this project does not
    implement are accepted with one warning naming them; the broker serves."""
    home = kafka_home()
    if home is None:
        pytest.skip("Apache Kafka 4.0 not found (set KAFKA_HOME or provide ../shared/kafka)")
    from tests.serving import ServeProcess as Serve
    props = os.path.join(home, "config", "server.properties")
    srv = Serve(tmp_path, props)
    srv.args += ["--advertised", srv.bootstrap]   # the file advertises localhost:9092
    srv.start()
    try:
        acked, errors = produce_acked(srv.bootstrap, "kafka-props", 10)
        assert not errors and len(acked) == 10
    finally:
        code, log = srv.stop()
    assert code == 0, log
    (warning,) = [line for line in log.splitlines() if "accepted without effect" in line]
    for key in ("num.network.threads", "num.io.threads", "socket.send.buffer.bytes",
                "socket.receive.buffer.bytes", "share.coordinator.state.topic.replication.factor"):
        assert key in warning
    # transaction.state.log.replication.factor has an effect now (cluster mode's __transaction_state)
    assert "transaction.state.log.replication.factor" not in warning
    assert "effective non-default configuration" in log and "num.partitions=1" in log


def test_kafka_keys_are_type_checked_and_unknown_keys_name_the_closest(tmp_path):
    from engine.config import EngineConfig
    from engine.errors import InvalidConfigError
    cfg = EngineConfig.from_mapping({"num.io.threads": "8", "delete.topic.enable": "false",
                                     "listener.name.internal.socket.send.buffer.bytes": "1024",
                                     "listener.name.internal.ssl.keystore.location": "/k"})
    # (listener.name.<l>.ssl.* has its effect on TLS listeners: not in the ignored list)
    assert cfg.ignored == {"num.io.threads": 8, "delete.topic.enable": False,
                           "listener.name.internal.socket.send.buffer.bytes": "1024"}
    assert cfg.explicit["listener.name.internal.ssl.keystore.location"] == "/k"
    with pytest.raises(InvalidConfigError, match="num.io.threads: expected an integer"):
        EngineConfig.from_mapping({"num.io.threads": "eight"})
    with pytest.raises(InvalidConfigError, match="did you mean 'num.network.threads'"):
        EngineConfig.from_mapping({"num.netwrok.threads": "3"})
    with pytest.raises(InvalidConfigError, match="did you mean 'log.segment.bytes'"):
        EngineConfig.from_mapping({"log.segmnet.bytes": "3"})


def test_startup_says_what_recovery_found_after_an_unclean_shutdown(tmp_path):
    from tests.serving import ServeProcess as Serve
    srv = Serve(tmp_path).start()
    try:
        acked, errors = produce_acked(srv.bootstrap, "rec", 200)
        assert not errors
    finally:
        srv.kill9()
    srv.start()
    code, log = srv.stop()
    assert code == 0
    line = [x for x in log.splitlines() if "after an unclean shutdown" in x]
    assert line and "segments scanned" in line[0] and "bytes truncated" in line[0]
    srv.start()
    _, log = srv.stop()
    assert log.count("after a clean shutdown") == 1


def test_sigquit_prints_every_threads_stack_and_the_broker_goes_on(tmp_path):
    """`kill -3`, as for a JVM: a thread dump on stderr, nothing else changes."""
    srv = ServeProcess(tmp_path).start()
    try:
        srv.proc.send_signal(signal.SIGQUIT)
        time.sleep(0.5)
        acked, errors = produce_acked(srv.bootstrap, "after-dump", 10)
        assert not errors and len(acked) == 10
    finally:
        code, err = srv.stop()
    assert code == 0 and "stopped cleanly" in err, err
    assert err.count("(most recent call first)") >= 3, err       # the main thread and workers
    assert "in cmd_serve" in err, err                             # the main thread's frames
