"""Training on many GPUs: the shipped ``accelerate`` configurations and the launch line.

A model that fits one GPU trains fastest data-parallel (DDP: every GPU holds
the whole model, each takes a share of the batch). A full fine-tune of a model
that does *not* fit one GPU has to shard its weights, gradients and optimizer
state across the GPUs: PyTorch FSDP or DeepSpeed ZeRO-3. Writing those
``accelerate`` YAML files by hand is error-prone, so the package ships one per
strategy (``accelerate_configs/ddp.yaml``, ``fsdp.yaml``, ``zero3.yaml``) and
``TrainSettings.parallel`` (``agentic-loop train --parallel``) picks one:

* ``"auto"`` (default): DDP on a machine with several GPUs, one process otherwise;
* ``"ddp"``, ``"fsdp"``, ``"zero3"``: that configuration, one process per GPU.

:func:`launch_command` builds ``accelerate launch --config_file <yaml>
--num_processes N --mixed_precision P agentic-loop train ...`` for a machine
with N GPUs (``train --dry-run`` prints it). The combinations that cannot work
are refused before any model loads (:func:`parallel_checks` at settings time,
:func:`check_launch` before a real run): a merged LoRA adapter under sharding
(merging needs the whole base on one process), ZeRO-3 without ``deepspeed``,
FSDP or ZeRO-3 on a machine with no CUDA GPU, and a sharded run started
outside ``accelerate launch`` (it would silently train on one GPU).

Example (a 4-GPU machine; no GPU needed):
    >>> gpus = Device(gpus=4, bf16=True)
    >>> strategy("auto", gpus), strategy("auto", Device()), strategy("fsdp", Device(gpus=1))
    ('ddp', None, 'fsdp')
    >>> cmd = launch_command(["train", "--parallel", "fsdp"], gpus, "fsdp", program="al")
    >>> cmd[:2], Path(cmd[3]).name, cmd[4:]
    ... # doctest: +NORMALIZE_WHITESPACE
    (['accelerate', 'launch'], 'fsdp.yaml',
     ['--num_processes', '4', '--mixed_precision', 'bf16', 'al', 'train', '--parallel', 'fsdp'])
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_loop.errors import ConfigError

__all__ = ["CONFIG_DIR", "PARALLEL", "SHARDED", "Device", "check_launch", "config_file",
           "launch_command", "launch_notes", "parallel_checks", "strategy", "train_args"]

#: The choices of ``TrainSettings.parallel`` (``--parallel``).
PARALLEL: tuple[str, ...] = ("auto", "ddp", "fsdp", "zero3")
#: The strategies that shard the model across GPUs (each process holds a part of it).
SHARDED: tuple[str, ...] = ("fsdp", "zero3")
#: Where the shipped ``accelerate`` configurations live (installed with the package).
CONFIG_DIR = Path(__file__).resolve().parent / "accelerate_configs"
#: What ``accelerate launch`` sets in each process of a run under a configuration.
_LAUNCHED_ENV = {"ddp": "WORLD_SIZE", "fsdp": "ACCELERATE_USE_FSDP",
                 "zero3": "ACCELERATE_USE_DEEPSPEED"}


@dataclass(frozen=True)
class Device:
    """What the trainer runs on: CUDA GPUs (0 = CPU), bf16 support, whether vLLM is installed."""

    gpus: int = 0
    bf16: bool = False
    vllm: bool = False

    @classmethod
    def detect(cls) -> Device:
        """This machine (visible CUDA devices, ``torch.cuda.is_bf16_supported``, ``vllm``).

        >>> Device.detect().gpus >= 0
        True
        """
        import importlib.util

        import torch

        if not torch.cuda.is_available():
            return cls()
        return cls(gpus=torch.cuda.device_count(), bf16=torch.cuda.is_bf16_supported(),
                   vllm=importlib.util.find_spec("vllm") is not None)

    @property
    def precision(self) -> str:
        """``fp32`` on CPU, ``bf16`` on GPUs that support it, else ``fp16``."""
        if not self.gpus:
            return "fp32"
        return "bf16" if self.bf16 else "fp16"


def config_file(name: str) -> Path:
    """The shipped ``accelerate`` configuration of a strategy (``ddp``, ``fsdp``, ``zero3``).

    >>> config_file("zero3").name, config_file("zero3").is_file()
    ('zero3.yaml', True)
    """
    if name not in _LAUNCHED_ENV:
        raise ConfigError(f"parallel strategy {name!r} has no accelerate configuration; use one "
                          f"of {', '.join(_LAUNCHED_ENV)}")
    return CONFIG_DIR / f"{name}.yaml"


def strategy(parallel: str, device: Device) -> str | None:
    """The configuration a run uses on ``device``: ``auto`` is DDP on 2+ GPUs, else None.

    An explicit ``ddp`` on one GPU or none is one plain process too (nothing to
    share); ``fsdp`` and ``zero3`` keep their configuration on one GPU (ZeRO-3
    with CPU offload still saves memory there).

    >>> strategy("auto", Device(gpus=2)), strategy("ddp", Device(gpus=1))
    ('ddp', None)
    """
    if parallel == "auto" or parallel == "ddp":
        return "ddp" if device.gpus > 1 else None
    return parallel


def launch_command(cli_args: Sequence[str], device: Device, parallel: str, *,
                   program: str, cpu_processes: int = 0) -> list[str]:
    """``program cli_args`` as ``device`` runs it under ``parallel`` (see the module doc).

    With no strategy (one process), or no GPU to launch on, it is the command itself;
    ``cpu_processes`` (``ddp`` on a machine with no GPU) launches that many CPU processes
    under the DDP configuration instead (``--cpu``: gloo, fp32).

    >>> launch_command(["train"], Device(gpus=1, bf16=True), "auto", program="al")
    ['al', 'train']
    >>> launch_command(["train"], Device(), "ddp", program="al", cpu_processes=2)[4:]
    ['--num_processes', '2', '--mixed_precision', 'no', '--cpu', 'al', 'train']
    """
    if cpu_processes and not device.gpus and parallel == "ddp":
        return ["accelerate", "launch", "--config_file", str(config_file("ddp")),
                "--num_processes", str(cpu_processes), "--mixed_precision", "no", "--cpu",
                program, *cli_args]
    chosen = strategy(parallel, device)
    if chosen is None or not device.gpus:
        return [program, *cli_args]
    return ["accelerate", "launch", "--config_file", str(config_file(chosen)),
            "--num_processes", str(device.gpus), "--mixed_precision", device.precision,
            program, *cli_args]


#: Settings whose ``train`` flag is not the field's name.
RENAMED = {"vllm_server_base_url": "--vllm-server-url"}


def train_args(settings: Any, data: Path, out: Path, base: str, resume: bool) -> list[str]:
    """The ``train`` arguments that reproduce ``settings`` (a ``TrainSettings``; non-default
    values only): what a launched process is given.

    >>> from agentic_loop.distill.train import TrainSettings
    >>> s = TrainSettings(lora=True, lora_target_modules=("q_proj", "v_proj"), merge_lora=False)
    >>> train_args(s, Path("d"), Path("o"), "local", resume=False)[9:]
    ['--lora', '--no-merge', '--lora-target-modules', 'q_proj,v_proj', '--no-resume']
    """
    defaults = type(settings)(method=settings.method)
    args = ["train", "--data", str(data), "--out", str(out), "--method", settings.method,
            "--base", base]
    flags = {"merge_lora": ("", "--no-merge"), "use_vllm": ("--use-vllm", "--no-vllm")}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if field.name == "method" or value == getattr(defaults, field.name):
            continue
        if isinstance(value, bool):
            on, off = flags.get(field.name, ("--" + field.name.replace("_", "-"), ""))
            args += [flag for flag in ((on if value else off),) if flag]
        else:
            text = ",".join(value) if isinstance(value, tuple) else str(value)
            args += [RENAMED.get(field.name, "--" + field.name.replace("_", "-")), text]
    return args if resume else [*args, "--no-resume"]


def parallel_checks(parallel: str, *, merged_lora: bool) -> list[tuple[bool, str]]:
    """``TrainSettings``' checks of ``parallel`` (machine-independent): (ok, message) pairs.

    A LoRA adapter merged into its base (``merged_lora``: the default, and
    always the SFT stage of ``sft+dpo``) needs the whole base model in one
    process after training; under FSDP or ZeRO-3 no process has it.

    >>> [m.split(":")[0] for ok, m in parallel_checks("fsdp", merged_lora=True) if not ok]
    ['parallel (--parallel) fsdp with a merged LoRA adapter cannot work']
    """
    return [
        (parallel in PARALLEL,
         f"parallel (--parallel) must be one of {', '.join(PARALLEL)}, got {parallel!r}"),
        (not (parallel in SHARDED and merged_lora),
         f"parallel (--parallel) {parallel} with a merged LoRA adapter cannot work: merging "
         "needs the whole base model in one process, and sharding leaves each GPU a part of it; "
         "pass --no-merge (the adapter is saved; not with --method sft+dpo), or --parallel ddp "
         "(a LoRA run's base fits one GPU in most cases)"),
    ]


def check_launch(parallel: str, device: Device, command: Sequence[str], *,
                 env: Mapping[str, str] | None = None) -> None:
    """Refuse a real run that ``parallel`` cannot do here, before any model loads.

    ``command`` is the launch line of this run (:func:`launch_command`), quoted
    in the message when the run was not started under ``accelerate launch``.

    >>> check_launch("fsdp", Device(), ["al"])
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: parallel (--parallel) fsdp shards the model across CUDA \
GPUs, and this machine has none; run it on a GPU machine, or drop --parallel (one process here)
    """
    env = os.environ if env is None else env
    if parallel in SHARDED and not device.gpus:
        raise ConfigError(f"parallel (--parallel) {parallel} shards the model across CUDA GPUs, "
                          "and this machine has none; run it on a GPU machine, or drop "
                          "--parallel (one process here)")
    if parallel == "zero3" and not _deepspeed_installed():
        raise ConfigError("parallel (--parallel) zero3 runs on DeepSpeed, which is not "
                          "installed: pip install deepspeed (or use --parallel fsdp)")
    chosen = strategy(parallel, device)
    if parallel != "auto" and chosen is not None and str(
            env.get(_LAUNCHED_ENV[chosen], "")).lower() in ("", "false", "0"):
        raise ConfigError(f"parallel (--parallel) {parallel} runs one process per GPU under "
                          f"accelerate launch, and this one was started alone; run: "
                          f"{shlex.join(command)}")


def launch_notes(parallel: str, device: Device, cli_args: Sequence[str], *,
                 program: str) -> list[str]:
    """What ``--dry-run`` adds about the launch: the command elsewhere, and why not here.

    >>> notes = launch_notes("auto", Device(), ["train"], program="al")
    >>> notes[0]
    'single process here: no CUDA GPU on this machine (--parallel auto)'
    >>> notes[1].split(" --config_file")[0]
    'on a machine with N GPUs (N >= 2): accelerate launch'
    """
    chosen = strategy(parallel, device)
    notes: list[str] = []
    if not device.gpus:
        notes.append(f"a real run with --parallel {parallel} is refused here: it shards the "
                     "model across CUDA GPUs, and this machine has none" if parallel in SHARDED
                     else f"single process here: no CUDA GPU on this machine (--parallel "
                     f"{parallel})")
        shown = chosen or "ddp"
        many = dataclasses.replace(device, gpus=2, bf16=True)
        elsewhere = launch_command(cli_args, many, shown, program=program)
        elsewhere[elsewhere.index("--num_processes") + 1] = "N"
        notes.append(f"on a machine with N GPUs (N >= {1 if shown in SHARDED else 2}): "
                     f"{shlex.join(elsewhere)}")
    elif chosen is None:
        notes.append(f"single process here: one GPU, nothing to share it with (--parallel "
                     f"{parallel})")
    else:
        notes.append(f"parallel: {chosen} on {device.gpus} GPU(s), one process each, "
                     f"configuration {config_file(chosen)}")
    if parallel == "zero3" and not _deepspeed_installed():
        notes.append("note: deepspeed is not installed here; pip install deepspeed before a "
                     "zero3 run")
    return notes


def _deepspeed_installed() -> bool:
    return importlib.util.find_spec("deepspeed") is not None
