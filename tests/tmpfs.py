"""A small tmpfs for tests of a full or read-only disk (needs root: ``mount -t tmpfs``).

::

    with tmpfs(tmp_path / "mnt", "4m") as mnt:    # pytest.skip (saying why) when not permitted
        ...
        fill(mnt)                                  # a filler file takes every free block
        remount(mnt, read_only=True)

Always unmounted at the end (lazily when a process still has files open there).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess

import pytest

__all__ = ["fill", "remount", "tmpfs"]


@contextlib.contextmanager
def tmpfs(path, size: str):
    path = str(path)
    os.makedirs(path, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (mount -t tmpfs); run as root to test a full disk")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {r.stderr.strip() or r.returncode}")
    try:
        yield path
    finally:
        if subprocess.run(["umount", path], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", path], capture_output=True)


def fill(mnt: str, name: str = "filler") -> str:
    """Write a file in `mnt` until the file system is full (ENOSPC); returns its path."""
    p = os.path.join(mnt, name)
    chunk = b"\0" * 65536
    with open(p, "ab", buffering=0) as f:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    f.write(chunk[:size])
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    return p


def remount(mnt: str, read_only: bool) -> None:
    subprocess.run(["mount", "-o", f"remount,{'ro' if read_only else 'rw'}", mnt], check=True,
                   capture_output=True)
