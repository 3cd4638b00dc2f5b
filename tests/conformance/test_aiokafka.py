"""aiokafka (0.14) against ``python -m engine serve``: every public method of AIOKafkaProducer,
AIOKafkaConsumer and AIOKafkaAdminClient that sends a request, asserting what Kafka answers.

``test_every_public_method_is_covered`` introspects the three classes: a public method that no
test names (``@covers``) and that is not listed in ``LOCAL_ONLY`` with its reason fails it.

Features the broker does not serve yet are tested for Kafka's refusal: a typed error within the
client's timeout, never a closed connection or a hang; each such test names the feature.
``CONFORMANCE_BOOTSTRAP=host:port`` runs the module against another broker (the reference
Kafka 4.0): then those features are asserted as Kafka serves them.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

from tests.secure_clients import aiokafka as client_conf

pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka import errors as Errors  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete  # noqa: E402
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # noqa: E402
from aiokafka.structs import OffsetAndMetadata  # noqa: E402

from ._coverage import Coverage  # noqa: E402

EXTERNAL = os.environ.get("CONFORMANCE_BOOTSTRAP")
SERVES_TRANSACTIONS = True       # ours and Kafka both serve transactions
cov = Coverage()
covers = cov.covers
# An hour ago: records much older than retention.ms (7 days) would roll their segment (segment.ms)
# and be deleted by retention, as Kafka does, moving the log start under the test.
TS = int(time.time() * 1000) - 3_600_000
DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5          # DescribeConfigs config_source codes

LOCAL_ONLY = {
    AIOKafkaProducer: {},
    AIOKafkaConsumer: {},
    AIOKafkaAdminClient: {"close": "closes sockets, sends nothing"},
}


@pytest.fixture(scope="module")
def boot(request, security) -> str:
    return EXTERNAL or request.getfixturevalue("serve").client_bootstrap


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


class Admin:
    def __init__(self, boot):
        self.a = AIOKafkaAdminClient(**client_conf(boot), request_timeout_ms=10000)

    async def __aenter__(self):
        await self.a.start()
        return self.a

    async def __aexit__(self, *exc):
        await self.a.close()


async def _topic(boot, name, partitions=1, configs=None):
    async with Admin(boot) as a:
        res = await a.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
        assert [e[1] for e in res.topic_errors] == [0]


async def _produce(boot, topic, n, partition=0, base_ts=TS):
    p = AIOKafkaProducer(**client_conf(boot), linger_ms=5)
    await p.start()
    try:
        futs = [await p.send(topic, b"v%d" % i, key=b"k%d" % i, partition=partition,
                             timestamp_ms=base_ts + i) for i in range(n)]
        return [(await f).offset for f in futs]
    finally:
        await p.stop()


def _consumer(boot, *topics, **kw):
    kw.setdefault("auto_offset_reset", "earliest")
    kw.setdefault("enable_auto_commit", False)
    return AIOKafkaConsumer(*topics, **client_conf(boot), fetch_max_wait_ms=100,
                            request_timeout_ms=10000, **kw)


async def _getmany_until(c, want, *partitions, timeout=15.0):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for recs in (await c.getmany(*partitions, timeout_ms=100)).values():
            got.extend(recs)
    return got


async def _refused_promptly(coro, feature, errors=(Errors.KafkaError,), within=10.0):
    """A not-served feature: Kafka's typed error, fast; not a timeout or a closed connection."""
    t0 = time.monotonic()
    try:
        await asyncio.wait_for(coro, within)
    except TimeoutError:
        pytest.fail(f"{feature}: no answer within {within}s")
    except errors as e:
        assert not isinstance(e, (Errors.KafkaTimeoutError, Errors.KafkaConnectionError,
                                  Errors.RequestTimedOutError)), f"{feature}: {e!r}"
        return e
    else:
        pytest.fail(f"{feature}: no error")
    finally:
        assert time.monotonic() - t0 < within + 1


# -- producer ------------------------------------------------------------------------------------
@covers(AIOKafkaProducer, "start", "send", "send_and_wait", "flush", "partitions_for",
        "create_batch", "send_batch", "stop")
