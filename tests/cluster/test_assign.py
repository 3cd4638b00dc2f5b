"""Replica assignment (engine/cluster/assign.py, Kafka's AdminUtils algorithm): no ZooKeeper."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.cluster.assign import assign_replicas
from engine.errors import InvalidReplicationFactorError


@pytest.mark.parametrize("n,parts,rf", [(3, 6, 3), (3, 50, 3), (5, 10, 2), (4, 7, 1), (6, 12, 3)])
def test_leaders_balanced_replicas_distinct(n, parts, rf):
    brokers = {b: None for b in range(1, n + 1)}
    for start in range(n):
        plan = assign_replicas(brokers, parts, rf, start=start, shift=0)
        assert sorted(plan) == list(range(parts))
        assert all(len(r) == rf == len(set(r)) and set(r) <= set(brokers) for r in plan.values())
        leaders = Counter(r[0] for r in plan.values())
        assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1
        replicas = Counter(b for r in plan.values() for b in r)
        assert max(replicas.values()) - min(replicas.get(b, 0) for b in brokers) <= 1


def test_kafka_example_layout():
    # Kafka's doc example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0
    plan = assign_replicas({b: None for b in range(5)}, 10, 3, start=0, shift=0)
    assert plan[0] == [0, 1, 2] and plan[1] == [1, 2, 3] and plan[4] == [4, 0, 1]
    assert plan[5] == [0, 2, 3] and plan[9] == [4, 1, 2]


def test_racks_spread_each_partition():
    brokers = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    plan = assign_replicas(brokers, 12, 3)
    for r in plan.values():
        assert len({brokers[b] for b in r}) == 3, r


def test_growth_continues_the_layout():
    brokers = {b: None for b in range(1, 4)}
    first = assign_replicas(brokers, 3, 2, start=0, shift=0)
    more = assign_replicas(brokers, 3, 2, first_partition=3, start=0, shift=0)
    assert sorted(more) == [3, 4, 5]
    assert Counter(r[0] for r in {**first, **more}.values()) == {1: 2, 2: 2, 3: 2}


def test_too_few_brokers():
    with pytest.raises(InvalidReplicationFactorError, match="larger than available brokers: 2"):
        assign_replicas({1: None, 2: None}, 1, 3)
