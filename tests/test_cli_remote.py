"""The CLI managing a running broker, as Kafka's tools do: ``--bootstrap-server``, and a
``--data-dir`` that a broker owns (the CLI goes through that broker instead of failing on
its writer lock)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.serving import ROOT, ServeProcess


def run(*args, input=None, check=True):
    r = subprocess.run([sys.executable, "-m", "engine", *args], input=input, capture_output=True,
                       cwd=ROOT, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"exit {r.returncode}: {r.stderr.decode()}")
    return r


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = ServeProcess(tmp_path_factory.mktemp("cli"), "--config", "group.initial.rebalance.delay.ms=0").start()
    yield s
    s.stop()


def test_topics_and_configs_over_the_wire(srv):
    bs = srv.bootstrap
    run("topics", "--bootstrap-server", bs, "create", "ev", "--partitions", "3",
        "--topic-config", "retention.ms=100000")
    # a data directory a broker owns: through that broker, not "already open for writing"
    run("topics", "--data-dir", srv.data, "create", "ev2", "--partitions", "2")
    assert run("topics", "--bootstrap-server", bs, "list").stdout.split() == [b"ev", b"ev2"]
    out = run("topics", "--bootstrap-server", bs, "describe", "ev").stdout.decode()
    assert "PartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=100000" in out
    assert out.count("Leader: 0\tReplicas: 0\tIsr: 0") == 3
    run("configs", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "ev", "--alter",
        "--add-config", "segment.bytes=1000000", "--delete-config", "retention.ms")
    out = run("configs", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "ev").stdout
    assert out.decode().splitlines()[1:] == ["  segment.bytes=1000000 sensitive=false source=DYNAMIC_TOPIC_CONFIG"]
    run("topics", "--bootstrap-server", bs, "alter", "ev", "--partitions", "4")
    assert run("topics", "--bootstrap-server", bs, "describe", "ev").stdout.count(b"Partition: ") == 4
    run("topics", "--bootstrap-server", bs, "delete", "ev2")
    assert run("topics", "--bootstrap-server", bs, "list").stdout.split() == [b"ev"]
    r = run("topics", "--bootstrap-server", bs, "create", "ev", check=False)
    assert r.returncode == 2 and b"already exists" in r.stderr and b"Traceback" not in r.stderr


def test_produce_consume_and_groups_over_the_wire(srv, tmp_path):
    bs = srv.bootstrap
    run("topics", "--bootstrap-server", bs, "create", "pc", "--partitions", "3")
    lines = tmp_path / "in.txt"
    lines.write_bytes(b"".join(b"k%d:v%d\n" % (i, i) for i in range(50)) + b"nokey\n")
    r = run("produce", "--bootstrap-server", bs, "pc", "--file", str(lines), "--key-separator", ":",
            "--header", "src=cli")
    assert b"Produced 51 records" in r.stderr
    out = run("consume", "--bootstrap-server", bs, "pc", "--from-beginning", "--format",
              "%k=%s [%h] %p\\n", "--timeout-ms", "500").stdout.decode().splitlines()
    assert len(out) == 51 and "=nokey [src=cli]" in " ".join(out)
    got = {line.split(" ")[0]: int(line.rsplit(" ", 1)[1]) for line in out if not line.startswith("=")}
    from engine.records import default_partition
    assert got == {f"k{i}=v{i}": default_partition(b"k%d" % i, 3) for i in range(50)}   # murmur2, as Kafka
    # a group: the first run reads everything and commits; the second finds nothing new
    first = run("consume", "--data-dir", srv.data, "pc", "--from-beginning", "--group", "g1",
                "--timeout-ms", "500")
    assert len(first.stdout.splitlines()) == 51
    again = run("consume", "--bootstrap-server", bs, "pc", "--from-beginning", "--group", "g1",
                "--timeout-ms", "300")
    assert again.stdout == b""
    desc = run("groups", "--bootstrap-server", bs, "describe", "g1").stdout.decode()
    rows = [line.split("\t") for line in desc.splitlines()[2:]]
    assert sum(int(r[3]) for r in rows) == 51 and all(r[5] == "0" for r in rows)   # lag 0
    assert "g1" in run("groups", "--bootstrap-server", bs, "list").stdout.decode()


def test_an_unreachable_broker_is_one_line(tmp_path):
    r = run("topics", "--bootstrap-server", "127.0.0.1:1", "list", check=False)
    assert r.returncode == 2
    assert r.stderr.decode().strip().startswith("error: no bootstrap broker answered")
