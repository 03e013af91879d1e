"""Release: a trained model in, a served (or rolled back) version out.

Enters: a candidate model, the current one, and a golden set (a task file).
Leaves: a gate decision, a registry version (promoted or not), a vLLM server.
Between: paired scores and a t-test, KL drift, diversity, the audit log.

Example:
    >>> from agentic_loop.distill.release import gate
    >>> gate([8, 9, 8, 9], [4, 5, 4, 5]).decision.value
    'ROLLBACK'
"""

from agentic_loop.distill.release.evaluate import EvalReport, evaluate_models
from agentic_loop.distill.release.gate import Decision, GateDecision, gate
from agentic_loop.distill.release.golden import GoldenError, GoldenTask, load_golden
from agentic_loop.distill.release.pipeline import LoopResult, distill_loop
from agentic_loop.distill.release.registry import ModelVersion, Registry, RegistryError
from agentic_loop.distill.release.serve import (
    ServeError,
    VLLMNotInstalledError,
    VLLMServer,
    serve,
    serve_registered,
)

__all__ = [
    "Decision",
    "EvalReport",
    "GateDecision",
    "GoldenError",
    "GoldenTask",
    "LoopResult",
    "ModelVersion",
    "Registry",
    "RegistryError",
    "ServeError",
    "VLLMNotInstalledError",
    "VLLMServer",
    "distill_loop",
    "evaluate_models",
    "gate",
    "load_golden",
    "serve",
    "serve_registered",
]
