"""The examples of docs/python.md, run by the test suite and type-checked with
``mypy --strict``."""

from __future__ import annotations

import os
import tempfile
import threading

import strata


def kv_example(path: str) -> None:
    with strata.open(path, memtable_budget=8 << 20) as db:
        db[b"user:1"] = b"ann"
        db.put("user:2", "bob")  # str is stored as UTF-8
        assert db[b"user:2"] == b"bob"
        assert b"user:1" in db
        assert db.get(b"user:9", b"?") == b"?"

        users = db.keyspace("users")
        with db.batch() as batch:  # atomic, may span keyspaces
            batch.put(b"u1", b"alice", keyspace=users)
            batch.delete(b"user:1")
        assert users[b"u1"] == b"alice"

        with db.snapshot() as snap:
            db[b"user:2"] = b"bobby"
            assert snap.get(b"user:2") == b"bob"

        keys = [k for k, _ in db.scan(b"user:", b"user;", reverse=True)]
        assert keys == [b"user:2"]
        db.delete_range(b"user:", b"user;")
        assert list(db.scan(b"user:", b"user;")) == []


def table_example(path: str) -> None:
    with strata.open(path) as db:
        people = db.create_table(
            "table people (id u64, name str, age i64, email str null) "
            "primary key (id) index by_age (age) index by_email unique (email) deferred"
        )
        people.insert({"id": 1, "name": "ann", "age": 31, "email": "ann@example.com"})
        people.replace((2, "bob", 25, None))  # a tuple in field order
        with people.transaction() as t:
            t.replace({"id": 3, "name": "cy", "age": 40})
            t.delete(2)
        people.update(1, {"age": 32})
        row = people.get(1)
        assert row is not None and row["age"] == 32
        over_30 = [r["name"] for r in people.select("by_age", range=(30, None))]
        assert over_30 == ["ann", "cy"]
        try:
            people.insert({"id": 4, "name": "dup", "age": 1, "email": "ann@example.com"})
        except strata.IntegrityError:
            pass
        else:
            raise AssertionError("the unique index let a duplicate in")
        assert people.count() == 2
        report = db.check()
        assert report["ok"], report["problems"]


def multimap_example(path: str) -> None:
    with strata.open(path) as db:
        follows = db.multimap("follows")  # created if missing; create=False to only open
        follows.put(b"ann", b"bob")
        follows.put(b"ann", b"cid")
        follows.put(b"ann", b"bob")  # already there: nothing changes
        assert list(follows.get(b"ann")) == [b"bob", b"cid"]
        assert list(follows.get(b"ann", reverse=True)) == [b"cid", b"bob"]
        assert list(follows.get(b"ann", start=b"c")) == [b"cid"]  # from a value on
        assert follows.contains(b"ann", b"cid")
        follows.delete(b"ann", b"cid")
        with db.batch() as batch:  # atomic with the batch's other writes
            follows.put(b"dan", b"ann", batch=batch)
            batch.put(b"user:dan", b"Dan")
        with db.snapshot() as snap:
            follows.delete_all(b"ann")  # every value, one range tombstone
            assert list(follows.get(b"ann", snapshot=snap)) == [b"bob"]
            assert not follows.contains(b"ann", b"bob")


def threads_example(path: str) -> None:
    with strata.open(path) as db:

        def work(i: int) -> None:
            for j in range(100):
                db[f"{i}:{j}"] = b"x"

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sum(1 for _ in db) == 400


def bulk_load_example(root: str) -> None:
    schema = "table users (id u64, age i64) primary key (id) index by_age (age)"
    with strata.TableWriter(schema, os.path.join(root, "load")) as w:  # a new or empty directory
        w.add_many((i, 20 + i % 50) for i in range(1000))  # sorted by primary key, else InvalidArgument
        files = w.finish()  # {"directory", "rows", "bytes", "files": [...]}
    with strata.open(os.path.join(root, "db")) as db:
        report = db.create_table(schema).ingest(files["directory"])  # move=True: link, then remove
        assert files["rows"] == 1000 and report["bytes"] == files["bytes"]
        assert db.table("users").get(999) == {"id": 999, "age": 20 + 999 % 50}


if __name__ == "__main__":
    for example in (kv_example, table_example, multimap_example, threads_example, bulk_load_example):
        example(tempfile.mkdtemp())
    print("examples ok")