def test_producer_send_batch_idempotent(boot, topic_name):
    async def main():
        await _topic(boot, topic_name, 3)
        # aiokafka is not idempotent by default (enable_idempotence=False); with the flag
        # InitProducerId gives it a producer id
        p = AIOKafkaProducer(**client_conf(boot), enable_idempotence=True, linger_ms=5)
        await p.start()
        try:
            assert await p.partitions_for(topic_name) == {0, 1, 2}
            assert p._txn_manager.producer_id >= 0
            m1 = await p.send_and_wait(topic_name, b"a", key=b"same", timestamp_ms=TS,
                                       headers=[("h", b"1"), ("e", b"")])
            f2 = await p.send(topic_name, b"b", key=b"same", timestamp_ms=TS + 1)
            f3 = await p.send(topic_name, None, key=b"tomb", partition=2, timestamp_ms=TS + 2)
            await p.flush()
            assert f2.done() and f3.done()
            m2, m3 = f2.result(), f3.result()
            assert (m2.partition, m2.offset) == (m1.partition, m1.offset + 1)
            assert (m1.timestamp, m3.partition) == (TS, 2)
            batch = p.create_batch()
            for i in range(3):
                assert batch.append(key=b"bk%d" % i, value=b"bv%d" % i, timestamp=TS + 10 + i)
            batch.close()
            bm = await (await p.send_batch(batch, topic_name, partition=1))
            assert bm.partition == 1
        finally:
            await p.stop()
        c = _consumer(boot)
        await c.start()
        try:
            tps = {TopicPartition(topic_name, m1.partition), TopicPartition(topic_name, 1),
                   TopicPartition(topic_name, 2)}
            c.assign(list(tps))
            recs = {(r.partition, r.offset): r for r in await _getmany_until(c, 6)}
        finally:
            await c.stop()
        r1 = recs[(m1.partition, m1.offset)]
        assert (r1.key, r1.value, r1.timestamp, list(r1.headers)) \
            == (b"same", b"a", TS, [("h", b"1"), ("e", b"")])
        assert (recs[(2, m3.offset)].key, recs[(2, m3.offset)].value) == (b"tomb", None)
        batch_recs = sorted((r.offset, r.key, r.value, r.timestamp) for r in recs.values()
                            if r.partition == 1 and r.key and r.key.startswith(b"bk"))
        assert [(k, v, t) for _, k, v, t in batch_recs] \
            == [(b"bk%d" % i, b"bv%d" % i, TS + 10 + i) for i in range(3)]
        assert batch_recs[0][0] == bm.offset
    run(main())


@covers(AIOKafkaProducer, "begin_transaction", "commit_transaction", "abort_transaction",
        "transaction", "send_offsets_to_transaction")
def test_producer_transactions(boot, topic_name):
    """Waits for: transactions (FindCoordinator key type 1, InitProducerId with a transactional.id,
    AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn)."""
    async def main():
        await _topic(boot, topic_name)
        tid = "atx-" + uuid.uuid4().hex[:8]
        p = AIOKafkaProducer(**client_conf(boot), transactional_id=tid, request_timeout_ms=5000)
        if not SERVES_TRANSACTIONS:
            # start() looks up the transaction coordinator: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            # (fatal at once in the clients), never a hang
            try:
                await _refused_promptly(p.start(), "transactions",
                                        errors=(Errors.TransactionalIdAuthorizationFailed,))
            finally:
                await p.stop()
            return
        await p.start()
        try:
            async with p.transaction():
                await p.send(topic_name, b"committed", partition=0)
                await p.send_offsets_to_transaction({TopicPartition(topic_name, 0): 1}, tid)
            await p.begin_transaction()
            await p.send(topic_name, b"aborted", partition=0)
            await p.abort_transaction()
            await p.begin_transaction()
            await p.send(topic_name, b"committed-2", partition=0)
            await p.commit_transaction()
        finally:
            await p.stop()
        c = _consumer(boot, isolation_level="read_committed")
        await c.start()
        try:
            tp = TopicPartition(topic_name, 0)
            c.assign([tp])
            got = await _getmany_until(c, 2, timeout=5)
            assert c.last_stable_offset(tp) == c.highwater(tp)
        finally:
            await c.stop()
        assert [r.value for r in got] == [b"committed", b"committed-2"]
        async with Admin(boot) as a:
            offs = await a.list_consumer_group_offsets(tid)
        assert offs[TopicPartition(topic_name, 0)].offset == 1
    run(main())


