"""A hypothesis state machine: key-value and table operations, flushes, compactions,
snapshots and reopens against plain dicts. STRATA_PY_EXAMPLES sets how many runs
(default 25)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

import strata
from machines import SETTINGS, DatabaseMachine

KEYS = st.binary(min_size=1, max_size=2).map(lambda b: bytes(x % 4 + 97 for x in b))
VALUES = st.binary(max_size=8)
IDS = st.integers(min_value=0, max_value=15)
VS = st.integers(min_value=-2, max_value=2)
NAMES = st.sampled_from(["", "a", "bb", "ü"])
SCHEMA = "table t (id u64, v i64, name str null) primary key (id) index by_v (v) {mode}"

Model = dict[str, dict[Any, Any]]


class Machine(DatabaseMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ks = self.db.keyspace("ks")
        self.mode = "deferred"
        self.table = self.db.create_table(SCHEMA.format(mode=self.mode))
        self.model: Model = {"default": {}, "ks": {}, "rows": {}}
        self.snaps: list[tuple[strata.Snapshot, Model]] = []

    def space(self, which: str) -> Any:
        return self.db if which == "default" else self.ks

    @rule(which=st.sampled_from(["default", "ks"]), k=KEYS, v=VALUES)
    def put(self, which: str, k: bytes, v: bytes) -> None:
        self.space(which)[k] = v
        self.model[which][k] = v

    @rule(which=st.sampled_from(["default", "ks"]), k=KEYS)
    def delete(self, which: str, k: bytes) -> None:
        self.space(which).delete(k)
        self.model[which].pop(k, None)

    @rule(which=st.sampled_from(["default", "ks"]), a=KEYS, b=KEYS)
    def delete_range(self, which: str, a: bytes, b: bytes) -> None:
        lo, hi = min(a, b), max(a, b)
        if lo == hi:
            return
        self.space(which).delete_range(lo, hi)
        for k in [k for k in self.model[which] if lo <= k < hi]:
            del self.model[which][k]

    @rule(ops=st.lists(st.tuples(st.booleans(), st.sampled_from(["default", "ks"]), KEYS, VALUES), max_size=6),
          fail=st.booleans())
    def batch(self, ops: list[tuple[bool, str, bytes, bytes]], fail: bool) -> None:
        try:
            with self.db.batch() as b:
                for is_put, which, k, v in ops:
                    ks = None if which == "default" else self.ks
                    if is_put:
                        b.put(k, v, keyspace=ks)
                    else:
                        b.delete(k, keyspace=ks)
                if fail:
                    raise KeyError("abort")
        except KeyError:
            return
        for is_put, which, k, v in ops:
            if is_put:
                self.model[which][k] = v
            else:
                self.model[which].pop(k, None)

    @rule(i=IDS, v=VS, name=NAMES | st.none(), insert=st.booleans())
    def write_row(self, i: int, v: int, name: str | None, insert: bool) -> None:
        row = {"id": i, "v": v, "name": name}
        if insert:
            try:
                self.table.insert(row)
            except strata.IntegrityError:
                assert i in self.model["rows"]
                return
            assert i not in self.model["rows"]
        else:
            self.table.replace(row)
        self.model["rows"][i] = row

    @rule(i=IDS)
    def delete_row(self, i: int) -> None:
        self.table.delete(i)
        self.model["rows"].pop(i, None)

    @rule(i=IDS, v=VS)
    def update_row(self, i: int, v: int) -> None:
        found = self.table.update(i, {"v": v})
        assert found == (i in self.model["rows"])
        if found:
            self.model["rows"][i] = {**self.model["rows"][i], "v": v}

    @rule(rows=st.lists(st.tuples(IDS, VS), max_size=5))
    def txn(self, rows: list[tuple[int, int]]) -> None:
        with self.table.transaction() as t:
            for i, v in rows:
                t.replace((i, v, None))
        for i, v in rows:
            self.model["rows"][i] = {"id": i, "v": v, "name": None}

    @precondition(lambda self: len(self.snaps) < 3)
    @rule()
    def take_snapshot(self) -> None:
        copy = {k: dict(v) for k, v in self.model.items()}
        self.snaps.append((self.db.snapshot(), copy))

    @precondition(lambda self: bool(self.snaps))
    @rule()
    def release_snapshot(self) -> None:
        snap, _ = self.snaps.pop(0)
        snap.release()

    @rule()
    def reopen(self) -> None:
        self.db.close()
        for snap, _ in self.snaps:
            try:
                snap.get(b"a")
            except strata.ClosedError:
                pass
            else:
                raise AssertionError("a snapshot outlived its database")
        self.snaps = []
        self.db = strata.open(self.path, memtable_budget=64 << 10)
        self.ks = self.db.keyspace("ks", create=False)
        self.table = self.db.table("t")

    @rule(k=KEYS)
    def point_reads(self, k: bytes) -> None:
        assert self.db.get(k) == self.model["default"].get(k)
        assert (k in self.ks) == (k in self.model["ks"])

    @rule(v=VS, reverse=st.booleans())
    def select_by_v(self, v: int, reverse: bool) -> None:
        got = [r["id"] for r in self.table.select("by_v", eq=v, reverse=reverse)]
        want = sorted((i for i, r in self.model["rows"].items() if r["v"] == v), reverse=reverse)
        assert got == want

    @invariant()
    def contents_match(self) -> None:
        assert list(self.db.scan()) == sorted(self.model["default"].items())
        assert list(self.ks.scan(reverse=True)) == sorted(self.model["ks"].items(), reverse=True)
        assert self.table.select().all() == [self.model["rows"][i] for i in sorted(self.model["rows"])]
        for snap, m in self.snaps:
            assert list(snap.scan()) == sorted(m["default"].items())
            assert self.table.select("by_v", snapshot=snap).all() == sorted(
                m["rows"].values(), key=lambda r: (r["v"], r["id"])
            )


Machine.TestCase.settings = SETTINGS
TestModel = Machine.TestCase
