"""Strata: an embedded LSM-tree storage engine with tables and secondary indexes.

>>> import strata, tempfile
>>> with strata.open(tempfile.mkdtemp()) as db:
...     db[b"k"] = b"v"
...     db.get(b"k")
b'v'

Keys and values are ``bytes`` (``str`` is accepted and stored as UTF-8; reads always
return ``bytes``). See docs/python.md for the whole API.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ._errors import *  # noqa: F403 (the exception classes, listed in its __all__)
from ._errors import __all__ as _error_names
from ._strata import (
    OPTIONS,
    Database,
    Keyspace,
    MultiMap,
    PartitionedDatabase,
    PartitionedTable,
    Partitioner,
    Rows,
    Scan,
    Snapshot,
    Table,
    TableBase,
    TableWriter,
    Transaction,
    Values,
    WriteBatch,
)


def open(path: str | os.PathLike[str], **options: Any) -> Database:
    """Opens (creating it if missing) the database in directory ``path``.

    Use it as a context manager to close it at the end of the block. ``options`` are
    the engine's (``OPTIONS`` lists them), e.g. ``memtable_budget=8 << 20``,
    ``sync="every_batch"``, ``read_only=True``.
    """
    return Database(path, **options)


def open_partitioned(
    path: str | os.PathLike[str],
    partitions: int | None = None,
    serve: Sequence[int] | None = None,
    **options: Any,
) -> PartitionedDatabase:
    """Opens the directory ``path`` of hash-partitioned tables, creating it with
    ``partitions`` partitions if missing (required then; checked against the directory
    when given). ``serve``, a list of partition numbers, opens only those: a serving
    node's share, whose tables refuse the other partitions' rows (``partitions`` is
    required when the directory is new); a node's directory opened without ``serve``
    is refused. Use it as a context manager. ``options`` are ``open``'s, applied to
    every partition. See docs/python.md.
    """
    return PartitionedDatabase(path, partitions, serve, **options)


__all__ = [
    "open",
    "open_partitioned",
    "PartitionedDatabase",
    "PartitionedTable",
    "TableBase",
    "OPTIONS",
    "Database",
    "Keyspace",
    "WriteBatch",
    "Snapshot",
    "Scan",
    "Table",
    "Transaction",
    "Rows",
    "TableWriter",
    "Partitioner",
    "MultiMap",
    "Values",
]
__all__ += _error_names
