"""Print log files like Kafka's ``kafka-dump-log.sh`` (DumpLogSegments).

``dump_segment(path, json=False, deep=True)`` yields text lines (Kafka's wording) or dicts, for:

* ``.log``: one line per batch (``baseOffset: .. lastOffset: .. count: .. position: .. CreateTime: .. size: ..
  magic: 2 compresscodec: .. crc: .. isvalid: ..``) and, when ``deep``, one ``| offset: ..`` line per record
  with key and payload (printable text, else hex);
* ``.index`` (``offset: .. position: ..``), ``.timeindex`` (``timestamp: .. offset: ..``);
* ``.txnindex`` (aborted transactions), ``.snapshot`` (producer state entries).

``dump(path, json=False, records=True, out=sys.stdout)`` prints a file or every file of a partition directory
(used by ``moldau log dump``); ``main(argv)`` is the same as a tiny command line.
"""

from __future__ import annotations

import json as _json
import os
import struct
import sys
from typing import Any, Iterator, TextIO

from crc32c import crc32c

from moldau.protocol.records import CODEC_NAMES
from moldau.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    decode_batch,
    increment_sequence,
)

from .index import TxnIndex
from .producer_state import CorruptSnapshotError, ProducerStateManager

__all__ = ["dump_segment", "dump", "main"]

_OFFSET_ENTRY = struct.Struct(">ii")
_CONTROL_NAMES = {0: "ABORT", 1: "COMMIT"}
_TIME_ENTRY = struct.Struct(">qi")


def _base_offset_of(path: str) -> int:
    stem = os.path.splitext(os.path.basename(path))[0]
    return int(stem) if stem.isdigit() else 0


def _printable(data: bytes | None) -> str | None:
    if data is None:
        return None
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return bytes(data).hex()
    if all(c.isprintable() or c in "\t\n\r" for c in text):
        return text
    return bytes(data).hex()


def _bool(v: bool) -> str:
    return "true" if v else "false"


def dump_segment(path: str, *, json: bool = False, deep: bool = True) -> Iterator[Any]:
    """Lines (str) or dicts describing the file at ``path`` (by its extension)."""
    ext = os.path.splitext(path)[1]
    if ext == ".log":
        yield from _dump_log(path, json, deep)
    elif ext == ".index":
        yield from _dump_index(path, json)
    elif ext == ".timeindex":
        yield from _dump_timeindex(path, json)
    elif ext == ".snapshot":
        yield from _dump_snapshot(path, json)
    elif ext == ".txnindex":
        yield from _dump_txnindex(path, json)
    else:
        raise ValueError(f"{path}: not a .log, .index, .timeindex, .txnindex or .snapshot file")


def _offsets_decoder(path: str) -> Any:
    """__consumer_offsets-N: the group coordinator's record decoder (kafka-dump-log --offsets-decoder)."""
    if not os.path.basename(os.path.dirname(os.path.abspath(path))).startswith("__consumer_offsets-"):
        return None
    from moldau.protocol.consumer_offsets import dump_fields

    return dump_fields


