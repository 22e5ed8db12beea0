"""TableWriter, Table.ingest and Partitioner: files built outside a database."""

from __future__ import annotations

import collections
import os
import pickle
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

import strata

SCHEMA = (
    "table people (id u64, name str, age i64, city str null) primary key (id) "
    "index by_age (age) index by_city (city, age) index by_name unique (name)"
)


def people(n: int, start: int = 0) -> list[tuple[int, str, int, str | None]]:
    return [
        (i, f"name{i:05}", (i * 37) % 90, None if i % 7 == 0 else f"city{i % 5}")
        for i in range(start, start + n)
    ]


def build(schema: str | strata.Table, directory: Path, rows: list[tuple[int, str, int, str | None]]) -> dict[str, object]:
    with strata.TableWriter(schema, directory) as w:
        assert w.add_many(rows) == len(rows)
        assert w.rows == len(rows)
        return w.finish()


def test_build_and_ingest_equals_row_by_row(tmp_path: Path) -> None:
    rows = people(500)
    desc = build(SCHEMA, tmp_path / "load", rows)
    assert desc["rows"] == 500
    files = desc["files"]
    assert isinstance(files, list)
    assert [f["keyspace"] for f in files] == ["primary", "index by_age", "index by_city", "index by_name"]
    assert all(f["entries"] == 500 for f in files)
    assert desc["bytes"] == sum(os.path.getsize(f["path"]) for f in files)

    with strata.open(tmp_path / "a") as a, strata.open(tmp_path / "b") as b:
        ingested = a.create_table(SCHEMA)
        report = ingested.ingest(tmp_path / "load")
        assert len(report["files"]) == 4
        assert report["bytes"] == desc["bytes"]
        assert not any(f["linked"] for f in report["files"])
        loaded = b.create_table(SCHEMA)
        for r in rows:
            loaded.insert(r)
        for index, eq, rng in [
            ("primary", None, None),
            ("by_age", None, (10, 40)),
            ("by_city", "city3", None),
            ("by_city", None, None),
            ("by_name", None, ("name00100", "name00200")),
        ]:
            got = ingested.select(index, eq=eq, range=rng).all()
            assert got == loaded.select(index, eq=eq, range=rng).all()
            assert got
        assert a.check(compact_first=True)["ok"]
        # Ingested rows take later statements like any row.
        ingested.replace((3, "renamed", 1, "x"))
        ingested.delete(4)
        assert ingested.get(3)["name"] == "renamed"
        assert ingested.get(4) is None
        assert [r["id"] for r in ingested.select("by_age", eq=1).all()] == [3] + [
            r[0] for r in rows if r[2] == 1 and r[0] not in (3, 4)
        ]
        assert a.check(compact_first=True)["ok"]


def test_dict_rows_table_schema_and_move(tmp_path: Path) -> None:
    with strata.open(tmp_path / "db") as db:
        t = db.create_table(SCHEMA)
        w = strata.TableWriter(t, tmp_path / "load", sort_memory=1 << 20)
        w.add({"id": 1, "name": "a", "age": 3})
        w.add({"id": 2, "name": "b", "age": 4, "city": "c"})
        w.finish()
        report = t.ingest(str(tmp_path / "load"), move=True)
        assert all(f["linked"] for f in report["files"])
        assert not (tmp_path / "load").exists()
        assert t.get(1) == {"id": 1, "name": "a", "age": 3, "city": None}
        assert t.count() == 2


def test_unsorted_and_repeated_rows_refused(tmp_path: Path) -> None:
    w = strata.TableWriter(SCHEMA, tmp_path / "load")
    w.add((5, "e", 1, None))
    with pytest.raises(strata.InvalidArgument, match="sorted by primary key"):
        w.add((4, "d", 1, None))
    with pytest.raises(strata.InvalidArgument, match="repeats"):
        w.add_many([(6, "f", 1, None), (6, "g", 1, None)])
    assert w.rows == 2  # the row before the refused one stays
    assert w.finish()["rows"] == 2


def test_rows_before_one_that_does_not_convert_stay_added(tmp_path: Path) -> None:
    w = strata.TableWriter(SCHEMA, tmp_path / "load")
    with pytest.raises(strata.SchemaError):
        w.add_many([(0, "a", 1, None), (1, "b", 1, None), (2, "c", 1, None), (3, 4, 5, None)])
    assert w.rows == 3

    def raising() -> Iterator[tuple[int, str, int, None]]:
        yield (3, "d", 1, None)
        raise ValueError("the source failed")

    with pytest.raises(ValueError, match="the source failed"):
        w.add_many(raising())
    assert w.rows == 4
    assert w.finish()["rows"] == 4


