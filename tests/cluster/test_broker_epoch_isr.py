"""KIP-903: a follower is added back to the ISR only on fetches of its current incarnation.

Followers fetch at Fetch v15 with ReplicaState = (broker id, broker epoch: the czxid of their
ZooKeeper registration); the leader records each follower's last broker epoch and its ISR
expansion carries it; the conditional ZooKeeper write (engine/cluster/view.py ``alter_isr``)
refuses a follower whose epoch is not its current registration's (Kafka: INELIGIBLE_REPLICA).

Here broker 3, a follower of a partition led by broker 1, is SIGKILLed and restarted (a new
registration, a new broker epoch), then paused (SIGSTOP) until the leader drops it from the ISR.
A fetch of its previous incarnation -- its old broker epoch, caught up to the high watermark, as a
fetch sent just before the kill and read late would be -- reaches the leader: the ISR must not
take broker 3 back (without the check the leader adds it at once, a restarted broker that may
lack what the old one had).  Resumed, broker 3 fetches with its new epoch and joins the ISR.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import threading
import time

from kazoo.recipe.watchers import DataWatch

from engine.client.connection import Connection
from engine.protocol.fetch import parse_fetch_response
from engine.protocol.messages import ApiKey, encode
from tests.cluster.conftest import wait_for, zk_json
from tests.serving import free_port

T = "kip903"
STATE = f"/brokers/topics/{T}/partitions/0/state"


def _fetch(address: str, topic_id: bytes, offset: int, replica_id: int, replica_epoch: int):
    """One Fetch v15 of partition 0 (as a follower when `replica_id` >= 0): its FetchResult."""
    host, port = address.rsplit(":", 1)
    body = {"max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "replica_state": {"replica_id": replica_id, "replica_epoch": replica_epoch},
            "topics": [{"topic_id": topic_id, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    conn = Connection(host, int(port), b"kip903-test", 10.0)
    try:
        r = conn.request(ApiKey.FETCH, 15, [encode(ApiKey.FETCH, 15, body, response=False)])
        err, _sid, found = parse_fetch_response(r, 15)
    finally:
        conn.close()
    assert err == 0, err
    return found[(topic_id, 0)]


def test_a_restarted_followers_old_fetches_do_not_bring_it_back(zk_client, cluster_factory):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    c = cluster_factory(3, "--config", "replica.lag.time.max.ms=1000")
    admin = AdminClient({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4"})
    admin.create_topics([NewTopic(T, 1, replica_assignment=[[1, 2, 3]])], operation_timeout=20)[T].result(30)
    wait_for(lambda: zk_client.exists(STATE) and sorted(zk_json(zk_client, STATE)[0]["isr"]) == [1, 2, 3],
             what="ISR [1, 2, 3]")
    assert zk_json(zk_client, STATE)[0]["leader"] == 1
    topic_id = zk_json(zk_client, f"/brokers/topics/{T}")[0]["topic_id"]
    tid = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    p = Producer({"bootstrap.servers": c.bootstrap, "broker.address.family": "v4", "acks": "all"})
    for i in range(3):
        p.produce(T, b"v%d" % i, partition=0)
    assert p.flush(30) == 0

    seen: list[tuple[list[int], int]] = []        # every partition state the watch brings
    lock = threading.Lock()

    def record(data, stat, event=None):
        if data is not None:
            with lock:
                seen.append((json.loads(data)["isr"], stat.mzxid))
    DataWatch(zk_client, STATE, record)

    # broker 3 restarts: a new registration, a new broker epoch (on a new port, so the leader's
    # liveness probe sees the old process gone at once and its registration is not waited out)
    f = c.brokers[3]
    old_epoch = zk_client.exists("/brokers/ids/3").czxid
    kill_zxid = zk_client.exists(STATE).mzxid
    f.kill9()
    # the probe deletes the dead incarnation's registration (a broker refuses to start while
    # another endpoint holds its id): slower than a restart on a loaded machine
    wait_for(lambda: zk_client.exists("/brokers/ids/3") is None, timeout=30,
             what="broker 3's old registration deleted by the liveness probe")
    f.port = free_port()
    f.bootstrap = f"127.0.0.1:{f.port}"
    f.start()

    def new_epoch():
        st = zk_client.exists("/brokers/ids/3")
        return st.czxid if st is not None and st.czxid != old_epoch else None
    epoch = wait_for(new_epoch, what="broker 3's new registration")
    wait_for(lambda: 3 in zk_json(zk_client, STATE)[0]["isr"] and zk_client.exists(STATE).mzxid > epoch,
             what="broker 3 back in the ISR after its restart")
    with lock:           # out of the ISR once dead; back only by a write after its new registration
        restarted = [(isr, z) for isr, z in seen if z > kill_zxid]
    assert restarted and 3 not in restarted[0][0], restarted
    assert all(z > epoch for isr, z in restarted if 3 in isr), (epoch, restarted)

    leader_log = c.brokers[1].log_path
    log_from = os.path.getsize(leader_log)

    os.killpg(f.proc.pid, signal.SIGSTOP)          # broker 3 stops fetching
    try:
        wait_for(lambda: sorted(zk_json(zk_client, STATE)[0]["isr"]) == [1, 2], timeout=10,
                 what="the leader dropping paused broker 3 from the ISR")
        with lock:
            mark = len(seen)
        hw = _fetch(c.brokers[1].bootstrap, tid, 0, -1, -1).high_watermark
        assert hw == 3
        # its previous incarnation's fetch, caught up: not enough to join the ISR
        assert _fetch(c.brokers[1].bootstrap, tid, hw, 3, old_epoch).error_code == 0
        time.sleep(0.7)
        assert zk_client.exists("/brokers/ids/3").czxid == epoch     # (still its registration)
        with lock:
            after = list(seen[mark:])
        assert all(3 not in isr for isr, _ in after), after
        assert 3 not in zk_json(zk_client, STATE)[0]["isr"]
        with open(leader_log, "rb") as fh:
            fh.seek(log_from)
            text = fh.read().decode("utf-8", "replace")
        assert f"fetches carried broker epoch {old_epoch}, its registration's is {epoch}" in text, text[-3000:]
    finally:
        os.killpg(f.proc.pid, signal.SIGCONT)

    # resumed, it fetches with its current broker epoch and joins
    wait_for(lambda: 3 in zk_json(zk_client, STATE)[0]["isr"], timeout=15, what="broker 3 rejoining the ISR")
    with lock:
        joined = [(isr, z) for isr, z in seen[mark:] if 3 in isr]
    assert joined and all(z > epoch for _, z in joined), joined
