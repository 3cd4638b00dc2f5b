"""meta.properties names the broker a data directory belongs to (Kafka's node.id / broker.id):
written at the first open, checked against broker.id in cluster mode as Kafka does."""

from __future__ import annotations

import pytest

import engine
from engine.errors import InvalidConfigError
from engine.metadata import read_meta_properties

CLUSTER = {"zookeeper.connect": "127.0.0.1:2181"}      # nothing connects: the Engine only stores


def test_cluster_broker_id_is_stored_and_checked(tmp_path):
    d = str(tmp_path / "b2")
    with engine.open(d, {**CLUSTER, "broker.id": 2}, background=False):
        pass
    props = read_meta_properties(d)
    assert props["node.id"] == "2" and props["cluster.id"]
    with engine.open(d, {**CLUSTER, "broker.id": 2}, background=False):
        pass                                                    # same broker: fine
    with pytest.raises(InvalidConfigError, match="configured broker.id 3 doesn't match stored node.id 2"):
        engine.open(d, {**CLUSTER, "broker.id": 3}, background=False)
    with engine.open(d, read_only=True) as ro:                  # readers learn whose copy it is
        assert ro.node._meta.node_id == 2 and ro.cluster_id == props["cluster.id"]
    with engine.open(d, background=False):                      # the single-node default checks nothing
        pass


def test_single_node_default_is_node_zero(tmp_path):
    d = str(tmp_path / "one")
    with engine.open(d, background=False):
        pass
    assert read_meta_properties(d)["node.id"] == "0"
    assert read_meta_properties(str(tmp_path / "none")) == {}
