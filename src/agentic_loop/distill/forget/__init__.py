"""Forgetting: a user's data, or everything past a retention age, erased from every store.

:func:`forget_user` and :func:`enforce_retention` follow a user's data from
the trajectory logs (with feedback and consent records) to the archive
entries and reflections made from those runs, their copies in other runs'
prompts (few-shot agent episodes included) and in the episodes of the agents
shown them, the dataset rows built from any of them, and the registered models
trained on those rows (marked in the registry's audit log), and every
place a writer recorded as holding user text (:mod:`agentic_loop.text_places`:
exports anywhere, shadow router logs, Postgres memory stores); a known
place it cannot reach is a warning, never skipped silently. Files are
compacted, not tombstoned, and an audit line records who erased what, when
and how much, never the data. :func:`withdraw_consent` keeps a user's runs
but excludes them from every later export. :func:`unarchive_rejected` (and
:func:`unarchive_runs`) take the archived outputs of runs people rejected out
of the exemplars, through the same erasure.

Modules: :mod:`.api` (the three calls), :mod:`.report` (the report and
the audit line, pydantic records; the report says when nothing was
found), :mod:`.selection` (which records go), :mod:`.logs`,
:mod:`.memories`, :mod:`.stores`, :mod:`.exports`, :mod:`.models` (one
store each), :mod:`.rejected` (rejected runs' archive entries),
:mod:`.recorded` (recorded places), :mod:`.references` (copies
in other runs), :mod:`.files` (raw lines and leftovers).

Example:
    >>> import tempfile
    >>> report = enforce_retention("90d", data=tempfile.mkdtemp(), exports=[], registries=[],
    ...                            audit_log=None)
    >>> report.kind, report.counts()["trajectories"]
    ('retention', 0)
"""

from agentic_loop.distill.forget.api import (
    DEFAULT_AUDIT_LOG,
    enforce_retention,
    forget_user,
    withdraw_consent,
)
from agentic_loop.distill.forget.models import AffectedModel
from agentic_loop.distill.forget.recorded import PlaceResult
from agentic_loop.distill.forget.rejected import Unarchived, unarchive_rejected, unarchive_runs
from agentic_loop.distill.forget.report import ErasureAudit, ForgetCounts, ForgetReport
from agentic_loop.distill.forget.selection import Selection

__all__ = [
    "DEFAULT_AUDIT_LOG",
    "AffectedModel",
    "ErasureAudit",
    "ForgetCounts",
    "ForgetReport",
    "PlaceResult",
    "Selection",
    "Unarchived",
    "enforce_retention",
    "forget_user",
    "unarchive_rejected",
    "unarchive_runs",
    "withdraw_consent",
]
