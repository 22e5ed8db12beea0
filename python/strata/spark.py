"""Building a partitioned Strata table with Apache Spark, then ingesting it.

``build_table(df, path, schema, partitions=N, staging_dir=...)`` runs one Spark job in
which rows stay in the JVM or in Arrow batches, never one Python object per row:

1. an Arrow UDF over the primary-key columns gives each row its Strata partition
   (``Partitioner.partition_ids``: the keys encoded and hashed in Rust, one call per
   Arrow batch);
2. ``repartitionById(N, partition)``: Spark partition ``i`` holds exactly the rows of
   Strata partition ``i`` (a JVM shuffle);
3. ``sortWithinPartitions(*primary key)``: a JVM sort, checked beforehand to give
   Strata's key order for the DataFrame's column types (``sort_columns``);
4. ``mapInArrow``: each task streams its sorted Arrow batches into a
   ``strata.TableWriter`` per Strata partition it holds (``add_many`` of a record
   batch), writing ``staging_dir/part-<i>-<task attempt id>``; a retried or speculative
   attempt writes a directory of its own, and the driver uses the one whose result it
   collected.

Then, on the driver, ``ingest_built`` installs partition ``i``'s files into partition
``i`` of ``strata.open_partitioned(path, partitions)``, the partitions in parallel: one
manifest edit per partition, all or nothing per partition (see docs/design/ingest.md and
docs/design/scale-out.md).

``staging_dir`` must be a directory every executor and the driver see at the same path
(a shared file system on a cluster; any local directory in ``local[*]`` mode).

Spark (``pyspark>=4.1`` with pandas and pyarrow: the ``spark`` extra) is needed only to
call ``build_files``/``build_table``; importing this module does not import it.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._errors import InvalidArgument, SchemaError
from ._strata import Partitioner, TableWriter

# The column holding each row's Strata partition while the job runs.
_PART = "_strata_partition"

# What each task returns per Strata partition it wrote (mapInArrow's output schema).
_RESULT = "partition int, directory string, rows long, bytes long, seconds double"


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
    """``build`` (the Spark job: partition ids, shuffle, sort and file writing),
    ``ingest`` and ``total``; ``write_max`` is the slowest task's file writing."""
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
    @property
    def serves(self) -> list[int]: ...
    def ingest(self, partition: int, directory: str, move: bool = ...) -> dict[str, Any]: ...


# Spark types (``DataType.typeName()``) whose values Arrow casts to each field type.
_INTEGRAL = {"byte", "short", "integer", "long"}
_ACCEPTED: dict[str, set[str]] = {
    "u64": _INTEGRAL | {"decimal"},
    "i64": _INTEGRAL | {"decimal"},
    "f64": _INTEGRAL | {"decimal", "float", "double"},
    "str": {"string"},
    "bytes": {"binary", "string"},
    "bool": {"boolean"},
}


def _type_problem(dtype: Any, ty: str, primary: bool) -> str | None:
    """Why a Spark column of type ``dtype`` cannot feed a field of type ``ty`` (in the
    primary key: why Spark's sort of it is not Strata's key order), or ``None``."""
    name = dtype.typeName()
    if name not in _ACCEPTED[ty]:
        return f"Spark type {dtype.simpleString()} does not convert to {ty}"
    if name == "decimal" and ty != "f64" and dtype.scale != 0:
        return f"Spark type {dtype.simpleString()} has a fraction; {ty} takes integers"
    collation = getattr(dtype, "collation", "UTF8_BINARY")
    if primary and name == "string" and collation != "UTF8_BINARY":
        # Strata's key order is the UTF-8 bytes' order, Spark's UTF8_BINARY order.
        return (
            f"Spark sorts strings of collation {collation} in another order than Strata's "
            "key order (UTF-8 bytes); cast the column to plain STRING"
        )
    return None


