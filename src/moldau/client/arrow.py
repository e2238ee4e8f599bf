"""Records from Arrow columns for ``send_arrow`` (pyarrow is imported only when it is called).

A ``pyarrow.Table`` or ``RecordBatch`` is read in chunks of up to 65,536 rows; each chunk's columns are
checked and converted once (``to_pylist`` in C: one ``bytes`` per key/value, ``int`` per timestamp and
partition) and zipped into the tuples ``send_many`` takes, so the per-record work is the producer's bulk
loop alone.

Columns (by name; ``None`` leaves the field out):

* ``value`` (default ``"value"``), ``key`` (default ``"key"`` when the table has such a column): binary,
  large_binary, string or large_string (strings are sent as UTF-8); nulls are Kafka's null key / value.
* ``timestamp``: an Arrow timestamp (any unit, converted to milliseconds) or an integer column of
  milliseconds since the epoch; no nulls. Without it, records take the time they are queued.
* ``partition``: an integer column; no nulls. Without it, the producer's partitioner (murmur2 of the key,
  sticky for keyless records).
* ``headers``: ``list<struct<key: string, value: binary>>`` or ``map<string, binary>`` (values may also be
  strings; null values allowed); a null or empty list means no headers.
"""

from __future__ import annotations

import enum
from itertools import repeat
from types import ModuleType
from typing import TYPE_CHECKING, Final, Iterable, Iterator, Literal, TypeAlias

if TYPE_CHECKING:
    import pyarrow  # optional; its classes name the argument types (pyarrow ships no type information)

__all__ = ["CHUNK_ROWS", "DEFAULT_KEY", "ArrowKey", "arrow_chunks"]

CHUNK_ROWS = 65536


class _Default(enum.Enum):
    KEY = "the table's 'key' column when it has one"


# send_arrow's default key: the column named "key" when the table has one, else no key
DEFAULT_KEY: Final = _Default.KEY
# send_arrow's ``key=``: a column name, None (no key) or DEFAULT_KEY
ArrowKey: TypeAlias = "str | None | Literal[_Default.KEY]"
# a cell of a headers column: map<string, binary> gives (key, value) pairs, list<struct<key, value>> dicts
_HeaderItem: TypeAlias = "tuple[str | bytes, bytes | str | None] | dict[str, str | bytes | None]"


def _pa() -> ModuleType:
    try:
        import pyarrow as pa
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError("send_arrow needs pyarrow (pip install 'moldau[spark]' or pyarrow)") from exc
    return pa


def _column(schema: pyarrow.Schema, name: str, role: str) -> int:
    idx = schema.get_field_index(name)
    if idx < 0:
        raise ValueError(f"{role} column {name!r} is not in the table (columns: {schema.names})")
    return idx


def _check_bytes(pa: ModuleType, field: pyarrow.Field, role: str) -> None:
    t = field.type
    if not (pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t)):
        raise TypeError(f"{role} column {field.name!r} must be binary or string, not {t}")


def _check_headers(pa: ModuleType, field: pyarrow.Field) -> None:
    t = field.type
    ok = False
    if pa.types.is_map(t):
        kt, vt = t.key_type, t.item_type
        ok = True
    elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        st = t.value_type
        names = [st.field(i).name for i in range(st.num_fields)]
        if names == ["key", "value"]:
            kt, vt = st.field(0).type, st.field(1).type
            ok = True
    if ok:
        textual = (pa.types.is_string(kt) or pa.types.is_large_string(kt) or pa.types.is_binary(kt)
                   or pa.types.is_large_binary(kt))
        ok = textual and (pa.types.is_binary(vt) or pa.types.is_large_binary(vt) or pa.types.is_string(vt)
                          or pa.types.is_large_string(vt))
    if not ok:
        raise TypeError(f"headers column {field.name!r} must be list<struct<key: string, value: binary>> or "
                        f"map<string, binary>, not {t}")


def _no_nulls(col: pyarrow.ChunkedArray, role: str, name: object) -> None:
    if col.null_count:
        raise ValueError(f"{role} column {name!r} has {col.null_count} null(s); nulls are not allowed there")


