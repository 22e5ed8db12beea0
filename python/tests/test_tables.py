"""Tables: value types, statements, transactions, selects, bulk rows and Arrow."""

from __future__ import annotations

import collections
import math
import types
from collections.abc import Sequence
from typing import Any, overload

import pytest

import strata

ALL_TYPES = (
    "table t (id u64, i i64, f f64, s str, b bytes, flag bool, "
    "ni i64 null, ns str null) primary key (id) index by_i (i) index by_s (s, f) eager"
)


def test_every_type_round_trips(db: strata.Database) -> None:
    t = db.create_table(ALL_TYPES)
    rows = [
        {"id": 0, "i": -(2**63), "f": -0.0, "s": "", "b": b"", "flag": False, "ni": None, "ns": None},
        {"id": 2**64 - 1, "i": 2**63 - 1, "f": math.inf, "s": "ünïcode ✓", "b": b"\x00\xff",
         "flag": True, "ni": -5, "ns": "x"},
        {"id": 7, "i": 3, "f": 1.5, "s": "a", "b": bytes(range(256)), "flag": True, "ni": 0, "ns": ""},
    ]
    for r in rows:
        t.insert(r)
    for r in rows:
        got = t.get(r["id"])
        assert got == r
        assert [type(v) for v in got.values()] == [type(v) for v in r.values()]
    nan_row = {"id": 9, "i": 0, "f": math.nan, "s": "n", "b": b"", "flag": False, "ni": None, "ns": None}
    t.insert(nan_row)
    assert math.isnan(t.get(9)["f"])
    assert t.fields == ["id", "i", "f", "s", "b", "flag", "ni", "ns"]
    assert "by_s" in t.schema


def test_int_accepted_for_f64_and_tuple_rows(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, f f64) primary key (id)")
    t.insert((1, 2))
    assert t.get(1) == {"id": 1, "f": 2.0}
    assert isinstance(t.get(1)["f"], float)


def test_any_mapping_or_sequence_is_a_row(db: strata.Database) -> None:
    class Pair(Sequence[int]):
        def __init__(self, a: int, b: int) -> None:
            self.items = (a, b)

        def __len__(self) -> int:
            return 2

        @overload
        def __getitem__(self, i: int) -> int: ...
        @overload
        def __getitem__(self, i: slice) -> Sequence[int]: ...
        def __getitem__(self, i: int | slice) -> int | Sequence[int]:
            return self.items[i]

    t = db.create_table("table t (id u64, v u64) primary key (id)")
    t.insert(types.MappingProxyType({"id": 1, "v": 10}))
    t.insert(collections.UserDict({"id": 2, "v": 20}))
    t.insert(Pair(3, 30))
    assert t.update(1, types.MappingProxyType({"v": 11})) is True
    with t.transaction() as tx:
        tx.replace(Pair(4, 40))
        tx.update(2, collections.UserDict({"v": 21}))
    assert [r["v"] for r in t.select("primary")] == [11, 21, 30, 40]
    # Text is a sequence of characters, not of cells.
    with pytest.raises(TypeError, match="mapping"):
        t.insert("ab")
    with pytest.raises(TypeError, match="mapping"):
        t.update(1, [("v", 1)])  # type: ignore[arg-type]


def test_statements(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, name str, age i64) primary key (id) index by_age (age)")
    t.insert({"id": 1, "name": "ann", "age": 31})
    t.replace({"id": 1, "name": "ann", "age": 32})
    t.replace({"id": 2, "name": "bob", "age": 20})
    assert t.update(2, {"age": 21}) is True
    assert t.update(99, {"age": 1}) is False
    assert t.get(2) == {"id": 2, "name": "bob", "age": 21}
    t.delete(1)
    t.delete(1)  # absent: no error
    assert t.get(1) is None
    assert t.get(1, "none") == "none"
    assert [r["id"] for r in t.select("by_age")] == [2]
    assert t.count() == 1
    s = t.stats()
    assert s["mode"] == "deferred" and s["statements"] >= 5
    assert [i["name"] for i in s["indexes"]] == ["by_age"]


def test_composite_primary_key(db: strata.Database) -> None:
    t = db.create_table("table t (a str, b u64, v str) primary key (a, b)")
    t.insert(("x", 2, "x2"))
    t.insert(("x", 1, "x1"))
    t.insert(("y", 1, "y1"))
    assert t.get(("x", 1)) == {"a": "x", "b": 1, "v": "x1"}
    assert [r["v"] for r in t.select(eq="x")] == ["x1", "x2"]
    assert [r["v"] for r in t.select(eq=("x",), reverse=True)] == ["x2", "x1"]
    with pytest.raises(strata.InvalidArgument):
        t.get("x")  # only part of the key
    t.delete(["x", 2])
    assert t.count() == 2