def _dump_log(path: str, as_json: bool, deep: bool) -> Iterator[Any]:
    with open(path, "rb") as f:
        data = f.read()
    offsets_decoder = _offsets_decoder(path)
    base = _base_offset_of(path)
    if not as_json:
        yield f"Dumping {path}"
        yield f"Log starting offset: {base}"
    pos = 0
    n = len(data)
    while pos < n:
        if n - pos < HEADER_SIZE:
            msg = f"Found {n - pos} invalid bytes at the end of {os.path.basename(path)} (position {pos})"
            yield {"error": msg, "position": pos} if as_json else msg
            return
        f_ = HEADER_STRUCT.unpack_from(data, pos)
        blen = f_[1]
        size = blen + LOG_OVERHEAD
        if blen < MIN_BATCH_LENGTH or f_[3] != 2 or pos + size > n:
            msg = (f"Found invalid bytes at position {pos} of {os.path.basename(path)} "
                   f"(length {blen}, magic {f_[3]})")
            yield {"error": msg, "position": pos} if as_json else msg
            return
        batch = memoryview(data)[pos : pos + size]
        valid = crc32c(batch[ATTRIBUTES_OFFSET:]) == f_[4]
        attrs = f_[5]
        base_offset = f_[0]
        lod = f_[6]
        base_seq = f_[11]
        last_seq = increment_sequence(base_seq, lod) if base_seq >= 0 else -1
        ts_type = "LogAppendTime" if attrs & TIMESTAMP_TYPE_FLAG else "CreateTime"
        codec = CODEC_NAMES.get(attrs & 0x07, str(attrs & 0x07))
        info = {
            "baseOffset": base_offset,
            "lastOffset": base_offset + lod,
            "count": f_[12],
            "baseSequence": base_seq,
            "lastSequence": last_seq,
            "producerId": f_[9],
            "producerEpoch": f_[10],
            "partitionLeaderEpoch": f_[2],
            "isTransactional": bool(attrs & TRANSACTIONAL_FLAG),
            "isControl": bool(attrs & CONTROL_FLAG),
            "position": pos,
            "timestampType": ts_type,
            "baseTimestamp": f_[7],
            "maxTimestamp": f_[8],
            "size": size,
            "magic": 2,
            "compresscodec": codec,
            "crc": f_[4],
            "isvalid": valid,
        }
        records: list[dict[str, Any]] = []
        rec_error = None
        if deep:
            try:
                for r in decode_batch(batch, 0):
                    records.append(
                        {
                            "offset": r.offset,
                            "timestamp": r.timestamp,
                            "keySize": -1 if r.key is None else len(r.key),
                            "valueSize": -1 if r.value is None else len(r.value),
                            "headerKeys": [k for k, _v in r.headers],
                            "key": _printable(r.key),
                            "payload": _printable(r.value),
                            "raw_key": r.key,
                            "raw_value": r.value,
                        }
                    )
                    if offsets_decoder is not None:
                        records[-1].update(offsets_decoder(r.key, r.value))
            except Exception as e:  # show what can be shown
                rec_error = f"cannot decode records: {e}"
        if as_json:
            if deep:
                for rec in records:
                    rec.pop("raw_key", None)
                    rec.pop("raw_value", None)
                info["records"] = records
                if rec_error:
                    info["recordsError"] = rec_error
            yield info
        else:
            yield (
                f"baseOffset: {base_offset} lastOffset: {base_offset + lod} count: {f_[12]} "
                f"baseSequence: {base_seq} lastSequence: {last_seq} producerId: {f_[9]} "
                f"producerEpoch: {f_[10]} partitionLeaderEpoch: {f_[2]} "
                f"isTransactional: {_bool(bool(attrs & TRANSACTIONAL_FLAG))} "
                f"isControl: {_bool(bool(attrs & CONTROL_FLAG))} position: {pos} {ts_type}: {f_[8]} "
                f"size: {size} magic: 2 compresscodec: {codec} crc: {f_[4]} isvalid: {_bool(valid)}"
            )
            for rec in records:
                seq = base_seq + (rec["offset"] - base_offset) if base_seq >= 0 else -1
                line = (
                    f"| offset: {rec['offset']} {ts_type}: {rec['timestamp']} keySize: {rec['keySize']} "
                    f"valueSize: {rec['valueSize']} sequence: {seq} headerKeys: "
                    f"[{','.join(rec['headerKeys'])}]"
                )
                if attrs & CONTROL_FLAG and rec["raw_key"] is not None and len(rec["raw_key"]) >= 4:
                    _v, ctype = struct.unpack_from(">hh", rec["raw_key"], 0)
                    line += f" endTxnMarker: {_CONTROL_NAMES.get(ctype, ctype)}"
                    raw_value = rec["raw_value"]
                    if raw_value is not None and len(raw_value) >= 6:
                        line += f" coordinatorEpoch: {struct.unpack_from('>i', raw_value, 2)[0]}"
                else:
                    if rec["key"] is not None:
                        line += f" key: {rec['key']}"
                    if rec["payload"] is not None:
                        line += f" payload: {rec['payload']}"
                yield line
            if rec_error:
                yield f"| {rec_error}"
        pos += size


