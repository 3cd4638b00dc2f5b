"""Idempotent producers at the log: duplicates answered with the original offsets,
sequence gaps, old epochs and negative sequences refused, nothing written."""

import pytest

from engine import errors
from engine.config import LogConfig
from engine.records import build_batch
from engine.storage.log import PartitionLog


def batch(pid, epoch, seq, n=3):
    return bytearray(build_batch([b"r%d" % i for i in range(n)], producer_id=pid,
                                 producer_epoch=epoch, base_sequence=seq))


@pytest.fixture
def plog(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    yield log
    log.close()


def test_retry_is_answered_with_the_original_offsets(plog):
    a = plog.append(batch(7, 0, 0))
    b = plog.append(batch(7, 0, 3))
    assert (a.first_offset, b.first_offset) == (0, 3)
    again = plog.append(batch(7, 0, 0))           # a retry of the first batch
    assert (again.first_offset, again.last_offset) == (0, 2)
    assert plog.log_end_offset == 6               # nothing written
    assert plog.append(batch(7, 0, 6)).first_offset == 6


def test_gap_old_epoch_and_negative_sequence_are_refused(plog):
    plog.append(batch(9, 1, 0))
    with pytest.raises(errors.OutOfOrderSequenceError):
        plog.append(batch(9, 1, 5))               # expected 3
    with pytest.raises(errors.InvalidProducerEpochError):
        plog.append(batch(9, 0, 3))
    with pytest.raises(errors.InvalidRecordError):
        plog.append(batch(9, 1, -1))
    with pytest.raises(errors.OutOfOrderSequenceError):
        plog.append(batch(9, 2, 4))               # a new epoch starts at 0
    assert plog.log_end_offset == 3
    assert plog.append(batch(9, 2, 0)).first_offset == 3


def test_unknown_producer_and_wraparound(plog):
    assert plog.append(batch(11, 0, 2_147_483_646, n=2)).first_offset == 0   # seqs ...646, ...647
    assert plog.append(batch(11, 0, 0, n=1)).first_offset == 2               # wraps to 0
    assert plog.append(batch(-1, -1, -1)).first_offset == 3                  # not idempotent


def test_truncation_forgets_batches_above_it(plog):
    plog.append(batch(5, 0, 0))
    plog.append(batch(5, 0, 3))
    plog.truncate_to(3)
    assert plog.append(batch(5, 0, 3)).first_offset == 3  # rewritten, not a duplicate
