"""Objects that outlive their database raise ClosedError, never crash; threads share a
database; the GIL is released while the engine works."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

import pytest

import strata


def test_everything_raises_after_close(path: str) -> None:
    db = strata.open(path)
    for i in range(100):
        db[b"k%03d" % i] = b"v"
    ks = db.keyspace("ks")
    t = db.create_table("table t (id u64) primary key (id)")
    t.insert((1,))
    t.insert((5,))
    m = db.multimap("m")
    scan = db.scan()
    assert next(scan) == (b"k000", b"v")
    rows = t.select()
    read_ahead = t.select()
    assert next(read_ahead) == {"id": 1}  # the rest is read ahead
    snap = db.snapshot()
    batch = db.batch()
    batch.put(b"x", b"y")
    txn = t.transaction()
    txn.insert((2,))
    db.close()
    for call in (
        lambda: next(scan),
        lambda: next(rows),
        lambda: snap.get(b"k000"),
        lambda: snap.scan(),
        lambda: ks.get(b"k"),
        lambda: ks.put(b"k", b"v"),
        lambda: t.get(1),
        lambda: t.insert((3,)),
        lambda: t.select(),
        lambda: batch.commit(),
        lambda: read_ahead.all(),
        lambda: m.put(b"k", b"v", batch=batch),
        lambda: txn.commit(),
        lambda: batch.put(b"x", b"z"),
        lambda: batch.delete(b"x"),
        lambda: txn.insert((4,)),
        lambda: txn.delete(1),
        lambda: db.batch(),
        lambda: t.transaction(),
    ):
        with pytest.raises(strata.ClosedError):
            call()
    snap.release()
    # The directory lock was released at close, while those objects still live.
    with strata.open(path) as again:
        assert again[b"k000"] == b"v"
        assert b"x" not in again
        with pytest.raises(strata.ClosedError):
            next(scan)  # still the old, closed database
    del scan, rows, read_ahead, m, snap, batch, txn, ks, t, db
    gc.collect()


def test_iterators_keep_working_while_open_after_the_db_object_is_dropped(path: str) -> None:
    db = strata.open(path)
    db[b"a"] = b"1"
    db[b"b"] = b"2"
    it = db.scan()
    del db
    gc.collect()
    assert list(it) == [(b"a", b"1"), (b"b", b"2")]


def test_threads_share_a_database(db: strata.Database) -> None:
    t = db.create_table("table t (id u64, w u64) primary key (id) index by_w (w)")
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for i in range(300):
                db[b"%d:%d" % (w, i)] = b"v"
                if i % 10 == 0:
                    with db.batch() as b:
                        b.put(b"batch:%d:%d" % (w, i), b"v")
                t.replace((w * 1000 + i, w))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def reader() -> None:
        try:
            for _ in range(50):
                for _k, v in db.scan(b"0:", b"0;"):
                    assert v == b"v"
                list(t.select("by_w", eq=1, limit=10))
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert sum(1 for _ in db.scan(None, b"4")) == 1200
    assert sum(1 for _ in db.scan(b"batch:", b"batch;")) == 120
    for w in range(4):
        assert sum(1 for _ in t.select("by_w", eq=w)) == 300
    assert db.check()["ok"]


def test_close_while_other_threads_read(path: str) -> None:
    db = strata.open(path)
    for i in range(2000):
        db[b"k%05d" % i] = b"v" * 20
    outcomes: list[str] = []

    def reader() -> None:
        try:
            while True:
                for _ in db.scan():
                    pass
                db.get(b"k00001")
        except strata.ClosedError:
            outcomes.append("closed")

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for th in threads:
        th.start()
    time.sleep(0.05)
    db.close()
    for th in threads:
        th.join(timeout=10)
    assert outcomes == ["closed"] * 3


def ticks_while(work: Callable[[list[float]], None]) -> tuple[float, float, list[float]]:
    """Runs ``work`` in a thread, which appends the start and end of the span it
    measures to the list it is given, while this thread ticks every millisecond;
    returns the span and the ticks inside it. A thread holding the GIL through the
    span leaves this one no tick in it."""
    span: list[float] = []
    th = threading.Thread(target=work, args=(span,))
    ticks: list[float] = []
    th.start()
    while th.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    th.join()
    start, end = span
    return start, end, [x for x in ticks if start < x < end]


def test_the_gil_is_released_during_engine_work(path: str) -> None:
    # A compaction of a few MB takes far longer than a switch interval; if the GIL were
    # held, this thread could not run at all meanwhile.
    with strata.open(path, memtable_budget=1 << 20) as db:
        t = db.create_table("table t (id u64, a u64, b u64) primary key (id) index by_a (a) index by_b (b)")
        with t.transaction() as txn:
            for i in range(60_000):
                txn.replace((i, i * 7 % 1000, i * 13 % 1000))

        def compact(span: list[float]) -> None:
            span.append(time.perf_counter())
            db.compact()
            db.check(compact_first=True)
            span.append(time.perf_counter())

        start, end, inside = ticks_while(compact)
        assert end - start > 0.02, "too little work to tell"
        assert len(inside) >= 5, (end - start, len(inside))


def test_the_gil_is_released_while_an_unclosed_database_shuts_down(path: str) -> None:
    # Dropped without close(), a database shuts down when its last object goes: it
    # waits for the compactions its writes started. Other threads run meanwhile.
    def load_and_drop(span: list[float]) -> None:
        db = strata.open(path, memtable_budget=1 << 20)
        t = db.create_table("table t (id u64, a u64, s str) primary key (id) index by_a (a)")
        pad = "x" * 200
        for start in range(0, 200_000, 20_000):
            with t.transaction() as txn:
                for i in range(start, start + 20_000):
                    txn.replace((i, i * 7 % 1000, pad))
        del t, txn
        span.append(time.perf_counter())
        del db  # the last object of the database: it shuts down here
        span.append(time.perf_counter())

    start, end, inside = ticks_while(load_and_drop)
    # Longer than the 5 ms switch interval: a thread holding the GIL throughout would
    # leave this one no tick at all.
    if end - start < 0.008:
        pytest.skip(f"the shutdown took {end - start:.3f} s: too little to tell")
    assert len(inside) >= 3, (end - start, len(inside))
    # Shut down whole: the directory opens again at once, with every row.
    with strata.open(path) as db:
        assert db.table("t").count() == 200_000
