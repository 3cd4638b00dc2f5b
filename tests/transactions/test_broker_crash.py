"""The broker SIGKILLed while a transaction commits: after a restart it is whole or absent.

A producer process writes a transaction over three partitions plus a group offset
(``send_offsets_to_transaction``) and calls ``commit_transaction()``; right after (0-20 ms,
one delay per round) the broker gets SIGKILL, then the producer process too. After a restart
on the same data directory, once no transaction is open (the coordinator either finishes a
commit it had decided, or aborts at ``transaction.timeout.ms``), the transaction is complete
everywhere or aborted everywhere: read_committed shows all of its records in every partition
or none in any, and the group's offset moved exactly when the records are visible. Records
acknowledged before the kill are all in the log (read_uncommitted), committed or not.

And a kill while a transaction is open (before any commit): after the restart the same
producer goes on and commits, and every record of the transaction is visible.

It kills the broker, so it has a broker of its own: ours by default; ``TXN_CRASH_KAFKA=1``
also runs it against Apache Kafka 4.0 (restarting Kafka takes ~15 s a round), which is how the
test itself was checked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.serving import KafkaProcess, ServeProcess, find_kafka

from .clients import T, create_topic, end_offsets, read_all
from .conftest import BROKER_SETTINGS, SELECTED

TXN_TIMEOUT_MS = 3000
PER_PARTITION = 50
DELAYS = (0.0, 0.005, 0.02)

COMMITTER = r"""
import sys
from confluent_kafka import Consumer, Producer, TopicPartition
bootstrap, topic, topic_in, group, txid, rnd, per, timeout_ms = sys.argv[1:9]
rnd, per = int(rnd), int(per)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid,
              "transaction.timeout.ms": int(timeout_ms), "linger.ms": 5})
p.init_transactions(30)
p.begin_transaction()
for part in range(3):
    for i in range(per):
        p.produce(topic, b"r%d-%d-%d" % (rnd, part, i), partition=part)
