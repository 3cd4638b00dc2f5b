"""A short socket fuzz of the live broker (a slice of reliability row B18).

Valid requests of every API and served version (written with kio) get random
byte mutations and go out one per connection.  Each must be answered or the
connection closed; the broker must log no internal error (a handler raising
something other than a Kafka error) and must serve a fresh client afterwards."""

from __future__ import annotations

import io
import logging
import os
import random
import socket
import struct
import uuid

import pytest

from engine.protocol import messages as m
from engine.records import build_batch

from .conftest import api_versions_ok, connect

pytest.importorskip("kio.serial")

_BASE = {
    0: {"transactional_id": None, "acks": 1, "timeout": 1000,
        "topic_data": [{"name": "f", "partition_data": [{"index": 0, "records": None}]}]},
    1: {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic": "f", "topic_id": uuid.UUID(int=7), "partitions": [{"partition": 0, "fetch_offset": 0,
                                                   "partition_max_bytes": 1 << 20}]}]},
    2: {"replica_id": -1, "isolation_level": 0,
        "topics": [{"name": "f", "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
    3: {"topics": [{"name": "f", "topic_id": uuid.UUID(int=0)}], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False},
    18: {"client_software_name": "fuzz", "client_software_version": "1"},
    19: {"topics": [{"name": "g", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                     "configs": []}], "timeout": 1000, "validate_only": True},
    20: {"topic_names": ["nothing"], "timeout": 1000},
}


def _valid_frames() -> list[bytes]:
    from kio.serial import entity_writer
    frames = []
    batch = bytes(build_batch([b"fuzz" * 10, (b"v", b"k", [("h", b"1")], 5)]))
    for key, data in _BASE.items():
        lo, hi = m.SUPPORTED[key]
        for version in range(max(lo, 3) if key == 0 else lo, hi + 1):
            if key == 0:
                data["topic_data"][0]["partition_data"][0]["records"] = batch
            cls = m._entity(key, version, False)
            buf = io.BytesIO()
            entity_writer(cls)(buf, m._build(cls, data))
            flex = m.is_flexible(key, version)
            msg = struct.pack(">hhih", key, version, 1, 4) + b"fuzz" + (b"\x00" if flex else b"") + buf.getvalue()
            frames.append(msg)
    return frames


def test_mutated_requests(broker, caplog):
    broker.call(lambda: broker.engine.create_topic("f", 1))
    rnd = random.Random(int(os.environ.get("FUZZ_SEED", "20261123")))
    frames = _valid_frames()
    answered = closed = 0
    with caplog.at_level(logging.WARNING, logger="engine.server"):
        for _i in range(int(os.environ.get("FUZZ_N", "400"))):
            msg = bytearray(rnd.choice(frames))
            for _ in range(rnd.randint(1, 4)):
                pos = rnd.randrange(8, len(msg))      # keep key/version: reach the decoders
                msg[pos] = rnd.randrange(256)
            if rnd.random() < 0.2:
                del msg[rnd.randrange(8, len(msg)):]
            with connect(broker.port, timeout=2) as s:
                s.sendall(struct.pack(">i", len(msg)) + msg)
                s.shutdown(socket.SHUT_WR)
                try:
                    data = s.recv(4)
                except (TimeoutError, ConnectionResetError):
                    data = b""
                if data:
                    answered += 1
                else:
                    closed += 1
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors[:5]]
    assert answered > 20 and closed > 20          # both outcomes exercised
    assert api_versions_ok(broker.port)
