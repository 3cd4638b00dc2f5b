"""Helpers for the storage tests: real v2 batches (kafka-python's builder until
our own lands), deterministic payloads, and a small LogConfig."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402

from engine.config import LogConfig  # noqa: E402


def make_batch(n: int = 3, ts: int = 1_000, value_size: int = 40, seed: int = 0,
               codec: int = 0) -> bytearray:
    """A v2 batch of `n` records; values derived from `seed` so tests can regenerate it."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                  batch_size=1 << 22)
    for i in range(n):
        v = (f"{seed}:{i}:".encode() * (value_size // 4 + 1))[:value_size]
        b.append(i, timestamp=ts + i, key=f"k{seed}".encode(), value=v, headers=[])
    return b.build()


def small_config(**kw) -> LogConfig:
    base = {"segment.bytes": 16_384, "index.interval.bytes": 512, "segment.index.bytes": 4096,
            "file.delete.delay.ms": 0}
    base.update({k.replace("_", "."): v for k, v in kw.items()})
    return LogConfig(base)


@pytest.fixture
def cfg():
    return small_config()


def pytest_collection_modifyitems(config, items):
    """`slow` tests run only with ENGINE_SLOW=1 (the default suite stays fast)."""
    if os.environ.get("ENGINE_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set ENGINE_SLOW=1")
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if "slow" in item.keywords and str(item.path).startswith(here + os.sep):
            item.add_marker(skip)


def expected_batch(i: int, first_offset: int, epoch: int = 0) -> bytes:
    """Batch number i of the crash tests, as stored (offsets and epoch stamped)."""
    from engine import _native

    b = make_batch(2, 1_000 + i, 30 + (i * 53) % 700, seed=i)
    _native.assign_offsets(b, first_offset, epoch)
    return bytes(b)
