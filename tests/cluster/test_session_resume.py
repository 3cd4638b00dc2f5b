"""A member's registrations through ZooKeeper hiccups.  A broker whose ZooKeeper session
expired registers again in its new session, even when ZooKeeper fails the first try (the link
dropped again right after the reconnect); a peer's new registration that could not be read is
read again.

Before: the member marked the session renewed before writing ``/brokers/ids/<id>``; after a
ConnectionLoss there it stayed unregistered (the controller saw one broker fewer) until the
liveness watcher happened to notice, and fenced for good even then: it would never lead again.

Real ZooKeeper, a real member of an in-process node; the session is expired the way ZooKeeper's
own tests do it (a second client on the same session id closes it), and one ConnectionLoss is
injected into the first registration of the new session."""

from __future__ import annotations

import socket

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from engine.cluster.member import ClusterMember
from engine.node import Node
from tests.cluster.conftest import wait_for


def test_registers_again_when_the_first_try_of_a_new_session_fails(tmp_path, zk, zk_client):
    node = Node(tmp_path / "data", {"broker.id": 1, "zookeeper.connect": zk.connect,
                                    "zookeeper.session.timeout.ms": 6000})
    member = ClusterMember(node, 1, zk.connect, "127.0.0.1", 9, node.config)
    member.start()
    try:
        _data, stat = zk_client.get("/brokers/ids/1")
        first_owner = stat.ephemeralOwner
        tries = []
        register = member.store.register_broker

        def flaky(broker_id, reg):
            tries.append(broker_id)
            if len(tries) == 1:
                raise ConnectionLoss("injected: the link dropped again")
            return register(broker_id, reg)
        member.store.register_broker = flaky

        sid, pwd = member.store.client.client_id        # expire the member's session
        twin = KazooClient(zk.connect, client_id=(sid, pwd), timeout=6)
        twin.start(30)
        twin.stop()
        twin.close()

        def registered_anew() -> bool:
            st = zk_client.exists("/brokers/ids/1")
            return st is not None and st.ephemeralOwner not in (first_owner, 0)
        # (before: registered again by the liveness watcher at best, but fenced for good -- it
        # would never lead anything again)
        wait_for(lambda: registered_anew() and not member.fenced, 30,
                 "broker 1 registered again in a new session, no longer fenced")
        assert len(tries) >= 2
    finally:
        member.stop()
        node.close()


def test_a_new_registration_unreadable_once_is_read_again(tmp_path, zk):
    """Broker 1's watch of /brokers/ids sees broker 2 arrive, but reading broker 2's
    registration fails once (ConnectionLoss, injected): broker 1 reads it again rather than
    leave broker 2 out of its live brokers until /brokers/ids changes once more (before: out
    for good -- a controller placing replicas would have seen one broker fewer)."""
    nodes = [Node(tmp_path / f"data-{i}", {"broker.id": i, "zookeeper.connect": zk.connect,
                                           "zookeeper.session.timeout.ms": 6000}) for i in (1, 2)]
    # (listening sockets at the registered ports: the peers' liveness watchers connect there)
    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in nodes]
    m1, m2 = (ClusterMember(n, i, zk.connect, "127.0.0.1", ls.getsockname()[1], n.config)
              for i, n, ls in zip((1, 2), nodes, listeners, strict=True))
    m1.start()
    try:
        wait_for(lambda: set(m1.view.brokers()) == {1}, 10, "broker 1 alone in its view")
        failed = []
        read = m1.store.broker

        def flaky(broker_id):
            if broker_id == 2 and not failed:
                failed.append(broker_id)
                raise ConnectionLoss("injected: the read of a new registration failed")
            return read(broker_id)
        m1.store.broker = flaky
        m2.start()
        wait_for(lambda: failed, 10, "broker 2's registration read (and failed) once")
        wait_for(lambda: set(m1.view.brokers()) == {1, 2}, 10, "broker 2 in broker 1's view")
    finally:
        m2.stop()
        m1.stop()
        for n, ls in zip(nodes, listeners, strict=True):
            n.close()
            ls.close()
