"""Eval: a candidate model against the current one on a golden set, and the gate's decision.

Enters: two models (or any runners), a golden set (a task file). Leaves:
paired scores per task, a statistical verdict, KL drift and diversity, and a
:class:`GateDecision` (PROMOTE, ROLLBACK or MANUAL_REVIEW). This stage
imports no other stage of :mod:`agentic_loop.distill`: the release side
acts on its decision, the loop drives it.

The evaluation takes the *runner*, not an architecture's name (as DSPy's
optimizers take the program): ``runners=(baseline_runner, candidate_runner)``
(architecture instances, or callables task -> trajectory / run result), or
``runners=architecture_runner("reflection")``, which builds one per model.

Names: :func:`gate` is the *release gate* (also spelled :func:`release_gate`),
whose :class:`GateDecision` says PROMOTE, ROLLBACK or MANUAL_REVIEW; the
*data gate* is the export's filters (the score threshold and the PII gate in
:mod:`agentic_loop.distill.data`). Every report is a pydantic record:
``model_dump(mode="json")`` is its JSON, ``model_validate`` reads it back.

Example:
    >>> from agentic_loop.distill.eval import gate
    >>> gate([8, 9, 8, 9], [4, 5, 4, 5]).decision.value
    'ROLLBACK'
"""

from agentic_loop.distill.eval.evaluate import (
    EvalReport,
    Runner,
    RunnerFactory,
    TaskScores,
    architecture_runner,
    evaluate_models,
)
from agentic_loop.distill.eval.gate import Decision, GateDecision, gate, release_gate
from agentic_loop.distill.eval.golden import GoldenError, GoldenTask, load_golden

__all__ = ["Decision", "EvalReport", "GateDecision", "GoldenError", "GoldenTask", "Runner",
           "RunnerFactory", "TaskScores", "architecture_runner", "evaluate_models", "gate",
           "load_golden", "release_gate"]
