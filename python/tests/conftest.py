from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import strata


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "db")


@pytest.fixture
def db(path: str) -> Iterator[strata.Database]:
    with strata.open(path, memtable_budget=1 << 20) as d:
        yield d
