"""The quota manager (engine/server/quotas.py) on real encoded requests and responses: Kafka's
throttle time ((rate - limit) / limit x window, the rate over at least quota.window.num - 1
windows), written into each response's throttle_time_ms where that version has it (Produce last,
Fetch and the kio-encoded responses first), followers' fetches not counted, the request-time
throttle capped at one window, and idle with no quota."""

from __future__ import annotations

import struct
import time

import pytest

from engine.protocol import messages as m
from engine.protocol.frames import parse_request_header
from engine.protocol.primitives import Reader
from engine.security.quotas import ClientQuotaStore, QuotaAlteration
from engine.server.common import _replica_id
from engine.server.quotas import QuotaManager, throttle_time_ms


class Conn:
    principal = "User:alice"


def _frame(key: int, version: int, body: bytes, client_id: str = "c1") -> bytes:
    cid = client_id.encode()
    head = struct.pack(">hhih", key, version, 7, len(cid)) + cid
    if m.is_flexible(key, version):
        head += b"\x00"
    return head + body


def _run(q: QuotaManager, frame: bytes, parts, conn=Conn):
    key, version = struct.unpack_from(">hh", frame)
    header, reader = parse_request_header(frame, m.is_flexible(key, version))
    mark = q.begin()
    if key == m.ApiKey.FETCH and _replica_id(m.decode(key, version, frame[reader.pos:])) >= 0:
        q.from_follower(conn)          # as the Fetch handler does once it has decoded the request
    return q.end(conn, header, frame, parts, mark)


@pytest.fixture
def store(tmp_path):
    return ClientQuotaStore(str(tmp_path))


def _set(store, entity, key, value):
    assert store.alter([QuotaAlteration(entity, ((key, value),))]) == [(0, None)]


def test_idle_without_quotas(store):
    q = QuotaManager(store)
    assert not q.active
    _set(store, (("user", "alice"),), "producer_byte_rate", 1000.0)
    assert q.active                    # the store's listener told the manager
    assert store.alter([QuotaAlteration((("user", "alice"),), (("producer_byte_rate", None),))]) == [(0, None)]
    assert not q.active


def test_kafkas_throttle_time():
    # O * W / (W + X) = T  =>  X = (O - T) / T * W
    assert throttle_time_ms(2000.0, 1000.0, 10000.0) == 10000
    assert throttle_time_ms(1500.0, 1000.0, 2000.0) == 1000


@pytest.mark.parametrize("version", [3, 7, 8, 9])
def test_produce_throttle_in_the_response(store, version):
    q = QuotaManager(store, window_num=11, window_size_s=1)
    _set(store, (("user", "alice"),), "producer_byte_rate", 1000.0)
    frame = _frame(0, version, bytes(20000 - 8 - 2 - 2 - (1 if version >= 9 else 0)))
    assert len(frame) == 20000
    parts = [m.encode_produce_response(version, [("t", [(0, 0, 5, -1, 0, None)])])]
    # 20000 bytes over the minimum window of 10 s: 2000 B/s, twice the limit -> 10 s
    assert _run(q, frame, parts) == 10000
    resp = m.read_struct(m._entity(0, version, True), Reader(bytes(parts[0])))
    assert resp["throttle_time"] == 10000
    assert resp["responses"][0]["partition_responses"][0]["base_offset"] == 5     # the rest intact
    # another user: no quota, nothing recorded
    class Bob:
        principal = "User:bob"
    parts = [m.encode_produce_response(version, [("t", [(0, 0, 5, -1, 0, None)])])]
    assert _run(q, frame, parts, Bob) == 0


def _fetch_request(version: int, replica_id: int) -> bytes:
    # (v15+: the id in ReplicaState, a tagged field after the topics, with the broker epoch)
    body = m.encode(1, version, {"replica_id": replica_id, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                                 "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                                 "replica_state": {"replica_id": replica_id, "replica_epoch": 4242},
                                 "topics": [{"topic": "t", "topic_id": bytes(range(16)), "partitions": [{
                                     "partition": 0, "current_leader_epoch": 3, "fetch_offset": 10,
                                     "last_fetched_epoch": 3, "log_start_offset": 0,
                                     "partition_max_bytes": 1 << 20}]}],
                                 "forgotten_topics_data": [], "rack_id": ""}, response=False)
    return _frame(1, version, body)


