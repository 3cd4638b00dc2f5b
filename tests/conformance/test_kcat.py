"""kcat (librdkafka's command-line client) against ``python -m engine serve``: every mode that
talks to a broker, ``-L`` (metadata), ``-P`` (produce), ``-C`` (consume, simple and ``-G``
balanced) and ``-Q`` (offsets by time), each asserting what Kafka answers.

kcat is /usr/bin/kcat here (Debian's package); without it these tests are skipped and say so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from tests.secure_clients import confluent
from tests.secure_clients import kcat as kcat_args

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")

T = 30  # seconds: no kcat run may take longer (a hang fails the test)


@pytest.fixture(scope="module")
def bootstrap(request, security) -> str:
    """The module's broker; CONFORMANCE_BOOTSTRAP=host:port runs these against another broker
    (the reference Kafka 4.0)."""
    return os.environ.get("CONFORMANCE_BOOTSTRAP") or request.getfixturevalue("serve").client_bootstrap


def kcat(bootstrap, *args, input=None, ok=True):
    r = subprocess.run([KCAT, *kcat_args(bootstrap), *args], input=input, capture_output=True, timeout=T)
    if ok:
        assert r.returncode == 0, r.stderr.decode()
    return r


def _produce(bootstrap, topic, lines: str, *extra):
    kcat(bootstrap, "-P", "-t", topic, "-K", ":", *extra, input=lines.encode())


def test_metadata_L(bootstrap, topic_name):
    _produce(bootstrap, topic_name, "k:v\n")        # auto-created with the broker's default
    md = json.loads(kcat(bootstrap, "-L", "-J").stdout)
    assert [b["name"] for b in md["brokers"]] == [bootstrap]
    broker_id = md["brokers"][0]["id"]
    assert md["controllerid"] == broker_id and md["originating_broker"]["id"] == broker_id
    topics = {t["topic"]: t for t in md["topics"]}
    assert topic_name in topics
    assert [(p["partition"], p["leader"], p["replicas"], p["isrs"])
            for p in topics[topic_name]["partitions"]] == \
        [(0, broker_id, [{"id": broker_id}], [{"id": broker_id}])]
    one = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic_name).stdout)
    assert [t["topic"] for t in one["topics"]] == [topic_name]
    text = kcat(bootstrap, "-L", "-t", topic_name).stdout.decode()
    assert "1 brokers:" in text and f'topic "{topic_name}" with 1 partitions:' in text


def test_produce_P_consume_C(bootstrap, topic_name):
    lines = "".join(f"key{i}:value {i}\n" for i in range(20))
    _produce(bootstrap, topic_name, lines, "-p", "0", "-z", "zstd", "-H", "src=kcat")
    out = kcat(bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e",
               "-f", "%p|%o|%k|%s|%h\n").stdout.decode()
    assert out.splitlines() == [f"0|{i}|key{i}|value {i}|src=kcat" for i in range(20)]
    # relative offsets: the last 3
    out = kcat(bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "-3", "-e",
               "-f", "%o %s\n").stdout.decode()
    assert out.splitlines() == [f"{i} value {i}" for i in range(17, 20)]
    # -c limits the count; -o end of a full partition gives nothing and exits with -e
    out = kcat(bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "5", "-c", "2",
               "-f", "%o\n").stdout.decode()
    assert out.splitlines() == ["5", "6"]
    assert kcat(bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "end", "-e").stdout == b""
    # -Z: an empty value is produced as NULL; %S prints its length (-1)
    kcat(bootstrap, "-P", "-t", topic_name, "-p", "0", "-Z", "-K", ":", input=b"nk:\n")
    out = kcat(bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "20", "-e",
               "-f", "%k %S\n").stdout.decode()
    assert out.splitlines() == ["nk -1"]


def test_consume_from_timestamp_and_query_Q(bootstrap, topic_name):
    _produce(bootstrap, topic_name, "a:1\nb:2\n", "-p", "0")
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    _produce(bootstrap, topic_name, "c:3\n", "-p", "0")
    stamps = [int(line.split()[1]) for line in kcat(
        bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e",
        "-f", "%o %T\n").stdout.decode().splitlines()]
    assert len(stamps) == 3 and stamps[1] < cut <= stamps[2]

    def query(spec):
        return json.loads(kcat(bootstrap, "-Q", "-J", "-t", f"{topic_name}:0:{spec}").stdout)

    res = query(cut)
    assert res[topic_name]["0"]["offset"] == 2          # the first record at or after cut
    assert query(0)[topic_name]["0"]["offset"] == 0
    assert query(-1)[topic_name]["0"]["offset"] == 3    # latest: the high watermark
    assert query(-2)[topic_name]["0"]["offset"] == 0    # earliest
    assert query(stamps[2] + 60_000)[topic_name]["0"]["offset"] == -1   # none that late
    text = kcat(bootstrap, "-Q", "-t", f"{topic_name}:0:{cut}").stdout.decode()
    assert text.split() == [topic_name, "[0]", "offset", "2"]
    # -C -o s@ts starts at the same offset
    out = kcat(bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", f"s@{cut}", "-e",
               "-f", "%o %k\n").stdout.decode()
    assert out.splitlines() == ["2 c"]


def test_balanced_consumer_G_commits(bootstrap, topic_name):
    ck = pytest.importorskip("confluent_kafka", reason="the group's offsets are read with confluent-kafka")
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(confluent(bootstrap))
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(T)
    _produce(bootstrap, topic_name, "a:1\nb:2\n", "-p", "0")
    _produce(bootstrap, topic_name, "c:3\n", "-p", "1")
    group = f"kg-{topic_name}"
    out = kcat(bootstrap, "-G", group, "-o", "beginning", "-e", "-f", "%p %o %k\n",
               "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100",
               topic_name).stdout.decode()
    assert sorted(out.splitlines()) == ["0 0 a", "0 1 b", "1 0 c"]
    res = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions(group)],
                                            request_timeout=T)[group].result(T)
    assert sorted((tp.partition, tp.offset) for tp in res.topic_partitions) == [(0, 2), (1, 1)]
    # a second run of the same group resumes after the commits: nothing left
    out = kcat(bootstrap, "-G", group, "-e", "-f", "%p %o %k\n", topic_name).stdout.decode()
    assert out == ""


def test_transactional_producer(bootstrap, topic_name):
    """kcat -X transactional.id=... produces in a transaction (init, begin, commit): the
    records are there for a read_committed consumer."""
    _produce(bootstrap, topic_name, "a:1\n", "-p", "0")
    r = kcat(bootstrap, "-P", "-t", topic_name, "-p", "0", "-X", f"transactional.id=tx-{topic_name}",
             input=b"x\n", ok=False)
    assert r.returncode == 0, r.stderr.decode()
    out = kcat(bootstrap, "-C", "-t", topic_name, "-p", "0", "-o", "beginning", "-e",
               "-X", "isolation.level=read_committed", "-f", "%s\n").stdout.decode()
    assert out.splitlines() == ["1", "x"]
