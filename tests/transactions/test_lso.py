"""The last stable offset: an open transaction holds read_committed readers back.

- While producer A's transaction is open, records committed after A's first record (by B's
  transaction) are held back: ListOffsets(read_committed) answers A's first offset and a
  read_committed consumer gets nothing; read_uncommitted sees everything. When A commits,
  read_committed gets A's and B's records, in offset order.
- A producer SIGKILLed inside a transaction (a separate process, ``transaction.timeout.ms``
  short) holds the LSO until the coordinator aborts its transaction after the time-out; then
  read_committed readers move past it (its records stay invisible to them) and see what was
  committed behind it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.secure_clients import confluent

from .clients import create_topic, end_offsets, producer, read_all

TXN_TIMEOUT_MS = 5000      # long enough that the check right after the kill still sees it open


def test_open_transaction_holds_back_read_committed(broker, unique):
    topic = f"{unique}-t"
    create_topic(broker.bootstrap, topic, 1)
    a = producer("confluent", broker.bootstrap, f"{unique}-a")
    b = producer("confluent", broker.bootstrap, f"{unique}-b")
    try:
        a.init()
        b.init()
        a.begin()
        a.send(topic, b"a0", 0)
        a.send(topic, b"a1", 0)
        a.flush()
        b.begin()
        b.send(topic, b"b0", 0)
        b.send(topic, b"b1", 0)
        b.flush()
        b.commit()
        assert end_offsets(broker.bootstrap, topic, [0], "read_uncommitted") == {0: 5}
        assert end_offsets(broker.bootstrap, topic, [0], "read_committed") == {0: 0}
        for reader in ("confluent", "kafka-python"):
            got, _ = read_all(reader, broker.bootstrap, topic, [0], "read_committed")
            assert got == {0: []}, reader
        got, _ = read_all("confluent", broker.bootstrap, topic, [0], "read_uncommitted")
        assert got == {0: [(0, b"a0"), (1, b"a1"), (2, b"b0"), (3, b"b1")]}

        a.commit()
        assert end_offsets(broker.bootstrap, topic, [0], "read_committed") == {0: 6}
        for reader in ("confluent", "aiokafka", "kafka-python"):
            got, pos = read_all(reader, broker.bootstrap, topic, [0], "read_committed")
            assert got == {0: [(0, b"a0"), (1, b"a1"), (2, b"b0"), (3, b"b1")]}, reader
            assert pos == {0: 6}, reader
    finally:
        a.close()
        b.close()


VICTIM = r"""
import json, sys, time
from confluent_kafka import Producer
conf, topic, txid, timeout_ms = sys.argv[1:5]
p = Producer({**json.loads(conf), "transactional.id": txid,
              "transaction.timeout.ms": int(timeout_ms), "linger.ms": 0})
p.init_transactions(30)
p.begin_transaction()
for i in range(3):
    p.produce(topic, b"victim-%d" % i, partition=0)
assert p.flush(30) == 0
print("in-transaction", flush=True)
time.sleep(120)
"""


def test_producer_killed_mid_transaction_is_aborted_after_its_timeout(broker, unique):
    topic = f"{unique}-t"
    create_topic(broker.bootstrap, topic, 1)
    proc = subprocess.Popen([sys.executable, "-c", VICTIM, json.dumps(confluent(broker.bootstrap)), topic,
                             f"{unique}-victim", str(TXN_TIMEOUT_MS)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == b"in-transaction", f"the producer process said {line!r}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    killed = time.monotonic()
    # Right after the kill the transaction is still open: the LSO stays at its first record.
    assert end_offsets(broker.bootstrap, topic, [0], "read_committed") == {0: 0}

    b = producer("confluent", broker.bootstrap, f"{unique}-b")
    try:
        b.init()
        b.begin()
        b.send(topic, b"b0", 0)
        b.send(topic, b"b1", 0)
        b.flush()
        b.commit()
    finally:
        b.close()

    # The coordinator aborts after transaction.timeout.ms (+ its check interval, 500 ms here).
    deadline = time.monotonic() + TXN_TIMEOUT_MS / 1000 + 20
    while True:
        hw = end_offsets(broker.bootstrap, topic, [0], "read_uncommitted")[0]
        lso = end_offsets(broker.bootstrap, topic, [0], "read_committed")[0]
        if lso == hw and hw == 3 + 2 + 2:         # victim's 3, b's 2, two markers
            break
        assert time.monotonic() < deadline, f"LSO still {lso} (high watermark {hw}) " \
            f"{time.monotonic() - killed:.1f}s after the producer was killed"
        time.sleep(0.2)

    for reader in ("confluent", "aiokafka", "kafka-python"):
        got, pos = read_all(reader, broker.bootstrap, topic, [0], "read_committed")
        assert [v for _o, v in got[0]] == [b"b0", b"b1"], reader
        assert pos == {0: 7}, reader
    got, _ = read_all("confluent", broker.bootstrap, topic, [0], "read_uncommitted")
    assert got[0][:3] == [(0, b"victim-0"), (1, b"victim-1"), (2, b"victim-2")]
    assert [v for _o, v in got[0][3:]] == [b"b0", b"b1"]
