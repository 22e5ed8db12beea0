"""Fuzzing the Arrow column decoder (src/columns.rs) from Python: `columns_of` is
replaced by arbitrary buffers, and `replace_many` must either write rows that match the
buffers or raise SchemaError and write nothing; never crash."""

from __future__ import annotations

import os
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import strata
import strata._arrow

pa = pytest.importorskip("pyarrow")

KINDS = ["u64", "str", "bool", "f64"]
column = st.one_of(
    st.none(),
    st.tuples(
        st.integers(0, 6),  # length
        st.integers(0, 3),  # offset
        st.none() | st.binary(max_size=2),  # validity
        st.binary(max_size=64),  # data
        st.none() | st.binary(max_size=64),  # offsets
    ),
)


@settings(max_examples=int(os.environ.get("STRATA_PY_EXAMPLES", "80")), deadline=None)
@given(cols=st.tuples(column, column, column, column), rows=st.integers(0, 4))
def test_arbitrary_buffers_never_crash(tmp_path_factory: Any, cols: tuple[Any, ...], rows: int) -> None:
    path = str(tmp_path_factory.mktemp("db"))
    with strata.open(path) as db:
        t = db.create_table("table t (id u64, s str null, b bool, f f64) primary key (id)")
        original = strata._arrow.columns_of
        strata._arrow.columns_of = lambda table, fields: list(cols)
        try:
            n = t.replace_many(pa.table({"id": pa.array(range(rows), pa.uint64())}))
        except strata.SchemaError:
            assert t.count() == 0
        else:
            assert n == rows
            assert t.count() <= rows
        finally:
            strata._arrow.columns_of = original


def test_decoded_values_follow_the_buffers(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, s str null, b bool, f f64) primary key (id)")
    ids = struct.pack("<3Q", 7, 8, 9)
    offsets = struct.pack("<4q", 0, 2, 2, 5)
    cols = [
        (2, 1, None, ids, None),  # offset 1: ids 8 and 9
        (2, 1, bytes([0b100]), b"abxyz", offsets),  # row 0 (index 1) null, row 1 "xyz"
        (2, 1, None, bytes([0b010]), None),  # True, False
        (2, 1, None, struct.pack("<3d", 0.0, 1.5, -2.0), None),
    ]
    original = strata._arrow.columns_of
    strata._arrow.columns_of = lambda table, fields: cols
    try:
        t.replace_many(pa.table({"id": pa.array([0, 0], pa.uint64())}))
    finally:
        strata._arrow.columns_of = original
    assert t.select().all() == [
        {"id": 8, "s": None, "b": True, "f": 1.5},
        {"id": 9, "s": "xyz", "b": False, "f": -2.0},
    ]
