"""Canary and shadow at the serving front: the canary file, the arm table, the numbers.

The flywheel service writes ``<registry>/canary.json`` (:mod:`.state`); the
serve process follows it (:mod:`.follow`: loads the candidate's adapter into
the running vLLM) and hands the front an :class:`ArmTable` (:mod:`.table`);
the front picks each request's version by its user key (:mod:`.user_key`)
and counts every answer per version (:mod:`.observations`, :mod:`.metrics`).

Example:
    >>> table = ArmTable(current="v1", candidate="v2", fraction=1.0)
    >>> table.arm_of(user_key({"x-agentic-loop-user": "alice"}, None))
    'candidate'
"""

from agentic_loop.distill.release.canary.follow import CanaryFollower
from agentic_loop.distill.release.canary.metrics import FrontMetrics
from agentic_loop.distill.release.canary.observations import ArmObservations
from agentic_loop.distill.release.canary.state import (
    CANARY_FILE,
    CanaryState,
    canary_file,
    read_canary,
    write_canary,
)
from agentic_loop.distill.release.canary.table import Arm, ArmTable
from agentic_loop.distill.release.canary.user_key import USER_HEADERS, json_body, user_key

__all__ = ["CANARY_FILE", "USER_HEADERS", "Arm", "ArmObservations", "ArmTable", "CanaryFollower",
           "CanaryState",
           "FrontMetrics", "canary_file", "json_body", "read_canary", "user_key",
           "write_canary"]