# -- consumer ------------------------------------------------------------------------------------
@covers(AIOKafkaConsumer, "start", "assign", "assignment", "topics", "partitions_for_topic",
        "beginning_offsets", "end_offsets", "offsets_for_times", "position", "seek",
        "seek_to_beginning", "seek_to_end", "getmany", "getone", "highwater",
        "last_stable_offset", "last_poll_timestamp", "pause", "paused", "resume", "stop")
def test_consumer_assign_offsets_seek_pause(boot, topic_name):
    async def main():
        await _topic(boot, topic_name, 2)
        assert await _produce(boot, topic_name, 10) == list(range(10))
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        c = _consumer(boot)
        await c.start()
        try:
            assert topic_name in await c.topics()
            c.assign([tp0, tp1])
            assert c.assignment() == {tp0, tp1}
            assert await c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
            assert await c.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 0}
            oft = await c.offsets_for_times({tp0: TS + 4, tp1: TS})
            assert (oft[tp0].offset, oft[tp0].timestamp, oft[tp1]) == (4, TS + 4, None)
            assert (await c.offsets_for_times({tp0: TS + 1000}))[tp0] is None
            assert await c.position(tp0) == 0
            c.seek(tp0, 3)
            assert await c.position(tp0) == 3
            r = await asyncio.wait_for(c.getone(tp0), 15)
            assert (r.offset, r.key, r.value, r.timestamp) == (3, b"k3", b"v3", TS + 3)
            assert c.partitions_for_topic(topic_name) == {0, 1}      # metadata of assigned
            got = await _getmany_until(c, 6, tp0)
            assert [x.offset for x in got] == list(range(4, 10))
            assert c.highwater(tp0) == 10
            assert c.last_stable_offset(tp0) == 10        # read_uncommitted: the high watermark
            assert abs(c.last_poll_timestamp(tp0) - time.time() * 1000) < 60_000
            await c.seek_to_beginning(tp0)
            assert await c.position(tp0) == 0
            await c.seek_to_end(tp0)
            assert await c.position(tp0) == 10
            await c.seek_to_beginning()
            c.pause(tp0)
            assert c.paused() == {tp0}
            assert await _getmany_until(c, 1, timeout=0.5) == []
            c.resume(tp0)
            assert c.paused() == set()
            assert [x.offset for x in await _getmany_until(c, 10)] == list(range(10))
        finally:
            await c.stop()
    run(main())


@covers(AIOKafkaConsumer, "subscribe", "subscription", "unsubscribe", "commit", "committed",
        "seek_to_committed")
def test_consumer_group_split_commit(boot, topic_name):
    async def main():
        await _topic(boot, topic_name, 4)
        for part in range(4):
            await _produce(boot, topic_name, 2, partition=part)
        group = "g-" + topic_name
        kw = dict(group_id=group, heartbeat_interval_ms=200, session_timeout_ms=6000)
        c1, c2 = _consumer(boot, **kw), _consumer(boot, **kw)
        await c1.start()
        await c2.start()
        try:
            c1.subscribe([topic_name])
            assert c1.subscription() == {topic_name}
            deadline = time.monotonic() + 20
            while len(c1.assignment()) < 4 and time.monotonic() < deadline:
                await c1.getmany(timeout_ms=100)
            assert len(c1.assignment()) == 4
            c2.subscribe([topic_name])
            while not (len(c1.assignment()) == 2 and len(c2.assignment()) == 2) \
                    and time.monotonic() < deadline:
                await asyncio.gather(c1.getmany(timeout_ms=100), c2.getmany(timeout_ms=100))
            a1, a2 = c1.assignment(), c2.assignment()
            assert (len(a1), len(a2)) == (2, 2) and not (a1 & a2), (a1, a2)
            async with Admin(boot) as a:
                [resp] = await a.describe_consumer_groups([group])
                [g] = resp.groups
                assert (g[2], len(g[5])) == ("Stable", 2)      # state, members
            first = sorted(a1)[0]
            await c1.commit({first: 1})
            assert await c1.committed(first) == 1
            for c in (c1, c2):
                for tp in c.assignment():
                    c.seek(tp, 2)
                await c.commit()                      # the positions
            for tp in a1 | a2:
                assert await c1.committed(tp) == 2
            c1.seek(first, 0)
            await c1.seek_to_committed(first)
            assert await c1.position(first) == 2
            c2.unsubscribe()
            assert c2.subscription() == set() and c2.assignment() == set()
            while len(c1.assignment()) < 4 and time.monotonic() < deadline:
                await c1.getmany(timeout_ms=100)
            assert len(c1.assignment()) == 4
        finally:
            await c2.stop()
            await c1.stop()
        async with Admin(boot) as a:
            [resp] = await a.describe_consumer_groups([group])
            assert (resp.groups[0][2], resp.groups[0][5]) == ("Empty", [])
    run(main())


