#!/usr/bin/env python3
"""Strata from Python beside sqlite3 (standard library) and rocksdict (RocksDB's Python
binding), every engine in the same run on fresh directories, ``--rounds`` times
interleaved; the figures are medians. Results: docs/benchmarks/python.md.

* ``micro``: the deferred-update paper's microbenchmark (docs/benchmarks/micro.md,
  ``strata-bench micro``): table ``test(f1 pk, f2..f5)`` with four non-unique secondary
  indexes, ``--rows`` preloaded, then client threads commit batches of uniform size
  1..=500, each statement a REPLACE of a random row or a DELETE of a random key (1/2
  each), for ``--seconds``. Strata deferred and eager (the paper's engine settings),
  and sqlite3 (WAL, synchronous=OFF, 8 KiB pages, a 64 MiB page cache like Strata's
  block cache, the same schema and indexes, the same batches as transactions). The
  batches are generated before the clock starts, so the figures are the engines' and
  their Python bindings', not the generator's: 400 per client thread, replayed in
  turn for as long as the run lasts. Each engine's preload is settled before the clock
  starts (Strata's compacted, sqlite3's checkpointed). Every round runs the engines in
  turn, reversed on odd rounds.
* ``kv``: ``--keys`` keys of 16 bytes (the key number big-endian, then zeros) with
  100-byte values: fillrandom (one ``put`` call per key, random order), readrandom (one
  ``get`` per key, random order, after a flush of the memtable), scan (iterate
  everything), fillbatch (a fresh database, batches of ``--batch`` puts). Strata (its
  defaults), Strata again (``strata-aa``, an A/A control), rocksdict (raw mode, with
  Strata's defaults where RocksDB's differ: ``rocksdict_options``) and sqlite3 (a
  ``WITHOUT ROWID`` table, autocommit).
* ``layer``: the Python layer's cost per get: Python readrandom's microseconds per call
  against ``strata-bench kv --benchmarks fillseq,readrandom`` with the same keys,
  values and engine settings, when the ``strata-bench`` binary is found.

Writes a table to stdout and everything as JSON (``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

import strata

Stmt = tuple[int, tuple[int, ...]]  # (0, row) = replace, (1, (key,)) = delete
REPLACE, DELETE = 0, 1

# The paper's engine settings (crates/strata-bench/src/engines/strata.rs).
PAPER = dict(
    memtable_budget=128 << 20,
    size_ratio=3.5,
    runs_per_level=2,
    bloom_fpr=0.05,
    block_size=8 << 10,
    background_threads=2,
    sync="none",
)
# The key-value runs open Strata with its defaults (as a user gets it) except the WAL
# policy, written but not fsynced like rocksdict's and sqlite3's settings here; the
# layer comparison runs `strata-bench kv` with the same settings (RUST_KV_FLAGS).
KV_STRATA: dict[str, Any] = dict(sync="none")
# sqlite3's page cache: the size of Strata's default block cache (64 MiB), as in
# `strata-bench micro`.
SQLITE_CACHE_KIB = 64 << 10
RUST_KV_FLAGS = ["--cache_size", str(64 << 20), "--block_size", str(8 << 10), "--bloom_bits", "10",
                 "--write_buffer_size", str(64 << 20)]


# ---------------------------------------------------------------- micro workload


def preload_rows(rows: int, seed: int) -> list[tuple[int, ...]]:
    rng = random.Random(seed)
    return [(k, *(rng.randint(1, rows) for _ in range(4))) for k in range(1, rows + 1)]


def client_batches(rows: int, max_batch: int, seed: int, client: int, count: int) -> list[list[Stmt]]:
    rng = random.Random(seed * 1_000_003 + client)
    out = []
    for _ in range(count):
        batch: list[Stmt] = []
        for _ in range(rng.randint(1, max_batch)):
            key = rng.randint(1, rows)
            if rng.random() < 0.5:
                batch.append((REPLACE, (key, *(rng.randint(1, rows) for _ in range(4)))))
            else:
                batch.append((DELETE, (key,)))
        out.append(batch)
    return out


class StrataMicro:
    def __init__(self, path: str, mode: str) -> None:
        self.db = strata.open(path, **PAPER)
        self.t = self.db.create_table(
            "table test (f1 u64, f2 u64, f3 u64, f4 u64, f5 u64) primary key (f1) "
            f"index i2 (f2) index i3 (f3) index i4 (f4) index i5 (f5) {mode}"
        )

    def preload(self, rows: list[tuple[int, ...]]) -> None:
        for i in range(0, len(rows), 50_000):
            self.t.replace_many(rows[i : i + 50_000])
        # Settled on disk before the clock starts, as sqlite3's preload is checkpointed.
        self.db.compact()

    def client(self) -> Callable[[list[Stmt]], None]:
        t = self.t

        def run(batch: list[Stmt]) -> None:
            with t.transaction() as txn:
                for op, arg in batch:
                    if op == REPLACE:
                        txn.replace(arg)
                    else:
                        txn.delete(arg[0])

        return run

    def close(self) -> None:
        self.db.close()


class SqliteMicro:
    def __init__(self, path: str) -> None:
        self.path = path
        c = self.connect()
        c.execute("PRAGMA page_size=8192")
        c.execute("PRAGMA journal_mode=WAL")
        c.execute(
            "CREATE TABLE test (f1 INTEGER PRIMARY KEY, f2 INTEGER, f3 INTEGER, f4 INTEGER, f5 INTEGER)"
        )
        for f in ("f2", "f3", "f4", "f5"):
            c.execute(f"CREATE INDEX i_{f} ON test ({f})")
        c.close()

    def connect(self) -> sqlite3.Connection:
        c = sqlite3.connect(self.path, timeout=600, isolation_level=None, check_same_thread=False)
        c.execute("PRAGMA synchronous=OFF")
        c.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        return c

    def preload(self, rows: list[tuple[int, ...]]) -> None:
        c = self.connect()
        c.execute("BEGIN")
        c.executemany("INSERT OR REPLACE INTO test VALUES (?, ?, ?, ?, ?)", rows)
        c.execute("COMMIT")
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        c.close()

    def client(self) -> Callable[[list[Stmt]], None]:
        c = self.connect()
        replace = "INSERT OR REPLACE INTO test VALUES (?, ?, ?, ?, ?)"
        delete = "DELETE FROM test WHERE f1 = ?"

        def run(batch: list[Stmt]) -> None:
            c.execute("BEGIN IMMEDIATE")
            for op, arg in batch:
                c.execute(replace if op == REPLACE else delete, arg)
            c.execute("COMMIT")

        return run

    def close(self) -> None:
        pass


def run_micro(engine: Any, rows: list[tuple[int, ...]], batches: list[list[list[Stmt]]], seconds: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    engine.preload(rows)
    preload_s = time.perf_counter() - t0
    counts = [0] * len(batches)
    deadline = time.perf_counter() + seconds
    errors: list[BaseException] = []

    def client(i: int) -> None:
        run = engine.client()
        mine = batches[i]
        j = 0
        try:
            while time.perf_counter() < deadline:
                b = mine[j % len(mine)]
                run(b)
                counts[i] += len(b)
                j += 1
        except BaseException as e:  # reported after the run
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(batches))]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - start
    engine.close()
    if errors:
        raise errors[0]
    total = sum(counts)
    return {
        "preload_seconds": round(preload_s, 3),
        "statements": total,
        "seconds": round(elapsed, 3),
        "statements_per_sec": round(total / elapsed, 1),
    }


def in_round_order(engines: list[tuple[str, Any]], rnd: int) -> list[tuple[str, Any]]:
    """The engines in order on even rounds and reversed on odd ones: no engine always
    runs first (the second of a round has run a few percent slower on this machine)."""
    return engines if rnd % 2 == 0 else engines[::-1]


# ---------------------------------------------------------------- kv workload


def make_keys(n: int) -> list[bytes]:
    return [i.to_bytes(8, "big") + bytes(8) for i in range(n)]


def make_values(n: int, size: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    blob = rng.randbytes(size * 64)
    return [blob[(i % 64) * size : (i % 64 + 1) * size] for i in range(n)]


class DictLikeKV:
    """What the Strata and rocksdict sides share: a ``db`` whose ``put``, ``get`` and
    ``close`` are one call each."""

    db: Any

    def fill(self, keys: list[bytes], values: list[bytes]) -> None:
        put = self.db.put
        for k, v in zip(keys, values):
            put(k, v)

    def read(self, keys: list[bytes]) -> int:
        get = self.db.get
        found = 0
        for k in keys:
            if get(k) is not None:
                found += 1
        return found

    def close(self) -> None:
        self.db.close()


class StrataKV(DictLikeKV):
    name = "strata"

    def __init__(self, path: str) -> None:
        self.db = strata.open(path, **KV_STRATA)

    def fill_batch(self, keys: list[bytes], values: list[bytes], n: int) -> None:
        db = self.db
        for i in range(0, len(keys), n):
            with db.batch() as b:
                put = b.put
                for k, v in zip(keys[i : i + n], values[i : i + n]):
                    put(k, v)

    def settle(self) -> None:
        self.db.flush()

    def scan(self) -> int:
        n = 0
        for _ in self.db.scan():
            n += 1
        return n


def rocksdict_options() -> Any:
    """rocksdict (raw mode) with Strata's defaults where RocksDB's differ: 64 MiB
    memtable and LRU block cache, 8 KiB blocks, 10 bloom bits per key, no compression,
    two background jobs."""
    import rocksdict

    o = rocksdict.Options(raw_mode=True)
    o.set_write_buffer_size(64 << 20)
    o.set_max_background_jobs(2)
    o.set_compression_type(rocksdict.DBCompressionType.none())
    b = rocksdict.BlockBasedOptions()
    b.set_block_size(8 << 10)
    b.set_bloom_filter(10, False)
    b.set_block_cache(rocksdict.Cache(64 << 20))
    o.set_block_based_table_factory(b)
    return o


class RocksKV(DictLikeKV):
    name = "rocksdict"

    def __init__(self, path: str) -> None:
        import rocksdict

        self.rd = rocksdict
        self.db = rocksdict.Rdict(path, rocksdict_options())

    def fill_batch(self, keys: list[bytes], values: list[bytes], n: int) -> None:
        db = self.db
        for i in range(0, len(keys), n):
            wb = self.rd.WriteBatch(raw_mode=True)
            put = wb.put
            for k, v in zip(keys[i : i + n], values[i : i + n]):
                put(k, v)
            db.write(wb)

    def settle(self) -> None:
        self.db.flush(True)

    def scan(self) -> int:
        n = 0
        for _ in self.db.items():
            n += 1
        return n


class SqliteKV:
    name = "sqlite3"

    def __init__(self, path: str) -> None:
        self.c = sqlite3.connect(path, isolation_level=None)
        self.c.execute("PRAGMA page_size=8192")
        self.c.execute("PRAGMA journal_mode=WAL")
        self.c.execute("PRAGMA synchronous=OFF")
        self.c.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        self.c.execute("CREATE TABLE kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")

    def fill(self, keys: list[bytes], values: list[bytes]) -> None:
        ex = self.c.execute
        q = "INSERT OR REPLACE INTO kv VALUES (?, ?)"
        for k, v in zip(keys, values):
            ex(q, (k, v))

    def fill_batch(self, keys: list[bytes], values: list[bytes], n: int) -> None:
        q = "INSERT OR REPLACE INTO kv VALUES (?, ?)"
        for i in range(0, len(keys), n):
            self.c.execute("BEGIN")
            self.c.executemany(q, zip(keys[i : i + n], values[i : i + n]))
            self.c.execute("COMMIT")

    def settle(self) -> None:
        self.c.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def read(self, keys: list[bytes]) -> int:
        ex = self.c.execute
        q = "SELECT v FROM kv WHERE k = ?"
        found = 0
        for k in keys:
            if ex(q, (k,)).fetchone() is not None:
                found += 1
        return found

    def scan(self) -> int:
        n = 0
        for _ in self.c.execute("SELECT k, v FROM kv ORDER BY k"):
            n += 1
        return n

    def close(self) -> None:
        self.c.close()


def timed(f: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    r = f()
    return time.perf_counter() - t0, r


def run_kv(cls: Any, root: str, n: int, batch: int, seed: int) -> dict[str, Any]:
    os.makedirs(root, exist_ok=True)
    keys = make_keys(n)
    values = make_values(n, 100, seed)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    fill_keys = [keys[i] for i in order]
    random.Random(seed + 1).shuffle(order)
    read_keys = [keys[i] for i in order]
    out: dict[str, Any] = {}

    def phase(name: str, secs: float, ops: int) -> None:
        out[name] = {"ops": ops, "seconds": round(secs, 4), "ops_per_sec": round(ops / secs, 1),
                     "micros_per_op": round(secs / ops * 1e6, 4)}

    d = os.path.join(root, f"{cls.name}-fill")
    e = cls(d)
    secs, _ = timed(lambda: e.fill(fill_keys, values))
    phase("fillrandom", secs, n)
    # Like strata-bench kv: the memtable is flushed before the reads (untimed), so that
    # they read files through the block cache, not the memtable.
    e.settle()
    secs, found = timed(lambda: e.read(read_keys))
    assert found == n, f"{cls.name}: found {found} of {n}"
    phase("readrandom", secs, n)
    secs, seen = timed(e.scan)
    assert seen == n, f"{cls.name}: scanned {seen} of {n}"
    phase("scan", secs, n)
    e.close()
    shutil.rmtree(d, ignore_errors=True)
    d = os.path.join(root, f"{cls.name}-batch")
    e = cls(d)
    secs, _ = timed(lambda: e.fill_batch(fill_keys, values, batch))
    phase(f"fillbatch{batch}", secs, n)
    e.close()
    shutil.rmtree(d, ignore_errors=True)
    return out


# ---------------------------------------------------------------- the Rust API, same keys


def find_strata_bench() -> str | None:
    here = os.path.dirname(os.path.abspath(__file__))
    cand = os.path.join(here, "..", "target", "release", "strata-bench")
    return cand if os.path.exists(cand) else shutil.which("strata-bench")


def rust_readrandom(binary: str, n: int, root: str) -> dict[str, Any] | None:
    out = os.path.join(root, "rust.json")
    cmd = [binary, "kv", "--benchmarks", "fillseq,readrandom", "--num", str(n), "--key_size", "16",
           "--value_size", "100", *RUST_KV_FLAGS, "--no_dd", "--db", os.path.join(root, "rust-db"), "--json", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    found: list[dict[str, Any]] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if x.get("workload") in ("fillseq", "readrandom") and "micros_per_op" in x:
                found.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(data)
    res = {r["workload"]: {"micros_per_op": r["micros_per_op"], "ops_per_sec": r["ops_per_sec"]} for r in found}
    return {"command": " ".join(cmd[:-4]), **res} if "readrandom" in res else None


# ---------------------------------------------------------------- report


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000, help="micro: rows preloaded [100000]")
    ap.add_argument("--seconds", type=float, default=20.0, help="micro: timed run per engine [20]")
    ap.add_argument("--threads", type=int, default=1, help="micro: client threads [1]")
    ap.add_argument("--max-batch", type=int, default=500, help="micro: largest batch [500]")
    ap.add_argument("--keys", type=int, default=200_000, help="kv: keys [200000]")
    ap.add_argument("--batch", type=int, default=100, help="kv: puts per batch [100]")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--rounds", type=int, default=3, help="rounds; figures are medians [3]")
    ap.add_argument("--only", choices=["micro", "kv"], help="run one part")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--dir", help="parent of the database directories [a temporary directory]")
    a = ap.parse_args()

    root = tempfile.mkdtemp(prefix="strata-pybench-", dir=a.dir)
    result: dict[str, Any] = {
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
    try:
        import rocksdict  # noqa: F401

        have_rocks = True
    except ImportError:
        have_rocks = False
        print("rocksdict is not installed: its rows are skipped (pip install rocksdict)", file=sys.stderr)

    try:
        if a.only in (None, "micro"):
            print(f"micro: {a.rows} rows, {a.threads} client thread(s), batches 1..={a.max_batch}, "
                  f"{a.seconds:g} s per engine, {a.rounds} round(s)", flush=True)
            rows = preload_rows(a.rows, a.seed)
            batches = [client_batches(a.rows, a.max_batch, a.seed, i, 400) for i in range(a.threads)]
            runs: dict[str, list[dict[str, Any]]] = {}
            micro_engines: list[tuple[str, Any]] = [
                ("strata-deferred", lambda p: StrataMicro(p, "deferred")),
                ("strata-eager", lambda p: StrataMicro(p, "eager")),
                ("sqlite3", lambda p: SqliteMicro(p)),
            ]
            for rnd in range(a.rounds):
                for name, make in in_round_order(micro_engines, rnd):
                    path = os.path.join(root, f"micro-{name}-{rnd}")
                    r = run_micro(make(path), rows, batches, a.seconds)
                    runs.setdefault(name, []).append(r)
                    shutil.rmtree(path, ignore_errors=True)
                    print(f"  round {rnd + 1} {name:16} {r['statements_per_sec']:>12,.0f} st/s "
                          f"(preload {r['preload_seconds']:.1f} s)", flush=True)
            micro: dict[str, Any] = {name: {"statements_per_sec": median([r["statements_per_sec"] for r in rs]),
                            "statements": sum(r["statements"] for r in rs), "runs": rs}
                     for name, rs in runs.items()}
            result["micro"] = {"rows": a.rows, "threads": a.threads, "max_batch": a.max_batch,
                               "seconds": a.seconds, "rounds": a.rounds, "engines": micro}
        if a.only in (None, "kv"):
            print(f"kv: {a.keys} keys of 16 bytes, values of 100 bytes, batches of {a.batch}, "
                  f"{a.rounds} round(s)", flush=True)
            # "strata-aa" is Strata again: an A/A control of the run's noise.
            engines: list[tuple[str, Any]] = [("strata", StrataKV), ("strata-aa", StrataKV)]
            if have_rocks:
                engines.append(("rocksdict", RocksKV))
            engines.append(("sqlite3", SqliteKV))
            kv_runs: dict[str, list[dict[str, Any]]] = {}
            for rnd in range(a.rounds):
                for name, cls in in_round_order(engines, rnd):
                    r = run_kv(cls, os.path.join(root, f"{name}-{rnd}"), a.keys, a.batch, a.seed)
                    kv_runs.setdefault(name, []).append(r)
                    print(f"  round {rnd + 1} {name:10} " + "  ".join(
                        f"{ph} {x['ops_per_sec']:,.0f}/s" for ph, x in r.items()), flush=True)
            kv: dict[str, Any] = {name: {ph: {"ops_per_sec": median([r[ph]["ops_per_sec"] for r in rs]),
                              "micros_per_op": median([r[ph]["micros_per_op"] for r in rs])}
                         for ph in rs[0]} | {"runs": rs}
                  for name, rs in kv_runs.items()}
            result["kv"] = {"keys": a.keys, "batch": a.batch, "rounds": a.rounds, "engines": kv}
            binary = find_strata_bench()
            if binary:
                rust_runs = [rust_readrandom(binary, a.keys, root) for _ in range(a.rounds)]
                rust_ok = [r for r in rust_runs if r]
                if rust_ok:
                    rust_us = median([r["readrandom"]["micros_per_op"] for r in rust_ok])
                    py = kv["strata"]["readrandom"]["micros_per_op"]
                    result["layer"] = {"rust_command": rust_ok[0]["command"], "rust_runs": rust_ok,
                                       "rust_micros_per_get": rust_us, "python_micros_per_get": py,
                                       "python_over_rust": round(py / rust_us, 3)}
            else:
                print("strata-bench not found (cargo build --release -p strata-bench): no layer row",
                      file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print_report(result)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {a.json}")
    return 0


def print_report(r: dict[str, Any]) -> None:
    if "micro" in r:
        m = r["micro"]["engines"]
        print("\nmicro (statements/s)")
        print("| engine | statements/s (median) | statements (all rounds) | strata-deferred / engine |")
        print("|---|---:|---:|---:|")
        d = m["strata-deferred"]["statements_per_sec"]
        for name, x in m.items():
            print(f"| {name} | {x['statements_per_sec']:,.0f} | {x['statements']:,} | {ratio(d, x['statements_per_sec'])} |")
    if "kv" in r:
        k = r["kv"]["engines"]
        phases = [ph for ph in k["strata"] if ph != "runs"]
        print("\nkv (operations/s, medians; ratio = strata / peer; strata-aa is Strata again)")
        peers = [e for e in k if e != "strata"]
        print("| workload | strata | " + " | ".join(f"{p} | strata/{p}" for p in peers) + " |")
        print("|---|---:|" + "---:|---:|" * len(peers))
        for ph in phases:
            s = k["strata"][ph]["ops_per_sec"]
            cells = " | ".join(f"{k[p][ph]['ops_per_sec']:,.0f} | {ratio(s, k[p][ph]['ops_per_sec'])}" for p in peers)
            print(f"| {ph} | {s:,.0f} | {cells} |")
    if "layer" in r:
        layer = r["layer"]
        print(f"\nget from Python: {layer['python_micros_per_get']:.3f} us/call; the Rust API "
              f"(strata-bench kv readrandom, same keys and settings): {layer['rust_micros_per_get']:.3f} us/op; "
              f"Python / Rust {layer['python_over_rust']:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
