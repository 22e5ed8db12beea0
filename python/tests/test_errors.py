"""Every exception class, raised by the engine condition it stands for, with the
engine's message; none of them changes anything."""

from __future__ import annotations

import errno
import os

import pytest

import strata


def test_hierarchy() -> None:
    for cls in (
        strata.CorruptionError,
        strata.IoError,
        strata.InvalidArgument,
        strata.SchemaError,
        strata.IntegrityError,
        strata.NotFoundError,
        strata.AlreadyExistsError,
        strata.NotADatabaseError,
        strata.BackgroundError,
        strata.ClosedError,
    ):
        assert issubclass(cls, strata.Error)
    assert issubclass(strata.InvalidArgument, ValueError)
    assert issubclass(strata.SchemaError, strata.InvalidArgument)
    assert issubclass(strata.IoError, OSError)


def test_corruption_names_file_and_offset(path: str) -> None:
    with strata.open(path) as db:
        for i in range(2000):
            db[b"k%05d" % i] = b"v" * 100
        db.flush()
    sst = [f for f in os.listdir(path) if f.endswith(".sst")]
    assert len(sst) == 1
    p = os.path.join(path, sst[0])
    data = bytearray(open(p, "rb").read())
    for i in range(100, 8000, 97):  # damage the first data block
        data[i] ^= 0xFF
    open(p, "wb").write(bytes(data))
    with strata.open(path) as db:
        with pytest.raises(strata.CorruptionError) as e:
            db.get(b"k00001")
        assert e.value.file == p
        assert isinstance(e.value.offset, int)
        assert sst[0] in str(e.value) and "offset" in str(e.value)
        report = db.check()
        assert not report["ok"]
        assert any(sst[0] in problem for problem in report["problems"])


def test_background_error_after_a_failed_compaction(path: str) -> None:
    # Three level-0 files, one with a damaged data block; the compactions that more
    # flushes start read it and fail in the background.
    with strata.open(path) as db:
        for r in range(3):
            for i in range(2000):
                db[b"k%08d" % (i * 3 + r)] = os.urandom(100)
            db.flush()
    first = sorted(f for f in os.listdir(path) if f.endswith(".sst"))[0]
    with open(os.path.join(path, first), "r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 64)
    db = strata.open(path)
    seen: strata.Error | None = None
    for r in range(12):
        try:
            for i in range(2000):
                db[b"k%08d" % (i * 3 + r % 3)] = b"w" * 100
            db.flush()
            db.compact()
        except strata.Error as e:
            seen = e
            break
    assert seen is not None, "a compaction over the damaged file must fail"
    # The failure puts the database in a failed state: every later write says why.
    with pytest.raises(strata.BackgroundError) as e:
        db.put(b"x", b"y")
    assert first in str(e.value)
    assert "corruption" in str(e.value)
    db.close()


def test_not_a_database(tmp_path: object) -> None:
    empty = os.path.join(str(tmp_path), "empty")
    os.mkdir(empty)
    with pytest.raises(strata.NotADatabaseError) as e:
        strata.open(empty, create_if_missing=False)
    assert e.value.file == empty
    assert os.listdir(empty) == []


def test_a_file_is_not_a_database(tmp_path: object) -> None:
    f = os.path.join(str(tmp_path), "file")
    open(f, "w").write("not a directory")
    with pytest.raises(strata.NotADatabaseError, match="not a directory") as e:
        strata.open(f)
    assert e.value.file == f
    assert open(f).read() == "not a directory"


def test_io_error_names_the_path(tmp_path: object) -> None:
    f = os.path.join(str(tmp_path), "file")
    open(f, "w").write("x")
    under = os.path.join(f, "db")
    with pytest.raises(strata.IoError) as e:
        strata.open(under)
    assert isinstance(e.value, OSError)
    assert e.value.file == under
    assert "Not a directory" in str(e.value)
    # The attributes Python's own OSError carries.
    assert e.value.errno == errno.ENOTDIR
    assert e.value.strerror is not None and "Not a directory" in e.value.strerror
    assert e.value.filename == under
    # Its text is the engine's message, as for every other error.
    assert str(e.value) == e.value.args[0] and under in str(e.value)


def test_already_exists_and_not_found(db: strata.Database) -> None:
    db.create_table("table t (id u64) primary key (id)")
    with pytest.raises(strata.AlreadyExistsError, match='table "t"'):
        db.create_table("table t (id u64) primary key (id)")
    with pytest.raises(strata.NotFoundError):
        db.table("nope")
    with pytest.raises(strata.NotFoundError):
        db.drop_keyspace("nope")
    with pytest.raises(strata.NotFoundError):
        db.table("t").select("no_such_index")


def test_integrity_error_changes_nothing(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, e str) primary key (id) index by_e unique (e)")
    t.insert((1, "a"))
    with pytest.raises(strata.IntegrityError, match="duplicate primary key"):
        t.insert((1, "b"))
    with pytest.raises(strata.IntegrityError):
        t.insert((2, "a"))
    with pytest.raises(strata.IntegrityError):
        with t.transaction() as txn:
            txn.insert((3, "c"))
            txn.insert((4, "a"))
    assert t.select().all() == [{"id": 1, "e": "a"}]


def test_schema_errors(db: strata.Database) -> None:
    with pytest.raises(strata.InvalidArgument, match="u32"):
        db.create_table("table t (a u32) primary key (a)")
    t = db.create_table("table t (id u64, name str, n i64 null) primary key (id)")
    bad_rows: list[object] = [
        {"id": 1},  # missing non-null field
        {"id": 1, "name": "x", "zzz": 1},  # unknown field
        (1, "x"),  # too short
        (1, "x", 1, 2),  # too long
        ("1", "x", None),  # str for u64
        (-1, "x", None),  # negative u64
        (2**64, "x", None),  # u64 overflow
        (True, "x", None),  # bool is not an int here
        (1, b"x", None),  # bytes for str
        (1, "x", 1.5),  # float for i64
        (None, "x", None),  # null in the primary key
    ]
    for row in bad_rows:
        with pytest.raises(strata.SchemaError):
            t.insert(row)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        t.insert(42)  # type: ignore[arg-type]  # not a row at all
    assert t.count() == 0
    with pytest.raises(strata.InvalidArgument):
        t.get((1, 2))
    with pytest.raises(strata.SchemaError):
        t.update(1, {"nope": 1})


def test_closed_error(path: str) -> None:
    db = strata.open(path)
    db.close()
    assert db.closed
    for call in (
        lambda: db.get(b"k"),
        lambda: db.put(b"k", b"v"),
        lambda: db.keyspace("x"),
        lambda: db.snapshot(),
        lambda: db.stats(),
        lambda: db.batch().commit(),
        lambda: list(db.scan()),
    ):
        with pytest.raises(strata.ClosedError, match="closed"):
            call()
    db.close()  # twice is fine


def test_lock_held_by_another_handle(path: str) -> None:
    # A busy database, as sqlite3 and RocksDB report one: an I/O error naming the LOCK.
    with strata.open(path) as db:
        db.put(b"k", b"v")
        with pytest.raises(strata.IoError, match="already open") as e:
            strata.open(path)
        assert e.value.file == os.path.join(path, "LOCK")
        assert db.get(b"k") == b"v"