# -- admin ---------------------------------------------------------------------------------------
@covers(AIOKafkaAdminClient, "start", "create_topics", "list_topics", "describe_topics",
        "create_partitions", "delete_topics", "describe_cluster", "find_coordinator")
def test_admin_topics_cluster(boot, topic_name):
    async def main():
        async with Admin(boot) as a:
            c = await a.describe_cluster()
            host, port = boot.rsplit(":", 1)
            [b] = c["brokers"]
            assert c["cluster_id"] and (b["host"], b["port"]) == (host, int(port))
            assert c["controller_id"] == b["node_id"]
            node = b["node_id"]
            # key type 0, a group. The first lookup may create __consumer_offsets and answer
            # COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka does; aiokafka's admin does not retry.
            deadline = time.monotonic() + 10
            while True:
                try:
                    assert await a.find_coordinator("group-x") == node
                    break
                except Errors.GroupCoordinatorNotAvailableError:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)
            res = await a.create_topics([NewTopic(topic_name, 3, 1)])
            assert [(t[0], t[1]) for t in res.topic_errors] == [(topic_name, 0)]
            res = await a.create_topics([NewTopic(topic_name, 3, 1)])
            assert res.topic_errors[0][1] == Errors.TopicAlreadyExistsError.errno
            assert topic_name in await a.list_topics()
            [d] = await a.describe_topics([topic_name])
            assert (d["topic"], d["error_code"], d["is_internal"]) == (topic_name, 0, False)
            assert sorted((p["partition"], p["leader"], p["replicas"], p["isr"])
                          for p in d["partitions"]) == [(i, node, [node], [node]) for i in range(3)]
            res = await a.create_partitions({topic_name: NewPartitions(5)})
            assert res.topic_errors[0][1] == 0
            deadline = time.monotonic() + 5        # Kafka: through its metadata log
            while len((await a.describe_topics([topic_name]))[0]["partitions"]) < 5 \
                    and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            [d] = await a.describe_topics([topic_name])
            assert len(d["partitions"]) == 5
            with pytest.raises(Errors.InvalidPartitionsError):
                await a.create_partitions({topic_name: NewPartitions(2)})
            res = await a.delete_topics([topic_name])
            assert res.topic_error_codes == [(topic_name, 0)]
            deadline = time.monotonic() + 10
            while topic_name in await a.list_topics() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert topic_name not in await a.list_topics()
    run(main())


@covers(AIOKafkaAdminClient, "find_coordinator")
def test_admin_find_transaction_coordinator(boot):
    """Waits for: transactions. FindCoordinator key type 1 (a transactional id): Kafka answers
    its transaction coordinator; until transactions are served, Kafka's typed error, promptly."""
    async def main():
        async with Admin(boot) as a:
            node = (await a.describe_cluster())["brokers"][0]["node_id"]
            if SERVES_TRANSACTIONS:
                assert await a.find_coordinator("tx-" + uuid.uuid4().hex[:6], 1) == node
            else:
                await _refused_promptly(a.find_coordinator("tx-" + uuid.uuid4().hex[:6], 1),
                                        "transactions",
                                        errors=(Errors.TransactionalIdAuthorizationFailed,))
    run(main())


@covers(AIOKafkaAdminClient, "describe_configs")
def test_admin_describe_configs(boot, topic_name):
    async def main():
        await _topic(boot, topic_name, configs={"retention.ms": "3600000"})
        async with Admin(boot) as a:
            [resp] = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
            [res] = resp.resources
            assert (res[0], res[3]) == (0, topic_name)
            entries = {e[0]: e for e in res[4]}
            assert entries["retention.ms"][1:4] == ("3600000", False, DYNAMIC_TOPIC_CONFIG)
            assert entries["cleanup.policy"][1] == "delete"
            assert entries["cleanup.policy"][3] == DEFAULT_CONFIG
            [resp] = await a.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic_name + "-none")])
            assert resp.resources[0][0] == Errors.UnknownTopicOrPartitionError.errno
    run(main())