def test_bad_rows_and_options(tmp_path: Path) -> None:
    w = strata.TableWriter(SCHEMA, tmp_path / "load")
    with pytest.raises(strata.SchemaError):
        w.add((1, "a"))
    with pytest.raises(strata.SchemaError):
        w.add({"id": 1, "name": "a", "age": 1, "nope": 2})
    with pytest.raises(strata.SchemaError, match="expected str"):
        w.add((1, 2, 3, None))
    assert w.rows == 0
    with pytest.raises(strata.InvalidArgument, match="no rows"):
        w.finish()
    with pytest.raises(strata.InvalidArgument, match="finished|discarded"):
        w.add((1, "a", 1, None))
    with pytest.raises(strata.InvalidArgument, match="unknown TableWriter option"):
        strata.TableWriter(SCHEMA, tmp_path / "other", sorting=1)
    with pytest.raises(strata.Error):
        strata.TableWriter("table broken (", tmp_path / "other")
    with pytest.raises(TypeError):
        strata.TableWriter(42, tmp_path / "other")  # type: ignore[arg-type]


def test_directory_must_be_new_or_empty(tmp_path: Path) -> None:
    (tmp_path / "load").mkdir()
    (tmp_path / "load" / "x").write_text("x")
    with pytest.raises(strata.AlreadyExistsError):
        strata.TableWriter(SCHEMA, tmp_path / "load")


def test_unique_duplicate_refused_at_finish(tmp_path: Path) -> None:
    w = strata.TableWriter(SCHEMA, tmp_path / "load")
    w.add_many([(1, "same", 1, None), (2, "same", 2, None)])
    with pytest.raises(strata.IntegrityError, match="by_name"):
        w.finish()


def test_exception_in_block_discards(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError):
        with strata.TableWriter(SCHEMA, tmp_path / "load") as w:
            w.add((1, "a", 1, None))
            raise RuntimeError("boom")
    assert not (tmp_path / "load").exists()


