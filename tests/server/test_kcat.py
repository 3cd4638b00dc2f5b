"""kcat (Debian's build, librdkafka inside) against the broker: metadata, produce
with keys, headers and every codec, consume with offsets, keys and headers.

kcat is installed by the README's test command (apt); where it cannot be
installed (no apt, no root) these tests are skipped and say why."""

from __future__ import annotations

import shutil
import subprocess

import pytest

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")


def kcat(broker, *args, input=None, timeout=60):
    r = subprocess.run([KCAT, "-b", broker.bootstrap, *args], input=input, capture_output=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def test_metadata_listing(broker):
    broker.call(lambda: broker.engine.create_topic("listed", 3))
    out = kcat(broker, "-L", "-t", "listed")
    assert "1 brokers:" in out and "topic \"listed\" with 3 partitions" in out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_with_keys_and_headers(broker, codec):
    topic = f"kc-{codec}"
    broker.call(lambda: broker.engine.create_topic(topic, 1))
    lines = "".join(f"key{i}:value {i}\n" for i in range(50))
    kcat(broker, "-P", "-t", topic, "-p", "0", "-K", ":", "-z", codec, "-H", "src=kcat",
         input=lines.encode())
    out = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
               "-f", "%o|%k|%s|%h\n")
    rows = [line.split("|") for line in out.splitlines()]
    assert [r[0] for r in rows] == [str(i) for i in range(50)]
    assert rows[7][1:] == ["key7", "value 7", "src=kcat"]
    # and the engine itself reads what kcat wrote
    table = broker.call(lambda: broker.engine.read_arrow(topic, 0))
    assert table.num_rows == 50
    assert table.column("key")[49].as_py() == b"key49"


def test_consume_from_an_offset(broker):
    def fill():
        with broker.engine.producer(linger_ms=0) as p:
            for i in range(20):
                p.send("off", b"m%d" % i, partition=0)
    broker.call(fill)
    out = kcat(broker, "-C", "-t", "off", "-p", "0", "-o", "15", "-e", "-f", "%o %s\n")
    assert out.splitlines() == [f"{i} m{i}" for i in range(15, 20)]
