"""Building a partitioned Strata table with Apache Spark, then ingesting it.

``build_table(df, path, schema, partitions=N, staging_dir=...)`` runs one Spark job:

1. each row becomes ``(encoded primary key, row)`` (``strata.Partitioner.keyed``);
2. ``repartitionAndSortWithinPartitions(N, partitioner.partition_of_key)``: Spark
   partition ``i`` holds exactly the rows of Strata partition ``i`` (the function returns
   ``0..N``, and PySpark takes it modulo N), sorted by encoded key, which sorts as the
   primary key;
3. ``mapPartitionsWithIndex``: each task writes its rows with a ``strata.TableWriter``
   into ``staging_dir/part-<i>-<attempt>`` (a retried or speculative attempt writes a
   directory of its own; the driver uses the one whose result it collected).

Then, on the driver, ``ingest_built`` installs partition ``i``'s files into partition
``i`` of ``strata.open_partitioned(path, partitions)``: one manifest edit per partition,
all or nothing per partition (see docs/design/ingest.md and docs/design/scale-out.md).

``staging_dir`` must be a directory every executor and the driver see at the same path
(a shared file system on a cluster; any local directory in ``local[*]`` mode).

Spark (``pyspark``) is needed only to call ``build_files``/``build_table``; importing
this module does not import it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._strata import Partitioner, TableWriter

# Rows keyed per call into the bindings.
_CHUNK = 8192


@dataclass(frozen=True)
class BuiltPartition:
    """One partition's files, as a Spark task wrote them."""

    partition: int
    directory: str | None
    """``None`` when the partition has no rows (nothing to ingest)."""
    rows: int
    bytes: int
    seconds: float
    """Time the task spent writing files (after Spark's shuffle and sort)."""


@dataclass
class BuildReport:
    """What ``build_table`` did: rows, bytes, and seconds per phase."""

    partitions: list[BuiltPartition]
    rows: int = 0
    bytes: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    """``build`` (the Spark job: shuffle, sort and file writing), ``ingest`` and
    ``total``; ``write_max`` is the slowest task's file writing."""
    ingested: list[dict[str, Any]] = field(default_factory=list)
    """Per partition, ``PartitionedTable.ingest``'s report."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "bytes": self.bytes,
            "seconds": dict(self.seconds),
            "partitions": [p.__dict__ for p in self.partitions],
        }


class _Ingests(Protocol):
    def ingest(self, partition: int, directory: str, move: bool = ...) -> dict[str, Any]: ...


def _attempt() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.attemptNumber() if ctx is not None else 0


def _build_task(
    schema: str, partitions: int, staging_dir: str, sort_memory: int | None
) -> Callable[[int, Iterator[tuple[bytes, tuple[Any, ...]]]], Iterator[BuiltPartition]]:
    """The function each task runs on its sorted ``(key, row)`` pairs."""

    def run(index: int, pairs: Iterator[tuple[bytes, tuple[Any, ...]]]) -> Iterator[BuiltPartition]:
        start = time.perf_counter()
        first = next(pairs, None)
        if first is None:
            yield BuiltPartition(index, None, 0, 0, 0.0)
            return
        directory = os.path.join(staging_dir, f"part-{index:05}-{_attempt()}")
        if os.path.exists(directory):
            shutil.rmtree(directory)  # an earlier run's attempt of the same number
        options: dict[str, Any] = {"partition": (index, partitions)}
        if sort_memory is not None:
            options["sort_memory"] = sort_memory
        with TableWriter(schema, directory, **options) as w:
            w.add_many(row for _, row in itertools.chain([first], pairs))
            desc = w.finish()
        yield BuiltPartition(index, directory, desc["rows"], desc["bytes"], time.perf_counter() - start)

    return run


def _keyed(partitioner: Partitioner) -> Callable[[Iterable[Any]], Iterator[tuple[bytes, tuple[Any, ...]]]]:
    def run(rows: Iterable[Any]) -> Iterator[tuple[bytes, tuple[Any, ...]]]:
        it = iter(rows)
        while chunk := list(itertools.islice(it, _CHUNK)):
            yield from partitioner.keyed(chunk)

    return run


def build_files(
    df: Any,
    schema: str,
    partitions: int,
    staging_dir: str,
    *,
    sort_memory: int | None = None,
) -> list[BuiltPartition]:
    """Runs the Spark job that writes each partition's files under ``staging_dir``;
    returns them by partition. ``df``'s columns must include the schema's fields (by
    name; others are ignored) with values of the fields' types."""
    partitioner = Partitioner(schema, partitions)
    text = partitioner.schema
    os.makedirs(staging_dir, exist_ok=True)
    of_key = partitioner.partition_of_key
    pairs = df.select(*partitioner.fields).rdd.mapPartitions(_keyed(partitioner))
    built = (
        pairs.repartitionAndSortWithinPartitions(partitions, of_key)
        .mapPartitionsWithIndex(_build_task(text, partitions, staging_dir, sort_memory))
        .collect()
    )
    out = sorted(built, key=lambda b: b.partition)
    if [b.partition for b in out] != list(range(partitions)):
        raise RuntimeError(f"Spark returned partitions {[b.partition for b in out]}, expected 0..{partitions}")
    return out


def ingest_built(
    table: _Ingests,
    built: Iterable[BuiltPartition],
    *,
    move: bool = True,
) -> list[dict[str, Any]]:
    """Ingests each built partition into the same partition of ``table`` (a
    ``PartitionedTable``), in partition order; returns the reports. With ``move`` the
    staged files are hard-linked and their directories removed. A partition whose
    ingest fails raises; those before it stay ingested (each is atomic on its own), so
    run it again on the rest after fixing the cause."""
    reports = []
    for b in built:
        if b.directory is None:
            continue
        report = table.ingest(b.partition, b.directory, move=move)
        report["partition"] = b.partition
        reports.append(report)
    return reports


def build_table(
    df: Any,
    path: str | os.PathLike[str],
    schema: str,
    *,
    partitions: int,
    staging_dir: str | os.PathLike[str],
    sort_memory: int | None = None,
    move: bool = True,
    **options: Any,
) -> BuildReport:
    """Builds table ``schema`` from DataFrame ``df`` with Spark and ingests it into the
    partitioned database at ``path`` (created with ``partitions`` partitions if
    missing; ``options`` are ``strata.open_partitioned``'s). The table is created if
    absent; ingest has insert semantics, so rows already in it are an
    ``IntegrityError``. Returns a ``BuildReport``."""
    from . import open_partitioned

    start = time.perf_counter()
    built = build_files(df, schema, partitions, os.fspath(staging_dir), sort_memory=sort_memory)
    mid = time.perf_counter()
    with open_partitioned(path, partitions=partitions, **options) as db:
        name = Partitioner(schema, partitions).table
        table = db.table(name) if name in db.list_tables() else db.create_table(schema)
        ingested = ingest_built(table, built, move=move)
    end = time.perf_counter()
    return BuildReport(
        partitions=built,
        rows=sum(b.rows for b in built),
        bytes=sum(b.bytes for b in built),
        seconds={
            "build": mid - start,
            "write_max": max((b.seconds for b in built), default=0.0),
            "ingest": end - mid,
            "total": end - start,
        },
        ingested=ingested,
    )
