"""Eval: a candidate model against the current one on a golden set, and the gate's decision.

Enters: two models (or any runners), a golden set (a task file). Leaves:
paired scores per task, a statistical verdict, KL drift and diversity, and a
:class:`GateDecision` (PROMOTE, ROLLBACK or MANUAL_REVIEW). This stage
imports no other stage of :mod:`agentic_loop.distill`: the release side
acts on its decision, the loop drives it.

Example:
    >>> from agentic_loop.distill.eval import gate
    >>> gate([8, 9, 8, 9], [4, 5, 4, 5]).decision.value
    'ROLLBACK'
"""

from agentic_loop.distill.eval.evaluate import EvalReport, evaluate_models
from agentic_loop.distill.eval.gate import Decision, GateDecision, gate
from agentic_loop.distill.eval.golden import GoldenError, GoldenTask, load_golden

__all__ = ["Decision", "EvalReport", "GateDecision", "GoldenError", "GoldenTask",
           "evaluate_models", "gate", "load_golden"]
