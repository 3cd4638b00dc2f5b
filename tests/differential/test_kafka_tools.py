"""Apache Kafka 4.0's own command-line tools against our broker (``python -m engine serve``).

Outputs are asserted, not just exit codes.  JVM start-up dominates (2-4 s a tool), so the
tools run in a few ordered steps and independent invocations of a step run side by side.
Kafka is found as for the differential tests (conftest.py); the package is skipped without it.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.serving import served as serve_broker

_JVM_ENV = {"KAFKA_HEAP_OPTS": "-Xmx256m",
            "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto",
            "KAFKA_LOG4J_OPTS": ""}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    yield from serve_broker(tmp_path_factory, "tools")


class Tools:
    def __init__(self, home: str, bootstrap: str, tmp):
        self.home, self.bootstrap, self.tmp = home, bootstrap, tmp

    def run(self, tool: str, *args: str, stdin: str | None = None, bootstrap: bool = True,
            check: bool = True, timeout: float = 60, expect_failure: bool = False) -> str:
        cmd = [os.path.join(self.home, "bin", f"kafka-{tool}.sh")]
        if bootstrap:
            cmd += ["--bootstrap-server", self.bootstrap]
        cmd += list(args)
        env = dict(os.environ, **_JVM_ENV)
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env,
                           timeout=timeout, cwd=str(self.tmp))
        out = p.stdout + p.stderr
        if check:
            assert p.returncode == 0, f"{' '.join(cmd)} exited {p.returncode}:\n{out[-3000:]}"
        if expect_failure:
            assert p.returncode != 0, f"{' '.join(cmd)} succeeded:\n{out[-3000:]}"
        return out

    def many(self, *calls) -> list[str]:
        """Several independent tool runs side by side: each call is (tool, args...); a tool
        named "!tool" is expected to fail (its exit code is asserted nonzero)."""
        def one(call):
            tool, *args = call
            if tool.startswith("!"):
                out = self.run(tool[1:], *args, check=False, expect_failure=True)
                return out
            return self.run(tool, *args)
        with ThreadPoolExecutor(3) as pool:
            return list(pool.map(one, calls))


@pytest.fixture(scope="module")
def tools(kafka_home, served, tmp_path_factory):
    return Tools(kafka_home, served.bootstrap, tmp_path_factory.mktemp("tools-cwd"))


def test_topics_producer_consumer_groups(tools):
    t = "tools-t"
    out = tools.run("topics", "--create", "--topic", t, "--partitions", "2",
                    "--replication-factor", "1", "--config", "retention.ms=1000000")
    assert f"Created topic {t}." in out
    listed, described, dup, bad = tools.many(
        ("topics", "--list"),
        ("topics", "--describe", "--topic", t),
        ("!topics", "--create", "--topic", t, "--partitions", "1"),
        ("!topics", "--create", "--topic", "bad", "--partitions", "1", "--replication-factor", "3"))
    assert t in listed.split()
    assert re.search(rf"Topic: {t}\s.*PartitionCount: 2\s+ReplicationFactor: 1\s+"
                     r"Configs: retention.ms=1000000", described), described
    for p in (0, 1):
        assert re.search(rf"Topic: {t}\s+Partition: {p}\s+Leader: 0\s+Replicas: 0\s+Isr: 0",
                         described), described
    assert "TopicExistsException" in dup and f"'{t}' already exists" in dup
    assert "InvalidReplicationFactorException" in bad

    tools.run("topics", "--alter", "--topic", t, "--partitions", "3")

    lines = [f"k{i}:v{i}" for i in range(12)]
    tools.run("console-producer", "--topic", t, "--property", "parse.key=true",
              "--property", "key.separator=:", stdin="\n".join(lines) + "\n")
    out = tools.run("console-consumer", "--topic", t, "--from-beginning", "--max-messages", "12",
                    "--property", "print.key=true", "--property", "key.separator=:",
                    "--group", "tools-g", "--timeout-ms", "30000")
    got = [line for line in out.splitlines() if re.fullmatch(r"k\d+:v\d+", line)]
    assert sorted(got) == sorted(lines), out
    assert "Processed a total of 12 messages" in out

    listed, described, ends, altered = tools.many(
        ("consumer-groups", "--list"),
        ("consumer-groups", "--describe", "--group", "tools-g"),
        ("get-offsets", "--topic", t, "--time", "-1"),
        ("topics", "--describe", "--topic", t))
    assert "PartitionCount: 3" in altered and "Partition: 2" in altered
    assert "tools-g" in listed.split()
    end = {int(p): int(o) for p, o in re.findall(rf"^{t}:(\d+):(\d+)$", ends, re.M)}
    assert sorted(end) == [0, 1, 2] and sum(end.values()) == 12, ends
    rows = re.findall(rf"^tools-g\s+{t}\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", described, re.M)
    assert {int(p): (int(cur), int(leo), int(lag)) for p, cur, leo, lag in rows} == \
        {p: (n, n, 0) for p, n in end.items()}, described
    # the consumer left: the group is Empty, so its offsets can be reset
    out = tools.run("consumer-groups", "--reset-offsets", "--to-earliest", "--execute",
                    "--group", "tools-g", "--topic", t)
    rows = re.findall(rf"^tools-g\s+{t}\s+(\d+)\s+(\d+)\s*$", out, re.M)
    assert sorted((int(p), int(o)) for p, o in rows) == [(0, 0), (1, 0), (2, 0)], out
    described = tools.run("consumer-groups", "--describe", "--group", "tools-g")
    rows = re.findall(rf"^tools-g\s+{t}\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", described, re.M)
    assert {int(p): (int(c), int(lag)) for p, c, _, lag in rows} == \
        {p: (0, n) for p, n in end.items()}, described
    out = tools.run("consumer-groups", "--delete", "--group", "tools-g")
    assert "Deletion of requested consumer groups ('tools-g') was successful." in out
    listed, missing = tools.many(("consumer-groups", "--list"),
                                 ("consumer-groups", "--describe", "--group", "tools-g"))
    assert "tools-g" not in listed.split()
    assert "Consumer group 'tools-g' does not exist." in missing

    tools.run("topics", "--delete", "--topic", t)
    assert t not in tools.run("topics", "--list").split()


def test_configs_offsets_delete_records_dump_log(tools, served):
    t = "tools-c"
    # small index interval and segments: several segments with real index entries to check
    tools.run("topics", "--create", "--topic", t, "--partitions", "1", "--replication-factor", "1",
              "--config", "index.interval.bytes=100", "--config", "segment.bytes=8192",
              "--config", "message.timestamp.type=CreateTime")
    topic_cfg, broker_cfg = tools.many(
        ("configs", "--describe", "--entity-type", "topics", "--entity-name", t),
        ("configs", "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all"))
    assert f"Dynamic configs for topic {t} are:" in topic_cfg
    assert "index.interval.bytes=100 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" \
           "index.interval.bytes=100, DEFAULT_CONFIG:log.index.interval.bytes=4096}" in topic_cfg
    assert "All configs for broker 0 are:" in broker_cfg
    assert "log.segment.bytes=1073741824 sensitive=false " \
           "synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}" in broker_cfg
    assert "group.initial.rebalance.delay.ms=0 sensitive=false synonyms={STATIC_BROKER_CONFIG:" \
           "group.initial.rebalance.delay.ms=0, DEFAULT_CONFIG:group.initial.rebalance.delay.ms=3000}" \
           in broker_cfg

    out = tools.run("configs", "--alter", "--entity-type", "topics", "--entity-name", t,
                    "--add-config", "retention.ms=86400000,cleanup.policy=delete")
    assert f"Completed updating config for topic {t}." in out
    out = tools.run("configs", "--alter", "--entity-type", "topics", "--entity-name", t,
                    "--delete-config", "message.timestamp.type")
    topic_cfg = tools.run("configs", "--describe", "--entity-type", "topics", "--entity-name", t)
    assert "retention.ms=86400000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=86400000}" \
        in topic_cfg
    assert "message.timestamp.type" not in topic_cfg

    # 300 records with CreateTime from the producer's clock (perf-test gives fixed-size values)
    tools.run("producer-perf-test", "--topic", t, "--num-records", "300", "--record-size", "100",
              "--throughput", "-1", "--producer-props", f"bootstrap.servers={tools.bootstrap}",
              "acks=1", "linger.ms=0", "batch.size=1000", bootstrap=False)
    latest, earliest, maxts, by_time = tools.many(
        ("get-offsets", "--topic", t, "--time", "-1"),
        ("get-offsets", "--topic", t, "--time", "-2"),
        ("get-offsets", "--topic", t, "--time", "-3"),
        ("get-offsets", "--topic", t, "--time", "0"))
    assert f"{t}:0:300" in latest.split()
    assert f"{t}:0:0" in earliest.split() and f"{t}:0:0" in by_time.split()
    (mx,) = re.findall(rf"^{t}:0:(\d+)$", maxts, re.M)
    assert 0 <= int(mx) < 300
    assert f"{t}:0:" not in tools.run("get-offsets", "--topic", t, "--time", "99999999999999")

    spec = tools.tmp / "delete.json"
    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 120}],
                                "version": 1}))
    out = tools.run("delete-records", "--offset-json-file", str(spec))
    assert f"partition: {t}-0\tlow_watermark: 120" in out
    assert f"{t}:0:120" in tools.run("get-offsets", "--topic", t, "--time", "-2").split()

    # kafka-dump-log over our segment and index files, after a clean shutdown (as Kafka's own
    # active segment, ours has preallocated indexes while it is open: the tool's sanity check
    # reads the zero-filled tail as a last entry; a clean shutdown trims them, as Kafka's)
    code, log = served.stop()
    assert code == 0 and "Traceback" not in log
    part = os.path.join(served.data, f"{t}-0")
    logs = sorted(glob.glob(os.path.join(part, "*.log")))
    assert len(logs) >= 3, os.listdir(part)
    first = int(os.path.basename(logs[0]).split(".")[0])
    assert 0 < first <= 120            # segments wholly below the new log start are gone
    files = logs + sorted(glob.glob(os.path.join(part, "*.index"))) + \
        sorted(glob.glob(os.path.join(part, "*.timeindex")))
    out = tools.run("dump-log", "--deep-iteration", "--index-sanity-check", "--files",
                    ",".join(files), bootstrap=False)
    for f in files:
        assert f"Dumping {f}" in out
        if not f.endswith(".log"):
            assert f"{f} passed sanity check." in out, out[-3000:]
    offsets = [int(o) for o in re.findall(r"^\| offset: (\d+) CreateTime", out, re.M)]
    assert offsets == list(range(first, 300)), offsets[:20]
    assert "isvalid: false" not in out and out.count("isvalid: true") >= len(logs)
    # without the sanity flag the tool checks every index entry against the log
    out = tools.run("dump-log", "--files", ",".join(f for f in files if f.endswith(".index")),
                    bootstrap=False)
    assert "Mismatches" not in out and "mismatch" not in out.lower(), out[-3000:]
    assert len(re.findall(r"^offset: \d+ position: \d+$", out, re.M)) >= 10, out[-2000:]
