"""What the hypothesis state machines share: a database in a temporary directory,
flush and compact rules on it, and their settings (STRATA_PY_EXAMPLES sets how many runs, default 25)."""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, rule

import strata


class DatabaseMachine(RuleBasedStateMachine):
    """A state machine over ``self.db`` (at ``self.path``, with small memtables so
    that flushes happen); flushes and compactions may come between any of its
    operations. Removed with its directory at the end."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "db")
        self.db = strata.open(self.path, memtable_budget=64 << 10)

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule()
    def flush(self) -> None:
        self.db.flush()

    @rule()
    def compact(self) -> None:
        self.db.compact()


SETTINGS = settings(
    max_examples=int(os.environ.get("STRATA_PY_EXAMPLES", "25")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
