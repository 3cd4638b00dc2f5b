"""Client quotas of KIP-612 (``ip`` entities, ``connection_creation_rate``) and KIP-599
(``controller_mutation_rate``) against Apache Kafka 4.0 and our broker (the session's shared
``reference_kafka`` -- this test touches only its own client id, a made-up ip and its own
topics, and removes them -- and ``ours``; both with the default quota windows: a mutation bucket
of 11 x rate tokens).

Alter/DescribeClientQuotas answers are compared with their error messages; CreateTopics v7 over
the mutation quota answers THROTTLING_QUOTA_EXCEEDED (89, no message) for the topic that finds
the bucket below zero, and a throttle time, on both; v5 (before the error existed) is served and
throttled.  AlterClientQuotas' entries are compared sorted (Kafka answers them, and each
entity's parts, in its maps' order)."""

from __future__ import annotations

import time
import uuid

from .wire import ALLOWED, Client, Pair, diff, normalize, plain

IP = "10.20.30.40"


def _entity(**kw) -> list[dict]:
    return [{"entity_type": t.replace("_", "-"), "entity_name": n} for t, n in kw.items()]


def _topics(partitions: dict[str, int]) -> dict:
    return {"topics": [{"name": n, "num_partitions": p, "replication_factor": 1,
                        "assignments": [], "configs": []} for n, p in partitions.items()],
            "timeout": 30000, "validate_only": False}


def _sorted(resp: dict) -> dict:
    """Kafka answers AlterClientQuotas' entries in its map's order, each entity's parts too (a
    client matches them by entity): both answers sorted the same way."""
    entries = [dict(e, entity=sorted(e["entity"], key=lambda x: x["entity_type"])) for e in resp["entries"]]
    return dict(resp, entries=sorted(entries, key=lambda e: repr(e["entity"])))


def _by_name(resp: dict) -> dict:
    return dict(resp, responses=sorted(resp["responses"], key=lambda r: r["name"]))


def test_ip_and_mutation_quotas(ours, reference_kafka):
    cid = f"mut-{uuid.uuid4().hex[:6]}"
    pair = Pair(ours, reference_kafka, messages=True)
    try:
        def alter(entries):
            return pair.same(49, {"entries": [{"entity": e, "ops": [
                {"key": k, "value": v or 0.0, "remove": v is None} for k, v in ops]} for e, ops in entries],
                "validate_only": False}, 1, sort=_sorted)

        alter([(_entity(ip=IP), [("connection_creation_rate", 7.0)]),
               (_entity(client_id=cid), [("controller_mutation_rate", 1.0)]),
               (_entity(ip=IP, user="u"), [("connection_creation_rate", 1.0)]),
               (_entity(ip="not-an-ip.invalid"), [("connection_creation_rate", 1.0)]),
               (_entity(ip="10.20.30.41"), [("producer_byte_rate", 1.0)]),
               (_entity(ip="10.20.30.42"), [("connection_creation_rate", 1.5)]),
               (_entity(user="u"), [("connection_creation_rate", 1.0)])])
        for components in ([{"entity_type": "ip", "match_type": 0, "match": IP}],
                           [{"entity_type": "ip", "match_type": 2, "match": None}],
                           [{"entity_type": "client-id", "match_type": 0, "match": cid}]):
            for _ in range(100):            # Kafka's broker learns the quotas from its controller
                a, b = pair.both(48, {"components": components, "strict": True}, 1)
                if a["entries"] and b["entries"]:
                    break
                time.sleep(0.05)
            assert a["entries"] and not diff(a, b, ALLOWED), (a, b)
        time.sleep(0.5)                     # ... and so does Kafka's controller's quota manager
        # 11 tokens: the first topic takes 12 (-1 left), the second finds the bucket below zero
        t1, t2 = f"{cid}-1", f"{cid}-2"
        answers = {}
        for name, port in pair.ports.items():
            with Client(port, cid) as c:
                answers[name] = plain(c.call(19, 7, _topics({t1: 12, t2: 1})))
        ours_a, kafka_a = (normalize(answers[n], 0) for n in ("ours", "kafka"))
        assert not diff(ours_a, kafka_a, ALLOWED | {"throttle_time", "configs", "topic_id"}), answers
        assert [t["error_code"] for t in answers["ours"]["topics"]] == [0, 89], answers
        assert all(a["throttle_time"] > 0 for a in answers.values()), answers
        # an older version (v5) below zero: served, and throttled
        t3 = f"{cid}-3"
        for name, port in pair.ports.items():
            with Client(port, cid) as c:
                answers[name] = plain(c.call(19, 5, _topics({t3: 1})))
        assert [t["error_code"] for a in answers.values() for t in a["topics"]] == [0, 0], answers
        assert all(a["throttle_time"] > 0 for a in answers.values()), answers
        alter([(_entity(ip=IP), [("connection_creation_rate", None)]),
               (_entity(client_id=cid), [("controller_mutation_rate", None)])])
        pair.same(20, {"topic_names": [t1, t3], "timeout": 30000}, 5, sort=_by_name)
    finally:
        pair.close()
