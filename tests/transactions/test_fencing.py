"""Zombie fencing: two producers with one transactional.id.

The first producer opens a transaction and writes three records; a second producer with the
same transactional.id calls ``init_transactions()``, which bumps the epoch and aborts the first
one's open transaction. The first producer's next produce/commit then fails with its client's
fenced error (fatal), none of its later records reach the log, and the second producer commits
normally. Readers: read_committed sees only the second producer's records; read_uncommitted
also the zombie's three aborted ones — at offsets that leave one offset for the abort marker.
"""

from __future__ import annotations

import pytest

from .clients import CLIENTS, create_topic, producer, read_all


@pytest.mark.parametrize("client", CLIENTS)
def test_second_producer_fences_the_first(broker, unique, client):
    topic, txid = f"{unique}-t", f"{unique}-txid"
    create_topic(broker.bootstrap, topic, 1)
    zombie = producer(client, broker.bootstrap, txid)
    successor = None
    try:
        zombie.init()
        zombie.begin()
        for i in range(3):
            zombie.send(topic, b"zombie-%d" % i, 0)
        zombie.flush()

        successor = producer(client, broker.bootstrap, txid)
        successor.init()                      # fences the zombie, aborts its transaction

        with pytest.raises(Exception) as ei:
            zombie.send(topic, b"zombie-late", 0)
            zombie.flush()
            zombie.commit()
        assert zombie.is_fenced(ei.value), f"{client}: not a fenced error: {ei.value!r}"

        successor.begin()
        successor.send(topic, b"next-0", 0)
        successor.send(topic, b"next-1", 0)
        successor.flush()
        successor.commit()
    finally:
        zombie.close()
        if successor is not None:
            successor.close()

    committed, pos = read_all("confluent", broker.bootstrap, topic, [0], "read_committed")
    assert committed == {0: [(4, b"next-0"), (5, b"next-1")]}
    assert pos == {0: 7}
    everything, _ = read_all("confluent", broker.bootstrap, topic, [0], "read_uncommitted")
    assert everything == {0: [(0, b"zombie-0"), (1, b"zombie-1"), (2, b"zombie-2"),
                              (4, b"next-0"), (5, b"next-1")]}
