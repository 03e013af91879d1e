"""Errors of the export: bad input paths, and an export that would produce nothing.

Both are :class:`~agentic_loop.errors.DataError` (so still ``ValueError``):
the input data cannot be turned into datasets as asked.

Example:
    >>> from agentic_loop.errors import AgenticLoopError, DataError
    >>> issubclass(EmptyExportError, ExportError), issubclass(ExportError, DataError)
    (True, True)
    >>> issubclass(ExportError, AgenticLoopError), issubclass(ExportError, ValueError)
    (True, True)
"""

from __future__ import annotations

from agentic_loop.errors import DataError

__all__ = ["EmptyExportError", "ExportError"]


class ExportError(DataError):
    """The export cannot run as asked; the message names the input and how to fix it."""


class EmptyExportError(ExportError):
    """Every candidate was filtered out; the message names the filter that removed the last ones.

    Nothing is written when it is raised, so an earlier export in the same
    folder is left as it was.
    """
