"""SIGTERM in cluster mode when ZooKeeper is unreachable.

A broker asks the controller for a controlled shutdown and gives back the controller seat through
ZooKeeper. kazoo queues a request made while it has no connection until one comes back, so with
ZooKeeper gone each of those calls waited forever: a broker interrupted this way stayed blocked
in ``Controller.resign``'s ``get`` for 40 minutes. Kafka's broker gives up its controlled
shutdown after its retries and stops anyway; so must ours, promptly and cleanly.
"""

from __future__ import annotations

import time

from tests.cluster.conftest import SESSION_MS


def test_sigterm_with_zookeeper_gone_stops_cleanly_and_promptly(zk, cluster_factory):
    c = cluster_factory(2)                       # one of the two holds /controller
    zk.stop()
    time.sleep(1.0)                              # both brokers see the connection drop
    for i, b in c.brokers.items():
        t0 = time.monotonic()
        rc, log = b.stop(timeout=90)             # SIGKILL after 90 s
        took = time.monotonic() - t0
        assert rc == 0 and "stopped cleanly" in log, f"broker {i}: exit {rc} after {took:.1f} s:\n{log[-3000:]}"
        # bounded by the session timeout (the controlled shutdown's request), not by ZooKeeper
        assert took < SESSION_MS / 1000 + 15, f"broker {i} took {took:.1f} s to stop"
        assert "controlled shutdown: cannot ask the controller" in log