@covers(AIOKafkaAdminClient, "alter_configs")
def test_admin_alter_configs_legacy(boot, topic_name):
    """Waits for: AlterConfigs (legacy, branch apis) — aiokafka's only alter. Kafka replaces the
    resource's whole set of overrides: a key the request omits goes back to its default."""
    async def main():
        await _topic(boot, topic_name, configs={"retention.ms": "3600000"})
        async with Admin(boot) as a:
            [resp] = await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name,
                                                           configs={"segment.ms": "600000"})])
            assert [(r[0], r[3]) for r in resp.resources] == [(0, topic_name)]
            deadline = time.monotonic() + 5
            while True:
                [d] = await a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)])
                dynamic = {e[0]: e[1] for e in d.resources[0][4] if e[3] == DYNAMIC_TOPIC_CONFIG}
                if dynamic == {"segment.ms": "600000"} or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.05)
            assert dynamic == {"segment.ms": "600000"}
            [resp] = await a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name,
                                                           configs={"retention.ms": "x"})])
            assert resp.resources[0][0] == Errors.InvalidConfigurationError.errno
    run(main())


@covers(AIOKafkaAdminClient, "delete_records")
def test_admin_delete_records(boot, topic_name):
    async def main():
        await _topic(boot, topic_name)
        await _produce(boot, topic_name, 10)
        tp = TopicPartition(topic_name, 0)
        async with Admin(boot) as a:
            assert await a.delete_records({tp: RecordsToDelete(4)}) == {tp: 4}
            with pytest.raises(Errors.OffsetOutOfRangeError):
                await a.delete_records({tp: RecordsToDelete(11)})
        c = _consumer(boot)
        await c.start()
        try:
            assert await c.beginning_offsets([tp]) == {tp: 4}
            c.assign([tp])
            assert [r.offset for r in await _getmany_until(c, 6)] == list(range(4, 10))
        finally:
            await c.stop()
    run(main())


@covers(AIOKafkaAdminClient, "list_consumer_groups", "describe_consumer_groups",
        "list_consumer_group_offsets")
def test_admin_groups(boot, topic_name):
    async def main():
        await _topic(boot, topic_name, 2)
        await _produce(boot, topic_name, 5, partition=0)
        group = "ga-" + topic_name
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        c = _consumer(boot, topic_name, group_id=group)
        await c.start()
        try:
            got = await _getmany_until(c, 5)
            assert len(got) == 5
            await c.commit({tp0: OffsetAndMetadata(5, "meta"), tp1: 0})
            async with Admin(boot) as a:
                assert (group, "consumer") in await a.list_consumer_groups()
                [resp] = await a.describe_consumer_groups([group])
                [(err, gid, state, ptype, proto, members)] = [tuple(g[:6]) for g in resp.groups]
                assert (err, gid, state, ptype, proto) == (0, group, "Stable", "consumer", "roundrobin")
                assert len(members) == 1
                offs = await a.list_consumer_group_offsets(group)
                assert {tp: (o.offset, o.metadata) for tp, o in offs.items()} \
                    == {tp0: (5, "meta"), tp1: (0, "")}
                offs = await a.list_consumer_group_offsets(group, partitions=[tp1])
                assert list(offs) == [tp1]
        finally:
            await c.stop()
        async with Admin(boot) as a:
            [resp] = await a.describe_consumer_groups([group])
            assert resp.groups[0][2] == "Empty"
            [resp] = await a.describe_consumer_groups(["none-" + group])
            assert resp.groups[0][2] == "Dead"
            assert await a.list_consumer_group_offsets("none-" + group) == {}
    run(main())


# -- coverage --------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [AIOKafkaProducer, AIOKafkaConsumer, AIOKafkaAdminClient],
                         ids=lambda c: c.__name__)
def test_every_public_method_is_covered(cls):
    cov.check(cls, LOCAL_ONLY[cls])
