"""The key-value API: round trips, bytes and str, keyspaces, batches, snapshots, scans,
reopen, options, stats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import strata


def test_put_get_delete_round_trip(db: strata.Database) -> None:
    db.put(b"k", b"v")
    assert db.get(b"k") == b"v"
    assert db[b"k"] == b"v"
    db[b"k"] = b"w"
    assert db[b"k"] == b"w"
    db.delete(b"k")
    assert db.get(b"k") is None
    assert db.get(b"k", b"dflt") == b"dflt"
    with pytest.raises(KeyError):
        db[b"k"]
    db[b"x"] = b"1"
    del db[b"x"]
    assert b"x" not in db


def test_str_is_utf8_and_reads_return_bytes(db: strata.Database) -> None:
    db["ключ"] = "значение"
    assert db["ключ"] == "значение".encode()
    assert db["ключ".encode()] == "значение".encode()
    db[bytearray(b"ba")] = bytearray(b"\x00\xff")
    assert db[b"ba"] == b"\x00\xff"
    assert isinstance(db.get("ba"), bytes)


def test_empty_and_binary_values(db: strata.Database) -> None:
    db[b"\x00"] = b""
    assert db[b"\x00"] == b""
    assert b"\x00" in db
    big = bytes(range(256)) * 4000
    db[b"big"] = big
    assert db[b"big"] == big


@pytest.mark.parametrize("bad", [1, 1.5, None, ["k"], object()])
def test_bad_key_types_raise_type_error_and_write_nothing(db: strata.Database, bad: object) -> None:
    with pytest.raises(TypeError, match="key must be bytes"):
        db.put(bad, b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value must be bytes"):
        db.put(b"k", bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        db.get(bad)  # type: ignore[arg-type]
    assert list(db.scan()) == []


def test_oversized_key_is_invalid_argument_and_writes_nothing(db: strata.Database) -> None:
    with pytest.raises(strata.InvalidArgument) as e:
        db.put(b"k" * (64 * 1024 + 1), b"v")
    assert isinstance(e.value, ValueError)
    assert "key" in str(e.value)
    assert list(db.scan()) == []


def test_long_scans_hand_every_entry_across_read_ahead_runs(db: strata.Database) -> None:
    # Scans read ahead in runs of 8 doubling to 512, keys and values of each run in one
    # buffer: lengths vary (an empty value too) so each entry's bounds are checked.
    items = {b"k%05d" % i + b"x" * (i % 5): b"v" * (i % 37) for i in range(3000)}
    with db.batch() as b:
        for k, v in items.items():
            b.put(k, v)
    want = sorted(items.items())
    assert list(db.scan()) == want
    db.flush()
    assert list(db.scan(reverse=True)) == want[::-1]
    lo, hi = want[100][0], want[2500][0]
    assert list(db.scan(lo, hi)) == want[100:2500]
    assert list(db) == [k for k, _ in want]


def test_scan_bounds_reverse_and_laziness(db: strata.Database) -> None:
    for i in range(100):
        db[b"k%03d" % i] = b"%d" % i
    assert [k for k, _ in db.scan(b"k010", b"k013")] == [b"k010", b"k011", b"k012"]
    assert [k for k, _ in db.scan(b"k010", b"k013", reverse=True)] == [b"k012", b"k011", b"k010"]
    assert len(list(db.scan(None, b"k005"))) == 5
    assert len(list(db.scan(b"k095"))) == 5
    assert list(db) == [b"k%03d" % i for i in range(100)]
    it = db.scan()
    assert next(it) == (b"k000", b"0")
    db[b"k999"] = b"late"  # the scan reads the state at its start
    assert sum(1 for _ in it) == 99


def test_delete_range(db: strata.Database) -> None:
    for i in range(20):
        db[b"k%02d" % i] = b"v"
    db.delete_range(b"k05", b"k15")
    assert [k for k, _ in db.scan()] == [b"k%02d" % i for i in list(range(5)) + list(range(15, 20))]
    with pytest.raises(strata.InvalidArgument):
        db.delete_range(b"k15", b"k05")


def test_keyspaces_are_independent(db: strata.Database) -> None:
    a = db.keyspace("a")
    b = db.keyspace("b")
    a[b"k"] = b"in a"
    b[b"k"] = b"in b"
    assert (a[b"k"], b[b"k"], db.get(b"k")) == (b"in a", b"in b", None)
    assert a.name == "a"
    assert sorted(db.keyspaces()) == ["a", "b", "default"]
    assert [k for k, _ in a.scan()] == [b"k"]
    assert list(b) == [b"k"]
    with pytest.raises(strata.NotFoundError):
        db.keyspace("missing", create=False)
    db.drop_keyspace("b")
    assert "b" not in db.keyspaces()


def test_batch_commits_at_the_end_of_the_block(db: strata.Database) -> None:
    users = db.keyspace("users")
    db[b"old"] = b"x"
    with db.batch() as b:
        b.put(b"u1", b"ann", keyspace=users)
        b.put(b"k", b"v")
        b.delete(b"old")
        assert len(b) == 3
        assert db.get(b"k") is None  # nothing visible before the commit
    assert users[b"u1"] == b"ann"
    assert db[b"k"] == b"v"
    assert b"old" not in db
    with pytest.raises(strata.InvalidArgument):
        b.put(b"again", b"v")


def test_batch_is_dropped_when_the_block_raises(db: strata.Database) -> None:
    with pytest.raises(RuntimeError):
        with db.batch() as b:
            b.put(b"k", b"v")
            raise RuntimeError("boom")
    assert b"k" not in db


def test_batch_with_a_bad_op_writes_nothing(db: strata.Database) -> None:
    b = db.batch()
    b.put(b"ok", b"v")
    b.put(b"big", b"v" * (64 * 1024 * 1024 + 1))
    with pytest.raises(strata.InvalidArgument):
        b.commit()
    assert b"ok" not in db


def test_batch_refuses_a_keyspace_of_another_database(db: strata.Database, tmp_path: object) -> None:
    import os

    other_path = os.path.join(str(tmp_path), "other")
    with strata.open(other_path) as other:
        ks = other.keyspace("x")
        with pytest.raises(strata.InvalidArgument, match="another database"):
            db.batch().put(b"k", b"v", keyspace=ks)


def test_snapshot_reads_a_fixed_point(db: strata.Database) -> None:
    ks = db.keyspace("ks")
    db[b"a"] = b"1"
    ks[b"x"] = b"1"
    snap = db.snapshot()
    db[b"a"] = b"2"
    db[b"b"] = b"new"
    ks[b"x"] = b"2"
    db.flush()
    assert snap.get(b"a") == b"1"
    assert snap.get(b"b") is None
    assert snap.get(b"x", keyspace=ks) == b"1"
    assert list(snap.scan()) == [(b"a", b"1")]
    assert snap.seq > 0
    snap.release()
    with pytest.raises(strata.ClosedError):
        snap.get(b"a")
    with db.snapshot() as s2:
        assert s2.get(b"a") == b"2"
    with pytest.raises(strata.ClosedError):
        s2.get(b"a")


def test_reopen_keeps_everything(path: str) -> None:
    with strata.open(path, memtable_budget=1 << 20) as db:
        for i in range(5000):
            db[b"k%05d" % i] = b"v%d" % i
        db.keyspace("ks")[b"x"] = b"y"
        db.create_table("table t (id u64, v str) primary key (id)").insert((1, "one"))
    with strata.open(path) as db:
        assert db[b"k04999"] == b"v4999"
        assert sum(1 for _ in db) == 5000
        assert db.keyspace("ks", create=False)[b"x"] == b"y"
        assert db.table("t").get(1) == {"id": 1, "v": "one"}


def test_options_are_checked(path: str) -> None:
    with pytest.raises(TypeError, match="unexpected option"):
        strata.open(path, memtable_size=1)
    with pytest.raises(strata.InvalidArgument, match="size_ratio"):
        strata.open(path, size_ratio=1.0)
    with pytest.raises(strata.InvalidArgument, match="sync"):
        strata.open(path, sync="sometimes")
    with pytest.raises(strata.InvalidArgument, match="memtable_budget"):
        strata.open(path, memtable_budget=-5)
    for seconds in (0.0, -1.0, float("nan"), float("inf"), 1e20):
        with pytest.raises(strata.InvalidArgument, match="delete_persistence_threshold"):
            strata.open(path, delete_persistence_threshold=seconds)
    with strata.open(path, sync="every_batch", compression="lz4", runs_per_level=3, size_ratio=4.0) as db:
        db[b"k"] = b"v"
        assert db.stats()["wal_syncs"] >= 1
    assert "memtable_budget" in strata.OPTIONS


def test_max_manifest_file_size_rolls_the_manifest(tmp_path: Path) -> None:
    def edits(**options: Any) -> int:
        with strata.open(str(tmp_path / str(len(options))), **options) as db:
            for i in range(5):
                db[b"k%d" % i] = b"v"
                db.flush()
            n: int = db.check()["files"]["manifest_edits"]
            assert db[b"k4"] == b"v"
        return n

    # Each edit starts a fresh manifest holding the whole state in one record.
    assert edits(max_manifest_file_size=1) == 1
    assert edits() > 1


def test_read_only_refuses_writes(path: str) -> None:
    with strata.open(path) as db:
        db[b"k"] = b"v"
    with strata.open(path, read_only=True) as db:
        assert db[b"k"] == b"v"
        with pytest.raises(strata.InvalidArgument):
            db[b"k2"] = b"v"


def test_stats_and_check(db: strata.Database) -> None:
    for i in range(2000):
        db[b"k%05d" % i] = b"v" * 50
    db.flush()
    s = db.stats()
    assert s["flushes"] >= 1
    default = next(k for k in s["keyspaces"] if k["name"] == "default")
    assert default["entries"] == 2000
    assert s["total_bytes"] > 0
    r = db.check()
    assert r["ok"] and r["problems"] == []
    assert r["files"]["sstables"] >= 1
    db.compact()
    assert db.stats()["compactions"] >= 0
