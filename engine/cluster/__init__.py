"""Cluster mode: brokers sharing metadata in ZooKeeper (Kafka's ZooKeeper-era layout).

- :mod:`engine.cluster.zk` -- the znode layout and its conditional writes (kazoo).
- :mod:`engine.cluster.controller` -- the controller (one broker, elected through ``/controller``).
- :mod:`engine.cluster.member` -- a broker's registration, metadata cache (the cluster view) and
  the watches that drive its replica manager.
- :mod:`engine.cluster.liveness` -- a peer broker's dead process seen at once (closed connection,
  refused connects): its registration removed so the controller elects without waiting out its
  session.
- :mod:`engine.cluster.admin` -- CreateTopics / CreatePartitions / DeleteTopics / ElectLeaders
  in cluster mode (written to ZooKeeper; the controller and the brokers act on them).
- :mod:`engine.cluster.assign` -- replica assignment (Kafka's algorithm).
- :mod:`engine.cluster.reassign` -- partition reassignment (KIP-455) on the controller thread.

Nothing here is imported on the single-node path (no kazoo import without ``zookeeper.connect``).
"""
