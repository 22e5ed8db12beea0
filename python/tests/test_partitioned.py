"""strata.open_partitioned: a table hash-partitioned by primary key, against one table
holding the same rows; ingest into a partition; bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

import strata
from strata import spark as sspark

SCHEMA = (
    "table t (id u64, a i64, s str null) primary key (id) index by_a (a) index by_sa (s, a)"
)


def rows(n: int) -> list[tuple[int, int, str | None]]:
    return [(i * 13 % 1009, i % 17 - 8, None if i % 5 == 0 else f"s{i % 4}") for i in range(n)]


def test_statements_and_selects_match_one_table(tmp_path: Path) -> None:
    data = rows(400)
    with strata.open_partitioned(tmp_path / "p", partitions=3) as db, strata.open(tmp_path / "one") as one:
        assert db.partitions == 3
        t = db.create_table(SCHEMA)
        ref = one.create_table(SCHEMA)
        assert db.list_tables() == ["t"]
        assert t.partitions == 3 and t.fields == ["id", "a", "s"]
        for r in data:
            t.insert(r)
            ref.insert(r)
        with pytest.raises(strata.IntegrityError):
            t.insert(data[0])
        for k in data[:50:3]:
            t.replace((k[0], 100, "new"))
            ref.replace((k[0], 100, "new"))
        for k in data[1:50:4]:
            t.delete(k[0])
            ref.delete(k[0])
        assert t.update(data[2][0], {"a": -50}) == ref.update(data[2][0], {"a": -50})
        assert t.update(10**9, {"a": 1}) is False
        assert t.count() == ref.count()
        for index, eq, rng, rev, lim in [
            ("primary", None, None, False, None),
            ("by_a", None, (-3, 4), False, None),
            ("by_a", None, None, True, 25),
            ("by_sa", "s1", (None, 0), False, None),
            ("by_sa", None, None, True, None),
        ]:
            got = t.select(index, eq=eq, range=rng, reverse=rev, limit=lim).all()
            assert got == ref.select(index, eq=eq, range=rng, reverse=rev, limit=lim).all()
        assert t.get(data[5][0]) == ref.get(data[5][0])
        assert t.get(10**9, "none") == "none"
        assert db.check(compact_first=True)["ok"]
        # Each row is in the partition partition_of names, and Partitioner agrees.
        p = strata.Partitioner(SCHEMA, 3)
        for r in data[100:140]:
            assert t.partition_of(r) == t.partition_of(r[0]) == p.partition_of(r[0])
            assert p.partition_of_key(p.key(r[0])) == t.partition_of(r[0])
    with strata.open_partitioned(tmp_path / "p") as db:
        assert db.partitions == 3
        assert db.table("t").count() == len(data) - len(data[1:50:4])
    with pytest.raises(strata.InvalidArgument):
        strata.open_partitioned(tmp_path / "p", partitions=4)
    with pytest.raises(strata.Error):
        strata.open_partitioned(tmp_path / "missing")


def test_closed_database_raises(tmp_path: Path) -> None:
    db = strata.open_partitioned(tmp_path / "p", partitions=2)
    t = db.create_table(SCHEMA)
    t.insert((1, 1, None))
    it = t.select()
    db.close()
    with pytest.raises(strata.ClosedError):
        t.get(1)
    with pytest.raises(strata.ClosedError):
        next(it)
    db.close()


def test_unique_index_refused(tmp_path: Path) -> None:
    with strata.open_partitioned(tmp_path / "p", partitions=2) as db:
        with pytest.raises(strata.Error, match="unique"):
            db.create_table("table u (id u64, e str) primary key (id) index by_e unique (e)")
        assert db.list_tables() == []


def build_partition(directory: Path, data: list[tuple[int, int, str | None]], part: int | None, n: int) -> None:
    opts = {} if part is None else {"partition": (part, n)}
    with strata.TableWriter(SCHEMA, directory, **opts) as w:
        w.add_many(sorted(data))


def build_partitions(
    tmp_path: Path, data: list[tuple[int, int, str | None]], n: int
) -> list[list[tuple[int, int, str | None]]]:
    """Splits ``data`` over ``n`` partitions and writes each one's files to
    ``tmp_path/part{i}``; returns the rows of each partition."""
    p = strata.Partitioner(SCHEMA, n)
    by_part = [[r for r in data if p.partition_of(r) == i] for i in range(n)]
    for i in range(n):
        build_partition(tmp_path / f"part{i}", by_part[i], i, n)
    return by_part


def test_ingest_per_partition(tmp_path: Path) -> None:
    data = rows(300)
    by_part = build_partitions(tmp_path, data, 3)
    with strata.open_partitioned(tmp_path / "p", partitions=3) as db:
        t = db.create_table(SCHEMA)
        # Files of partition 1 offered to partition 0: refused, nothing changes.
        with pytest.raises(strata.InvalidArgument, match="partition"):
            t.ingest(0, tmp_path / "part1")
        assert t.count() == 0
        for i in range(3):
            report = t.ingest(i, tmp_path / f"part{i}", move=(i == 2))
            assert sum(f["entries"] for f in report["files"]) == 3 * len(by_part[i])
        assert not (tmp_path / "part2").exists()
        assert sorted(r["id"] for r in t.select().all()) == sorted(r[0] for r in data)
        assert db.check(compact_first=True)["ok"]


def test_writer_refuses_rows_of_another_partition(tmp_path: Path) -> None:
    p = strata.Partitioner(SCHEMA, 3)
    other = next(r for r in rows(50) if p.partition_of(r) != 0)
    w = strata.TableWriter(SCHEMA, tmp_path / "w", partition=(0, 3))
    with pytest.raises(strata.InvalidArgument):
        w.add(other)
    assert w.rows == 0
    # Files written without a partition are read through at ingest.
    build_partition(tmp_path / "mixed", rows(50), None, 3)
    with strata.open_partitioned(tmp_path / "p", partitions=3) as db:
        t = db.create_table(SCHEMA)
        with pytest.raises(strata.InvalidArgument, match="another partition"):
            t.ingest(0, tmp_path / "mixed")
        assert t.count() == 0


def test_serving_nodes_hold_their_partitions_only(tmp_path: Path) -> None:
    data = rows(300)
    by_part = build_partitions(tmp_path, data, 4)
    built = [sspark.BuiltPartition(i, str(tmp_path / f"part{i}"), len(by_part[i]), 0, 0.0) for i in range(4)]
    # Two nodes of one deployment, each serving two of the four partitions.
    for serve in ([1, 3], [0, 2]):
        with strata.open_partitioned(tmp_path / "p", partitions=4, serve=serve) as node:
            assert node.partitions == 4 and node.serves == serve
            assert "serving" in repr(node)
            t = node.create_table(SCHEMA)
            assert t.serves == serve
            # Every partition's files offered at once: refused before any is ingested.
            with pytest.raises(strata.InvalidArgument, match="not served"):
                sspark.ingest_built(t, built, move=False)
            assert t.count() == 0
            reports = sspark.ingest_built(t, [b for b in built if b.partition in node.serves], move=False)
            assert [r["partition"] for r in reports] == serve
            other = next(i for i in range(4) if i not in serve)
            # Another node's files, and another node's rows, are refused here.
            with pytest.raises(strata.InvalidArgument, match="not served"):
                t.ingest(other, tmp_path / f"part{other}")
            with pytest.raises(strata.InvalidArgument, match="not served"):
                t.insert(by_part[other][0])
            with pytest.raises(strata.InvalidArgument, match="not served"):
                t.get(by_part[other][0][0])
            # A select reads the served partitions: their rows, in index order.
            mine = sorted((r for i in serve for r in by_part[i]), key=lambda r: (r[1], r[0]))
            assert [(r["a"], r["id"]) for r in t.select("by_a").all()] == [(r[1], r[0]) for r in mine]
            report = node.check(compact_first=True)
            assert report["ok"] and len(report["partitions"]) == 2
    assert sorted(d.name for d in (tmp_path / "p").iterdir() if d.is_dir()) == ["p000", "p001", "p002", "p003"]
    with strata.open_partitioned(tmp_path / "p") as whole:
        assert whole.serves == [0, 1, 2, 3]
        assert sorted(r["id"] for r in whole.table("t").select().all()) == sorted(r[0] for r in data)
    # An existing directory records its count: serve= alone opens a node's share.
    with strata.open_partitioned(tmp_path / "p", serve=[2]) as node:
        assert node.partitions == 4 and node.serves == [2]
        assert sorted(r["id"] for r in node.table("t").select().all()) == sorted(r[0] for r in by_part[2])
    # A new directory needs the count to create it with, and nothing is created.
    with pytest.raises(strata.NotADatabaseError, match="no PARTITIONS file"):
        strata.open_partitioned(tmp_path / "new", serve=[0])
    assert not (tmp_path / "new").exists()
    with pytest.raises(strata.InvalidArgument, match="does not exist"):
        strata.open_partitioned(tmp_path / "p", partitions=4, serve=[4])
