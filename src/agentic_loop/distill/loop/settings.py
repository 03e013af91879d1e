"""The settings of an improve run: checked up front, scheduled per round, fingerprinted.

Why one frozen object: a run is many rounds over hours, resumed after
kills; a bad threshold found in round 3, or a resume with other settings
mixing two runs in one folder, wastes all of it. So every option is checked
when the object is built (messages name the ``agentic-loop improve`` flag),
the per-round schedules (the SFT score threshold that rises each round, the
sampling temperatures) are methods, and a fingerprint of everything but the
stop rules lets a resume refuse a folder another run owns.

Example:
    >>> s = ImproveSettings(thresholds=(7.0, 8.0, 9.0), temperatures=(0.7, 1.0), samples=3)
    >>> [s.threshold_for(r) for r in (1, 2, 3, 4)]
    [7.0, 8.0, 9.0, 9.0]
    >>> [s.temperature_for(1, k) for k in range(3)]
    [0.7, 1.0, 0.7]
    >>> ImproveSettings(thresholds=(9.0, 7.0))
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: thresholds (--thresholds) must not fall from one round to \
the next (the bar rises), got (9.0, 7.0)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from agentic_loop.distill.train.parallel import PARALLEL, SHARDED
from agentic_loop.distill.train.settings import METHODS, vllm_server_checks
from agentic_loop.errors import ConfigError

__all__ = ["IMPROVE_METHODS", "JUDGED", "LOOP_METHODS", "ROUND_PARALLEL", "ImproveSettings",
           "read_principles", "train_method", "votes_unchecked"]

#: Settings a resume may change: the stop rules, the round budget, how training spreads, where
#: GRPO's vLLM server is.
_RESUMABLE = ("rounds", "patience", "min_gain", "max_concurrency", "parallel", "num_processes",
              "vllm_server_base_url")
#: Settings added later, left out of the fingerprint at their defaults: a run started before
#: they existed keeps its fingerprint, so it still resumes.
_LATER: dict[str, Any] = {"max_steps": 4, "first_tool_call": False, "judge": None,
                          "principles": None, "min_rank_gap": 2.0, "agreement_threshold": 0.7,
                          "min_labels": 20, "review_logs": [], "promote": True,
                          "use_vllm": None, "vllm_mode": "colocate",
                          "vllm_server_base_url": None}
#: The loop-level methods resting on a judge, a reference or a vote, and the trainer each uses
#: (:mod:`~agentic_loop.distill.loop.methods` makes their data).
LOOP_METHODS: dict[str, str] = {"self-rewarding": "dpo", "spin": "dpo", "ttrl": "grpo",
                                "constitutional": "sft+dpo"}
#: The methods whose data a judge (or a vote) decides: the agreement alarm gates them.
JUDGED = frozenset({"self-rewarding", "ttrl", "constitutional"})
#: Every method ``--method`` takes: the trainers' own, then the loop methods that rest on judges.
IMPROVE_METHODS: tuple[str, ...] = (*METHODS, *LOOP_METHODS)
#: How a round's train stage runs: in this process, or launched through a shipped accelerate
#: configuration (:mod:`~agentic_loop.distill.loop.launch`).
RoundParallel = Literal["none", "auto", "ddp", "fsdp", "zero3"]
ROUND_PARALLEL: tuple[str, ...] = ("none", *PARALLEL)


@dataclass(frozen=True)
class ImproveSettings:
    """What an improve run does each round (see :func:`~agentic_loop.distill.loop.improve`).

    Args:
        rounds: the round budget.
        samples: samples per pool task per round (K).
        arch: the architecture that samples (``reflection``, ``archive_refine``, ``reflexion``).
        max_iterations: its rounds per sample (1: single-shot, scored).
        temperatures: sample ``k`` uses ``temperatures[k % len]``...
        temperature_step: ...plus this much per round after the first (negative: cool down).
        thresholds: round ``r`` trains on outputs scoring at least ``thresholds[r - 1]``
            (the last one from then on), on the 0-10 scale; non-decreasing.
        method: ``sft``, ``dpo``, ``sft+dpo`` or ``grpo`` (on the pool's prompt set), or a
            method resting on a judge: ``self-rewarding``, ``spin``, ``ttrl``,
            ``constitutional`` (:mod:`~agentic_loop.distill.loop.methods`).
        hint_retry: retry tasks with no passing sample once, with the verifier's hint.
        base: the model to start from before the registry has a current version.
        max_tokens: generation limit of the samples and the gate.
        min_gain / patience: stop when the golden pass rate has not risen by ``min_gain``
            over its best for ``patience`` rounds.
        pass_score: the golden pass score of a task whose rubric has no check.
        eval_arch: also gate inside this architecture (``None``: single-shot only).
        max_concurrency: runs in flight while sampling.
        max_steps: on tool tasks (agent rounds), an episode's model calls at most.
        first_tool_call: on tool tasks, force each grown (and hinted) episode's first model
            call to be a tool call; small models seldom open with one by themselves. The gate
            never forces it: it measures what each model does by itself.
        judge: the judge model's spec (``None``: the round's current model, the policy
            judging itself): it judges the gate's judged features (golden tasks' features
            that are not checks, for both models), and the data of ``self-rewarding``,
            ``constitutional`` and ``grpo`` with ``judged_reward="rank"``.
        principles: constitutional: a file of principles, one a line (``None``: the defaults).
        min_rank_gap: self-rewarding: the smallest judge-score gap (0-10) of a pair.
        agreement_threshold / min_labels: the agreement alarm: judged data trains only
            while judge-vs-people agreement is at least this, given this many labels.
        review_logs: logs whose people's labels the alarm checks the judge against
            (besides the round's own runs).
        promote: promote a candidate the gate says PROMOTE of (False: register it with the
            gate's verdict in its card and audit, but leave ``current``: the flywheel canaries it).
        parallel: how the train stage runs: ``none`` in this process; ``auto``, ``ddp``,
            ``fsdp``, ``zero3`` as ``accelerate launch ... agentic-loop train`` through the
            shipped configuration (``auto``: DDP on 2+ GPUs, in this process otherwise).
        num_processes: the launch's processes (``None``: one per GPU); on a machine with no
            GPU, ``ddp`` with it launches that many CPU processes.
        use_vllm / vllm_mode: GRPO's generation on vLLM (``None``: on a GPU with vLLM
            installed), ``colocate`` or ``server``; passed to the trainer (and the launch).
        vllm_server_base_url: with ``vllm_mode="server"``, the ``trl vllm-serve`` server's
            URL (``None``: TRL's 0.0.0.0:8000); a resume may change it.
        train_options / export_options / eval_options: more keywords for ``train``
            (LoRA on by default), ``export_datasets`` and ``evaluate_models``.
    """

    rounds: int = 3
    samples: int = 4
    arch: str = "reflection"
    max_iterations: int = 1
    temperatures: tuple[float, ...] = (0.7, 1.0)
    temperature_step: float = 0.0
    thresholds: tuple[float, ...] = (7.0, 8.0, 9.0)
    method: str = "sft"
    hint_retry: bool = True
    base: str = "local"
    max_tokens: int = 128
    min_gain: float = 0.01
    patience: int = 2
    pass_score: float = 8.0
    eval_arch: str | None = None
    max_concurrency: int = 4
    max_steps: int = 4
    first_tool_call: bool = False
    judge: str | None = None
    principles: str | None = None
    min_rank_gap: float = 2.0
    agreement_threshold: float = 0.7
    min_labels: int = 20
    review_logs: tuple[str, ...] = ()
    promote: bool = True
    parallel: RoundParallel = "none"
    num_processes: int | None = None
    use_vllm: bool | None = None
    vllm_mode: str = "colocate"
    vllm_server_base_url: str | None = None
    train_options: Mapping[str, Any] = field(default_factory=dict)
    export_options: Mapping[str, Any] = field(default_factory=dict)
    eval_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperatures", tuple(float(t) for t in self.temperatures))
        object.__setattr__(self, "thresholds", tuple(float(t) for t in self.thresholds))
        logs = self.review_logs  # one log, not a sequence of characters
        object.__setattr__(self, "review_logs", tuple(
            str(p) for p in ([logs] if isinstance(logs, (str, os.PathLike)) else logs)))
        checks: list[tuple[bool, str]] = [
            (_count(self.rounds), f"rounds (--rounds) must be at least 1, got {self.rounds!r}"),
            (_count(self.samples),
             f"samples (--samples) must be at least 1, got {self.samples!r}"),
            (_count(self.max_iterations),
             f"max_iterations (--max-iterations) must be at least 1, got {self.max_iterations!r}"),
            (_count(self.patience),
             f"patience (--patience) must be at least 1, got {self.patience!r}"),
            (_count(self.max_tokens),
             f"max_tokens (--max-tokens) must be at least 1, got {self.max_tokens!r}"),
            (_count(self.max_concurrency),
             f"max_concurrency must be at least 1, got {self.max_concurrency!r}"),
            (_count(self.max_steps),
             f"max_steps (--max-steps) must be at least 1, got {self.max_steps!r}"),
            (bool(self.temperatures) and all(t >= 0 for t in self.temperatures),
             f"temperatures (--temperatures) must be one or more numbers >= 0, "
             f"got {self.temperatures}"),
            (bool(self.thresholds) and all(0 <= t <= 10 for t in self.thresholds),
             f"thresholds (--thresholds) are scores on the 0-10 scale, got {self.thresholds}"),
            (all(a <= b for a, b in zip(self.thresholds, self.thresholds[1:], strict=False)),
             "thresholds (--thresholds) must not fall from one round to the next (the bar "
             f"rises), got {self.thresholds}"),
            (self.method in IMPROVE_METHODS,
             f"method (--method) must be one of {', '.join(IMPROVE_METHODS)}, "
             f"got {self.method!r}"),
            (self.judge is None or (isinstance(self.judge, str) and bool(self.judge.strip())),
             f"judge (--judge) is a chat model spec (local, local:<dir>, openai:<model>, ...), "
             f"got {self.judge!r}"),
            (self.principles is None or self.method == "constitutional",
             f"principles (--principles) are the constitutional method's; pass --method "
             f"constitutional or drop --principles (method is {self.method!r})"),
            (0 < self.min_rank_gap <= 10,
             f"min_rank_gap (--min-rank-gap) is a judge-score gap in (0, 10], "
             f"got {self.min_rank_gap}"),
            (-1 <= self.agreement_threshold <= 1,
             f"agreement_threshold (--agreement-threshold) is a correlation in [-1, 1], "
             f"got {self.agreement_threshold}"),
            (_count(self.min_labels),
             f"min_labels (--min-labels) must be at least 1, got {self.min_labels!r}"),
            (all(Path(p).expanduser().exists() for p in self.review_logs),
             "review_logs (--review-logs): "
             f"{[p for p in self.review_logs if not Path(p).expanduser().exists()]} not found; "
             "pass the TrajectoryLog folders (or .jsonl files) people labelled"),
            (self.min_gain >= 0, f"min_gain (--min-gain) must be 0 or more, got {self.min_gain}"),
            (0 <= self.pass_score <= 10,
             f"pass_score is a score on the 0-10 scale, got {self.pass_score}"),
            (self.train_options.get("merge_lora", True) is not False,
             "improve gates and samples the trained model in-process, which needs a merged "
             "model; leave merge_lora on"),
        ] + self._launch_checks()
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        if self.principles is not None:  # a bad file is found now, not after a round's sampling
            read_principles(self.principles)
        from agentic_loop.architectures import architecture_class

        architecture_class(self.arch)
        if self.eval_arch is not None:
            architecture_class(self.eval_arch)

    def _launch_checks(self) -> list[tuple[bool, str]]:
        """The machine-independent checks of the train stage's launch and GRPO's vLLM."""
        lora = bool(self.train_kwargs().get("lora"))
        grpo_options = self.use_vllm is not None or self.vllm_mode != "colocate"
        return [
            (self.parallel in ROUND_PARALLEL,
             f"parallel (--parallel) must be one of {', '.join(ROUND_PARALLEL)}, "
             f"got {self.parallel!r}"),
            (self.num_processes is None or _count(self.num_processes),
             f"num_processes (--num-processes) must be at least 1, got {self.num_processes!r}"),
            (self.num_processes is None or self.parallel != "none",
             f"num_processes (--num-processes) {self.num_processes} sizes a launched train "
             "stage; pass --parallel auto, ddp, fsdp or zero3 with it, or drop it"),
            (not (self.parallel in SHARDED and lora),
             f"parallel (--parallel) {self.parallel} with a LoRA adapter cannot work in "
             "improve: the round merges the adapter into its base to sample and gate it, and "
             "sharding leaves each GPU a part of the base; pass --full (every weight, "
             "train_options lora=False), or --parallel ddp"),
            (self.vllm_mode in ("colocate", "server"),
             f"vllm_mode (--vllm-mode) must be 'colocate' or 'server', got {self.vllm_mode!r}"),
            (not grpo_options or train_method(self.method) == "grpo",
             "use_vllm and vllm_mode (--use-vllm, --vllm-mode) set GRPO's generation; method "
             f"{self.method!r} trains {train_method(self.method)!r}: drop them or pass "
             "--method grpo (or ttrl)"),
            (self.vllm_server_base_url is None or train_method(self.method) == "grpo",
             "vllm_server_base_url (--vllm-server-url) is GRPO's vLLM server; method "
             f"{self.method!r} trains {train_method(self.method)!r}: drop it or pass "
             "--method grpo (or ttrl)"),
            *vllm_server_checks(self.vllm_server_base_url, self.vllm_mode, self.use_vllm),
        ]

    def threshold_for(self, round_number: int) -> float:
        """The SFT score threshold (0-10) of round ``round_number`` (1-based)."""
        return self.thresholds[min(round_number, len(self.thresholds)) - 1]

    def temperature_for(self, round_number: int, sample: int) -> float:
        """The sampling temperature of sample ``sample`` (0-based) in round ``round_number``."""
        base = self.temperatures[sample % len(self.temperatures)]
        return round(max(0.0, base + self.temperature_step * (round_number - 1)), 6)

    def train_kwargs(self, method: str | None = None) -> dict[str, Any]:
        """The keywords ``train`` gets: LoRA unless ``train_options`` says otherwise; for a
        GRPO ``method``, the vLLM settings that are not the trainer's defaults.

        >>> ImproveSettings(method="grpo", use_vllm=True).train_kwargs("grpo")
        {'lora': True, 'use_vllm': True}
        """
        vllm: dict[str, Any] = {}
        if method == "grpo":
            vllm = {k: getattr(self, k) for k in ("use_vllm", "vllm_mode", "vllm_server_base_url")
                    if getattr(self, k) != _LATER[k]}
        return {"lora": True, **vllm, **self.train_options}

    def eval_kwargs(self) -> dict[str, Any]:
        """The keywords ``evaluate_models`` gets (the samples' ``max_tokens``, no bar of its own,
        by default)."""
        return {"max_tokens": self.max_tokens, "progress": False, **self.eval_options}

    def to_dict(self) -> dict[str, Any]:
        """Plain data (``improve.json``)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # no deep copy of models
        for key in ("temperatures", "thresholds", "review_logs"):
            data[key] = list(data[key])
        for key in ("train_options", "export_options", "eval_options"):
            data[key] = {k: (v if isinstance(v, (str, int, float, bool, type(None)))
                             else repr(v)) for k, v in dict(data[key]).items()}
        return data

    def fingerprint(self, source: str = "") -> str:
        """A short hash of everything a resume must not change (the stop rules may change)."""
        data = {k: v for k, v in self.to_dict().items() if k not in _RESUMABLE
                and not (k in _LATER and v == _LATER[k])}
        for key in ("export_options", "eval_options", "train_options"):
            data[key] = {k: v for k, v in data[key].items() if k != "progress"
                         and not str(v).startswith("<")}
        payload = json.dumps({"settings": data, "source": source}, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def votes_unchecked(method: str, train_options: Mapping[str, Any]) -> bool:
    """Whether a round's reward is the group's majority vote where no check decides (``ttrl``,
    ``grpo`` with ``judged_reward="vote"``): its pool keeps the tasks without a check.

    >>> votes_unchecked("ttrl", {}), votes_unchecked("grpo", {"judged_reward": "vote"})
    (True, True)
    >>> votes_unchecked("grpo", {}), votes_unchecked("sft", {"judged_reward": "vote"})
    (False, False)
    """
    return method == "ttrl" or (method == "grpo" and train_options.get("judged_reward") == "vote")


def train_method(method: str) -> str:
    """The trainer (``sft``, ``dpo``, ``sft+dpo``, ``grpo``) that ``method`` trains with.

    >>> train_method("self-rewarding"), train_method("ttrl"), train_method("sft")
    ('dpo', 'grpo', 'sft')
    """
    return LOOP_METHODS.get(method, method)


def read_principles(path: str | os.PathLike[str]) -> tuple[tuple[str, str], ...]:
    """A constitution file as ``(name, description)`` pairs: one principle a line, ``name:
    description`` or just the description (``#`` comments and blank lines skipped).

    Read when the settings are built, so a bad file fails before a round samples.
    """
    file = Path(path).expanduser()
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"principles file {file} cannot be read ({exc}); pass a text file "
                          "with one principle a line (--principles)") from None
    found: list[tuple[str, str]] = []
    for line in (raw.strip() for raw in lines):
        if not line or line.startswith("#"):
            continue
        name, sep, text = line.partition(":")
        if sep and name.strip().isidentifier() and text.strip():
            found.append((name.strip(), text.strip()))
        else:
            found.append((f"principle_{len(found) + 1}", line))
    if not found:
        raise ConfigError(f"principles file {file} holds no principle; write one a line, "
                          "'name: description' or just the description")
    names = [name for name, _ in found]
    if len(set(names)) != len(names):
        raise ConfigError(f"principles file {file} names a principle twice ({names}); "
                          "give each line its own name")
    return tuple(found)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1
