"""Fault injection against a local cluster: what ``python -m engine chaos`` runs and the cluster
tests reuse (docs/availability.md, docs/cluster.md#chaos-runs).

- :mod:`engine.chaos.runner` -- the command: a local cluster under an idempotent acks=all
  producer while brokers are killed, stopped, their disks filled (``--scenario`` runs one of the
  network-partition scenarios instead).
- :mod:`engine.chaos.netproxy` -- ``LinkProxy``, a per-link TCP proxy (pass / blackhole / reset /
  delay, per client id).
- :mod:`engine.chaos.cluster` -- ZooKeeper and brokers with every link behind a proxy, and the
  replica byte-identity check below the high watermark.
- :mod:`engine.chaos.workload` -- the producer and consumer-group member the scenarios run under.
- :mod:`engine.chaos.scenarios` -- the network-partition scenarios, their registry and checks.
- :mod:`engine.chaos.crash_scenarios` -- the scenarios in which a broker process dies (power loss).
- :mod:`engine.chaos.observe` -- a scenario's result line and its poll of partition states.
- :mod:`engine.chaos.power_loss` -- a broker's unsynced tail dropped as a power loss would.

Tooling, not the broker: nothing on a broker's path imports this package; it imports downward
(engine.cluster's ZooKeeper server, storage file names, the native batch reader).
"""