def test_ingest_refusals_change_nothing(tmp_path: Path) -> None:
    build(SCHEMA, tmp_path / "load", people(50))
    other = "table other (id u64, v str) primary key (id) index by_v (v)"
    with strata.TableWriter(other, tmp_path / "other") as w:
        w.add((1, "x"))
    with strata.open(tmp_path / "db") as db:
        t = db.create_table(SCHEMA)
        t.insert((10, "already", 1, None))
        # Files of another table's shape.
        with pytest.raises(strata.SchemaError):
            t.ingest(tmp_path / "other")
        # A row whose primary key exists.
        with pytest.raises(strata.IntegrityError):
            t.ingest(tmp_path / "load")
        # Not a writer's output.
        with pytest.raises(strata.Error):
            t.ingest(tmp_path / "nothing")
        # A damaged file: flip a byte in the middle of the primary file.
        primary = tmp_path / "load" / "primary.sst"
        data = bytearray(primary.read_bytes())
        data[len(data) // 3] ^= 0xFF
        primary.write_bytes(bytes(data))
        t.delete(10)
        with pytest.raises(strata.Error):
            t.ingest(tmp_path / "load")
        assert t.count() == 0
        assert db.check()["ok"]
        assert (tmp_path / "load" / "TABLE").exists()


def test_files_of_another_build_refused(tmp_path: Path) -> None:
    build(SCHEMA, tmp_path / "one", people(20))
    build(SCHEMA, tmp_path / "two", people(20, start=100))
    # The index file of another build: same shape, different digest.
    os.replace(tmp_path / "two" / "index-0.sst", tmp_path / "one" / "index-0.sst")
    with strata.open(tmp_path / "db") as db:
        t = db.create_table(SCHEMA)
        with pytest.raises(strata.InvalidArgument, match="not one table writer's output"):
            t.ingest(tmp_path / "one")
        assert t.count() == 0


def test_partitioner(tmp_path: Path) -> None:
    # A partitioned table's indexes are local: a unique one is refused before any
    # Spark job runs or any file is written.
    with pytest.raises(strata.InvalidArgument, match="cannot check uniqueness"):
        strata.Partitioner(SCHEMA, 4)
    with pytest.raises(strata.InvalidArgument, match="cannot check uniqueness"):
        strata.TableWriter(SCHEMA, tmp_path / "unique", partition=(0, 4))
    assert not (tmp_path / "unique").exists()
    p = strata.Partitioner(SCHEMA.replace(" unique", ""), 4)
    assert p.partitions == 4
    row = (12, "n", 3, None)
    assert p.partition_of(row) == p.partition_of(12) == p.partition_of((12,))
    assert p.partition_of({"id": 12, "name": "n", "age": 3}) == p.partition_of(12)
    # Any mapping is a row, as `insert` takes it.
    proxy = types.MappingProxyType({"id": 12, "name": "n", "age": 3})
    assert p.partition_of(proxy) == p.partition_of(12)
    assert p.key(collections.UserDict(id=12, name="n", age=3)) == p.key(12)
    assert p.partition_of_key(p.key(12)) == p.partition_of(12)
    # Encoded keys sort as the keys do (u64 and composite keys alike).
    ids = [0, 1, 255, 256, 2**32, 2**64 - 1]
    assert sorted(p.key(i) for i in ids) == [p.key(i) for i in ids]
    comp = strata.Partitioner("table c (a i64, b str, v u64) primary key (a, b)", 3)
    keys = [(-5, "z"), (-5, "zz"), (0, ""), (0, "a"), (7, "b")]
    assert sorted(comp.key(k) for k in keys) == [comp.key(k) for k in keys]
    assert comp.key((0, "a", 99)) == comp.key((0, "a"))
    # Every partition gets rows, and the count is checked.
    assert {p.partition_of(i) for i in range(200)} == {0, 1, 2, 3}
    with pytest.raises(strata.InvalidArgument):
        strata.Partitioner(SCHEMA, 0)
    with pytest.raises(strata.InvalidArgument):
        p.partition_of((1, 2))
    keyed = p.keyed([row, {"id": 1, "name": "a", "age": 2}])
    assert keyed == [(p.key(12), row), (p.key(1), (1, "a", 2, None))]
    # A key cannot be null: no bytes or partition made up for one.
    with pytest.raises(strata.SchemaError, match="not nullable"):
        p.key(None)
    with pytest.raises(strata.SchemaError, match="not nullable"):
        p.partition_of({"id": None, "name": "x", "age": 1})
    with pytest.raises(strata.SchemaError, match="not nullable"):
        p.keyed([(None, "x", 1, None)])
    # Spark ships it to executors by pickling.
    q = pickle.loads(pickle.dumps(p))
    assert [q.partition_of(i) for i in range(100)] == [p.partition_of(i) for i in range(100)]


def test_partition_ids_of_arrow_batches() -> None:
    pa = pytest.importorskip("pyarrow")
    comp = strata.Partitioner("table c (a i64, b str, f f64, v u64 null) primary key (b, a, f)", 5)
    assert comp.primary_key == ["b", "a", "f"]
    assert comp.field_types == [("a", "i64", False), ("b", "str", False), ("f", "f64", False), ("v", "u64", True)]
    keys = [(i * 7 - 300, f"s{i % 13}\x00{i}", float(i) / 3) for i in range(1000)]
    batch = pa.RecordBatch.from_pylist(
        [{"a": a, "b": b, "f": f, "v": None, "extra": "x"} for a, b, f in keys]
    )
    want = [comp.partition_of((b, a, f)) for a, b, f in keys]
    ids = comp.partition_ids(batch)
    assert ids.type == pa.int32()
    assert ids.to_pylist() == want
    # Tables, slices (an offset into the buffers) and other integer widths alike.
    assert comp.partition_ids(pa.Table.from_batches([batch])).to_pylist() == want
    assert comp.partition_ids(batch.slice(10, 20)).to_pylist() == want[10:30]
    narrow = batch.set_column(0, "a", pa.array([a for a, _, _ in keys], pa.int16()))
    assert comp.partition_ids(narrow).to_pylist() == want
    assert comp.partition_ids(batch.slice(0, 0)).to_pylist() == []
    with pytest.raises(strata.SchemaError, match="primary key field f"):
        comp.partition_ids(batch.drop_columns(["f"]))
    nulls = batch.set_column(0, "a", pa.array([None] * len(keys), pa.int64()))
    with pytest.raises(strata.SchemaError, match="null"):
        comp.partition_ids(nulls)
    with pytest.raises(TypeError):
        comp.partition_ids([(1, "a", 0.5)])


def test_add_many_of_record_batches(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    rows = people(300)
    names = ["id", "name", "age", "city"]
    batch = pa.RecordBatch.from_pylist([dict(zip(names, r)) for r in rows])
    with strata.TableWriter(SCHEMA, tmp_path / "load") as w:
        assert w.add_many(batch.slice(0, 100)) == 100
        assert w.add_many(batch.slice(100)) == 200
        w.finish()
    with strata.open(tmp_path / "db") as db:
        t = db.create_table(SCHEMA)
        t.ingest(tmp_path / "load")
        assert [tuple(r.values()) for r in t.select().all()] == rows
