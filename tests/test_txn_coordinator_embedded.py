"""The TransactionCoordinator's Python API in-process (``Engine.transaction_coordinator``):
the coordinator and the group coordinator each on a thread of their own, state replayed from
``__transaction_state`` on reopen, id expiry with a tombstone."""

from __future__ import annotations

import time

import engine
from engine import _native
from engine.coordinator import OffsetAndMetadata

T = 30


def _txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    b = _native.BatchBuilder()
    for v in values:
        b.append(v, None, None, int(time.time() * 1000))
    return b.build(0, 0, pid, epoch, seq, True)


def _wait_state(coord, tid: str, state: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        [d] = coord.call(coord.describe_transactions, [tid], timeout=T)
        if d.state == state or time.monotonic() > deadline:
            return d
        time.sleep(0.02)


def _init(coord, tid: str, timeout_ms: int = 60000, **kw):
    for _ in range(200):
        err, pid, epoch = coord.call(coord.init_producer_id, tid, timeout_ms, timeout=T, **kw)
        if err not in (15, 51):        # __transaction_state being created; a transaction completing
            return err, pid, epoch
        time.sleep(0.02)
    return err, pid, epoch


def test_commit_with_offsets_then_reopen(tmp_path):
    with engine.open(tmp_path, config={"group.initial.rebalance.delay.ms": 0}) as eng:
        eng.create_topic("t", 1)
        coord = eng.transaction_coordinator
        groups = eng.group_coordinator
        assert groups.call(groups.find_coordinator, "g", timeout=T)[0] in (0, 15)  # creates __consumer_offsets
        groups.call(groups.runtime.ensure_topic, timeout=T)
        err, pid, epoch = _init(coord, "embedded")
        assert (err, epoch) == (0, 0) and pid >= 0
        assert coord.call(coord.add_partitions, "embedded", pid, epoch, [("t", 0)], timeout=T) == {("t", 0): 0}
        plog = eng.log("t", 0)
        plog.append(_txn_batch(pid, epoch, 0, [b"a", b"b"]))
        assert plog.last_stable_offset == 0                     # the open transaction holds it
        assert coord.call(coord.add_offsets, "embedded", pid, epoch, "g", timeout=T) == 0
        res = coord.call(coord.txn_offset_commit, "embedded", "g", pid, epoch,
                         {("t", 0): OffsetAndMetadata(2, -1, "meta")}, timeout=T)
        assert res == {("t", 0): 0}
        # pending: not the group's committed offset yet, and unstable
        assert groups.call(groups.fetch_offsets, "g", [("t", 0)], timeout=T)[1][("t", 0)].offset == -1
        assert groups.call(groups.unstable_partitions, "g", None, timeout=T) == {("t", 0)}
        assert coord.call(coord.end_txn, "embedded", pid, epoch, True, timeout=T) == 0
        d = _wait_state(coord, "embedded", "CompleteCommit")
        assert (d.state, d.partitions) == ("CompleteCommit", ())
        assert plog.last_stable_offset == plog.high_watermark == 3   # two records and the marker
        assert groups.call(groups.fetch_offsets, "g", [("t", 0)], timeout=T)[1][("t", 0)].offset == 2
        assert groups.call(groups.unstable_partitions, "g", None, timeout=T) == set()
        # no transaction now: EndTxn is INVALID_TXN_STATE, a retried commit is fine
        assert coord.call(coord.end_txn, "embedded", pid, epoch, False, timeout=T) == 48
        assert coord.call(coord.end_txn, "embedded", pid, epoch, True, timeout=T) == 0
        # an aborted transaction's offsets are dropped
        assert coord.call(coord.add_offsets, "embedded", pid, epoch, "g", timeout=T) == 0
        coord.call(coord.txn_offset_commit, "embedded", "g", pid, epoch, {("t", 0): 9}, timeout=T)
        assert coord.call(coord.end_txn, "embedded", pid, epoch, False, timeout=T) == 0
        _wait_state(coord, "embedded", "CompleteAbort")
        assert groups.call(groups.fetch_offsets, "g", [("t", 0)], timeout=T)[1][("t", 0)].offset == 2
    with engine.open(tmp_path) as eng:                  # replayed: both logs
        coord = eng.transaction_coordinator
        coord.wait_loaded()
        [d] = coord.call(coord.describe_transactions, ["embedded"], timeout=T)
        assert (d.error_code, d.state, d.producer_id, d.producer_epoch) == (0, "CompleteAbort", pid, epoch)
        groups = eng.group_coordinator
        groups.wait_loaded()
        assert groups.call(groups.fetch_offsets, "g", [("t", 0)], timeout=T)[1][("t", 0)].offset == 2
        code, listed = coord.call(coord.list_transactions, ["CompleteAbort"], timeout=T)
        assert code == 0 and [(x.transactional_id, x.producer_id) for x in listed] == [("embedded", pid)]
        # the next instance bumps the epoch
        assert _init(coord, "embedded") == (0, pid, epoch + 1)


def test_pending_offsets_replayed_until_their_marker(tmp_path):
    """kill-like reopen while a transactional offset commit is pending: it stays pending (not
    committed) after the replay, and commits with the marker."""
    with engine.open(tmp_path) as eng:
        eng.create_topic("t", 1)
        groups = eng.group_coordinator
        groups.call(groups.runtime.ensure_topic, timeout=T)
        coord = eng.transaction_coordinator
        err, pid, epoch = _init(coord, "pend")
        assert coord.call(coord.add_offsets, "pend", pid, epoch, "g2", timeout=T) == 0
        assert coord.call(coord.txn_offset_commit, "pend", "g2", pid, epoch, {("t", 0): 5}, timeout=T) == \
            {("t", 0): 0}
    with engine.open(tmp_path) as eng:
        groups = eng.group_coordinator
        groups.wait_loaded()
        assert groups.call(groups.unstable_partitions, "g2", None, timeout=T) == {("t", 0)}
        assert groups.call(groups.fetch_offsets, "g2", [("t", 0)], timeout=T)[1][("t", 0)].offset == -1
        coord = eng.transaction_coordinator
        coord.wait_loaded()
        assert coord.call(coord.end_txn, "pend", pid, epoch, True, timeout=T) == 0
        _wait_state(coord, "pend", "CompleteCommit")
        assert groups.call(groups.fetch_offsets, "g2", [("t", 0)], timeout=T)[1][("t", 0)].offset == 5


def test_idle_ids_expire(tmp_path):
    cfg = {"transactional.id.expiration.ms": 1}
    with engine.open(tmp_path, config=cfg) as eng:
        coord = eng.transaction_coordinator
        err, pid, epoch = _init(coord, "idle")
        assert err == 0
        time.sleep(0.01)
        assert coord.call(coord.expire_transactional_ids, timeout=T) == 1
        assert coord.call(coord.describe_transactions, ["idle"], timeout=T)[0].error_code == 105
    with engine.open(tmp_path, config=cfg) as eng:     # the tombstone replays: still gone
        coord = eng.transaction_coordinator
        coord.wait_loaded()
        assert coord.call(coord.describe_transactions, ["idle"], timeout=T)[0].error_code == 105
        err, pid2, epoch2 = _init(coord, "idle")
        assert err == 0 and pid2 != pid and epoch2 == 0    # a new producer id


def test_concurrent_transactions_while_completing(tmp_path):
    """Between EndTxn's answer (PrepareCommit written) and the markers, the transaction is
    completing: AddPartitionsToTxn, InitProducerId and a retried EndTxn(commit) get
    CONCURRENT_TRANSACTIONS, an EndTxn(abort) INVALID_TXN_STATE (Kafka's answers)."""
    with engine.open(tmp_path) as eng:
        eng.create_topic("t", 1)
        coord = eng.transaction_coordinator
        err, pid, epoch = _init(coord, "busy")
        assert coord.call(coord.add_partitions, "busy", pid, epoch, [("t", 0)], timeout=T) == {("t", 0): 0}

        async def end_then_race():
            # no suspension between the calls: the marker task has not run yet
            out = [await coord.end_txn("busy", pid, epoch, True)]
            out.append((await coord.add_partitions("busy", pid, epoch, [("t", 0)]))[("t", 0)])
            out.append(await coord.end_txn("busy", pid, epoch, True))
            out.append(await coord.end_txn("busy", pid, epoch, False))
            out.append((await coord.init_producer_id("busy", 60000))[0])
            return out

        assert coord.call(end_then_race, timeout=T) == [0, 51, 51, 48, 51]
        assert _wait_state(coord, "busy", "CompleteCommit").state == "CompleteCommit"
        assert coord.call(coord.add_partitions, "busy", pid, epoch, [("t", 0)], timeout=T) == {("t", 0): 0}


def test_kafka_dump_log_decodes_transaction_state(tmp_path):
    """Kafka's own decoder (kafka-dump-log.sh --transaction-log-decoder) reads our
    __transaction_state records: Kafka's TransactionLogKey/Value format."""
    import os
    import subprocess

    import pytest

    from engine.coordinator import partition_for
    from tests.serving import find_kafka
    home, why = find_kafka()
    if home is None:
        pytest.skip(why)
    tool = os.path.join(home, "bin", "kafka-dump-log.sh")
    with engine.open(tmp_path) as eng:
        eng.create_topic("t", 1)
        coord = eng.transaction_coordinator
        err, pid, epoch = _init(coord, "dumped")
        coord.call(coord.add_partitions, "dumped", pid, epoch, [("t", 0)], timeout=T)
        coord.call(coord.end_txn, "dumped", pid, epoch, True, timeout=T)
        _wait_state(coord, "dumped", "CompleteCommit")
    seg = tmp_path / f"__transaction_state-{partition_for('dumped', 50)}" / "00000000000000000000.log"
    out = subprocess.run([tool, "--transaction-log-decoder", "--files", str(seg)], capture_output=True,
                         text=True, timeout=120).stdout
    payloads = [ln.split("payload: ", 1)[1] for ln in out.splitlines() if "transactionalId=dumped" in ln]
    prefix = f"producerId:{pid},producerEpoch:{epoch},state="
    assert [p.split("txnLastUpdateTimestamp")[0] for p in payloads] == [
        f"{prefix}Empty,partitions=[],", f"{prefix}Ongoing,partitions=[t-0],",
        f"{prefix}PrepareCommit,partitions=[t-0],", f"{prefix}CompleteCommit,partitions=[],"], out