def sort_columns(df: Any, partitioner: Partitioner) -> list[Any]:
    """The Spark sort expressions that put ``df``'s rows in Strata's primary-key order,
    having checked every schema field against ``df``'s columns:
    a missing field, a column whose type does not convert to its field's, or a
    primary-key column that Spark sorts in another order than Strata's encoded keys is
    a ``SchemaError``.

    Spark's ascending sort equals the key encoding's order for integers and decimals of
    scale 0 (as ``u64``/``i64``: negative values are refused later for ``u64``), for
    strings of the default UTF8_BINARY collation and binary (bytes compared unsigned,
    a prefix first), and for booleans. For floats Spark sorts NaN last, as Strata does,
    but treats -0.0 and 0.0 as equal where Strata puts -0.0 first: a second expression
    breaks that tie."""
    from pyspark.sql import functions as F

    columns = {f.name: f.dataType for f in df.schema.fields}
    pk = set(partitioner.primary_key)
    missing = [name for name, _, _ in partitioner.field_types if name not in columns]
    if missing:
        raise SchemaError(
            f"table {partitioner.table}: the DataFrame has no column {', '.join(missing)} "
            f"(its columns: {', '.join(columns)})"
        )
    for name, ty, _ in partitioner.field_types:
        problem = _type_problem(columns[name], ty, name in pk)
        if problem is not None:
            what = "primary key field" if name in pk else "field"
            raise SchemaError(f"table {partitioner.table}: {what} {name} ({ty}): {problem}")
    out = []
    for name in partitioner.primary_key:
        c = F.col(name)
        out.append(c)
        if columns[name].typeName() in ("float", "double"):
            # False (first) for -0.0, true for 0.0, null (equal) for every other value.
            out.append(F.when(c == 0, ~c.cast("string").startswith("-")))
    return out


def _partition_ids(partitioner: Partitioner) -> Callable[..., Any]:
    """The Arrow UDF body: primary-key columns in, Strata partition per row out."""
    import pyarrow as pa

    names = partitioner.primary_key

    def ids(*columns: Any) -> Any:
        return partitioner.partition_ids(pa.RecordBatch.from_arrays(list(columns), names=names))

    # arrow_udf reads its kind (scalar: arrays in, an array out) from the annotations.
    ids.__annotations__ = {"columns": pa.Array, "return": pa.Array}
    return ids


def _task_attempt() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.taskAttemptId() if ctx is not None else 0


def _write_task(
    schema: str, partitions: int, staging_dir: str, sort_memory: int | None
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function each task runs on its sorted Arrow batches: one ``TableWriter`` per
    Strata partition, fed whole record batches. ``repartitionById`` gives a task the
    rows of one partition; a task given several needs each one's rows contiguous."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        attempt = _task_attempt()
        results: list[dict[str, Any]] = []
        writer: TableWriter | None = None
        current = -1
        start = 0.0
        seen: set[int] = set()

        def finish(w: TableWriter) -> None:
            desc = w.finish()
            results.append(
                {
                    "partition": current,
                    "directory": w.directory,
                    "rows": desc["rows"],
                    "bytes": desc["bytes"],
                    "seconds": time.perf_counter() - start,
                }
            )

        try:
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                runs = pc.run_end_encode(batch.column(_PART))
                rows = batch.drop_columns([_PART])
                at = 0
                for end, part in zip(runs.run_ends.to_pylist(), runs.values.to_pylist()):
                    if part != current:
                        if writer is not None:
                            finish(writer)
                            writer = None
                        if part in seen:
                            raise RuntimeError(f"a Spark task got the rows of Strata partition {part} in two runs")
                        seen.add(part)
                        current, start = part, time.perf_counter()
                        directory = os.path.join(staging_dir, f"part-{part:05}-{attempt}")
                        if os.path.exists(directory):
                            shutil.rmtree(directory)  # an earlier run's task of the same id
                        options: dict[str, Any] = {"partition": (part, partitions)}
                        if sort_memory is not None:
                            options["sort_memory"] = sort_memory
                        writer = TableWriter(schema, directory, **options)
                    assert writer is not None
                    writer.add_many(rows.slice(at, end - at))
                    at = end
            if writer is not None:
                finish(writer)
                writer = None
        finally:
            if writer is not None:
                writer.discard()
                # A failed finish has emptied the directory already; a failure while
                # adding rows leaves the files written so far.
                shutil.rmtree(writer.directory, ignore_errors=True)
        yield pa.RecordBatch.from_pylist(
            results,
            schema=pa.schema(
                [
                    ("partition", pa.int32()),
                    ("directory", pa.string()),
                    ("rows", pa.int64()),
                    ("bytes", pa.int64()),
                    ("seconds", pa.float64()),
                ]
            ),
        )

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
    returns them by partition (``directory`` ``None`` for a partition without rows).
    ``df``'s columns must include the schema's fields (by name; others are ignored) with
    types that convert to the fields' (see ``sort_columns``; a mismatch is a
    ``SchemaError`` before any job runs). A value that does not fit its field (a null in
    a non-nullable field, a negative ``u64``) or a duplicate primary key fails the job
    with the writer's error."""
    from pyspark.sql.pandas.functions import arrow_udf

    partitioner = Partitioner(schema, partitions)
    order = sort_columns(df, partitioner)
    os.makedirs(staging_dir, exist_ok=True)
    # Typed loosely: pyspark's overloads want the annotations arrow_udf reads at run time.
    make_udf: Any = arrow_udf
    ids = make_udf(_partition_ids(partitioner), "int")
    rows = df.select(*partitioner.fields)
    keyed = rows.withColumn(_PART, ids(*partitioner.primary_key))
    written = (
        keyed.repartitionById(partitions, _PART)
        # The primary key first: Spark's sorter compares a prefix of the first key (a
        # constant partition id would leave every comparison to the full rows).
        .sortWithinPartitions(*order)
        .mapInArrow(_write_task(partitioner.schema, partitions, staging_dir, sort_memory), _RESULT)
        .collect()
    )
    by_part: dict[int, BuiltPartition] = {}
    for r in written:
        b = BuiltPartition(r["partition"], r["directory"], r["rows"], r["bytes"], r["seconds"])
        if b.partition in by_part or not 0 <= b.partition < partitions:
            raise RuntimeError(f"Spark tasks returned partition {b.partition} twice or out of 0..{partitions}")
        by_part[b.partition] = b
    return [by_part.get(i, BuiltPartition(i, None, 0, 0, 0.0)) for i in range(partitions)]


