import struct

import pytest

from engine import _native
from engine.errors import CorruptRecordError, InvalidRecordError, RecordTooLargeError

from .helpers import batch, control_batch, recrc


def three():
    a = batch([b"a", b"b"], 0, timestamp=100)
    b = batch([b"c"], 2, codec=3, timestamp=300)
    c = batch([b"d", b"e", b"f"], 3, timestamp=200)
    return a, b, c, a + b + c


def test_header_properties():
    data = batch([b"a", b"b", b"c"], 10, timestamp=5, partition_leader_epoch=3)
    h = _native.read_header(data)
    assert isinstance(h, _native.BatchHeader)
    assert (h.position, h.base_offset, h.last_offset, h.next_offset) == (0, 10, 12, 13)
    assert (h.magic, h.records_count, h.size, h.batch_length) == (2, 3, len(data), len(data) - 12)
    assert (h.timestamp_type, h.codec, h.partition_leader_epoch) == (0, 0, 3)
    assert h.crc == _native.crc32c(data[21:])
    assert "base_offset=10" in repr(h)


def test_read_header_rejects():
    with pytest.raises(CorruptRecordError):
        _native.read_header(b"\x00" * 30)
    data = bytearray(batch([b"a"]))
    data[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        _native.read_header(data)


def test_verify_batch_flipped_crc_byte():
    a, b, c, data = three()
    assert _native.verify_batch(data, len(a)).base_offset == 2
    bad = bytearray(data)
    bad[len(a) + 17] ^= 0x40
    with pytest.raises(CorruptRecordError) as ei:
        _native.verify_batch(bad, len(a), path="seg.log")
    assert ei.value.position == len(a) and ei.value.path == "seg.log"
    assert "CRC" in ei.value.reason
    # a flipped payload byte is caught the same way
    bad = bytearray(data)
    bad[len(a) + len(b) - 1] ^= 1
    with pytest.raises(CorruptRecordError):
        _native.verify_batch(bad, len(a))
    # but a flipped baseOffset byte is outside the CRC
    bad = bytearray(data)
    bad[len(a) + 7] ^= 1
    _native.verify_batch(bad, len(a))


def test_verify_batch_truncated_is_an_error():
    a, _, _, _ = three()
    with pytest.raises(CorruptRecordError):
        _native.verify_batch(a[:-1])


def test_list_batches_stops_at_partial_and_zero_tail():
    a, b, c, data = three()
    hs, end = _native.list_batches(data, check_crc=True)
    assert [h.base_offset for h in hs] == [0, 2, 3] and end == len(data)
    assert [h.position for h in hs] == [0, len(a), len(a) + len(b)]
    hs, end = _native.list_batches(data[:-5])
    assert len(hs) == 2 and end == len(a) + len(b)
    hs, end = _native.list_batches(data[: len(a) + 10])
    assert len(hs) == 1 and end == len(a)
    hs, end = _native.list_batches(data + b"\x00" * 4096)
    assert len(hs) == 3 and end == len(data)
    hs, end = _native.list_batches(data, start=len(a), max_batches=1, base_position=100)
    assert [h.position for h in hs] == [100 + len(a)] and end == len(a) + len(b)


def test_list_batches_bad_batch_raises():
    a, b, c, data = three()
    bad = bytearray(data)
    struct.pack_into(">i", bad, len(a) + 8, 10)     # batchLength below the minimum
    with pytest.raises(CorruptRecordError) as ei:
        _native.list_batches(bad, base_position=1000)
    assert ei.value.position == 1000 + len(a)
    bad = bytearray(data)
    bad[len(a) + 30] ^= 1
    _native.list_batches(bad)                       # no CRC check by default
    with pytest.raises(CorruptRecordError):
        _native.list_batches(bad, check_crc=True)


def test_seek_offset_and_timestamp():
    a, b, c, data = three()
    assert _native.seek_offset(data, 0) == (0, 0, 1)
    assert _native.seek_offset(data, 1) == (0, 0, 1)
    assert _native.seek_offset(data, 2) == (len(a), 2, 2)
    assert _native.seek_offset(data, 4) == (len(a) + len(b), 3, 5)
    assert _native.seek_offset(data, 6) == (len(data), -1, -1)
    assert _native.seek_offset(data, 4, start=len(a)) == (len(a) + len(b), 3, 5)
    # maxTimestamps are 101, 300, 202
    assert _native.seek_timestamp(data, 50) == (0, 0, 1)
    assert _native.seek_timestamp(data, 102) == (len(a), 2, 2)
    assert _native.seek_timestamp(data, 301) == (len(data), -1, -1)


def test_scan_segment_rebuilds_index():
    batches = [batch([b"x" * 100] * 3, 100 + 3 * i, timestamp=1000 + i, partition_leader_epoch=i // 4)
               for i in range(10)]
    data = b"".join(batches)
    r = _native.scan_segment(data, 100, index_interval=500)
    assert r.ok and r.status == 0 and r.valid_end == len(data)
    assert (r.batches, r.records, r.next_offset) == (10, 30, 130)
    assert r.max_timestamp == 1009 + 2 and r.offset_of_max_timestamp == 129
    assert r.epochs == [(0, 100), (1, 112), (2, 124)]
    size = len(batches[0])
    entries = [struct.unpack_from(">ii", r.offset_index, i) for i in range(0, len(r.offset_index), 8)]
    assert entries and all(pos % size == 0 for _, pos in entries)
    assert entries[0][1] > 500                      # the first batch is never indexed
    for rel, pos in entries:                        # entry = last offset of the batch at pos
        assert _native.read_header(data, pos).last_offset == 100 + rel
    assert len(r.time_index) % 12 == 0 and r.time_index


def test_scan_segment_stops_at_damage():
    batches = [batch([b"y"], i) for i in range(5)]
    data = bytearray(b"".join(batches))
    n = len(batches[0])
    data[3 * n + 40] ^= 1
    r = _native.scan_segment(bytes(data), 0)
    assert not r.ok and r.status == 4 and r.error_position == 3 * n and r.valid_end == 3 * n
    assert r.next_offset == 3 and "CRC" in r.reason
    r = _native.scan_segment(bytes(data[: 2 * n + 20]), 0)
    assert r.ok and r.status == 1 and r.valid_end == 2 * n and r.error_position == -1
    dup = batches[0] + batches[1] + batches[1]
    r = _native.scan_segment(dup, 0)
    assert r.status == 5 and r.error_position == 2 * n


def test_assign_offsets_stamps_in_place():
    a, b, c, data = three()
    buf = bytearray(data)
    res = _native.assign_offsets(buf, 1000, leader_epoch=7)
    assert res == (1000, 1005, 300, 1002, 3, 6)
    hs, _ = _native.list_batches(buf, check_crc=True)
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(1000, 7), (1002, 7), (1003, 7)]
    assert [r[0] for r in _native.decode_batches(buf)[0]] == list(range(1000, 1006))


def test_assign_offsets_log_append_time():
    buf = bytearray(batch([b"a", b"b"], timestamp=10))
    res = _native.assign_offsets(buf, 0, log_append_time=99_000)
    assert res[2:4] == (99_000, 1)
    h = _native.verify_batch(buf)
    assert h.timestamp_type == 1 and h.max_timestamp == 99_000


def test_assign_offsets_rejections_leave_buffer_untouched():
    a, b, c, data = three()
    # control batch
    buf = bytearray(a + control_batch(5))
    before = bytes(buf)
    with pytest.raises(InvalidRecordError):
        _native.assign_offsets(buf, 50)
    assert bytes(buf) == before
    _native.assign_offsets(bytearray(control_batch(5)), 0, allow_control=True)
    # lastOffsetDelta mismatch (CRC kept valid)
    bad = bytearray(b)
    struct.pack_into(">i", bad, 23, 4)
    recrc(bad)
    buf = bytearray(a + bytes(bad))
    before = bytes(buf)
    with pytest.raises(InvalidRecordError, match="lastOffsetDelta"):
        _native.assign_offsets(buf, 50)
    assert bytes(buf) == before
    # second of two has a bad CRC: nothing patched
    bad = bytearray(b)
    bad[-1] ^= 1
    buf = bytearray(a + bytes(bad))
    before = bytes(buf)
    with pytest.raises(CorruptRecordError) as ei:
        _native.assign_offsets(buf, 50)
    assert ei.value.position == len(a)
    assert bytes(buf) == before
    # trailing garbage / truncated
    with pytest.raises(CorruptRecordError):
        _native.assign_offsets(bytearray(a[:-1]), 0)
    with pytest.raises(InvalidRecordError):
        _native.assign_offsets(bytearray(), 0)
    with pytest.raises(RecordTooLargeError):
        _native.assign_offsets(bytearray(data), 0, max_batch_bytes=len(a) - 1)


def test_assign_offsets_keep_offsets():
    a, b, c, data = three()
    buf = bytearray(data)
    assert _native.assign_offsets(buf, 0, keep_offsets=True)[:2] == (0, 5)
    assert bytes(buf[:8]) == data[:8]
    with pytest.raises(InvalidRecordError):
        _native.assign_offsets(bytearray(data), 1, keep_offsets=True)


def test_set_leader_epoch():
    a, b, c, data = three()
    buf = bytearray(data)
    _native.set_leader_epoch(buf, 12)
    hs, _ = _native.list_batches(buf, check_crc=True)
    assert [h.partition_leader_epoch for h in hs] == [12, 12, 12]


def test_batch_peeks():
    a, b, c, data = three()
    txn = batch([b"x"], 6, producer_id=9, producer_epoch=1, base_sequence=0, is_transactional=True)
    buf = memoryview(bytearray(data + txn))
    assert [_native.batch_size(buf, p) for p in (0, len(a), len(a) + len(b))] == [len(a), len(b), len(c)]
    assert _native.batch_size(buf[:11]) == -1 and _native.batch_size(buf, len(buf) - 5) == -1
    assert not _native.batch_is_transactional(buf) and _native.batch_is_transactional(buf, len(data))
    assert _native.batch_producer_id(buf) == -1 and _native.batch_producer_id(buf, len(data)) == 9
    assert _native.BATCH_HEADER_SIZE == 61
    # no complete v2 header there: "no" and -1, never an exception
    short = txn[:_native.BATCH_HEADER_SIZE - 1]
    assert not _native.batch_is_transactional(short) and _native.batch_producer_id(short) == -1
    assert not _native.batch_is_transactional(txn, -1) and _native.batch_producer_id(txn, len(txn)) == -1
    v1 = bytearray(txn)
    v1[16] = 1
    assert not _native.batch_is_transactional(v1) and _native.batch_producer_id(v1) == -1
    assert _native.batch_size(v1) == len(txn)


def test_batch_size_strict_checks_the_bytes_up_to_the_magic():
    a = batch([b"a", b"b"])
    assert _native.batch_size(a[:20], strict=True) == len(a)
    assert _native.batch_size(a[:16], strict=True) == -1 and _native.batch_size(a[:16]) == len(a)
    bad = bytearray(a)
    bad[16] = 1
    assert _native.batch_size(bad, strict=True) == 0
    assert _native.batch_size(b"\x00" * 20, strict=True) == 0      # batchLength 0
    assert _native.batch_size(b"\x00" * 20) == 12


def test_has_delete_horizon():
    data = batch([b"a"])
    assert not _native.read_header(data).has_delete_horizon
    marked = _native.with_delete_horizon(control_batch(), 0, 123)
    h = _native.read_header(marked)
    assert h.has_delete_horizon and h.is_control and h.base_timestamp == 123


def test_stamp_producer():
    a, b, c, data = three()
    buf = bytearray(data)
    assert _native.stamp_producer(buf, 42, 3, 2147483646, True) == 6
    hs, _ = _native.list_batches(buf, check_crc=True)
    assert [(h.producer_id, h.producer_epoch, h.is_transactional) for h in hs] == [(42, 3, True)] * 3
    assert [h.base_sequence for h in hs] == [2147483646, 0, 1]       # wraps at INT32_MAX to 0
    assert _native.decode_batches(buf)[0] == _native.decode_batches(data)[0]
    one = bytearray(a)
    assert _native.stamp_producer(one, 5, 0, -1) == 2
    h = _native.read_header(one)
    assert (h.producer_id, h.base_sequence, h.is_transactional) == (5, -1, False)
    _native.verify_batch(one)
    # not whole batches: nothing patched
    cut = bytearray(data[:-1])
    with pytest.raises(CorruptRecordError):
        _native.stamp_producer(cut, 1, 1, 0)
    assert cut == data[:-1]
