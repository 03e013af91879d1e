"""The flywheel service: rounds, canary ramp, monitors and a status page, over one registry.

Enters: a registry, a trajectory source (log folders or a ``postgresql://``
URL) and a golden set. Leaves: candidates trained on new accepted runs,
ramped at the server's front (``canary.json``) and promoted or rolled back by
tests with stated power, every decision in ``<registry>/flywheel/audit.jsonl``.
See :mod:`.service` (the loop), :mod:`.ramp` (the stage tests), :mod:`.status_page`.

Example:
    >>> from agentic_loop.distill.flywheel import FlywheelSettings, RampSettings
    >>> FlywheelSettings(min_new_runs=20).ramp.stages
    (0.05, 0.25, 0.5, 1.0)
"""

from agentic_loop.distill.flywheel.journal import AuditRecord, FlywheelState, Journal
from agentic_loop.distill.flywheel.lease import Lease, LeaseHeldError
from agentic_loop.distill.flywheel.ramp import RampSettings, StageVerdict, judge_stage
from agentic_loop.distill.flywheel.ramp_stats import ArmSample, TestResult, runs_needed
from agentic_loop.distill.flywheel.service import Flywheel
from agentic_loop.distill.flywheel.settings import FlywheelSettings, parse_duration
from agentic_loop.distill.flywheel.status import FlywheelStatus
from agentic_loop.distill.flywheel.status_server import StatusServer

__all__ = ["ArmSample", "AuditRecord", "Flywheel", "FlywheelSettings", "FlywheelState",
           "FlywheelStatus", "Journal", "Lease", "LeaseHeldError", "RampSettings",
           "StageVerdict", "StatusServer", "TestResult", "judge_stage", "parse_duration",
           "runs_needed"]
