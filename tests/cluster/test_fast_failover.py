"""A dead leader replaced without waiting out its ZooKeeper session (engine/cluster/liveness.py),
and a paused one not replaced early -- under an idempotent acks=all confluent-kafka producer
(RF 3, ``min.insync.replicas=2``), nothing acknowledged lost or doubled.

The sessions are long on purpose (20 s for the kill, 10 s for the pause) so that "well before
the session timeout" and "only after it" are told apart without tight timing asserts.  The kill
test prints where the time went, from the brokers' log timestamps: kill -> a peer declares the
process dead -> the controller writes the new leader -> the new leader serves -> the client's
next acknowledgement.
"""

from __future__ import annotations

import datetime
import os
import re
import signal
import time
import uuid

from engine.cluster.liveness import probe
from tests.cluster.conftest import wait_for
from tests.cluster.test_replication import Load, _check, _consume_all, _create, _state

LAG = ("--config", "replica.lag.time.max.ms=3000")


def _session(ms: int) -> tuple[str, ...]:
    return ("--config", f"zookeeper.session.timeout.ms={ms}")      # (after conftest's: it wins)


def _topic(c, zk_client, prefix):
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    _create(c.brokers[1].bootstrap, topic, 1, 3, {"min.insync.replicas": "2"})
    wait_for(lambda: zk_client.exists(f"/brokers/topics/{topic}/partitions/0/state")
             and len(_state(zk_client, topic)["isr"]) == 3, timeout=60, what="the partition with a full ISR")
    return topic


def test_probe_tells_refused_from_accepted():
    """The verdict the fast path rests on: a port nobody listens on is refused; a listening one
    is accepted even when its process never calls accept() (as a SIGSTOPped broker's)."""
    import socket
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        assert probe("127.0.0.1", port) == "accepted"
    finally:
        srv.close()
    assert probe("127.0.0.1", port) == "refused"


def _first_log_time(c, pattern: str, after: float) -> float | None:
    """The wall-clock time of the first broker log line matching `pattern` at or after `after`."""
    best = None
    for b in c.brokers.values():
        for line in b.log_text().splitlines():
            m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ", line)
            if m is None or not re.search(pattern, line):
                continue
            t = time.mktime(datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timetuple()) \
                + int(m.group(2)) / 1000
            if t >= after - 0.001 and (best is None or t < best):
                best = t
    return best


def test_sigkilled_leader_replaced_before_its_session_expires(zk_client, cluster_factory):
    session_ms = 20000
    c = cluster_factory(3, *_session(session_ms), *LAG)
    topic = _topic(c, zk_client, "fast")
    load = Load(c.bootstrap, topic).start()
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    old = _state(zk_client, topic)["leader"]
    wall0, t0 = time.time(), time.monotonic()
    c.brokers[old].kill9()
    new = wait_for(lambda: _state(zk_client, topic)["leader"] not in (old, -1)
                   and _state(zk_client, topic)["leader"], timeout=session_ms / 1000 + 30, what="a new leader")
    elected = time.monotonic() - t0
    gone = zk_client.exists(f"/brokers/ids/{old}") is None
    took = _first_ack_after(load, t0)
    # where the time went (the brokers' log timestamps, millisecond resolution)
    steps = [("a peer declared it dead", _first_log_time(c, rf"peer {old} .*refused two connects", wall0)),
             ("controller wrote the new leader",
              _first_log_time(c, rf"{topic}-0 leader={new} .*leader {old} gone", wall0)),
             ("new leader serving", _first_log_time(c, rf"leader of {topic}-0 from leader epoch", wall0))]
    print(f"\nSIGKILL of leader {old} (session {session_ms} ms): new leader {new} seen in ZooKeeper after "
          f"{elected:.2f} s; " + "; ".join(f"{what} +{t - wall0:.3f} s" if t else f"{what} ?" for what, t in steps)
          + f"; the client's next acknowledgement +{took:.3f} s")
    assert elected < session_ms / 2000, \
        f"the new leader took {elected:.1f} s: the session ({session_ms} ms) was waited out"
    assert gone, "the dead broker's registration is still there"
    c.brokers[old].start()               # rejoins as a restarted broker does
    wait_for(lambda: len(_state(zk_client, topic)["isr"]) == 3, timeout=60, what="a full ISR again")
    before = len(load.acked)
    wait_for(lambda: len(load.acked) >= before + 500, timeout=60, what="500 more acknowledgements")
    # the old session expires meanwhile (20 s after the kill): nothing more may happen
    epoch = _state(zk_client, topic)["leader_epoch"]
    time.sleep(max(0.0, t0 + session_ms / 1000 + 2 - time.monotonic()))
    assert _state(zk_client, topic)["leader_epoch"] == epoch, "an election after the dead session expired"
    assert zk_client.exists(f"/brokers/ids/{old}") is not None, "the restarted broker lost its registration"
    load.stop()
    assert load.errors == []
    assert _check(load, _consume_all(c.bootstrap, topic, 1)) == (0, 0)