@pytest.mark.parametrize("version", [4, 11, 12, 15, 16])
def test_fetch_throttle_consumers_not_followers(store, version):
    """A follower's Fetch (replica id >= 0: the body's first field before v15, ReplicaState's
    from v15, KIP-903 -- our followers fetch at v15) is exempt from a consumer_byte_rate
    default; a consumer's is throttled at every version."""
    q = QuotaManager(store, window_num=2, window_size_s=1)
    _set(store, (("client-id", None),), "consumer_byte_rate", 100.0)
    pd = m.FetchPartitionData(0, 0, 10, 10, 0, [bytes(1000)])
    topic = "t" if version < 13 else bytes(range(16))
    parts, size = m.encode_fetch_response(version, [(topic, [pd])])
    throttle = _run(q, _fetch_request(version, -1), parts)
    # size bytes over the minimum window of 1 s against 100 B/s
    assert throttle == round((size - 100.0) / 100.0 * 1000.0)
    assert struct.unpack_from(">i", parts[0])[0] == throttle
    parts, _ = m.encode_fetch_response(version, [(topic, [pd])])
    assert _run(q, _fetch_request(version, 1), parts) == 0            # a follower's fetch
    assert struct.unpack_from(">i", parts[0])[0] == 0


def test_request_time_throttle_is_capped_at_one_window(store):
    q = QuotaManager(store, window_num=11, window_size_s=1)
    _set(store, (("user", "alice"), ("client-id", "busy")), "request_percentage", 0.0001)
    body = m.encode(3, 9, {"topics": None, "allow_auto_topic_creation": False,
                           "include_cluster_authorized_operations": False,
                           "include_topic_authorized_operations": False}, response=False)
    frame = _frame(3, 9, body, client_id="busy")
    header, reader = parse_request_header(frame, True)
    mark = q.begin()
    deadline = time.thread_time() + 0.05
    while time.thread_time() < deadline:      # 50 ms of CPU "in the handler"
        pass
    parts = [m.encode(3, 9, {"throttle_time": 0, "brokers": [], "cluster_id": None, "controller_id": -1,
                             "topics": [], "cluster_authorized_operations": -2147483648})]
    assert q.end(Conn, header, frame, parts, mark) == 1000
    assert m.read_struct(m._entity(3, 9, True), Reader(parts[0]))["throttle_time"] == 1000
    # ApiVersions is not counted
    av = _frame(18, 3, b"\x02t\x021\x00")
    assert _run(q, av, [m.encode_api_versions_response(3, 0, m.SUPPORTED)]) == 0


def test_kip951_answers_carry_the_throttle(store):
    """Produce v10-11 with KIP-951's NodeEndpoints after throttle_time_ms, and Fetch v13-16 from a
    consumer (from v15 the body no longer starts with replica_id), are throttled and patched."""
    q = QuotaManager(store, window_num=11, window_size_s=1)
    _set(store, (("user", "alice"),), "producer_byte_rate", 1000.0)
    _set(store, (("client-id", None),), "consumer_byte_rate", 100.0)
    for version in (10, 11):
        frame = _frame(0, version, bytes(20000 - 8 - 2 - 2 - 1))
        parts = [m.encode_produce_response(version, [("t", [(0, 6, -1, -1, -1, None, (2, 3))])],
                                           [(2, "b2", 9093, None)])]
        assert _run(q, frame, parts) > 0
        resp = m.read_struct(m._entity(0, version, True), Reader(bytes(parts[0])))
        assert resp["throttle_time"] > 0
        assert resp["node_endpoints"] == [{"node_id": 2, "host": "b2", "port": 9093, "rack": None}]
    for version in (13, 16):
        pd = m.FetchPartitionData(0, 0, 10, 10, 0, [bytes(1000)])
        parts, _ = m.encode_fetch_response(version, [(bytes(range(16)), [pd])])
        assert _run(q, _fetch_request(version, -1), parts) > 0
        assert struct.unpack_from(">i", parts[0])[0] > 0
