"""What transactions leave on disk, read by Kafka's own ``kafka-dump-log.sh``: the same on
both brokers.

A confluent-kafka producer commits a transaction of two records, aborts one of one record,
then a second instance with the same transactional.id starts. Then, in the broker's data
directory:

- ``__transaction_state`` (``--transaction-log-decoder``): the id's records in order, Kafka's
  TransactionLog format: Empty, Ongoing [t-0], PrepareCommit [t-0], CompleteCommit [],
  Ongoing [t-0], PrepareAbort [t-0], CompleteAbort [], Empty (the next epoch);
- the data partition (``--deep-iteration``): transactional batches with the producer's
  sequences, a COMMIT and an ABORT control batch (one record each, an EndTxnMarker);
- its ``.txnindex``: the aborted transaction's entry (first offset, last offset = its marker,
  last stable offset).
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import time

import pytest

from tests.serving import find_kafka

from .clients import create_topic, producer


def _dump(*args) -> str:
    home, why_not = find_kafka()
    if home is None:
        pytest.skip(why_not)
    r = subprocess.run([os.path.join(home, "bin", "kafka-dump-log.sh"), *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def _states(broker, txid):
    files = sorted(glob.glob(os.path.join(broker.data_dir, "__transaction_state-*", "*.log")))
    assert files, f"no __transaction_state segments under {broker.data_dir}"
    out = _dump("--transaction-log-decoder", "--files", ",".join(files))
    pat = re.compile(r"transactionalId=" + re.escape(txid) +
                     r" payload: producerId:(\d+),producerEpoch:(\d+),state=(\w+),partitions=\[([^\]]*)\]")
    return [(int(pid), int(epoch), state, parts) for pid, epoch, state, parts in pat.findall(out)]


def test_transaction_state_data_and_txnindex_as_kafka_writes_them(broker, unique):
    topic, txid = f"{unique}-t", f"{unique}-txid"
    create_topic(broker.bootstrap, topic, 1)
    p = producer("confluent", broker.bootstrap, txid)
    try:
        p.init()
        p.begin()
        p.send(topic, b"a", 0)
        p.send(topic, b"b", 0)
        p.commit()
        p.begin()
        p.send(topic, b"c", 0)
        p.abort()
    finally:
        p.close()
    successor = producer("confluent", broker.bootstrap, txid)
    try:
        successor.init()              # answered once the abort completed: its Empty record follows it
    finally:
        successor.close()

    deadline = time.monotonic() + 30
    while True:
        states = _states(broker, txid)
        if len(states) >= 8 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    pid, epoch = states[0][0], states[0][1]
    tp = f"{topic}-0"
    assert [(s, parts) for _p, _e, s, parts in states] == [
        ("Empty", ""), ("Ongoing", tp), ("PrepareCommit", tp), ("CompleteCommit", ""),
        ("Ongoing", tp), ("PrepareAbort", tp), ("CompleteAbort", ""), ("Empty", "")]
    assert {(p_, e) for p_, e, _s, _parts in states[:7]} == {(pid, epoch)}
    assert states[7][:2] == (pid, epoch + 1)

    part_dir = os.path.join(broker.data_dir, tp)
    (seg,) = sorted(glob.glob(os.path.join(part_dir, "*.log")))
    data = _dump("--deep-iteration", "--files", seg)
    batches = re.findall(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) "
                         r"lastSequence: (-?\d+) producerId: (-?\d+) producerEpoch: (-?\d+) "
                         r"partitionLeaderEpoch: \d+ isTransactional: (\w+) isControl: (\w+)", data)
    assert [(int(b), int(c), int(s), int(p_), int(e), t, ctl) for b, _l, c, s, _ls, p_, e, t, ctl in batches] == [
        (0, 2, 0, pid, epoch, "true", "false"),
        (2, 1, -1, pid, epoch, "true", "true"),
        (3, 1, 2, pid, epoch, "true", "false"),
        (4, 1, -1, pid, epoch, "true", "true")]
    markers = re.findall(r"endTxnMarker: (\w+) coordinatorEpoch: (\d+)", data)
    assert [m for m, _c in markers] == ["COMMIT", "ABORT"]

    (idx,) = glob.glob(os.path.join(part_dir, "*.txnindex"))
    entries = re.findall(r"producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+) lastStableOffset: (\d+)",
                         _dump("--files", idx))
    assert [tuple(int(x) for x in e) for e in entries] == [(pid, 3, 4, 5)]
