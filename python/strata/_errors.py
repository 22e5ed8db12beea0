"""The exception hierarchy of Strata.

Every error the engine reports is a subclass of :class:`Error` and carries the engine's
message. :class:`CorruptionError` and :class:`IoError` also carry ``file`` (and
``offset`` for corruption); the other classes set both to ``None``.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every Strata error."""

    file: str | None = None
    offset: int | None = None


class CorruptionError(Error):
    """Stored data failed a checksum or could not be decoded (``file``, ``offset``)."""


class IoError(Error, OSError):
    """An operating-system I/O error (``file`` when known)."""

    def __str__(self) -> str:
        # The engine's message, which says what it was doing; OSError's own would
        # show only ``errno``, ``strerror`` and ``filename`` once they are set.
        return str(self.args[0]) if self.args else super().__str__()


class InvalidArgument(Error, ValueError):
    """The call passed something Strata cannot accept; nothing was changed."""


class SchemaError(InvalidArgument):
    """A row or value does not match the table's schema."""


class IntegrityError(Error):
    """A primary or unique key constraint would be violated; nothing was changed."""


class NotFoundError(Error):
    """A named keyspace, table or index does not exist."""


class AlreadyExistsError(Error):
    """A keyspace or table of that name already exists."""


class NotADatabaseError(Error):
    """The directory is not a Strata database (``file`` names it)."""


class BackgroundError(Error):
    """A background flush or compaction failed; writes are refused until reopened."""


class ClosedError(Error):
    """The database (or the snapshot) was closed or released."""


__all__ = [
    "Error",
    "CorruptionError",
    "IoError",
    "InvalidArgument",
    "SchemaError",
    "IntegrityError",
    "NotFoundError",
    "AlreadyExistsError",
    "NotADatabaseError",
    "BackgroundError",
    "ClosedError",
]
