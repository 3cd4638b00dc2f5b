"""``python -m engine dump-log``: a segment's batches (with CRC checks) or an index's entries
(``.index``, ``.timeindex``, ``.txnindex``), in the columns of Kafka's ``kafka-dump-log.sh``;
transaction markers print as Kafka's ``endTxnMarker: COMMIT|ABORT coordinatorEpoch: N``."""

from __future__ import annotations

import os
import sys

from . import _native

__all__ = ["dump_log"]

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def _dump_index(path: str) -> int:
    """Entries of an .index (offset, position) or .timeindex (timestamp, offset) file."""
    import struct

    base = int(os.path.basename(path).split(".")[0])
    with open(path, "rb") as f:
        data = f.read()
    time_index = path.endswith(".timeindex")
    size = 12 if time_index else 8
    print(f"Dumping {path}")
    if len(data) % size:
        print(f"error: size {len(data)} is not a multiple of the {size}-byte entry")
        return 1
    n = 0
    for i in range(0, len(data), size):
        if time_index:
            ts, rel = struct.unpack_from(">qi", data, i)
            if ts == 0 and rel == 0 and i > 0:
                break
            print(f"timestamp: {ts} offset: {base + rel}")
        else:
            rel, pos = struct.unpack_from(">ii", data, i)
            if rel == 0 and pos == 0 and i > 0:
                break
            print(f"offset: {base + rel} position: {pos}")
        n += 1
    print(f"{n} entries", file=sys.stderr)
    return 0


def _dump_txn_index(path: str) -> int:
    """Entries of a .txnindex (aborted transactions), Kafka's line format."""
    from .errors import CorruptIndexError
    from .storage import txnindex

    print(f"Dumping {path}")
    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = txnindex.decode(data, path)
    except CorruptIndexError as e:
        print(f"error: {e.reason}")
        return 1
    for entry in entries:
        print(f"version: 0 producerId: {entry.producer_id} firstOffset: {entry.first_offset} "
              f"lastOffset: {entry.last_offset} lastStableOffset: {entry.last_stable_offset}")
    print(f"{len(entries)} entries", file=sys.stderr)
    return 0


def dump_log(path: str, print_records: bool = False, print_payload: bool = False) -> int:
    """Every batch of a segment (Kafka's DumpLogSegments columns); an index's entries."""
    if path.endswith((".index", ".timeindex")):
        return _dump_index(path)
    if path.endswith(".txnindex"):
        return _dump_txn_index(path)
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    n = 0
    bad = 0
    print(f"Dumping {path}")
    while pos < len(data):
        try:
            h = _native.read_header(data, pos)
        except Exception as e:  # not a v2 header: report and stop, like Kafka's tool
            print(f"position: {pos} error: {e}")
            bad += 1
            break
        if h.batch_length < 49 or pos + h.size > len(data):
            print(f"position: {pos} partial batch: {len(data) - pos} bytes left, batch claims {h.size}")
            break
        try:
            _native.verify_batch(data, pos, path)
            valid = True
        except Exception:
            valid = False
            bad += 1
        print(f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
              f"baseSequence: {h.base_sequence} lastSequence: "
              f"{h.base_sequence + h.last_offset_delta if h.base_sequence >= 0 else -1} "
              f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
              f"partitionLeaderEpoch: {h.partition_leader_epoch} "
              f"isTransactional: {str(h.is_transactional).lower()} "
              f"isControl: {str(h.is_control).lower()} position: {pos} "
              f"CreateTime: {h.max_timestamp} size: {h.size} magic: {h.magic} "
              f"compresscodec: {_CODECS.get(h.codec, h.codec)} crc: {h.crc} isvalid: {str(valid).lower()}")
        if print_records and valid and h.is_control:
            kind, coord = _native.read_control_record(data, pos) if h.records_count else (-1, -1)
            what = {0: "ABORT", 1: "COMMIT"}.get(kind, "UNKNOWN")
            print(f"| offset: {h.base_offset} CreateTime: {h.max_timestamp} keySize: 4 valueSize: 6 "
                  f"endTxnMarker: {what} coordinatorEpoch: {coord}" if h.records_count else
                  "| (empty control batch)")
        elif print_records and valid:
            for off, ts, key, value, headers in _native.decode_batch(data, pos, False):
                hdrs = ",".join(f"{k}:{v!r}" for k, v in headers)
                print(f"| offset: {off} CreateTime: {ts} keySize: {-1 if key is None else len(key)} "
                      f"valueSize: {-1 if value is None else len(value)} headers: {hdrs}"
                      + (f" key: {key!r} payload: {value!r}" if print_payload else ""))
        n += 1
        pos += h.size
    print(f"{n} batches, {bad} invalid", file=sys.stderr)
    return 1 if bad else 0
