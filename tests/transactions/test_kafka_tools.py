"""Kafka's own ``kafka-transactions.sh`` against the broker: list, describe, describe-producers.

A confluent-kafka producer (``transaction.timeout.ms=45000``) opens a transaction with two
records on partition 0 and one on partition 1 of a topic; the tools must show it Ongoing, on
both partitions, with its producer id, epoch and timeout, and the producer's open transaction
starting at offset 0 of partition 0. After the commit: CompleteCommit, no partitions, no open
transaction in describe-producers; after a second transaction is aborted: CompleteAbort.
The tools run in parallel (each is a JVM start of several seconds).
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.secure_clients import command_config
from tests.serving import find_kafka

from .clients import create_topic, producer


def _tool(bootstrap, *args):
    home, why_not = find_kafka()
    if home is None:
        pytest.skip(why_not)
    r = subprocess.run([os.path.join(home, "bin", "kafka-transactions.sh"), "--bootstrap-server",
                        bootstrap, *command_config(bootstrap), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"kafka-transactions.sh {' '.join(args)}: {r.stdout}\n{r.stderr[-2000:]}"
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[0].split("\t")]
    rows = []
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.split("\t")]
        rows.append(dict(zip(header, cells + [""] * (len(header) - len(cells)), strict=False)))
    return rows


def _tools(bootstrap, txid, topic):
    with ThreadPoolExecutor(3) as ex:
        lst = ex.submit(_tool, bootstrap, "list")
        desc = ex.submit(_tool, bootstrap, "describe", "--transactional-id", txid)
        prods = ex.submit(_tool, bootstrap, "describe-producers", "--topic", topic, "--partition", "0")
        listed = [r for r in lst.result() if r["TransactionalId"] == txid]
        (described,) = desc.result()
        return listed, described, prods.result()


def test_list_describe_and_describe_producers(broker, unique):
    topic, txid = f"{unique}-t", f"{unique}-txid"
    create_topic(broker.bootstrap, topic, 2)
    p = producer("confluent", broker.bootstrap, txid, **{"transaction.timeout.ms": 45000})
    try:
        p.init()
        p.begin()
        p.send(topic, b"a", 0)
        p.send(topic, b"b", 0)
        p.send(topic, b"c", 1)
        p.flush()

        listed, described, prod0 = _tools(broker.bootstrap, txid, topic)
        assert len(listed) == 1 and listed[0]["TransactionState"] == "Ongoing", listed
        pid = listed[0]["ProducerId"]
        assert int(pid) >= 0
        assert described["TransactionalId"] == txid
        assert described["ProducerId"] == pid
        assert described["TransactionState"] == "Ongoing"
        assert described["TransactionTimeoutMs"] == "45000"
        assert int(described["CurrentTransactionStartTimeMs"]) > 0
        assert set(described["TopicPartitions"].split(",")) == {f"{topic}-0", f"{topic}-1"}
        epoch = described["ProducerEpoch"]
        assert [(r["ProducerId"], r["ProducerEpoch"], r["LastSequence"], r["CurrentTransactionStartOffset"])
                for r in prod0] == [(pid, epoch, "1", "0")]

        p.commit()
        listed, described, prod0 = _tools(broker.bootstrap, txid, topic)
        assert [r["TransactionState"] for r in listed] == ["CompleteCommit"]
        assert described["TransactionState"] == "CompleteCommit"
        assert described["TopicPartitions"] == ""
        assert [(r["ProducerId"], r["CurrentTransactionStartOffset"]) for r in prod0] == [(pid, "None")]
        assert int(prod0[0]["LatestCoordinatorEpoch"]) >= 0      # the commit marker's

        p.begin()
        p.send(topic, b"d", 1)
        p.abort()
        (described,) = _tool(broker.bootstrap, "describe", "--transactional-id", txid)
        assert described["TransactionState"] == "CompleteAbort"
        assert described["ProducerId"] == pid
    finally:
        p.close()
