import os

from engine import _native
from engine.storage import files
from engine.storage.segment import LogSegment

from .conftest import make_batch, small_config


def _stamp(buf, offset):
    first, last, maxts, off_maxts, _nb, _nr = _native.assign_offsets(buf, offset, 0)
    return first, last, maxts, off_maxts


def _fill(seg, n_batches, start=0, ts=1000):
    out = []
    off = start
    for i in range(n_batches):
        b = make_batch(3, ts + 10 * i, 100, seed=i)
        first, last, maxts, omt = _stamp(b, off)
        pos = seg.append(last, maxts, omt, b)
        out.append((first, last, pos, bytes(b)))
        off = last + 1
    return out


def test_sparse_index_rule(tmp_path):
    cfg = small_config(index_interval_bytes=500)
    seg = LogSegment(str(tmp_path), 0, cfg, create=True)
    batches = _fill(seg, 20)
    size = len(batches[0][3])
    # Kafka's rule by hand: entry when the counter > interval before this append.
    expect, counter = [], 0
    for _first, last, pos, b in batches:
        if counter > 500:
            expect.append((last, pos))
            counter = 0
        counter += len(b)
    assert expect and expect[0][1] > 0  # the first append is never indexed
    got = [seg.index.entry(i) for i in range(seg.index.entries)]
    assert got == expect
    assert size > 0 and seg.size == sum(len(b[3]) for b in batches)
    # scan_segment (recovery) rebuilds identical entries
    seg.close()
    seg2 = LogSegment(str(tmp_path), 0, cfg)
    r, truncated = seg2.recover()
    assert truncated == 0 and r.batches == 20
    assert [seg2.index.entry(i) for i in range(seg2.index.entries)] == expect


def test_translate_read_and_min_one_batch(tmp_path):
    seg = LogSegment(str(tmp_path), 0, small_config(), create=True)
    batches = _fill(seg, 30)
    for first, last, pos, _b in batches:
        for o in (first, last):
            assert seg.translate_offset(o)[:2] == (pos, first)
    assert seg.translate_offset(10**6) is None
    fs = seg.read(31, 50)
    first, last, pos, b = batches[10]
    assert (fs.position, fs.size, fs.start_offset) == (pos, 50, 30)
    assert fs.read() == b[:50]
    fs = seg.read(31, 50, min_one_batch=True)
    assert fs.size == len(b) and fs.read() == b
    assert bytes(fs.view()) == b
    fs = seg.read(31, 10**6, max_position=batches[12][2])
    assert fs.read() == b"".join(x[3] for x in batches[10:12])
    cs = seg.complete_slice(31, 40)
    assert cs.read() == b"".join(x[3] for x in batches[10:14]) and cs.end_offset == 42


def test_find_offset_by_timestamp_record_level(tmp_path):
    seg = LogSegment(str(tmp_path), 0, small_config(), create=True)
    _fill(seg, 30)  # batch i: offsets 3i..3i+2, timestamps 1000+10i+j
    assert seg.find_offset_by_timestamp(0) == (0, 1000)
    assert seg.find_offset_by_timestamp(1001) == (1, 1001)
    assert seg.find_offset_by_timestamp(1155) == (48, 1160)
    assert seg.find_offset_by_timestamp(1291) == (88, 1291)
    assert seg.find_offset_by_timestamp(1293) is None


def test_truncate_to(tmp_path):
    seg = LogSegment(str(tmp_path), 100, small_config(), create=True)
    batches = _fill(seg, 30, start=100)
    removed = seg.truncate_to(151)  # inside batch 17 (offsets 151..153): the whole batch goes
    assert removed == sum(len(x[3]) for x in batches[17:])
    assert seg.next_offset == 151 and seg.size == batches[17][2]
    assert all(seg.index.entry(i)[0] < 151 for i in range(seg.index.entries))
    assert seg.translate_offset(151) is None
    seg.truncate_to(100)
    assert seg.size == 0 and seg.next_offset == 100


def test_should_roll(tmp_path):
    cfg = small_config(segment_bytes=2000, segment_ms=1000)
    seg = LogSegment(str(tmp_path), 0, cfg, create=True)
    assert not seg.should_roll(100, 5000, 10, 0)
    _fill(seg, 1, ts=5000)
    assert not seg.should_roll(100, 5500, 10, 0)
    assert seg.should_roll(100, 6003, 10, 0)  # segment.ms from the first batch's timestamp
    assert seg.should_roll(2000, 5500, 10, 0)  # size
    assert seg.should_roll(10, 5500, 2**31 + 5, 0)  # relative offset overflow


def test_file_names_are_kafkas(tmp_path):
    seg = LogSegment(str(tmp_path), 42, small_config(), create=True)
    _fill(seg, 3, start=42)
    seg.close()
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000042.index", "00000000000000000042.log", "00000000000000000042.timeindex"]
    # trimmed to the used size on close: one offset entry (third append), one time entry
    assert os.path.getsize(tmp_path / "00000000000000000042.index") == 8
    assert os.path.getsize(tmp_path / "00000000000000000042.timeindex") == 12
    assert files.offset_from_filename("00000000000000000042.log") == 42
    assert files.parse_partition_dir("my-topic-with-dashes-12") == ("my-topic-with-dashes", 12)


def test_preallocate_reserves_without_growing(tmp_path):
    seg = LogSegment(str(tmp_path), 0, small_config(preallocate=True, segment_bytes=1 << 20), create=True)
    st = os.stat(seg.log_path)
    assert st.st_size == 0 and st.st_blocks * 512 >= 1 << 20
    _fill(seg, 3)
    assert os.path.getsize(seg.log_path) == seg.size
    seg.on_become_inactive()
    assert os.stat(seg.log_path).st_blocks * 512 < 1 << 20
    seg.close()
