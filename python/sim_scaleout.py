"""Scale-out on one machine: a table split into N hash partitions, each served by its own
process (a stand-in for a node), as docs/design/scale-out.md describes.

For each N in --parts: N processes start; process i owns partition i (its own database
directory) and loads, row by row through the table API in transactions of --batch
rows, exactly the rows whose primary key hashes to i (``strata.Partitioner``, the
routing a partitioned table uses). Then every process answers the same --queries
equality selects through a secondary index on its partition: a scatter-gather select
is one query per partition, done when the slowest partition answers. Reported: load
rows/s (rows / slowest partition's load time) and select queries/s (queries / slowest
partition's select time), and the ratio to N=1.

    python sim_scaleout.py --rows 400000 --parts 1,2,4 --json scaleout.json

The table is the micro shape (u64 primary key, four u64 secondary indexes), deferred.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import tempfile
import time
from typing import Any

import strata

SCHEMA = (
    "table micro (f1 u64, f2 u64, f3 u64, f4 u64, f5 u64) primary key (f1) "
    "index i2 (f2) index i3 (f3) index i4 (f4) index i5 (f5) deferred"
)
MASK = (1 << 64) - 1


def field(i: int, j: int, rows: int) -> int:
    """splitmix64 of (row, field), as strata-bench ingest draws its rows."""
    z = (i * 8 + j + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return (z ^ (z >> 31)) % rows + 1


def row(i: int, rows: int) -> tuple[int, int, int, int, int]:
    return (i + 1, field(i, 2, rows), field(i, 3, rows), field(i, 4, rows), field(i, 5, rows))


def node(args: tuple[str, int, int, int, int, int, Any]) -> dict[str, float]:
    """One partition's process: load its rows, then answer the queries."""
    directory, part, parts, rows, batch, queries, barrier = args
    p = strata.Partitioner(SCHEMA, parts)
    mine = [row(i, rows) for i in range(rows) if p.partition_of(i + 1) == part]
    with strata.open(directory, memtable_budget=64 << 20) as db:
        t = db.create_table(SCHEMA)
        barrier.wait()
        start = time.perf_counter()
        for k in range(0, len(mine), batch):
            t.replace_many(mine[k : k + batch])
        db.flush()
        load = time.perf_counter() - start
        barrier.wait()
        start = time.perf_counter()
        found = 0
        for q in range(queries):
            found += len(t.select("i2", eq=field(q, 7, rows)).all())
        select = time.perf_counter() - start
    return {"rows": len(mine), "load": load, "select": select, "found": found}


def run(rows: int, parts: int, batch: int, queries: int, root: str) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(parts)
        jobs = [(os.path.join(root, f"n{parts}-p{i:03}"), i, parts, rows, batch, queries, barrier) for i in range(parts)]
        with ctx.Pool(parts) as pool:
            res = pool.map(node, jobs)
    assert sum(r["rows"] for r in res) == rows
    load = max(r["load"] for r in res)
    select = max(r["select"] for r in res)
    return {
        "partitions": parts,
        "rows": rows,
        "load_seconds": load,
        "load_rows_per_sec": rows / load,
        "queries": queries,
        "select_seconds": select,
        "select_queries_per_sec": queries / select,
        "rows_found": sum(int(r["found"]) for r in res),
        "per_partition": res,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--parts", default="1,2,4")
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    root = a.dir or tempfile.mkdtemp(prefix="strata-scaleout-")
    results = []
    try:
        for n in [int(x) for x in a.parts.split(",")]:
            r = run(a.rows, n, a.batch, a.queries, root)
            results.append(r)
            print(f"N={n}: load {r['load_rows_per_sec']:,.0f} rows/s, select {r['select_queries_per_sec']:,.0f} q/s", flush=True)
    finally:
        if a.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    base = results[0]
    print(f"\ncores: {os.cpu_count()}, load average at the end: {os.getloadavg()[0]:.1f}")
    print("| N | load rows/s | vs N=1 | select q/s | vs N=1 | rows found |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['partitions']} | {r['load_rows_per_sec']:,.0f} | {r['load_rows_per_sec'] / base['load_rows_per_sec']:.2f} "
            f"| {r['select_queries_per_sec']:,.0f} | {r['select_queries_per_sec'] / base['select_queries_per_sec']:.2f} "
            f"| {r['rows_found']:,} |"
        )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cores": os.cpu_count(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