def _headers_list(
    items: list[_HeaderItem] | None,
) -> list[tuple[str | bytes | None, bytes | str | None]] | None:
    if not items:
        return None
    out: list[tuple[str | bytes | None, bytes | str | None]] = []
    for it in items:
        k, v = (it["key"], it["value"]) if type(it) is dict else it
        if type(k) is bytes:
            k = k.decode()
        out.append((k, v))
    return out


def arrow_chunks(data: pyarrow.Table | pyarrow.RecordBatch, *, key: ArrowKey = DEFAULT_KEY,
                 value: str | None = "value", headers: str | None = None,
                 timestamp: str | None = None, partition: str | None = None) -> Iterator[Iterable[object]]:
    """Iterables of records (as ``send_many`` takes them), one per chunk of ``data``'s rows. The columns are
    checked (names, types) before the first chunk is yielded."""
    pa = _pa()
    if isinstance(data, pa.Table):
        batches = data.to_batches(max_chunksize=CHUNK_ROWS)
    elif isinstance(data, pa.RecordBatch):
        batches = [data.slice(i, CHUNK_ROWS) for i in range(0, data.num_rows, CHUNK_ROWS)]
    else:
        raise TypeError(f"send_arrow takes a pyarrow Table or RecordBatch, not {type(data).__name__}")
    schema = data.schema
    if key is DEFAULT_KEY:
        key = "key" if schema.get_field_index("key") >= 0 else None
    roles: dict[str, object] = {"key": key, "value": value, "headers": headers, "timestamp": timestamp,
                                "partition": partition}
    idx: dict[str, int] = {}
    for role, name in roles.items():
        if name is not None:
            if not isinstance(name, str):
                raise TypeError(f"{role}= names a column (a str), not {type(name).__name__}")
            idx[role] = _column(schema, name, role)
    for role in ("key", "value"):
        if role in idx:
            _check_bytes(pa, schema.field(idx[role]), role)
    if "headers" in idx:
        _check_headers(pa, schema.field(idx["headers"]))
    ts_unit = None
    if "timestamp" in idx:
        t = schema.field(idx["timestamp"]).type
        if pa.types.is_timestamp(t):
            ts_unit = t
        elif not pa.types.is_integer(t):
            raise TypeError(f"timestamp column {timestamp!r} must be an Arrow timestamp or integer "
                            f"milliseconds, not {t}")
    if "partition" in idx and not pa.types.is_integer(schema.field(idx["partition"]).type):
        raise TypeError(f"partition column {partition!r} must be an integer column, "
                        f"not {schema.field(idx['partition']).type}")

    for role in ("timestamp", "partition"):
        if role in idx:
            _no_nulls(data.column(idx[role]), role, roles[role])  # before any record is queued

    def pylist(rb: pyarrow.RecordBatch, role: str) -> list[object]:
        col = rb.column(idx[role])
        if role in ("key", "value"):
            t = col.type
            if pa.types.is_string(t):
                col = col.cast(pa.binary())
            elif pa.types.is_large_string(t):
                col = col.cast(pa.large_binary())
        elif role == "timestamp":
            if ts_unit is not None:
                col = col.cast(pa.timestamp("ms", ts_unit.tz), safe=False).cast(pa.int64())
            else:
                col = col.cast(pa.int64())
        elif role == "partition":
            col = col.cast(pa.int64())
        values = col.to_pylist()
        if role == "headers":
            values = [_headers_list(h) for h in values]
        return values

    for rb in batches:
        n = rb.num_rows
        if not n:
            continue
        cols = {role: pylist(rb, role) for role in idx}
        values = cols["value"] if "value" in cols else repeat(None, n)
        if len(cols) == 1 and "value" in cols:
            yield values  # bytes or None each: the bulk loop's cheapest form
        elif set(cols) <= {"key", "value"}:
            yield zip(cols["key"], values)
        else:
            yield zip(cols["key"] if "key" in cols else repeat(None, n), values,
                      cols["headers"] if "headers" in cols else repeat(None, n),
                      cols["timestamp"] if "timestamp" in cols else repeat(None, n),
                      cols["partition"] if "partition" in cols else repeat(None, n))