def _dump_index(path: str, as_json: bool) -> Iterator[Any]:
    base = _base_offset_of(path)
    with open(path, "rb") as f:
        data = f.read()
    if not as_json:
        yield f"Dumping {path}"
    usable = len(data) - len(data) % 8
    for rel, position in _OFFSET_ENTRY.iter_unpack(data[:usable]):
        if rel == 0 and position == 0 and base != 0:  # zero-filled preallocated tail (Kafka's active index)
            break
        yield (
            {"offset": base + rel, "position": position}
            if as_json
            else f"offset: {base + rel} position: {position}"
        )


def _dump_timeindex(path: str, as_json: bool) -> Iterator[Any]:
    base = _base_offset_of(path)
    with open(path, "rb") as f:
        data = f.read()
    if not as_json:
        yield f"Dumping {path}"
    usable = len(data) - len(data) % 12
    for ts, rel in _TIME_ENTRY.iter_unpack(data[:usable]):
        if ts == 0 and rel == 0:
            break
        yield {"timestamp": ts, "offset": base + rel} if as_json else f"timestamp: {ts} offset: {base + rel}"


def _dump_snapshot(path: str, as_json: bool) -> Iterator[Any]:
    with open(path, "rb") as f:
        data = f.read()
    if not as_json:
        yield f"Dumping {path}"
    try:
        entries = ProducerStateManager.parse_snapshot(data)
    except CorruptSnapshotError as e:
        yield {"error": str(e)} if as_json else f"Invalid snapshot: {e}"
        return
    for pid, epoch, last_seq, last_offset, delta, ts, coord, txn_first in entries:
        d = {
            "producerId": pid,
            "producerEpoch": epoch,
            "coordinatorEpoch": coord,
            "currentTxnFirstOffset": txn_first,
            "lastSequence": last_seq,
            "lastOffset": last_offset,
            "offsetDelta": delta,
            "timestamp": ts,
        }
        yield d if as_json else " ".join(f"{k}: {v}" for k, v in d.items())


def _dump_txnindex(path: str, as_json: bool) -> Iterator[Any]:
    if not as_json:
        yield f"Dumping {path}"
    for pid, first, last, lso in TxnIndex.read(path):
        d = {
            "version": 0,
            "producerId": pid,
            "firstOffset": first,
            "lastOffset": last,
            "lastStableOffset": lso,
        }
        yield d if as_json else " ".join(f"{k}: {v}" for k, v in d.items())


_DUMPABLE = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


def dump(path: str, *, json: bool = False, records: bool = True, out: TextIO | None = None) -> int:
    """Print ``path`` (a file, or every dumpable file of a partition directory in order). Returns 0."""
    out = out or sys.stdout
    if os.path.isdir(path):
        names = [n for n in os.listdir(path) if os.path.splitext(n)[1] in _DUMPABLE]
        names.sort(key=lambda n: (os.path.splitext(n)[0], _DUMPABLE.index(os.path.splitext(n)[1])))
        files = [os.path.join(path, n) for n in names]
    elif os.path.exists(path):
        files = [path]
    else:
        raise FileNotFoundError(path)
    for fp in files:
        for item in dump_segment(fp, json=json, deep=records):
            if json:
                item = dict(item)
                item.setdefault("file", fp)
                out.write(_json.dumps(item) + "\n")
            else:
                out.write(item + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="moldau-dump-log", description="Dump moldau/Kafka log files")
    p.add_argument("path")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-records", action="store_true")
    args = p.parse_args(argv)
    return dump(args.path, json=args.json, records=not args.no_records)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
