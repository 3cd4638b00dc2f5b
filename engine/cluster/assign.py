"""Replica assignment for new topics and partitions, as Kafka's ``AdminUtils.assignReplicasToBrokers``.

Without racks: the first replica of partition p goes to broker ``(start + p) % n`` of the sorted
live brokers, and the followers follow it at a shift that grows each time the partitions wrap
around the brokers, so leaders (first replicas) are balanced and followers spread.  With racks:
the brokers are first ordered alternating between racks (rack a, rack b, rack c, rack a, ...),
and a follower is skipped while its rack already holds a replica of the partition and some rack
does not yet (Kafka's rack-aware rule, simplified: no per-broker repeat check beyond that).
"""

from __future__ import annotations

import random

from ..errors import InvalidReplicationFactorError

__all__ = ["assign_replicas"]


def _rack_alternated(brokers: dict[int, str | None]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(brokers[b] or "", []).append(b)
    racks = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(brokers):
        for r in racks:
            if i < len(by_rack[r]):
                out.append(by_rack[r][i])
        i += 1
    return out


def assign_replicas(brokers: dict[int, str | None], partitions: int, replication_factor: int,
                    first_partition: int = 0, start: int | None = None,
                    shift: int | None = None) -> dict[int, list[int]]:
    """{partition: [replica broker ids]} for partitions ``first_partition ..`` (`brokers`: id -> rack)."""
    n = len(brokers)
    if replication_factor < 1:
        raise InvalidReplicationFactorError(f"replication factor must be larger than 0, got {replication_factor}")
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {n}.")
    racked = any(brokers.values())
    order = _rack_alternated(brokers) if racked else sorted(brokers)
    rnd = random.Random()
    start = rnd.randrange(n) if start is None else start
    shift = rnd.randrange(n) if shift is None else shift
    out: dict[int, list[int]] = {}
    for i in range(partitions):
        p = first_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (start + p) % n
        replicas = [order[first]]
        racks_used = {brokers[order[first]]}
        j = 0
        while len(replicas) < replication_factor:
            gap = 1 + (shift + j) % (n - 1) if n > 1 else 0
            b = order[(first + gap) % n]
            j += 1
            if b in replicas:
                if j > 4 * n:          # cannot happen with distinct gaps, but never loop forever
                    b = next(x for x in order if x not in replicas)
                else:
                    continue
            if racked and brokers[b] in racks_used and len(racks_used) < len(set(brokers.values())) \
                    and j <= 4 * n:
                continue
            replicas.append(b)
            racks_used.add(brokers[b])
        out[p] = replicas
    return out
