"""strata.spark: a table built by Spark in local mode, ingested, checked against a
row-by-row load. Skipped only when pyspark or Java is absent (`.ci/run` installs both)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
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
