"""No RecordBatch header byte offsets in Python: the layout is written down once, natively
(csrc/consts.pxi), and Python reads a batch through ``_native.read_header`` (a BatchHeader), the
``batch_*`` peeks (batch_is_transactional, batch_producer_id, batch_size),
``_native.BATCH_HEADER_SIZE`` and the native writers (assign_offsets, stamp_producer, ...).

A syntax check over every .py file under engine/ and spark_udfs/ (csrc/ is where offsets
belong).  The heuristic, kept simple on purpose:

* a subscript of a name that usually holds batch bytes (``BYTES_NAMES``: records, buf, batch,
  piece, data, ...; the last part of ``x.records`` counts too) with a constant index in 8..61
  (``buf[43]``, ``rec[22]``, ``data[pos + 57]``) or a slice with a constant bound in 1..61
  (``piece[27:35]``, ``data[pos + 8:pos + 12]``).  A bound is a constant when it is an int
  literal or ``expr + literal``.  Indexes below 8 are left out: they would sit inside
  baseOffset, and ``data[0]``, ``out[1]`` are common for tuples;
* ``len(<such a name>)`` compared with an int literal in 12..61 (``len(buf) > 61``);
* a struct ``unpack_from``/``pack_into`` at a constant offset that is a batch header field's
  (``struct.unpack_from(">i", b, 57)``), whatever the buffer is called;
* a constant named ``OFF_*`` / ``*_OFF_*`` or ``*BATCH_HEADER*`` (``_OFF_PRODUCER = 43``,
  ``_BATCH_HEADER = 61``): named offsets are offsets too;
* ``<x>.attributes & <literal>`` or ``attrs & <literal>``: the attribute bits have
  BatchHeader properties (is_transactional, is_control, has_delete_horizon, codec,
  timestamp_type).

Anything it flags that is not a batch header goes into ``ALLOWED`` with a comment; an entry that
no longer matches anything fails the test, so the list only shrinks.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = ("engine", "spark_udfs")

BYTES_NAMES = {"records", "rec", "buf", "batch", "piece", "data", "out", "view", "mv", "raw",
               "payload", "chunk"}
# RecordBatch v2 field offsets (csrc/consts.pxi), for the struct check
FIELD_OFFSETS = {8, 12, 16, 17, 21, 23, 27, 35, 43, 51, 53, 57, 61}

# (path relative to the repository, the flagged source text) -> why it is not a batch header
ALLOWED: dict[tuple[str, str], str] = {
    # a Kafka protocol UUID (16 bytes) in the request reader, not a record batch
    ("engine/protocol/primitives.py", "self.buf[p:p + 16]"): "protocol uuid",
    # the client_id length of a Kafka *request header* (size, api key, version, correlation id,
    # then the id), read by the partition tests' proxy to tell connections apart
    ("engine/chaos/netproxy.py", "struct.unpack_from('>h', head, 12)"): "request header client_id length",
}


_OFF_NAME = re.compile(r"(?:^|_)OFF_")     # (OFF_CRC, _OFF_ATTRIBUTES; not RETRY_BACKOFF_MS)


def _last_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _int_of(node: ast.AST | None) -> int | None:
    """An int literal, or the literal of ``expr + literal`` / ``literal + expr``."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        for side in (node.left, node.right):
            if isinstance(side, ast.Constant) and type(side.value) is int:
                return side.value
    return None


def _is_int(node: ast.AST, lo: int, hi: int) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and lo <= node.value <= hi


def offending(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, source) of every batch-header offset the heuristic sees in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _last_name(node.value) in BYTES_NAMES:
            s = node.slice
            if isinstance(s, ast.Slice):
                bounds = [_int_of(b) for b in (s.lower, s.upper) if b is not None]
                hit = any(b is not None and 1 <= b <= 61 for b in bounds)
            else:
                i = _int_of(s)
                hit = i is not None and 8 <= i <= 61
            if hit:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(x, ast.Call) and isinstance(x.func, ast.Name) and x.func.id == "len"
                   and x.args and _last_name(x.args[0]) in BYTES_NAMES for x in sides) \
                    and any(_is_int(x, 12, 61) for x in sides):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and _last_name(node.func) in ("unpack_from", "pack_into"):
            # struct.unpack_from(fmt, buf, offset) / pack_into(fmt, buf, offset, ...);
            # a Struct's s.unpack_from(buf, offset) / s.pack_into(buf, offset, ...)
            module_form = isinstance(node.func, ast.Attribute) and _last_name(node.func.value) == "struct"
            k = 2 if module_form else 1
            if len(node.args) > k and _int_of(node.args[k]) in FIELD_OFFSETS:
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.Tuple)):
            for target in node.targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                if any(isinstance(n, ast.Name) and (_OFF_NAME.search(n.id) or "BATCH_HEADER" in n.id)
                       for n in names):
                    found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd) \
                and _last_name(node.left) in ("attributes", "attrs") \
                and isinstance(node.right, ast.Constant):
            found.append((node.lineno, ast.unparse(node)))
    return found


def _python_files():
    for top in TREES:
        yield from sorted((ROOT / top).rglob("*.py"))


def test_no_batch_header_offsets_in_python():
    bad, used = [], set()
    for path in _python_files():
        rel = path.relative_to(ROOT).as_posix()
        for line, text in offending(ast.parse(path.read_text(), str(path))):
            if (rel, text) in ALLOWED:
                used.add((rel, text))
            else:
                bad.append(f"{rel}:{line}: {text}")
    assert not bad, ("RecordBatch header offsets in Python (use _native.read_header / BatchHeader, "
                     "the batch_* peeks or BATCH_HEADER_SIZE; see this test's docstring):\n  "
                     + "\n  ".join(bad))
    assert set(ALLOWED) - used == set(), "allow-listed entries that no longer occur: remove them"


def test_the_heuristic_catches_what_it_should():
    flagged = """
has_txn = len(p.records) > 61 and p.records[22] & 0x10
pid_ok = buf[43] < 0x80
due = int.from_bytes(piece[27:35], "big", signed=True)
size = 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
count = struct.unpack_from(">i", b, 57)[0]
_OFF_CRC, _OFF_ATTRIBUTES = 17, 21
txn = h.attributes & 0x10
ctl = attrs & 0x20
_BATCH_HEADER = 61
"""
    lines = flagged.strip().splitlines()
    assert {line for line, _ in offending(ast.parse(flagged))} == set(range(2, len(lines) + 2))
    assert len(offending(ast.parse(lines[0]))) == 2        # the len() and the [22]
    fine = """
first = data[0]
a, b = out[1], out[2]
key = records[i:i + n]
uuid = frame[p:p + 16]
RETRY_BACKOFF_MS = 100
n = len(buf) > 1024
x = _native.read_header(data).producer_id
"""
    assert offending(ast.parse(fine)) == []
