"""Transactional test data written straight to a partition log, as the transaction
coordinator would leave it: transactional batches (the producer's batch builder with the
transactional attribute) from several interleaved producers, COMMIT / ABORT markers
(``PartitionLog.append_control``), plain batches between them, an aborted transaction that
spans segments, compressed transactional batches, and one transaction left open at the end.

``fill(log)`` returns (committed, uncommitted): the values a read_committed reader must see
(non-transactional records and those of committed transactions, below the LSO) and those a
read_uncommitted reader sees (every data record, no markers), in offset order.
"""

from __future__ import annotations

import time

from engine.records import build_batch


def _now() -> int:
    return int(time.time() * 1000)


def fill(log, rounds: int = 6, per_batch: int = 20, open_tail: bool = True):
    seq: dict[int, int] = {}
    outcome: dict[tuple[int, int], bool] = {}      # (pid, txn number) -> committed
    txn_no: dict[int, int] = {}
    tagged: list[tuple[int, int, bytes]] = []      # (pid, txn number, value)

    def txn_batch(pid: int, tag: str, codec: str = "none"):
        n = txn_no.setdefault(pid, 0)
        vals = [f"{tag}-p{pid}-t{n}-{i}".encode() for i in range(per_batch)]
        ts = _now()
        b = build_batch([(v, b"k%d" % pid, [], ts) for v in vals], codec, producer_id=pid, producer_epoch=0,
                        base_sequence=seq.get(pid, 0), is_transactional=True)
        seq[pid] = seq.get(pid, 0) + per_batch
        log.append(bytearray(b))
        tagged.extend((pid, n, v) for v in vals)

    def plain(tag: str):
        vals = [f"{tag}-{i}".encode() for i in range(3)]
        log.append(bytearray(build_batch([(v, None, [], _now()) for v in vals])))
        tagged.extend((-1, 0, v) for v in vals)

    def end(pid: int, commit: bool):
        outcome[(pid, txn_no[pid])] = commit
        log.append_control(pid, 0, commit, 0)
        txn_no[pid] += 1

    for r in range(rounds):
        a, b, c = 100 + r % 2, 200, 300
        txn_batch(a, f"r{r}a")
        plain(f"r{r}x")
        txn_batch(b, f"r{r}b", "lz4" if r % 2 else "none")
        txn_batch(a, f"r{r}a2", "zstd")
        end(a, commit=(r % 3 != 1))                 # rounds 1, 4: producer a aborts
        txn_batch(c, f"r{r}c")
        end(b, commit=(r % 2 == 0))                 # odd rounds: producer b aborts
        plain(f"r{r}y")
        end(c, commit=True)
    end_offset = log.last_stable_offset
    if open_tail:
        txn_batch(999, "open")                      # stays open: the LSO stops here
        plain("tail")
    committed = [v for pid, n, v in tagged if pid < 0 or outcome.get((pid, n), False)]
    uncommitted = [v for _pid, _n, v in tagged]
    if open_tail:
        committed = committed[:-3]                  # the plain tail is above the LSO
    assert log.last_stable_offset == end_offset
    return committed, uncommitted
