"""A round's train stage launched through the shipped ``accelerate`` configurations.

Why a module of its own: a round trains in its own process by default, which
is one GPU at most. A full fine-tune of a model that does not fit one GPU, or
a round that should use all eight, has to run as ``accelerate launch
--config_file <shipped ddp|fsdp|zero3.yaml> --num_processes N ... agentic-loop
train ...``, the same line ``agentic-loop train --parallel X --dry-run``
prints (:func:`~agentic_loop.distill.train.parallel.launch_command` builds both).
:func:`plan_launch` decides, for ``ImproveSettings.parallel`` and the machine,
whether the stage launches and with which command, or stays in this process
and why; :func:`launched_train` runs it, waits, then reads the model and its
card back through ``train`` itself (a finished run with the same fingerprint
is reused, not retrained, so a child that trained other settings is refused).
The plan's :meth:`RoundLaunch.record` goes into the round's ``state.json``.

Example (an 8-GPU machine, a full fine-tune under FSDP; no GPU needed):
    >>> from agentic_loop.distill.loop.settings import ImproveSettings
    >>> from agentic_loop.distill.train.parallel import Device
    >>> s = ImproveSettings(parallel="fsdp", train_options={"lora": False, "max_steps": 2})
    >>> plan = plan_launch(s, Path("d"), Path("m"), method="sft", base="local",
    ...                    options=s.train_kwargs("sft"), device=Device(gpus=8, bf16=True),
    ...                    program="agentic-loop")
    >>> plan.command[:2], Path(plan.command[3]).name, plan.command[4:8]
    (('accelerate', 'launch'), 'fsdp.yaml', ('--num_processes', '8', '--mixed_precision', 'bf16'))
    >>> plan.command[8:]
    ... # doctest: +NORMALIZE_WHITESPACE
    ('agentic-loop', 'train', '--data', 'd', '--out', 'm', '--method', 'sft', '--base', 'local',
     '--max-steps', '2', '--parallel', 'fsdp')
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agentic_loop.distill.loop.settings import ImproveSettings
from agentic_loop.distill.train.model_card import CARD_FILE
from agentic_loop.distill.train.parallel import Device, check_launch, launch_command, train_args
from agentic_loop.distill.train.settings import GRPO_FIELDS, TrainSettings
from agentic_loop.errors import ConfigError, TrainError

__all__ = ["RoundLaunch", "launch_line", "launched_train", "plan_launch", "preflight",
           "train_program"]

#: ``train`` keywords that are not ``TrainSettings`` fields: the first two cross to the launched
#: process (``--no-resume``; its own bar), the rest cannot.
_CALL_ONLY = ("resume", "progress", "keep_checkpoints", "name", "callbacks")
#: What a process started by ``accelerate launch`` sees, as ``check_launch`` reads it.
_AS_LAUNCHED = {"WORLD_SIZE": "1", "ACCELERATE_USE_FSDP": "true",
                "ACCELERATE_USE_DEEPSPEED": "true"}
#: Lines of a failed launch's log quoted in its error.
_TAIL = 15


@dataclass(frozen=True)
class RoundLaunch:
    """How a round's train stage runs: ``command`` launched, or (``None``) in this process."""

    parallel: str
    command: tuple[str, ...] | None
    note: str

    def record(self) -> dict[str, Any]:
        """What the round's state keeps: the strategy, the exact command (or None), the note."""
        return {"parallel": self.parallel,
                "command": shlex.join(self.command) if self.command else None,
                "note": self.note}

    def line(self) -> str:
        """One line for people: the command, or why the stage stays in this process."""
        return launch_line(self.record())


def launch_line(record: Mapping[str, Any]) -> str:
    """A :meth:`RoundLaunch.record` (as ``state.json`` keeps it) as one line for people.

    >>> launch_line({"parallel": "ddp", "command": "accelerate launch x", "note": "launched"})
    'launched: accelerate launch x'
    """
    return f"{record['note']}: {record['command']}" if record.get("command") else record["note"]


def train_program() -> str:
    """The ``agentic-loop`` a launch runs: on PATH, else beside this Python (a venv's bin/)."""
    found = shutil.which("agentic-loop")
    if found:
        return found
    sibling = Path(sys.executable).with_name("agentic-loop")
    return str(sibling) if sibling.is_file() else "agentic-loop"


