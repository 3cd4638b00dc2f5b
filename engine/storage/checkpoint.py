"""Small checkpoint files, written atomically and never trusted half-written.

Formats (Kafka's text formats, one item per line, '\\n' endings)::

    recovery-point-offset-checkpoint, log-start-offset-checkpoint,
    replication-offset-checkpoint           0 / N / N lines "topic partition offset"
    leader-epoch-checkpoint (per partition) 0 / N / N lines "epoch startOffset"
    .kafka_cleanshutdown                    JSON {"version": 0, "brokerEpoch": -1}

Write protocol: write `<name>.tmp`, fsync it, rename over `<name>`, fsync the
directory.  Read protocol: a wrong version, a count that does not match the
lines, an unparsable line, a negative offset or trailing junk makes the whole
file invalid: `read_*` raise :class:`CheckpointError` and the caller treats the
file as missing (and reports it) — reliability-contract row D11.

Concurrency: callers serialise writes of one file (LogManager holds its lock).
"""

from __future__ import annotations

import json
import os

__all__ = [
    "CheckpointError",
    "read_clean_shutdown",
    "read_epoch_checkpoint",
    "read_offset_checkpoint",
    "write_atomic",
    "write_clean_shutdown",
    "write_epoch_checkpoint",
    "write_offset_checkpoint",
]

VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file is truncated or garbled; it must be treated as missing."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"invalid checkpoint {path}: {reason}")


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes, mode: int = 0o644) -> None:
    """temp file (created with `mode`) + fsync + rename + fsync of the directory."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def _parse(path: str, fields: int) -> list[list[str]] | None:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise CheckpointError(path, "not ASCII text") from None
    if not text.endswith("\n"):
        raise CheckpointError(path, "no final newline (truncated)")
    lines = text[:-1].split("\n")
    if len(lines) < 2:
        raise CheckpointError(path, "missing version or count line")
    if lines[0] != str(VERSION):
        raise CheckpointError(path, f"unknown version {lines[0]!r}")
    if not lines[1].isdigit():
        raise CheckpointError(path, f"bad entry count {lines[1]!r}")
    n = int(lines[1])
    if len(lines) - 2 != n:
        raise CheckpointError(path, f"count says {n} entries, file has {len(lines) - 2}")
    out = []
    for i, line in enumerate(lines[2:], 3):
        parts = line.split(" ")
        if len(parts) != fields:
            raise CheckpointError(path, f"line {i}: expected {fields} fields, got {line!r}")
        for p in parts[1:]:
            if not (p.isdigit() or (p.startswith("-") and p[1:].isdigit())):
                raise CheckpointError(path, f"line {i}: {p!r} is not an integer")
        out.append(parts)
    return out


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int] | None:
    """{(topic, partition): offset}; None if the file does not exist."""
    rows = _parse(path, 3)
    if rows is None:
        return None
    out: dict[tuple[str, int], int] = {}
    for topic, part, off in rows:
        p, o = int(part), int(off)
        if p < 0 or o < 0:
            raise CheckpointError(path, f"negative partition or offset in {topic} {part} {off}")
        if (topic, p) in out:
            raise CheckpointError(path, f"duplicate entry for {topic}-{p}")
        out[(topic, p)] = o
    return out


def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(offsets))]
    for (topic, part), off in sorted(offsets.items()):
        lines.append(f"{topic} {part} {off}")
    write_atomic(path, ("\n".join(lines) + "\n").encode("ascii"))


def read_epoch_checkpoint(path: str) -> list[tuple[int, int]] | None:
    """[(epoch, start_offset)] in increasing order; None if missing."""
    rows = _parse(path, 2)
    if rows is None:
        return None
    out: list[tuple[int, int]] = []
    for ep, off in rows:
        if not ep.isdigit():
            raise CheckpointError(path, f"bad epoch {ep!r}")
        e, o = int(ep), int(off)
        if o < 0 or (out and (e <= out[-1][0] or o < out[-1][1])):
            raise CheckpointError(path, f"epochs or offsets not increasing at {e} {o}")
        out.append((e, o))
    return out


def write_epoch_checkpoint(path: str, entries: list[tuple[int, int]]) -> None:
    lines = [str(VERSION), str(len(entries))] + [f"{e} {o}" for e, o in entries]
    write_atomic(path, ("\n".join(lines) + "\n").encode("ascii"))


def write_clean_shutdown(path: str, broker_epoch: int = -1) -> None:
    write_atomic(path, json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode())


def read_clean_shutdown(path: str) -> dict | None:
    """The marker's content, or None if absent or unreadable (unreadable = unclean)."""
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode())
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or data.get("version") != 0:
        return None
    return data
