"""Errors of the export: bad input paths, and an export that would produce nothing.

Example:
    >>> issubclass(EmptyExportError, ExportError), issubclass(ExportError, ValueError)
    (True, True)
"""

from __future__ import annotations

__all__ = ["EmptyExportError", "ExportError"]


class ExportError(ValueError):
    """The export cannot run as asked; the message names the input and how to fix it."""


class EmptyExportError(ExportError):
    """Every candidate was filtered out; the message names the filter that removed the last ones.

    Nothing is written when it is raised, so an earlier export in the same
    folder is left as it was.
    """
