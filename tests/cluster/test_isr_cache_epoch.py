"""The leader's own ISR change, cached until its ZooKeeper watch brings the znode, keeps a
broker epoch a leadership can be judged by (engine/cluster/view.py ``alter_isr``).

A member takes up a leadership only from a state written after its registration (its mzxid
above the registration's czxid: KIP-380's broker epoch, engine/cluster/member.py).  The ISR
change is cached at once; cached with mzxid 0, a pending apply of that partition (an earlier
watch's) read it as a leadership older than the registration and made the leader follow nobody
-- and the watch's own apply, at the same partition epoch, then changed nothing.  Here the
watch is held back (kazoo's callback thread blocked) so the cached state is the one read."""

from __future__ import annotations

import threading
import time

from kazoo.protocol.states import Callback

import engine
from engine.cli_cluster import make_member
from engine.cluster import admin


def test_alter_isr_cache_keeps_the_broker_epoch(tmp_path, zk):
    eng = engine.open(str(tmp_path / "data"), {"zookeeper.connect": zk.connect, "broker.id": "1",
                                                "zookeeper.session.timeout.ms": "6000"})
    member = make_member(eng.node, "127.0.0.1")
    try:
        member.port = 9
        member.start()
        admin.create_topic(member, "cache", 1, 1, {}, timeout_s=20)
        deadline = time.monotonic() + 20
        while (st := member.view.state("cache", 0)) is None or st.leader != 1:
            assert time.monotonic() < deadline, "no state naming broker 1 leader"
            time.sleep(0.05)
        assert st.mzxid > member.registration_zxid
        release = threading.Event()
        member.store.client.handler.dispatch_callback(Callback("watch", release.wait, (10,)))
        try:
            assert member.view.alter_isr("cache", 0, [1], st.leader_epoch, st.version)
            cached = member.view.state("cache", 0)
            assert cached.version == st.version + 1          # (ours: the watch is held back)
            assert cached.mzxid >= st.mzxid > member.registration_zxid, cached
        finally:
            release.set()
    finally:
        member.stop()
        eng.close()
