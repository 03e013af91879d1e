"""Release: a gated model in, a served (or rolled back) version out.

Enters: a model the gate passed. Leaves: a registry version (the audit log
first, then the index), a vLLM server behind a front proxy that holds the
stable port, a canary or shadow router, and a monitor that rolls back.

Example:
    >>> import tempfile, pathlib
    >>> from agentic_loop.distill.release import Registry
    >>> model = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (model / "config.json").write_text("{}")
    >>> reg = Registry(pathlib.Path(tempfile.mkdtemp()) / "registry")
    >>> reg.promote(reg.register(model).version).version
    'v1'
"""

from agentic_loop.distill.release.judge_agreement import (
    AgreementReport,
    JudgeAgreement,
    judge_agreement,
    judged_rewards_allowed,
)
from agentic_loop.distill.release.live import ServingState, read_serving, sync_served

# registers "registry:<dir>" in the models' provider table (also an entry point, pyproject.toml)
from agentic_loop.distill.release.live_model import REGISTRY_PROVIDER, RegistryChatModel
from agentic_loop.distill.release.monitor import MonitorReport, MonitorSettings, monitor
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
    "REGISTRY_PROVIDER",
    "AgreementReport",
    "JudgeAgreement",
    "RegistryChatModel",
    "ModelVersion",
    "MonitorReport",
    "MonitorSettings",
    "Registry",
    "RegistryError",
    "RegistryServer",
    "Router",
    "ServeError",
    "ServingState",
    "VLLMNotInstalledError",
    "VLLMServer",
    "judge_agreement",
    "judged_rewards_allowed",
    "monitor",
    "read_serving",
    "serve",
    "serve_registered",
    "sync_served",
]