def plan_launch(settings: ImproveSettings, data: Path, out: Path, *, method: str, base: str,
                options: Mapping[str, Any], device: Device | None = None,
                program: str | None = None) -> RoundLaunch:
    """The train stage's launch for ``settings.parallel`` on ``device`` (default: this machine).

    Refuses, naming the flag, what cannot run here: FSDP or ZeRO-3 with no CUDA GPU, ZeRO-3
    without DeepSpeed, more processes than devices, and ``train`` options that cannot cross
    to another process.
    """
    parallel, wanted = settings.parallel, settings.num_processes
    if parallel == "none":
        return RoundLaunch("none", None, "in-process (--parallel none)")
    device = Device.detect() if device is None else device
    args = train_args(_train_settings(method, options, parallel), data, out, base,
                      resume=bool(options.get("resume", True)))
    program = program or train_program()
    check_launch(parallel, device, [program, *args], env=_AS_LAUNCHED)
    if device.gpus:
        if wanted is not None and wanted > device.gpus:
            raise ConfigError(f"num_processes (--num-processes) {wanted} is more than the "
                              f"{device.gpus} GPU(s) this machine has; pass at most "
                              f"{device.gpus}, or drop it (one process per GPU)")
        used = replace(device, gpus=wanted or device.gpus)
        command = launch_command(args, used, parallel, program=program)
        if command[0] != "accelerate":
            return RoundLaunch(parallel, None, f"in-process: {used.gpus} GPU, nothing to "
                                               f"share it with (--parallel {parallel})")
        return RoundLaunch(parallel, tuple(command),
                           f"launched: {parallel} on {used.gpus} GPU(s)")
    cpus = os.cpu_count() or 1
    if parallel == "ddp" and wanted is not None:
        if wanted > cpus:
            raise ConfigError(f"num_processes (--num-processes) {wanted} is more than the "
                              f"{cpus} CPU(s) of this machine, which has no CUDA GPU; pass at "
                              f"most {cpus}")
        command = launch_command(args, device, parallel, program=program, cpu_processes=wanted)
        return RoundLaunch(parallel, tuple(command),
                           f"launched: ddp on {wanted} CPU process(es), no CUDA GPU here")
    return RoundLaunch(parallel, None, f"in-process: no CUDA GPU on this machine (--parallel "
                                       f"{parallel}; --parallel ddp --num-processes N launches "
                                       "N CPU processes)")


def preflight(settings: ImproveSettings, device: Device | None = None) -> RoundLaunch:
    """The plan of every round's train stage, made before the first round samples anything,
    so a launch this machine cannot run is refused at start (paths are placeholders).

    >>> preflight(ImproveSettings()).line()
    'in-process (--parallel none)'
    """
    from agentic_loop.distill.loop.settings import train_method

    method = train_method(settings.method)
    return plan_launch(settings, Path("<round data>"), Path("<round model>"), method=method,
                       base=settings.base, options=settings.train_kwargs(method), device=device)


def launched_train(train: Callable[..., Any], settings: ImproveSettings, data: Path, out: Path,
                   *, method: str, base: str, options: Mapping[str, Any], log: Path,
                   device: Device | None = None) -> tuple[Any, RoundLaunch]:
    """Train as :func:`plan_launch` says, returning ``train``'s result and the plan.

    A launched stage writes its output to ``log``; when it ends, ``train`` (the
    in-process trainer) is called with the same settings, and finds the run
    finished: it reads the model and card back. A launch that fails, or ends
    without a model card in ``out``, is a :class:`TrainError` quoting the command.
    """
    plan = plan_launch(settings, data, out, method=method, base=base, options=options,
                       device=device)
    if plan.command is None:
        return train(data, out, method=method, base=base, **options), plan
    _run(plan.command, log)
    if not (out / CARD_FILE).is_file():
        raise TrainError(f"the launched train stage ended without a model card in {out}: "
                         f"{shlex.join(plan.command)}; see {log}")
    return train(data, out, method=method, base=base, **{**options, "resume": True}), plan


def _train_settings(method: str, options: Mapping[str, Any], parallel: str) -> TrainSettings:
    """``options`` as the ``TrainSettings`` the launched ``train`` rebuilds from its flags."""
    stuck = sorted(k for k in _CALL_ONLY[2:] if options.get(k) not in (None, False, (), []))
    if stuck:
        raise ConfigError(f"train options {stuck} cannot be passed to a launched train stage "
                          f"(--parallel {parallel}); drop them, or train in-process with "
                          "--parallel none")
    fields = {k: v for k, v in options.items() if k not in _CALL_ONLY
              and (method == "grpo" or k not in GRPO_FIELDS)}
    return TrainSettings(**{**fields, "method": method, "parallel": parallel})


def _run(command: tuple[str, ...], log: Path) -> None:
    """Run ``command`` to its end, its output in ``log``; this Python's bin/ first on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as sink:
        sink.write(f"$ {shlex.join(command)}\n")
        sink.flush()
        try:
            code = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                  check=False).returncode
        except OSError as exc:
            raise TrainError(f"the train stage could not be launched ({exc}): "
                             f"{shlex.join(command)}; install accelerate in this environment, "
                             "or pass --parallel none") from None
    if code != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-_TAIL:])
        raise TrainError(f"the launched train stage failed (exit {code}): {shlex.join(command)}"
                         f"; the last lines of {log}:\n{tail}")
