"""strata.spark: tables built by Spark in local mode (the Arrow path: partition ids in
Rust, JVM shuffle and sort, TableWriter per task), ingested, checked against row-by-row
loads; every primary-key type Spark sorts; bad input refused. Skipped only when pyspark
or Java is absent (`.ci/run` installs both)."""

from __future__ import annotations

import math
import os
import shutil
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import strata
from strata import spark as sspark

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install ./python[spark])")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime (apt-get install openjdk-17-jre-headless)", allow_module_level=True)

SCHEMA = (
    "table events (id u64, user str, kind str, amount i64, note str null) primary key (id) "
    "index by_user (user) index by_kind (kind, amount) index by_amount (amount) "
    "index by_note (note)"
)
PARTS = 4
N = 3000


def rows(n: int = N) -> list[tuple[Any, ...]]:
    # Ids scattered (not in order), so Spark really has to sort.
    return [
        (
            (i * 7919) % 1_000_003,
            f"user{i % 97}",
            ["click", "view", "buy"][i % 3],
            (i * 31) % 1000 - 500,
            None if i % 4 else f"note{i}",
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("strata-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def frame(spark: Any, data: list[tuple[Any, ...]]) -> Any:
    ddl = "id long, user string, kind string, amount long, note string"
    # Spark has no unsigned type: ids here fit a signed long, and the bindings take
    # Python ints either way.
    return spark.createDataFrame(data, ddl).repartition(3)


def test_build_files_partition_like_the_partitioner(spark: Any, tmp_path: Path) -> None:
    data = rows()
    built = sspark.build_files(frame(spark, data), SCHEMA, PARTS, str(tmp_path / "staging"))
    assert [b.partition for b in built] == list(range(PARTS))
    assert sum(b.rows for b in built) == N
    p = strata.Partitioner(SCHEMA, PARTS)
    for b in built:
        assert b.directory is not None and b.rows > 0
        # Each task's files are tagged with their Strata partition.
        assert os.path.basename(b.directory).startswith(f"part-{b.partition:05}-")
        with strata.open(tmp_path / f"db{b.partition}") as db:
            t = db.create_table(SCHEMA)
            t.ingest(b.directory)
            ids = [r["id"] for r in t.select().all()]
            assert len(ids) == b.rows
            assert {p.partition_of(i) for i in ids} == {b.partition}


def test_spark_build_equals_row_by_row_load(spark: Any, tmp_path: Path) -> None:
    data = rows()
    report = sspark.build_table(
        frame(spark, data),
        tmp_path / "built",
        SCHEMA,
        partitions=PARTS,
        staging_dir=tmp_path / "staging",
    )
    assert report.rows == N
    assert report.bytes > 0
    assert set(report.seconds) == {"build", "write_max", "ingest", "total"}
    assert len(report.ingested) == PARTS
    # Moved: the staging directories are gone.
    assert not any((tmp_path / "staging").iterdir())

    with strata.open(tmp_path / "plain") as plain:
        ref = plain.create_table(SCHEMA)
        for r in data:
            ref.insert(r)
        with strata.open_partitioned(tmp_path / "built") as db:
            t = db.table("events")
            assert sorted(r["id"] for r in t.select().all()) == sorted(r[0] for r in data)
            for r in data[:200]:
                assert t.get(r[0]) == ref.get(r[0])
            for index, eq, rng in [
                ("by_user", "user5", None),
                ("by_kind", "buy", (-100, 100)),
                ("by_amount", None, (0, 50)),
                ("by_note", None, None),
            ]:
                got = t.select(index, eq=eq, range=rng).all()
                assert got
                assert got == ref.select(index, eq=eq, range=rng).all()
            check = db.check(compact_first=True)
            assert check["ok"], check
            # Ingested rows take later statements.
            first = data[0][0]
            t.replace((first, "someone", "view", 1, None))
            assert t.get(first)["user"] == "someone"
            assert db.check()["ok"]


def test_build_table_into_existing_rows_refused(spark: Any, tmp_path: Path) -> None:
    data = rows(200)
    with strata.open_partitioned(tmp_path / "db", partitions=PARTS) as db:
        t = db.create_table(SCHEMA)
        t.insert(data[0])
    with pytest.raises(strata.IntegrityError):
        sspark.build_table(frame(spark, data), tmp_path / "db", SCHEMA, partitions=PARTS,
                           staging_dir=tmp_path / "staging")


def cells(rows: list[dict[str, Any]]) -> list[str]:
    # repr tells -0.0 from 0.0 and makes NaN equal to itself.
    return [repr(tuple(r.values())) for r in rows]


# (schema, Spark DDL, rows): each primary-key type, with the values where Spark's order
# and the encoded key order could part: NULs and prefixes in strings and bytes, signs,
# -0.0/0.0/NaN/infinities, u64 above i64's range (as decimal(20,0)).
PK_CASES = {
    "str_i64": (
        "table t (s str, n i64, v u64) primary key (s, n) index by_v (v)",
        "s string, n long, v long",
        [
            (s, n, i)
            for i, (s, n) in enumerate(
                (s, n)
                for s in ["", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\u00e9", "\uffff", "\U0001f600"]
                for n in [-(2**63), -1, 0, 5, 2**63 - 1]
            )
        ],
    ),
    "bytes_bool": (
        "table t (b bytes, flag bool, v i64) primary key (b, flag) index by_v (v)",
        "b binary, flag boolean, v long",
        [
            (b, f, i)
            for i, (b, f) in enumerate(
                (b, f)
                for b in [b"", b"\x00", b"\x00\x00", b"\x00\x01", b"\x01", b"\x7f", b"\x80", b"\xff", b"\xff\x00"]
                for f in [False, True]
            )
        ],
    ),
    "f64": (
        # Zeros of both signs beside the same k: Spark alone would interleave them by k.
        "table t (x f64, k i64, v i64) primary key (x, k) index by_v (v)",
        "x double, k long, v long",
        [
            (x, k, i)
            for i, (x, k) in enumerate(
                (x, k)
                for x in [math.inf, -1.5, 0.0, -0.0, 1e-300, -1e-300, 2.5, -math.inf, math.nan, 1e300]
                for k in range(8)
            )
        ],
    ),
    "u64_decimal": (
        "table t (id u64, v i64) primary key (id) index by_v (v)",
        "id decimal(20,0), v long",
        [(Decimal(x), i) for i, x in enumerate([2**64 - 1, 0, 2**63, 1, 2**63 - 1, 2**32, 255, 256])],
    ),
}


@pytest.mark.parametrize("case", sorted(PK_CASES))
def test_primary_key_types_sort_as_strata(spark: Any, tmp_path: Path, case: str) -> None:
    schema, ddl, data = PK_CASES[case]
    report = sspark.build_table(
        spark.createDataFrame(data, ddl).repartition(3), tmp_path / "built", schema,
        partitions=3, staging_dir=tmp_path / "staging",
    )
    assert report.rows == len(data)
    with strata.open(tmp_path / "plain") as plain, strata.open_partitioned(tmp_path / "built") as db:
        ref = plain.create_table(schema)
        for r in data:
            ref.insert(tuple(int(c) if isinstance(c, Decimal) else c for c in r))
        t = db.table("t")
        assert cells(t.select().all()) == cells(ref.select().all())
        assert cells(t.select("by_v").all()) == cells(ref.select("by_v").all())
        assert db.check(compact_first=True)["ok"]


def test_bad_input_refused_before_any_job(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    df = frame(spark, rows(50))
    staging = tmp_path / "staging"
    for bad, message in [
        (df.drop("kind"), "no column kind"),
        (df.withColumn("id", F.col("id").cast("string")), r"primary key field id \(u64\).*string"),
        (df.withColumn("amount", F.col("amount").cast("decimal(10,2)")), "fraction"),
        (df.withColumn("user", F.array("user")), r"field user \(str\).*array"),
    ]:
        with pytest.raises(strata.SchemaError, match=message):
            sspark.build_files(bad, SCHEMA, PARTS, str(staging))
    # A string primary key in a collation Spark sorts otherwise than Strata's bytes.
    schema, ddl, data = PK_CASES["str_i64"]
    collated = spark.createDataFrame(data, ddl).selectExpr("collate(s, 'UTF8_LCASE') AS s", "n", "v")
    with pytest.raises(strata.SchemaError, match="collation UTF8_LCASE"):
        sspark.build_files(collated, schema, PARTS, str(staging))
    assert not staging.exists()


def test_bad_values_fail_the_job(spark: Any, tmp_path: Path) -> None:
    data = rows(100)
    negative = [(-1 if i == 40 else r[0], *r[1:]) for i, r in enumerate(data)]
    with pytest.raises(Exception, match="cannot convert"):
        sspark.build_files(frame(spark, negative), SCHEMA, PARTS, str(tmp_path / "staging"))
    # Refused by the partition-id UDF, before any file is written.
    assert not any((tmp_path / "staging").iterdir())
    duplicate = data + [data[7]]
    with pytest.raises(Exception, match="(?i)order|duplicate"):
        sspark.build_files(frame(spark, duplicate), SCHEMA, PARTS, str(tmp_path / "staging2"))
    # The failed task removed its files (tasks that finished keep theirs).
    part = strata.Partitioner(SCHEMA, PARTS).partition_of(data[7][0])
    assert not list((tmp_path / "staging2").glob(f"part-{part:05}-*"))


def test_ingest_failure_midway_leaves_the_others_ingested(tmp_path: Path) -> None:
    data = rows(300)
    p = strata.Partitioner(SCHEMA, 3)
    built = []
    for i in range(3):
        mine = sorted((r for r in data if p.partition_of(r[0]) == i), key=lambda r: r[0])
        d = tmp_path / f"part-{i}"
        with strata.TableWriter(SCHEMA, d, partition=(i, 3)) as w:
            w.add_many(mine)
            desc = w.finish()
        built.append(sspark.BuiltPartition(i, str(d), desc["rows"], desc["bytes"], 0.0))
    clash = next(r for r in data if p.partition_of(r[0]) == 1)
    with strata.open_partitioned(tmp_path / "db", partitions=3) as db:
        t = db.create_table(SCHEMA)
        t.insert(clash)
        with pytest.raises(strata.IntegrityError) as caught:
            sspark.ingest_built(t, built, move=False)
        assert "partitions [0, 2] ingested; [1] not ingested" in "".join(getattr(caught.value, "__notes__", []))
        assert t.count() == sum(b.rows for b in built if b.partition != 1) + 1
        t.delete(clash[0])
        assert [r["partition"] for r in sspark.ingest_built(t, built[1:2], move=False)] == [1]
        assert sorted(r["id"] for r in t.select().all()) == sorted(r[0] for r in data)
        assert db.check()["ok"]
