"""The pyarrow side of ``Rows.to_arrow()``, ``Table.replace_many(pyarrow_table)``,
``TableWriter.add_many(pyarrow_table)`` and ``Partitioner.partition_ids``.

Columns travel as raw Arrow buffers (see ``src/columns.rs``): a validity bitmap or
``None``, the values buffer, and int64 offsets for ``str``/``bytes`` columns.
"""

from __future__ import annotations

from typing import Any

from ._errors import SchemaError


def _arrow_type(kind: str) -> Any:
    import pyarrow as pa

    return {
        "u64": pa.uint64(),
        "i64": pa.int64(),
        "f64": pa.float64(),
        "str": pa.large_string(),
        "bytes": pa.large_binary(),
        "bool": pa.bool_(),
    }[kind]


def table_from_columns(names: list[str], columns: list[tuple[Any, ...]]) -> Any:
    """A ``pyarrow.Table`` from the column buffers built in Rust."""
    import pyarrow as pa

    arrays = []
    for kind, length, validity, data, offsets in columns:
        bufs = [pa.py_buffer(validity) if validity is not None else None]
        if offsets is not None:
            bufs.append(pa.py_buffer(offsets))
        bufs.append(pa.py_buffer(data))
        arrays.append(pa.Array.from_buffers(_arrow_type(kind), length, bufs))
    return pa.Table.from_arrays(arrays, names=names)


def int32_array(data: bytes) -> Any:
    """A ``pyarrow.Int32Array`` over little-endian ``int32`` values built in Rust."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int32(), len(data) // 4, [None, pa.py_buffer(data)])


def columns_of(table: Any, fields: list[tuple[str, str]], ignore_other: bool = False) -> list[Any]:
    """Each field's column as ``(length, offset, validity, data, offsets)`` (or ``None``
    when the table lacks it), cast to the field's Arrow type. A column of no field is a
    ``SchemaError`` unless ``ignore_other``."""
    import pyarrow as pa

    known = {name for name, _ in fields}
    extra = [c for c in table.column_names if c not in known]
    if extra and not ignore_other:
        raise SchemaError(f"unknown field {extra[0]!r}")
    out: list[Any] = []
    for name, kind in fields:
        if name not in table.column_names:
            out.append(None)
            continue
        col = table.column(name)
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        try:
            arr = arr.cast(_arrow_type(kind))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"column {name}: cannot convert {arr.type} to {kind}: {e}") from e
        bufs = arr.buffers()
        validity = bufs[0].to_pybytes() if bufs[0] is not None and arr.null_count else None
        if kind in ("str", "bytes"):
            offsets = bufs[1].to_pybytes() if bufs[1] is not None else b""
            data = bufs[2].to_pybytes() if bufs[2] is not None else b""
        else:
            offsets = None
            data = bufs[1].to_pybytes() if bufs[1] is not None else b""
        out.append((len(arr), arr.offset, validity, data, offsets))
    return out
