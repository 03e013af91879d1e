"""agentic-loop: agents that improve with use on self-hosted open-weight models.

Two loops close here. At inference time, LangGraph architectures generate,
critique with a deterministic multi-feature score, refine, and archive what
they accept so later tasks start from similar good examples. At training
time, the logged trajectories are filtered, turned into SFT and preference
data, distilled into the weights, gated against a golden set and served back.

Both loops' main verbs are here: ``run`` an architecture
(:func:`create_architecture`; its generator may be a chat model, a chat model with
``tools=``, or any LangGraph agent), :func:`export_datasets`, :func:`train`,
:func:`evaluate_models` and :func:`gate`, the :class:`Registry`, and
:func:`improve` (rounds of all of it). Names are imported lazily, so
``import agentic_loop`` (and the CLI's ``--help``) stays fast and loads
torch only when a model is needed.

Example:
    >>> import agentic_loop
    >>> agentic_loop.__version__
    '0.1.0'
    >>> callable(agentic_loop.load_chat_model)
    True
    >>> agentic_loop.TrainSettings(method="sft+dpo").stages
    ('sft', 'dpo')
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    **{name: "agentic_loop.errors" for name in (
        "AgenticLoopError", "ConfigError", "DataError", "JudgeError", "ModelError",
        "ReleaseError", "StorageError", "TaskError", "TrainError")},
    "load_chat_model": "agentic_loop.models",
    "ModelLoadError": "agentic_loop.models",
    "ModelSpecError": "agentic_loop.models",
    "StructuredOutputError": "agentic_loop.models",
    "ScriptedChatModel": "agentic_loop.testing",
    **{name: "agentic_loop.judges" for name in (
        "Feature", "Rubric", "Evaluation", "Critic", "Critique", "CriticError", "LLMJudge",
        "spread_report", "copywriting_rubric",
        "instruction_rubric", "math_rubric", "code_rubric", "run_python_tests")},
    **{name: "agentic_loop.memory" for name in (
        "Archive", "ArchiveEntry", "Embedder", "ReflexionMemory", "ArchiveStore")},
    **{name: "agentic_loop.architectures" for name in (
        "Reflection", "ArchiveRefine", "RLHFSelfImprovement", "Reflexion", "RunResult",
        "create_reflection_graph", "create_archive_refine_graph",
        "create_reflexion_graph", "create_architecture")},
    **{name: "agentic_loop.trajectories" for name in ("Trajectory", "TrajectoryLog")},
    # agents: an episode's record, our tool loop, and ready tools
    "Episode": "agentic_loop.episodes",
    **{name: "agentic_loop.agents" for name in ("as_agent", "tool_agent")},
    **{name: "agentic_loop.tools" for name in (
        "calculator", "python_tool", "lookup_tool", "safe_tool")},
    **{name: "agentic_loop.distill.data.reward" for name in ("composite_reward", "RewardWeights")},
    **{name: "agentic_loop.distill" for name in (
        "export_datasets", "PiiGate", "ExportReport", "ExportError", "EmptyExportError",
        "forget_user", "enforce_retention", "withdraw_consent", "ForgetReport")},
    # the training side's verbs: data -> train -> eval (gate) -> release (registry), improve
    **{name: "agentic_loop.distill.train" for name in ("train", "TrainSettings", "TrainResult")},
    **{name: "agentic_loop.distill.eval" for name in (
        "evaluate_models", "EvalReport", "gate", "release_gate")},
    "Registry": "agentic_loop.distill.release",
    "improve": "agentic_loop.distill.loop",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentic_loop' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
