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
from agentic_loop.distill.release.improve import ImproveResult, ImproveSettings, improve
from agentic_loop.distill.release.live import ServingState, read_serving, sync_served
from agentic_loop.distill.release.monitor import MonitorReport, MonitorSettings, monitor
from agentic_loop.distill.release.pipeline import LoopResult, distill_loop
from agentic_loop.distill.release.registry import ModelVersion, Registry, RegistryError
from agentic_loop.distill.release.router import Router
from agentic_loop.distill.release.serve import (
    ServeError,
    VLLMNotInstalledError,
    VLLMServer,
    serve,
)
from agentic_loop.distill.release.serve_watch import RegistryServer, serve_registered

__all__ = [
    "Decision",
    "EvalReport",
    "GateDecision",
    "GoldenError",
    "GoldenTask",
    "ImproveResult",
    "ImproveSettings",
    "LoopResult",
    "ModelVersion",
    "MonitorReport",
    "MonitorSettings",
    "Router",
    "Registry",
    "RegistryError",
    "RegistryServer",
    "ServeError",
    "ServingState",
    "VLLMNotInstalledError",
    "VLLMServer",
    "distill_loop",
    "evaluate_models",
    "gate",
    "improve",
    "load_golden",
    "monitor",
    "read_serving",
    "serve",
    "serve_registered",
    "sync_served",
]