def test_select_eq_range_bounds_reverse_limit(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, g str, n i64) primary key (id) index by_gn (g, n)")
    for i in range(20):
        t.insert((i, "ab"[i % 2], i))
    evens = [r["n"] for r in t.select("by_gn", eq="a")]
    assert evens == list(range(0, 20, 2))
    assert [r["n"] for r in t.select("by_gn", eq="a", range=(4, 10))] == [4, 6, 8]
    assert [r["n"] for r in t.select("by_gn", eq="a", range=(4, 10), bounds="[]")] == [4, 6, 8, 10]
    assert [r["n"] for r in t.select("by_gn", eq="a", range=(4, 10), bounds="()")] == [6, 8]
    assert [r["n"] for r in t.select("by_gn", eq="a", range=(4, 10), bounds="(]")] == [6, 8, 10]
    assert [r["n"] for r in t.select("by_gn", eq="b", range=(None, 5))] == [1, 3]
    assert [r["n"] for r in t.select("by_gn", eq="b", reverse=True, limit=3)] == [19, 17, 15]
    assert [r["id"] for r in t.select(range=(17, None))] == [17, 18, 19]
    with pytest.raises(strata.InvalidArgument):
        t.select("by_gn", range=(1, 2, 3))  # type: ignore[arg-type]
    with pytest.raises(strata.InvalidArgument):
        t.select("by_gn", eq="a", range=(1, 2), bounds="[[")  # type: ignore[arg-type]
    with pytest.raises(strata.InvalidArgument):
        t.select("by_gn", eq=("a", 1, 2))
    with pytest.raises(strata.SchemaError):
        t.select("by_gn", eq=1)


def test_select_is_lazy_and_sees_its_start(db: strata.Database) -> None:
    t = db.create_table("table t (id u64) primary key (id)")
    for i in range(10):
        t.insert((i,))
    rows = t.select()
    assert next(rows) == {"id": 0}
    t.insert((100,))
    assert [r["id"] for r in rows] == list(range(1, 10))


def test_select_at_a_snapshot(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, v i64) primary key (id) index by_v (v)")
    t.insert((1, 10))
    with db.snapshot() as snap:
        t.replace((1, 20))
        t.insert((2, 30))
        assert t.select("by_v", snapshot=snap).all() == [{"id": 1, "v": 10}]
        assert [r["v"] for r in t.select("by_v")] == [20, 30]


def test_transaction_commit_and_discard(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, v str) primary key (id)")
    t.insert((1, "a"))
    with t.transaction() as txn:
        txn.replace((2, "b"))
        txn.delete(1)
        txn.update(2, {"v": "bb"})
        assert len(txn) == 3
        assert t.get(2) is None
    assert t.select().all() == [{"id": 2, "v": "bb"}]
    with pytest.raises(ZeroDivisionError):
        with t.transaction() as txn:
            txn.delete(2)
            1 / 0
    assert t.count() == 1
    txn = t.transaction()
    txn.insert((3, "c"))
    assert txn.commit() == 1
    with pytest.raises(strata.InvalidArgument):
        txn.commit()


def test_replace_many_rows(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, v str null) primary key (id) index by_v (v)")
    n = t.replace_many(({"id": i, "v": str(i % 3)} for i in range(1000)))
    assert n == 1000
    assert t.count() == 1000
    assert sum(1 for _ in t.select("by_v", eq="1")) == 333
    with pytest.raises(strata.SchemaError):
        t.replace_many([(2000, "x"), ("bad", "y")])
    assert t.get(2000) is None  # the whole call is one transaction


def test_dict_schema(db: strata.Database) -> None:
    t = db.create_table(
        {
            "name": "users",
            "fields": {"id": "u64", "email": "str null", "age": "i64"},
            "primary_key": ["id"],
            "indexes": {"by_age": ["age"], "by_email": {"fields": ["email"], "unique": True}},
            "maintenance": "eager",
        }
    )
    assert t.schema == (
        "table users (id u64, email str null, age i64) primary key (id) "
        "index by_age (age) index by_email unique (email) eager"
    )
    with pytest.raises(strata.InvalidArgument, match="letters"):
        db.create_table({"name": "x", "fields": {"a": "u64) primary key (a"}, "primary_key": "a"})
    with pytest.raises(strata.InvalidArgument, match="unknown key"):
        db.create_table({"name": "x", "fields": {"a": "u64"}, "primary_key": "a", "extra": 1})
    with pytest.raises(TypeError):
        db.create_table(42)  # type: ignore[arg-type]
    assert db.tables() == ["users"]
    db.drop_table("users")
    assert db.tables() == []
    # Any mapping, at every level, as the stubs promise.
    frozen = types.MappingProxyType
    t = db.create_table(
        frozen(
            {
                "name": "m",
                "fields": frozen({"id": "u64", "v": "str"}),
                "primary_key": "id",
                "indexes": frozen({"by_v": frozen({"fields": ["v"], "unique": True})}),
            }
        )
    )
    assert t.schema == "table m (id u64, v str) primary key (id) index by_v unique (v) deferred"


