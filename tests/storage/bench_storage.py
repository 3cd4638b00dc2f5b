"""Storage figures (not a test): python tests/storage/bench_storage.py [dir]

Prints append MB/s (page cache), durable append rate with 1 and 8 threads
(group commit), recovery scan GB/s (unclean reopen of one big segment with
CRC), clean reopen time, and read (FileSlice.read) GB/s.
"""
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from storage.conftest import make_batch  # noqa: E402

from engine.config import LogConfig  # noqa: E402
from engine.storage.manager import LogManager  # noqa: E402


def main(base):
    d = tempfile.mkdtemp(dir=base)
    try:
        batch = make_batch(100, 1000, 1000)  # ~100 KB batch of 1 KB records
        cfg = LogConfig({"segment.bytes": 1 << 30})
        m = LogManager(d + "/a", config_for=lambda t: cfg)
        log = m.create_log("bench", 0)
        total = 0
        t0 = time.perf_counter()
        while total < (1 << 30):
            total += log.append(bytearray(batch)).size
        dt = time.perf_counter() - t0
        print(f"append (page cache, 100 KB batches): {total / dt / 1e6:.0f} MB/s, {total / len(batch) / dt:.0f} batches/s")
        t0 = time.perf_counter()
        n, off = 0, 0
        while off < log.log_end_offset:  # consumer-style fetches of 1 MiB
            f = log.read(off, 1 << 20, min_one_batch=True)
            for s in f.slices:
                n += len(s.read())
            off += (f.size // len(batch)) * 100 or 100
        dt = time.perf_counter() - t0
        print(f"read via PartitionLog.read + FileSlice.read, 1 MiB fetches (hot): {n / dt / 1e9:.2f} GB/s")
        t0 = time.perf_counter()
        n = 0
        for s in log.segments_for_range(0):
            v = s.view()
            buf = bytearray(1 << 20)
            for p in range(0, s.size, 1 << 20):
                chunk = v[p:p + (1 << 20)]
                buf[:len(chunk)] = chunk
                n += len(chunk)
            del v, chunk
        dt = time.perf_counter() - t0
        print(f"segments_for_range + FileSlice.view (mmap, copy 1 MiB chunks): {n / dt / 1e9:.2f} GB/s")
        log.flush()
        m.checkpoint_all()
        m._release_lock()  # crash: the next open recovers the active segment
        os.unlink(os.path.join(d, "a", "recovery-point-offset-checkpoint"))
        t0 = time.perf_counter()
        m2 = LogManager(d + "/a", config_for=lambda t: cfg)
        dt = time.perf_counter() - t0
        scanned = sum(l.recovery_stats.bytes_scanned for l in m2.logs().values())
        print(f"unclean open, full CRC recovery scan: {scanned / dt / 1e9:.2f} GB/s ({scanned >> 20} MiB in {dt:.2f} s)")
        m2.close()
        t0 = time.perf_counter()
        m3 = LogManager(d + "/a", config_for=lambda t: cfg)
        print(f"clean open (no scan): {(time.perf_counter() - t0) * 1000:.1f} ms, scanned={m3.segments_scanned}")
        m3.close()

        small = make_batch(1, 1000, 100)
        for threads in (1, 8):
            dcfg = LogConfig({"flush.messages": 1})
            m = LogManager(d + f"/durable{threads}", config_for=lambda t: dcfg)
            log = m.create_log("bench", 0)
            per = 3000 // threads if threads > 1 else 1500
            def work():
                for _ in range(per):
                    log.append(bytearray(small))
            ts = [threading.Thread(target=work) for _ in range(threads)]
            t0 = time.perf_counter()
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            dt = time.perf_counter() - t0
            n = per * threads
            print(f"durable appends (flush.messages=1), {threads} thread(s): {n / dt:.0f} appends/s, "
                  f"{log.sync_count} fdatasync rounds for {n} appends")
            m.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
