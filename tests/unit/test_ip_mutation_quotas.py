"""The quota kinds of KIP-612 and KIP-599 without a broker: Kafka's TokenBucket arithmetic of
``controller_mutation_rate`` (strict and permissive requests, engine/server/mutation_quotas.py),
the per-IP connection creation rate (engine/server/ip_quotas.py: an address's own quota over the
default, a refused connection not counted), and both kinds kept in client-quotas.json."""

from __future__ import annotations

import json

import pytest

from engine.security.quotas import ClientQuotaStore, QuotaAlteration, QuotaFormatError
from engine.server import mutation_quotas
from engine.server.ip_quotas import IpConnectionQuotas
from engine.server.mutation_quotas import ControllerMutationQuotas, TokenBucket


@pytest.fixture
def store(tmp_path):
    return ClientQuotaStore(str(tmp_path))


def _set(store, entity, key, value):
    assert store.alter([QuotaAlteration(entity, ((key, value),))]) == [(0, None)]


def test_token_bucket_is_kafkas():
    b = TokenBucket()
    rate, burst = 2.0, 22.0                    # 11 windows x 1 s x 2
    assert b.measure(rate, burst, 1_000_000.0) == burst    # full at first use
    b.record(30.0, rate, burst, 1_000_000.0)
    assert b.measure(rate, burst, 1_000_000.0) == -8.0     # may go below zero
    assert b.measure(rate, burst, 1_002_000.0) == -4.0     # refilled at rate per second
    assert b.measure(rate, burst, 1_100_000.0) == burst    # never above the burst


def test_strict_and_permissive_requests(store, monkeypatch):
    now = [5_000_000.0]
    monkeypatch.setattr(mutation_quotas, "_now_ms", lambda: now[0])
    q = ControllerMutationQuotas(store, window_num=2, window_size_s=1)
    assert not q.active
    _set(store, (("client-id", "c"),), "controller_mutation_rate", 2.0)
    assert q.active
    strict = q.quota_for("User:ANONYMOUS", "c", 6, "CreateTopics")
    assert strict.strict and not strict.exceeded()          # 4 tokens
    strict.record(4)
    assert not strict.exceeded()                            # 0: not below zero
    strict.record(3)                                        # -3: allowed, no throttle yet
    assert strict.throttle_ms() == 0
    assert strict.exceeded() and strict.throttle_ms() == 1500   # 3 tokens at 2 a second
    now[0] += 500
    assert strict.throttle_ms() == 1000                     # less the time since
    # an older version: served and throttled
    old = q.quota_for("User:ANONYMOUS", "c", 5, "CreateTopics")
    assert not old.strict and not old.exceeded()
    old.record(1)                                           # -2 + 1 = -3 after 0.5 s refill
    assert old.throttle_ms() == 1500
    # DeleteTopics strict from v5, CreatePartitions from v3
    assert q.quota_for("User:ANONYMOUS", "c", 5, "DeleteTopics").strict
    assert not q.quota_for("User:ANONYMOUS", "c", 2, "CreatePartitions").strict
    # another client id: unbounded
    other = q.quota_for("User:ANONYMOUS", "d", 7, "CreateTopics")
    other.record(1000)
    assert not other.exceeded() and other.throttle_ms() == 0


def test_ip_connection_rate(store):
    q = IpConnectionQuotas(store, window_num=2, window_size_s=1)
    assert not q.active and q.throttle_ms("10.0.0.1") == 0
    _set(store, (("ip", None),), "connection_creation_rate", 1.0)
    _set(store, (("ip", "10.0.0.2"),), "connection_creation_rate", 3.0)
    assert q.quota("10.0.0.1") == 1 and q.quota("10.0.0.2") == 3 and q.quota("::ffff:10.0.0.2") == 3
    assert q.throttle_ms("10.0.0.1") == 0
    assert 0 < q.throttle_ms("10.0.0.1") <= 1000           # 2 > 1 a second: refused
    assert 0 < q.throttle_ms("10.0.0.1") <= 1000           # the refused one was not counted
    assert [q.throttle_ms("10.0.0.2") > 0 for _ in range(4)] == [False, False, False, True]
    # a change applies to the running rates
    _set(store, (("ip", None),), "connection_creation_rate", 100.0)
    assert q.throttle_ms("10.0.0.1") == 0
    assert store.alter([QuotaAlteration((("ip", None),), (("connection_creation_rate", None),))]) == [(0, None)]
    assert q.quota("10.0.0.1") is None


def test_kept_in_the_data_directory(tmp_path, store):
    _set(store, (("ip", "10.1.1.1"),), "connection_creation_rate", 3.0)
    _set(store, (("ip", None),), "connection_creation_rate", 50.0)
    _set(store, (("user", "u1"),), "controller_mutation_rate", 2.5)
    again = ClientQuotaStore(str(tmp_path))
    assert again.snapshot() == {(("ip", "10.1.1.1"),): {"connection_creation_rate": 3.0},
                                (("ip", None),): {"connection_creation_rate": 50.0},
                                (("user", "u1"),): {"controller_mutation_rate": 2.5}}
    # an ip entity holding a user's key is not Kafka's form
    doc = json.loads((tmp_path / "client-quotas.json").read_text())
    doc["entities"].append({"entity": {"ip": "10.2.2.2"}, "quotas": {"producer_byte_rate": 1}})
    (tmp_path / "client-quotas.json").write_text(json.dumps(doc))
    with pytest.raises(QuotaFormatError):
        ClientQuotaStore(str(tmp_path))
