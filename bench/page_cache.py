"""What writing produced bytes into the page cache costs on this machine, with no broker.

    python -m bench.page_cache [--mb 1024] [--dir DIR]

pwrites 1 MiB from one in-cache buffer to a new file in DIR (default: a temp
dir on the file system the broker bench uses), in 256 MiB passes, and prints the
CPU time (user + system) per MiB of each pass; then overwrites the first 256 MiB
(pages already in the page cache).  Every produced byte a broker stores lands in
a page-cache page like this, so the new-page figure is a floor under any
broker's CPU per produced byte (bench.broker_clients).  On a VM with free page
reporting (virtio-balloon: `dmesg | grep "Free page reporting"`) the first
passes can reuse pages the guest freed moments ago and are cheap; once those are
used up every new page costs a host fault and the figure rises several times.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

MIB = 1 << 20
PASS_MB = 256


def main(argv=None) -> int:
    from engine import _native

    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        fd = os.open(os.path.join(d, "pages"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            buf = os.urandom(MIB)
            pos = 0
            for i in range(max(1, args.mb // PASS_MB)):
                t0 = time.process_time()
                for _ in range(PASS_MB):
                    pos += _native.pwrite_all(fd, buf, pos)
                print(f"new pages, pass {i} ({PASS_MB} MiB): "
                      f"{(time.process_time() - t0) / PASS_MB * 1e3:.2f} ms CPU per MiB")
            t0 = time.process_time()
            for j in range(PASS_MB):
                _native.pwrite_all(fd, buf, j * MIB)
            print(f"overwrite pages in the cache:    {(time.process_time() - t0) / PASS_MB * 1e3:.2f} ms CPU per MiB")
        finally:
            os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