assert p.flush(30) == 0
p.send_offsets_to_transaction([TopicPartition(topic_in, 0, rnd + 1)], c.consumer_group_metadata(), 30)
print("committing", flush=True)
p.commit_transaction(30)
print("committed", flush=True)
"""


def _params():
    out = [pytest.param("ours", id="ours", marks=[pytest.mark.ours_only] + (
        [] if "ours" in SELECTED else [pytest.mark.skip(reason="TXN_BROKERS leaves out ours")]))]
    kafka_marks = [pytest.mark.kafka, pytest.mark.slow]
    if not os.environ.get("TXN_CRASH_KAFKA") or "kafka" not in SELECTED:
        kafka_marks.append(pytest.mark.skip(reason="set TXN_CRASH_KAFKA=1 to check this test against Kafka 4.0"))
    out.append(pytest.param("kafka", id="kafka", marks=kafka_marks))
    return out


@pytest.fixture(params=_params())
def own_broker(request, tmp_path):
    if request.param == "ours":
        args = []
        for kv in BROKER_SETTINGS:
            args += ["--config", kv]
        srv = ServeProcess(tmp_path, *args).start()
        yield srv
        _code, log = srv.stop()
        assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"
    else:
        home, why_not = find_kafka()
        if home is None:
            pytest.skip(why_not)
        k = KafkaProcess(home, str(tmp_path), *BROKER_SETTINGS).start()
        k.kill9 = lambda: (os.killpg(k.proc.pid, signal.SIGKILL), k.proc.wait(30))
        yield k
        k.stop()


def _committed_offset(bootstrap, topic_in, group):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return c.committed([TopicPartition(topic_in, 0)], timeout=T)[0].offset
    finally:
        c.close()


def _settled(bootstrap, topic, deadline):
    """Wait until no transaction is open on the three partitions (LSO == high watermark)."""
    while True:
        try:
            hw = end_offsets(bootstrap, topic, [0, 1, 2], "read_uncommitted")
            lso = end_offsets(bootstrap, topic, [0, 1, 2], "read_committed")
            if hw == lso:
                return hw
        except Exception as e:          # the broker is still loading
            lso, hw = repr(e), None
        assert time.monotonic() < deadline, f"a transaction stayed open after the restart: LSO {lso}, HW {hw}"
        time.sleep(0.25)


def test_commit_interrupted_by_broker_kill_is_all_or_nothing(own_broker, tmp_path):
    srv = own_broker
    topic, topic_in, group = "crash-out", "crash-in", "crash-g"
    create_topic(srv.bootstrap, topic, 3)
    create_topic(srv.bootstrap, topic_in, 1)
    outcomes = []
    expect_offset = -1001                      # no committed offset yet
    visible_rounds = []
    for rnd, delay in enumerate(DELAYS):
        proc = subprocess.Popen([sys.executable, "-c", COMMITTER, srv.bootstrap, topic, topic_in,
                                 group, f"crash-txid-{rnd}", str(rnd), str(PER_PARTITION),
                                 str(TXN_TIMEOUT_MS)],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            line = proc.stdout.readline()
            assert line.strip() == b"committing", f"round {rnd}: the producer said {line!r}"
            time.sleep(delay)
            srv.kill9()
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        srv.start()
        _settled(srv.bootstrap, topic, time.monotonic() + TXN_TIMEOUT_MS / 1000 + 30)

        committed, _ = read_all("confluent", srv.bootstrap, topic, [0, 1, 2], "read_committed")
        everything, _ = read_all("confluent", srv.bootstrap, topic, [0, 1, 2], "read_uncommitted")
        mine = [b"r%d-" % rnd]
        per_part = [sum(1 for _o, v in committed[p] if v.startswith(mine[0])) for p in range(3)]
        written = [sum(1 for _o, v in everything[p] if v.startswith(mine[0])) for p in range(3)]
        assert written == [PER_PARTITION] * 3, f"round {rnd}: acknowledged records lost: {written}"
        assert per_part in ([PER_PARTITION] * 3, [0] * 3), \
            f"round {rnd} (kill {delay * 1000:.0f} ms into the commit): half a transaction: {per_part}"
        is_committed = per_part[0] == PER_PARTITION
        if is_committed:
            expect_offset = rnd + 1
            visible_rounds.append(rnd)
        assert _committed_offset(srv.bootstrap, topic_in, group) == expect_offset, \
            f"round {rnd}: group offset and records disagree (records {'visible' if is_committed else 'aborted'})"
        # earlier rounds keep their outcome
        for earlier in range(rnd):
            n = sum(1 for _o, v in committed[0] if v.startswith(b"r%d-" % earlier))
            assert n == (PER_PARTITION if earlier in visible_rounds else 0)
        outcomes.append("commit" if is_committed else "abort")
    print("outcomes per delay:", dict(zip(DELAYS, outcomes, strict=True)))


def test_open_transaction_survives_a_broker_kill(own_broker):
    """SIGKILL while a transaction is open (its records acknowledged, no commit asked yet):
    after the restart the same producer adds more records and commits, and read_committed
    sees every record of it -- the coordinator's Ongoing state and the records were kept."""
    from confluent_kafka import Producer
    srv = own_broker
    topic = "survive"
    create_topic(srv.bootstrap, topic, 3)
    p = Producer({"bootstrap.servers": srv.bootstrap, "transactional.id": "survivor", "linger.ms": 5,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(T)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, b"before-%d" % i, partition=i % 3)
    assert p.flush(T) == 0
    srv.kill9()
    srv.start()
    for i in range(30):
        p.produce(topic, b"after-%d" % i, partition=i % 3)
    p.commit_transaction(60)
    _settled(srv.bootstrap, topic, time.monotonic() + 30)
    committed, _ = read_all("confluent", srv.bootstrap, topic, [0, 1, 2], "read_committed")
    for part in range(3):
        assert [v for _o, v in committed[part]] == \
            [b"before-%d" % i for i in range(part, 30, 3)] + [b"after-%d" % i for i in range(part, 30, 3)]
    del p
