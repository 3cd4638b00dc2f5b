"""Committed and aborted transactions as each client's consumers see them.

Each transactional producer (confluent-kafka, aiokafka, kafka-python) writes three transactions
over two partitions of its own topic: commit, abort, commit. Then every consumer client reads
both partitions with ``read_committed`` and ``read_uncommitted``:

- read_committed returns exactly the committed records, at their offsets;
- read_uncommitted returns the aborted records too;
- neither ever returns a control record (each commit/abort marker takes exactly one offset,
  seen as a gap), and both end at the high watermark (no transaction left open).
"""

from __future__ import annotations

import pytest

from .clients import CLIENTS, create_topic, end_offsets, producer, read_all

# (outcome, {partition: values}) in order; offsets follow: records of a partition are
# contiguous and each transaction ends with one marker per partition it wrote to.
PLAN = [
    ("commit", {0: [b"c1-0", b"c1-1", b"c1-2"], 1: [b"c1-3", b"c1-4"]}),
    ("abort", {0: [b"a2-0", b"a2-1", b"a2-2"], 1: [b"a2-3"]}),
    ("commit", {0: [b"c3-0"], 1: [b"c3-1", b"c3-2"]}),
]


def expected(plan):
    """({p: [(offset, value)] committed}, {p: [(offset, value)] all data}, {p: high watermark})."""
    committed, everything, next_offset = {}, {}, {}
    for outcome, parts in plan:
        for p, values in parts.items():
            o = next_offset.get(p, 0)
            recs = [(o + i, v) for i, v in enumerate(values)]
            everything.setdefault(p, []).extend(recs)
            committed.setdefault(p, [])
            if outcome == "commit":
                committed[p].extend(recs)
            next_offset[p] = o + len(values) + 1            # + the marker
    return committed, everything, next_offset


@pytest.fixture(scope="session")
def produced_topics():
    return {}


@pytest.fixture
def produced(broker, produced_topics, request):
    """The topic a producer client filled with PLAN (made once per broker and client)."""
    name = request.param
    key = (broker.kind, name)
    if key not in produced_topics:
        topic = f"vis-{name}-{broker.kind}"
        try:
            create_topic(broker.bootstrap, topic, 2)
            p = producer(name, broker.bootstrap, f"txid-vis-{name}")
            try:
                p.init()
                for outcome, parts in PLAN:
                    p.begin()
                    for part, values in parts.items():
                        for v in values:
                            p.send(topic, v, part)
                    p.flush()
                    p.commit() if outcome == "commit" else p.abort()
            finally:
                p.close()
            produced_topics[key] = topic
        except Exception as e:               # every test of this producer fails with it
            produced_topics[key] = e
    if isinstance(produced_topics[key], Exception):
        raise produced_topics[key]
    return produced_topics[key]


@pytest.mark.parametrize("produced", CLIENTS, indirect=True)
@pytest.mark.parametrize("reader", CLIENTS)
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_consumers_see_commits_and_never_aborts_or_markers(broker, produced, reader, isolation):
    committed, everything, hw = expected(PLAN)
    got, positions = read_all(reader, broker.bootstrap, produced, [0, 1], isolation)
    want = committed if isolation == "read_committed" else everything
    assert got == want
    assert positions == hw                                  # past the last marker


@pytest.mark.parametrize("produced", ["confluent"], indirect=True)
def test_end_offsets_per_isolation_level_with_no_open_transaction(broker, produced):
    """ListOffsets(latest): with every transaction complete the LSO is the high watermark."""
    _c, _e, hw = expected(PLAN)
    assert end_offsets(broker.bootstrap, produced, [0, 1], "read_uncommitted") == hw
    assert end_offsets(broker.bootstrap, produced, [0, 1], "read_committed") == hw