def _first_ack_after(load, t0: float) -> float:
    n = len(load.ack_times)
    wait_for(lambda: len(load.ack_times) > n and load.ack_times[-1] > t0, timeout=90, what="a delivery")
    return next(t for t in load.ack_times if t > t0) - t0


def test_sigstopped_leader_not_replaced_before_its_session_expires(zk_client, cluster_factory):
    session_ms = 10000
    c = cluster_factory(3, *_session(session_ms), *LAG)
    topic = _topic(c, zk_client, "paused")
    # requests in flight to the stopped leader hang until the client gives up on them
    load = Load(c.bootstrap, topic, **{"socket.timeout.ms": 10000}).start()
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    st = _state(zk_client, topic)
    old, epoch = st["leader"], st["leader_epoch"]
    pid = c.brokers[old].proc.pid
    t0 = time.monotonic()
    os.killpg(pid, signal.SIGSTOP)
    try:
        time.sleep(session_ms / 2000)    # half the session: a paused process is not declared dead
        st = _state(zk_client, topic)
        assert (st["leader"], st["leader_epoch"]) == (old, epoch), f"a paused leader was replaced early: {st}"
        assert zk_client.exists(f"/brokers/ids/{old}") is not None
        new = wait_for(lambda: _state(zk_client, topic)["leader"] not in (old, -1)
                       and _state(zk_client, topic)["leader"], timeout=session_ms / 1000 + 30,
                       what="a new leader after the session expired")
        elected = time.monotonic() - t0
        before = len(load.acked)
        wait_for(lambda: len(load.acked) >= before + 500, timeout=90, what="500 acknowledgements from the new leader")
    finally:
        os.killpg(pid, signal.SIGCONT)
    print(f"\nSIGSTOP of leader {old} (session {session_ms} ms): leader {new} elected after {elected:.2f} s")
    assert elected >= session_ms / 2000        # (the session expires a ping interval or so early)
    wait_for(lambda: old in _state(zk_client, topic)["isr"], timeout=60, what="the old leader back in the ISR")
    load.stop()
    assert load.errors == []
    assert _check(load, _consume_all(c.bootstrap, topic, 1)) == (0, 0)


def test_live_leader_whose_registration_is_deleted_is_fenced_and_returns(zk_client, cluster_factory):
    """The safety argument's second half: should a live leader ever be declared dead (here its
    registration is deleted by hand, as a wrong verdict would), the controller elects another
    leader at a bumped epoch, the old one stops acknowledging (its followers left it), registers
    again by itself and rejoins the ISR -- nothing acknowledged lost or doubled."""
    c = cluster_factory(3, *_session(20000), *LAG)
    topic = _topic(c, zk_client, "deposed")
    load = Load(c.bootstrap, topic).start()
    wait_for(lambda: len(load.acked) >= 1000, timeout=60, what="1000 acknowledged records")
    st = _state(zk_client, topic)
    old, epoch = st["leader"], st["leader_epoch"]
    zk_client.delete(f"/brokers/ids/{old}")
    wait_for(lambda: _state(zk_client, topic)["leader"] not in (old, -1)
             and _state(zk_client, topic)["leader_epoch"] > epoch, timeout=10, what="a new leader at a new epoch")
    wait_for(lambda: zk_client.exists(f"/brokers/ids/{old}") is not None, timeout=10,
             what="the deposed broker registered again")
    wait_for(lambda: old in _state(zk_client, topic)["isr"], timeout=60, what="the deposed leader back in the ISR")
    before = len(load.acked)
    wait_for(lambda: len(load.acked) >= before + 500, timeout=60, what="500 more acknowledgements")
    load.stop()
    assert load.errors == []
    assert _check(load, _consume_all(c.bootstrap, topic, 1)) == (0, 0)