def test_a_handle_to_a_redefined_table_is_refused(db: strata.Database) -> None:
    t = db.create_table("table a (id u64) primary key (id)")
    db.drop_table("a")
    db.create_table("table a (id u64, x u64, y u64) primary key (id) index by_y (y)")
    with pytest.raises(strata.SchemaError, match="redefined"):
        t.select("by_y", eq=1)


def test_create_and_drop_index(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, v i64) primary key (id)")
    t.replace_many([(i, i % 5) for i in range(100)])
    t.create_index("by_v", ["v"])
    assert sum(1 for _ in t.select("by_v", eq=3)) == 20
    t.drop_index("by_v")
    with pytest.raises(strata.NotFoundError):
        t.select("by_v")


@pytest.fixture
def pa() -> Any:
    """pyarrow, or the test is skipped (the tests above do not need it)."""
    return pytest.importorskip("pyarrow")


def test_arrow_round_trip_with_nulls(db: strata.Database, pa: Any) -> None:
    t = db.create_table(ALL_TYPES)
    table = pa.table(
        {
            "id": pa.array([3, 1, 2], pa.uint64()),
            "i": pa.array([-1, 0, 2**63 - 1], pa.int64()),
            "f": [0.5, -2.0, 1e300],
            "s": ["x", "", "ü"],
            "b": [b"\x00", b"", b"bb"],
            "flag": [True, False, True],
            "ni": pa.array([None, 5, None], pa.int64()),
            "ns": [None, "n", "m"],
        }
    )
    assert t.replace_many(table) == 3
    assert t.get(3) == {"id": 3, "i": -1, "f": 0.5, "s": "x", "b": b"\x00", "flag": True, "ni": None, "ns": None}
    back = t.select().to_arrow()
    assert back.num_rows == 3
    assert back.column("id").to_pylist() == [1, 2, 3]
    assert back.column("ni").to_pylist() == [5, None, None]
    assert back.column("ns").to_pylist() == ["n", "m", None]
    assert back.column("b").to_pylist() == [b"", b"bb", b"\x00"]
    assert back.column("flag").to_pylist() == [False, True, True]
    assert back.column("s").to_pylist() == ["", "ü", "x"]
    # A sliced, chunked table with narrower types is cast and read from its offset.
    sliced = pa.concat_tables([table, table]).slice(1, 2)
    sliced = sliced.set_column(0, "id", pa.array([10, 11], pa.uint8()))
    t.replace_many(sliced)
    assert t.get(10)["i"] == 0 and t.get(11)["i"] == 2**63 - 1
    assert t.get(11)["ni"] is None


def test_arrow_bad_columns(db: strata.Database, pa: Any) -> None:
    t = db.create_table("table t (id u64, v str) primary key (id)")
    with pytest.raises(strata.SchemaError, match="unknown field"):
        t.replace_many(pa.table({"id": [1], "v": ["a"], "w": [1]}))
    with pytest.raises(strata.SchemaError):
        t.replace_many(pa.table({"id": [1], "v": [[1, 2]]}))
    with pytest.raises(strata.SchemaError):
        t.replace_many(pa.table({"id": [1]}))  # v is not nullable
    assert t.count() == 0


def test_arrow_of_a_redefined_table_is_refused(db: strata.Database, pa: Any) -> None:
    t = db.create_table("table a (id u64, name str) primary key (id)")
    db.drop_table("a")
    db.create_table("table a (id u64, n u64, x str) primary key (id)")
    db.table("a").insert((1, 5, "x"))
    with pytest.raises(strata.SchemaError, match="redefined"):
        t.select().to_arrow()
    db.drop_table("a")
    db.create_table("table a (id u64, n u64) primary key (id)")
    db.table("a").insert((1, 5))
    with pytest.raises(strata.SchemaError, match="redefined"):
        t.select().to_arrow()  # as many fields, of another type
