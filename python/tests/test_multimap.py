"""Multimaps: round trips, order, paging, batches, snapshots, bad input, lifetime, and a
hypothesis state machine against a dict of sets. STRATA_PY_EXAMPLES sets how many
state-machine runs (default 25)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

import strata
from machines import SETTINGS, DatabaseMachine


def test_put_get_in_value_order(db: strata.Database) -> None:
    m = db.multimap("m")
    for v in [b"c", b"a", b"b", b"a"]:
        m.put(b"k", v)
    m.put("other", "z")
    assert list(m.get(b"k")) == [b"a", b"b", b"c"]
    assert list(m.get(b"k", reverse=True)) == [b"c", b"b", b"a"]
    assert list(m.get("other")) == [b"z"]
    assert list(m.get(b"absent")) == []
    assert m.name == "m" and repr(m) == '<strata.MultiMap "m">'


def test_start_pages_in_either_direction(db: strata.Database) -> None:
    m = db.multimap("m")
    for v in [b"a", b"c", b"e"]:
        m.put(b"k", v)
    assert list(m.get(b"k", start=b"c")) == [b"c", b"e"]
    assert list(m.get(b"k", start=b"b")) == [b"c", b"e"]
    assert list(m.get(b"k", start=b"c", reverse=True)) == [b"c", b"a"]
    assert list(m.get(b"k", start=b"d", reverse=True)) == [b"c", b"a"]


def test_delete_delete_all_contains(db: strata.Database) -> None:
    m = db.multimap("m")
    for v in [b"1", b"2", b"3"]:
        m.put(b"k", v)
    m.put(b"k2", b"1")
    m.delete(b"k", b"2")
    m.delete(b"k", b"9")  # absent: no error
    assert m.contains(b"k", b"1") and not m.contains(b"k", b"2")
    m.delete_all(b"k")
    assert list(m.get(b"k")) == []
    assert list(m.get(b"k2")) == [b"1"]


def test_many_values_stream_lazily(db: strata.Database) -> None:
    m = db.multimap("m")
    n = 3000
    with db.batch() as b:
        for i in range(n):
            m.put(b"k", i.to_bytes(4, "big"), batch=b)
    db.flush()
    it = m.get(b"k")
    assert next(it) == (0).to_bytes(4, "big")
    assert sum(1 for _ in it) == n - 1
    assert next(iter(m.get(b"k", reverse=True))) == (n - 1).to_bytes(4, "big")


def test_batch_commits_with_other_writes_or_not_at_all(db: strata.Database) -> None:
    m = db.multimap("m")
    with db.batch() as b:
        m.put(b"k", b"v", batch=b)
        m.put(b"k", b"w", batch=b)
        b.put(b"plain", b"x")
        assert list(m.get(b"k")) == []  # not yet committed
        assert len(b) == 3
    assert list(m.get(b"k")) == [b"v", b"w"] and db[b"plain"] == b"x"
    with pytest.raises(RuntimeError):
        with db.batch() as b:
            m.delete_all(b"k", batch=b)
            raise RuntimeError("discard")
    assert list(m.get(b"k")) == [b"v", b"w"]
    with db.batch() as b:
        m.delete(b"k", b"v", batch=b)
    assert list(m.get(b"k")) == [b"w"]
    b = db.batch()
    b.commit()
    with pytest.raises(strata.InvalidArgument, match="already committed"):
        m.put(b"k", b"z", batch=b)


def test_snapshot_reads(db: strata.Database) -> None:
    m = db.multimap("m")
    m.put(b"k", b"old")
    with db.snapshot() as snap:
        m.put(b"k", b"new")
        m.delete(b"k", b"old")
        assert list(m.get(b"k", snapshot=snap)) == [b"old"]
        assert m.contains(b"k", b"old", snapshot=snap)
        assert not m.contains(b"k", b"new", snapshot=snap)
    assert list(m.get(b"k")) == [b"new"]
    with pytest.raises(strata.ClosedError):
        m.get(b"k", snapshot=snap)


def test_bad_input_writes_nothing(db: strata.Database) -> None:
    m = db.multimap("m")
    m.put(b"k", b"v")
    with pytest.raises(strata.InvalidArgument):
        m.put(b"", b"v")
    with pytest.raises(strata.InvalidArgument):
        m.put(b"k", b"x" * (1 << 20))
    with pytest.raises(TypeError, match="value must be bytes"):
        m.put(b"k", 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be bytes"):
        m.get(None)  # type: ignore[arg-type]
    with db.batch() as b:
        with pytest.raises(strata.InvalidArgument):
            m.put(b"", b"v", batch=b)
        assert len(b) == 0
    assert list(m.get(b"k")) == [b"v"]
    with pytest.raises(strata.NotFoundError):
        db.multimap("missing", create=False)


def test_other_databases_batch_and_snapshot_are_refused(db: strata.Database, tmp_path: Path) -> None:
    with strata.open(str(tmp_path / "other")) as other:
        m = db.multimap("m")
        with pytest.raises(strata.InvalidArgument, match="another database"):
            m.put(b"k", b"v", batch=other.batch())
        with other.snapshot() as s:
            with pytest.raises(strata.InvalidArgument, match="another database"):
                m.get(b"k", snapshot=s)
        assert list(m.get(b"k")) == []


def test_reopen_and_close(path: str) -> None:
    with strata.open(path) as db:
        m = db.multimap("m")
        m.put(b"k", b"a")
        m.put(b"k", b"b")
        it = m.get(b"k")
        assert next(it) == b"a"
    with pytest.raises(strata.ClosedError):
        next(it)
    with pytest.raises(strata.ClosedError):
        m.put(b"k", b"c")
    with strata.open(path) as db:
        assert list(db.multimap("m", create=False).get(b"k")) == [b"a", b"b"]
        assert "m" in db.keyspaces()


def test_threads_share_a_multimap(db: strata.Database) -> None:
    m = db.multimap("m")

    def add(w: int) -> int:
        for i in range(200):
            m.put(b"shared", b"%d:%03d" % (w, i))
            if i % 50 == 0:
                db.flush()
        return sum(1 for _ in m.get(b"shared", start=b"%d:" % w))

    with ThreadPoolExecutor(4) as pool:
        seen = list(pool.map(add, range(4)))
    assert all(n >= 200 for n in seen)
    values = list(m.get(b"shared"))
    assert len(values) == 800 and values == sorted(values)


KEYS = st.sampled_from([b"a", b"b", b"cc"])
VALS = st.binary(min_size=0, max_size=3)


class MultiMapMachine(DatabaseMachine):
    """Puts, deletes, delete_alls (direct and batched), flushes, compactions, reopens
    and snapshots against a dict of sets."""

    def __init__(self) -> None:
        super().__init__()
        self.m = self.db.multimap("m")
        self.model: dict[bytes, set[bytes]] = {}
        self.snap: tuple[strata.Snapshot, dict[bytes, set[bytes]]] | None = None

    @rule(k=KEYS, v=VALS, batched=st.booleans())
    def put(self, k: bytes, v: bytes, batched: bool) -> None:
        if batched:
            with self.db.batch() as b:
                self.m.put(k, v, batch=b)
        else:
            self.m.put(k, v)
        self.model.setdefault(k, set()).add(v)

    @rule(k=KEYS, v=VALS)
    def delete(self, k: bytes, v: bytes) -> None:
        self.m.delete(k, v)
        self.model.get(k, set()).discard(v)

    @rule(k=KEYS, batched=st.booleans())
    def delete_all(self, k: bytes, batched: bool) -> None:
        if batched:
            with self.db.batch() as b:
                self.m.delete_all(k, batch=b)
        else:
            self.m.delete_all(k)
        self.model.pop(k, None)

    @rule()
    def reopen(self) -> None:
        if self.snap is not None:
            self.snap[0].release()
            self.snap = None
        self.db.close()
        self.db = strata.open(self.path, memtable_budget=64 << 10)
        self.m = self.db.multimap("m", create=False)

    @rule()
    def take_snapshot(self) -> None:
        if self.snap is not None:
            self.snap[0].release()
        self.snap = (self.db.snapshot(), {k: set(v) for k, v in self.model.items()})

    @rule(k=KEYS, start=st.none() | VALS, reverse=st.booleans())
    def get_matches(self, k: bytes, start: bytes | None, reverse: bool) -> None:
        want = sorted(self.model.get(k, set()), reverse=reverse)
        if start is not None:
            want = [v for v in want if (v <= start if reverse else v >= start)]
        assert list(self.m.get(k, start=start, reverse=reverse)) == want

    @invariant()
    def agrees(self) -> None:
        for k in [b"a", b"b", b"cc"]:
            assert list(self.m.get(k)) == sorted(self.model.get(k, set()))
        if self.snap is not None:
            snap, old = self.snap
            for k in [b"a", b"cc"]:
                assert list(self.m.get(k, snapshot=snap)) == sorted(old.get(k, set()))


MultiMapMachine.TestCase.settings = SETTINGS
test_multimap_model = MultiMapMachine.TestCase