def ingest_built(
    table: _Ingests,
    built: Iterable[BuiltPartition],
    *,
    move: bool = True,
    threads: int | None = None,
) -> list[dict[str, Any]]:
    """Ingests each built partition into the same partition of ``table`` (a
    ``PartitionedTable``), ``threads`` partitions at a time (default: one per core);
    returns the reports in partition order. With ``move`` the staged files are
    hard-linked and their directories removed.

    Each partition's ingest is atomic on its own; together they are not. When one
    fails, the others still run to their end, then the first failure (in partition
    order) is raised, with a note naming the partitions that were ingested and those
    that were not: the ingested ones stay (run ``ingest_built`` again on the rest after
    fixing the cause). A partition ``table`` does not serve (a serving node's table,
    ``open_partitioned(..., serve=...)``) is refused before anything is ingested."""
    todo = [b for b in built if b.directory is not None]
    served = set(table.serves)
    if elsewhere := sorted({b.partition for b in todo} - served):
        raise InvalidArgument(
            f"partitions {elsewhere} are not served by this table (it serves {sorted(served)}): "
            "ingest them on the nodes serving them"
        )
    workers = max(1, min(len(todo), threads if threads is not None else os.cpu_count() or 1))

    def one(b: BuiltPartition) -> dict[str, Any]:
        assert b.directory is not None
        report = table.ingest(b.partition, b.directory, move=move)
        report["partition"] = b.partition
        return report

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(one, b) for b in todo]
        outcomes = [(b, f.exception()) for b, f in zip(todo, futures)]
    failed = [(b, e) for b, e in outcomes if e is not None]
    if failed:
        err = failed[0][1]
        assert err is not None
        done = [b.partition for b, e in outcomes if e is None]
        note = (
            f"strata.spark.ingest_built: partitions {done} ingested; "
            f"{[b.partition for b, _ in failed]} not ingested"
        )
        if hasattr(err, "add_note"):
            err.add_note(note)
        else:
            # Python 3.10: the same attribute, which its tracebacks do not print.
            setattr(err, "__notes__", [*getattr(err, "__notes__", []), note])
        raise err
    return [f.result() for f in futures]


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
