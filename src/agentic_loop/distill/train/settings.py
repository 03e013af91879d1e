"""The settings of one training run: checked up front, defaulted per method, fingerprinted.

A run that fails on a bad learning rate after loading a model wastes
minutes; a run resumed with different settings silently trains a model
nobody asked for. So the settings are one frozen object, validated when it
is built (errors name the argument and its ``agentic-loop train`` flag),
and hashed into a fingerprint that resume and the model card compare.

Learning-rate defaults differ by method and by LoRA: a LoRA adapter starts
at zero and needs a ~10x larger step than full fine-tuning, and DPO moves a
policy away from a reference, which needs smaller steps than SFT. GRPO
(online RL, the rubric's checks as the reward) takes TRL's own 1e-6, and
its own KL strength: ``beta`` defaults to 0.1 for DPO and 0.04 for GRPO
(DeepSeekMath's; 0 drops the reference model). GRPO's fields carry TRL's
``GRPOConfig`` names (``num_generations``, ``max_completion_length``,
``temperature``, ``use_vllm``, ``vllm_mode``, ``vllm_server_base_url``: the
``trl vllm-serve`` server of ``vllm_mode="server"``, kept off the fingerprint
as where generation runs does not change the model).

The trainer knobs a TRL user looks for keep TRL's names too:
``lr_scheduler_type`` and ``warmup_steps`` (a step count, or below 1 a
fraction of the run), ``gradient_accumulation_steps``, ``lora_r`` /
``lora_alpha`` / ``lora_target_modules``, ``validation_split`` (a seeded
share of the SFT or DPO rows held out and scored as ``eval_loss``) and
``report_to`` (``"none"``, ``"tensorboard"``, ``"wandb"``, ...). At their
defaults they leave the card and the fingerprint as they were, so a run
started before they existed still resumes; ``report_to`` never enters the
fingerprint: where the curves go does not change the model. Nor does
``parallel`` (``"auto"``, ``"ddp"``, ``"fsdp"``, ``"zero3"``: how the run
spreads over GPUs, :mod:`agentic_loop.distill.train.parallel`); the card keeps
it when it is not ``"auto"``.

``tool_format`` says how tool-calling rows become training text:
``"engine"`` (the in-process engine's prompt and call format),
``"chat_template"`` (the model's own template renders ``tool_calls`` and
``tools``) or ``"auto"`` (the template's when it mentions tools, else the
engine's); see :mod:`agentic_loop.distill.train.tool_format`.

GRPO's reward may add a *judged* part to the checks' part
(:mod:`agentic_loop.distill.train.judged_reward`): ``judged_reward="rank"``
has a judge model rank each prompt's group of completions on the rubric's
judged features (``judge``: a chat model spec, default the policy's base
model, loaded once and never trained); ``"vote"`` rewards agreeing with the
group's majority short answer (TTRL, no model). The judged part weighs
``judged_reward_weight`` against the checks' 1. At ``"none"`` (the default)
the card and the fingerprint are as they were.

Example:
    >>> s = TrainSettings(method="dpo", lora=True)
    >>> s.learning_rate_for("dpo"), s.stages
    (5e-05, ('dpo',))
    >>> g = TrainSettings(method="grpo", num_generations=2, batch_size=4)
    >>> g.learning_rate_for("grpo"), g.beta_for("grpo"), g.stages
    (1e-06, 0.04, ('grpo',))
    >>> TrainSettings(method="sft+dpo").stages
    ('sft', 'dpo')
    >>> TrainSettings(method="sft", epochs=0)
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: epochs (--epochs) must be positive, got 0
    >>> TrainSettings().fingerprint("abc") == TrainSettings().fingerprint("abc")
    True
    >>> TrainSettings(report_to="wandb").fingerprint("abc") == TrainSettings().fingerprint("abc")
    True
    >>> TrainSettings(report_to="tensorboard,wandb").reporters
    ['tensorboard', 'wandb']
    >>> TrainSettings(tool_format="engine").hyperparameters()["tool_format"]
    'engine'
    >>> "tool_format" in TrainSettings().hyperparameters()  # the default leaves the card as it was
    False
    >>> j = TrainSettings(method="grpo", judged_reward="rank", judge="local")
    >>> j.hyperparameters()["judge"], j.hyperparameters()["judged_reward"]
    ('local', 'rank')
    >>> "judged_reward" in TrainSettings(method="grpo").hyperparameters()
    False
    >>> TrainSettings(method="grpo", judge="local")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: judge (--judge) names the model of the judged reward, ...
    >>> [len(part) for part in split_validation(list(range(10)), 0.2, seed=0)]
    [8, 2]
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from typing import Any, Literal
from urllib.parse import urlsplit

from agentic_loop.distill.train.parallel import parallel_checks
from agentic_loop.errors import ConfigError

__all__ = ["DEFAULT_BETAS", "DEFAULT_LEARNING_RATES", "GRPO_FIELDS", "JUDGED_REWARDS",
           "LLM_FEATURE_POLICIES", "LR_SCHEDULERS", "METHODS", "REPORTERS", "TOOL_FORMATS",
           "JudgedRewardKind", "Method", "TrainSettings", "split_validation",
           "vllm_server_checks"]

Method = Literal["sft", "dpo", "sft+dpo", "grpo"]
METHODS: tuple[str, ...] = ("sft", "dpo", "sft+dpo", "grpo")
#: How a rubric with LLM-judged features becomes a reward: its checks only, or refused.
LLM_FEATURE_POLICIES: tuple[str, ...] = ("checks", "refuse")
JudgedRewardKind = Literal["none", "rank", "vote"]
#: GRPO reward's judged part: none (checks only), rank (a judge ranks each group), vote (TTRL).
JUDGED_REWARDS: tuple[str, ...] = ("none", "rank", "vote")
#: The fields only GRPO reads (left out of other methods' cards and fingerprints).
GRPO_FIELDS: tuple[str, ...] = ("num_generations", "max_completion_length", "temperature",
                                "use_vllm", "vllm_mode", "vllm_server_base_url",
                                "reward_workers", "check_reward_weight",
                                "format_penalty", "llm_features", "tool_max_turns",
                                "free_first_turn", "judge", "judged_reward",
                                "judged_reward_weight")

#: transformers' ``SchedulerType`` values (``lr_scheduler_type``).
LR_SCHEDULERS: tuple[str, ...] = (
    "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
    "inverse_sqrt", "reduce_lr_on_plateau", "cosine_with_min_lr", "cosine_warmup_with_min_lr",
    "warmup_stable_decay")
#: transformers' reporting integrations (``report_to``), besides "none" and "all".
REPORTERS: tuple[str, ...] = (
    "azure_ml", "clearml", "codecarbon", "comet_ml", "dagshub", "dvclive", "flyte", "mlflow",
    "neptune", "swanlab", "tensorboard", "trackio", "wandb")
#: How tool-calling rows become training text (see :mod:`.tool_format`).
TOOL_FORMATS: tuple[str, ...] = ("auto", "engine", "chat_template")
#: The knobs that stay off the card and the fingerprint at their default (see the module doc).
_QUIET_DEFAULTS: dict[str, object] = {"lr_scheduler_type": "linear", "warmup_steps": 0.0,
                                      "validation_split": 0.0, "report_to": "none",
                                      "tool_format": "auto", "judge": None,
                                      "judged_reward": "none", "judged_reward_weight": 1.0,
                                      "parallel": "auto", "vllm_server_base_url": None}
#: The knobs that never enter the fingerprint: how a run reports, spreads or reaches vLLM.
_UNFINGERPRINTED: tuple[str, ...] = ("report_to", "parallel", "vllm_server_base_url")

#: (stage, lora) -> learning rate, used when none is given.
DEFAULT_LEARNING_RATES: dict[tuple[str, bool], float] = {
    ("sft", False): 2e-5,
    ("sft", True): 2e-4,
    ("dpo", False): 5e-6,
    ("dpo", True): 5e-5,
    ("grpo", False): 1e-6,
    ("grpo", True): 1e-5,
}

#: stage -> KL strength (``beta``), used when none is given.
DEFAULT_BETAS: dict[str, float] = {"dpo": 0.1, "grpo": 0.04}


@dataclass(frozen=True)
class TrainSettings:
    """Everything that decides what a training run produces (not how it reports progress).

    ``learning_rate=None`` takes :data:`DEFAULT_LEARNING_RATES` for the
    method's *last* stage; with ``sft+dpo`` the SFT stage takes its own
    default unless ``learning_rate`` is given (then both stages use it).
    ``beta=None`` takes :data:`DEFAULT_BETAS`. With GRPO, ``batch_size`` is
    TRL's: completions per device per step (``num_generations`` of them per
    prompt), and ``max_length`` does not apply.
    """

    method: str = "sft"
    lora: bool = False
    max_steps: int | None = None
    epochs: float = 1.0
    beta: float | None = None
    seed: int = 0
    learning_rate: float | None = None
    batch_size: int = 4
    gradient_accumulation_steps: int = 1
    max_length: int = 512
    merge_lora: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: str | tuple[str, ...] = "all-linear"
    gradient_checkpointing: bool = False
    save_steps: int = 50
    lr_scheduler_type: str = "linear"
    warmup_steps: float = 0.0
    validation_split: float = 0.0
    report_to: str = "none"
    tool_format: str = "auto"
    # GRPO (see GRPO_FIELDS)
    num_generations: int = 4
    max_completion_length: int = 128
    temperature: float = 1.0
    use_vllm: bool | None = None
    vllm_mode: str = "colocate"
    #: vllm_mode "server": the base URL of the ``trl vllm-serve`` server (None: TRL's
    #: host and port, 0.0.0.0:8000)
    vllm_server_base_url: str | None = None
    reward_workers: int = 0
    check_reward_weight: float = 0.0
    format_penalty: float = 0.0
    llm_features: str = "checks"
    #: GRPO on tasks with tools: model turns an episode may take (its calls and the answer)
    tool_max_turns: int = 4
    #: GRPO on tasks with tools: let the policy choose its first turn (by default it is a
    #: tool call, as ``tool_agent(first_tool_choice="any")`` makes it at inference)
    free_first_turn: bool = False
    #: GRPO's judged reward: the judge's chat model spec, or a LangChain chat model (in
    #: Python; the card keeps its id); None: the policy's base model
    judge: Any = None
    #: GRPO's judged reward part: none (checks only), rank (GroupRanker), vote (majority)
    judged_reward: str = "none"
    #: the judged part's weight in the reward (the checks' part weighs 1)
    judged_reward_weight: float = 1.0
    #: how a run spreads over GPUs: auto (DDP on 2+ GPUs), ddp, fsdp or zero3 (see .parallel)
    parallel: str = "auto"

    def __post_init__(self) -> None:
        checks: list[tuple[bool, str]] = [
            (self.method in METHODS,
             f"method (--method) must be one of {', '.join(METHODS)}, got {self.method!r}"),
            (self.max_steps is None or self.max_steps >= 1,
             f"max_steps (--max-steps) must be at least 1, got {self.max_steps}"),
            (self.epochs > 0, f"epochs (--epochs) must be positive, got {self.epochs:g}"),
            (self.beta is None or self.beta > 0 or (self.method == "grpo" and self.beta == 0),
             f"beta (--beta) must be positive (0 allowed for grpo), got {self.beta}"),
            (self.learning_rate is None or self.learning_rate > 0,
             f"learning_rate (--learning-rate) must be positive, got {self.learning_rate}"),
            (self.batch_size >= 1,
             f"batch_size (--batch-size) must be at least 1, got {self.batch_size}"),
            (self.gradient_accumulation_steps >= 1,
             "gradient_accumulation_steps must be at least 1, "
             f"got {self.gradient_accumulation_steps}"),
            (self.max_length >= 16,
             f"max_length (--max-length) must be at least 16 tokens, got {self.max_length}"),
            (self.lora_r >= 1 and self.lora_alpha >= 1, "lora_r and lora_alpha must be at least 1"),
            (0 <= self.lora_dropout < 1,
             f"lora_dropout must be in [0, 1), got {self.lora_dropout}"),
            (self.save_steps >= 1, f"save_steps must be at least 1, got {self.save_steps}"),
            (self.lr_scheduler_type in LR_SCHEDULERS,
             f"lr_scheduler_type (--lr-scheduler-type) must be one of {', '.join(LR_SCHEDULERS)}, "
             f"got {self.lr_scheduler_type!r}"),
            (0 <= self.warmup_steps < 1 or float(self.warmup_steps).is_integer() and
             self.warmup_steps > 0,
             "warmup_steps (--warmup-steps) must be a whole number of steps or a fraction in "
             f"[0, 1), got {self.warmup_steps:g}"),
            (0 <= self.validation_split < 1,
             f"validation_split (--validation-split) must be in [0, 1), got "
             f"{self.validation_split:g}"),
            (not (self.validation_split and self.method == "grpo"),
             "validation_split (--validation-split) applies to sft and dpo; GRPO has no held-out "
             "answers to score; drop it"),
            (self.report_to in ("none", "all") or all(r in REPORTERS for r in self.reporters),
             f"report_to (--report-to) must be none, all or a comma-separated list of "
             f"{', '.join(REPORTERS)}; got {self.report_to!r}"),
            (self.tool_format in TOOL_FORMATS,
             f"tool_format (--tool-format) must be one of {', '.join(TOOL_FORMATS)}, got "
             f"{self.tool_format!r}"),
            (not (self.method == "sft+dpo" and self.lora and not self.merge_lora),
             ("method 'sft+dpo' with an unmerged LoRA adapter cannot work: the DPO adapter's "
              "base is the SFT model, which only exists merged; drop --no-merge, or train 'sft' "
              "and 'dpo' separately")),
        ]
        checks += parallel_checks(self.parallel, merged_lora=self.lora and (
            self.merge_lora or self.method == "sft+dpo"))
        if self.method == "grpo":
            checks += self._grpo_checks() + self._judge_checks()
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    def _grpo_checks(self) -> list[tuple[bool, str]]:
        per_step = self.batch_size * self.gradient_accumulation_steps
        return [
            (self.num_generations >= 2,
             "num_generations (--num-generations) must be at least 2: GRPO compares completions "
             f"of the same prompt, got {self.num_generations}"),
            (per_step % self.num_generations == 0,
             f"batch_size x gradient_accumulation_steps ({per_step}) must be a multiple of "
             f"num_generations ({self.num_generations}): each step scores whole groups; set "
             f"--batch-size to {self.num_generations} or a multiple of it"),
            (self.max_completion_length >= 1,
             "max_completion_length (--max-completion-length) must be at least 1, "
             f"got {self.max_completion_length}"),
            (self.temperature > 0,
             f"temperature (--temperature) must be positive, got {self.temperature:g}"),
            (self.vllm_mode in ("colocate", "server"),
             f"vllm_mode must be 'colocate' or 'server', got {self.vllm_mode!r}"),
            *vllm_server_checks(self.vllm_server_base_url, self.vllm_mode, self.use_vllm),
            (self.reward_workers >= 0,
             f"reward_workers (--reward-workers) must be 0 or more, got {self.reward_workers}"),
            (self.check_reward_weight >= 0 and self.format_penalty >= 0,
             "check_reward_weight and format_penalty (--check-reward-weight, --format-penalty) "
             f"must be 0 or more, got {self.check_reward_weight:g} and {self.format_penalty:g}"),
            (self.tool_max_turns >= 1,
             f"tool_max_turns (--tool-max-turns) must be at least 1, got {self.tool_max_turns}"),
            (self.llm_features in LLM_FEATURE_POLICIES,
             f"llm_features (--llm-features) must be one of {', '.join(LLM_FEATURE_POLICIES)}, "
             f"got {self.llm_features!r}"),
        ]

    def _judge_checks(self) -> list[tuple[bool, str]]:
        from agentic_loop.judges.group_rank import MAX_GROUP

        judge = self.judge
        return [
            (self.judged_reward != "rank" or self.num_generations <= MAX_GROUP,
             f"judged_reward 'rank' shows a prompt's num_generations completions to the judge "
             f"at once, at most {MAX_GROUP}; got --num-generations {self.num_generations}"),
            (self.judged_reward in JUDGED_REWARDS,
             f"judged_reward (--judged-reward) must be one of {', '.join(JUDGED_REWARDS)}, got "
             f"{self.judged_reward!r}"),
            (judge is None or (bool(judge.strip()) if isinstance(judge, str) else
                               callable(getattr(judge, "invoke", None))),
             f"judge (--judge) must be a chat model spec such as 'local' or 'openai:gpt-4o-mini', "
             f"or a LangChain chat model, got {judge!r:.80}"),
            (judge is None or self.judged_reward == "rank",
             "judge (--judge) names the model of the judged reward, which only --judged-reward "
             f"rank asks (got judged_reward={self.judged_reward!r}); pass --judged-reward rank, "
             "or drop --judge"),
            (self.judged_reward_weight > 0,
             "judged_reward_weight (--judged-reward-weight) must be positive, got "
             f"{self.judged_reward_weight:g}"),
            (not (self.judged_reward == "rank" and self.llm_features == "refuse"),
             "judged_reward 'rank' has a judge score the rubrics' LLM-judged features, and "
             "llm_features 'refuse' refuses them; drop --llm-features refuse, or the judged "
             "reward"),
        ]

    @property
    def judge_name(self) -> str | None:
        """``judge`` as the card and the fingerprint keep it: the spec, or the model's id.

        >>> from agentic_loop.testing import ScriptedChatModel
        >>> TrainSettings(method="grpo", judged_reward="rank",
        ...               judge=ScriptedChatModel(model_id="big-judge")).judge_name
        'big-judge'
        """
        if self.judge is None or isinstance(self.judge, str):
            return self.judge
        from agentic_loop.models.wrappers import model_id_of

        return model_id_of(self.judge)

    @property
    def reporters(self) -> list[str]:
        """``report_to`` as the list TRL takes (``[]`` for "none")."""
        if self.report_to == "none":
            return []
        return [r.strip() for r in self.report_to.split(",") if r.strip()]

    @property
    def stages(self) -> tuple[str, ...]:
        """The trainer stages this method runs, in order."""
        return ("sft", "dpo") if self.method == "sft+dpo" else (self.method,)

    def learning_rate_for(self, stage: str) -> float:
        """The learning rate of one stage (explicit, else the method/LoRA default)."""
        if self.learning_rate is not None:
            return self.learning_rate
        return DEFAULT_LEARNING_RATES[(stage, self.lora)]

    def beta_for(self, stage: str) -> float:
        """The KL strength of a DPO or GRPO stage (explicit, else the stage's default)."""
        return self.beta if self.beta is not None else DEFAULT_BETAS[stage]

    @property
    def adapter_output(self) -> bool:
        """True when the output directory holds a LoRA adapter, not a full model."""
        return self.lora and not self.merge_lora

    def hyperparameters(self) -> dict[str, Any]:
        """The settings as plain data, for the model card (resolved learning rates included)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # flat: no model copies
        if self.judge is not None:
            data["judge"] = self.judge_name
        data["lora_target_modules"] = (self.lora_target_modules if isinstance(
            self.lora_target_modules, str) else list(self.lora_target_modules))
        data["learning_rates"] = {s: self.learning_rate_for(s) for s in self.stages}
        if not self.lora:
            lora_keys = ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
                         "merge_lora")
            for key in lora_keys:
                data.pop(key)
        kl_stages = [s for s in self.stages if s in DEFAULT_BETAS]
        if kl_stages:
            data["beta"] = self.beta_for(kl_stages[-1])
        else:
            data.pop("beta")
        for key, default in _QUIET_DEFAULTS.items():
            if data[key] == default:
                data.pop(key)
        if "grpo" in self.stages:
            data.pop("max_length")
        else:
            for key in GRPO_FIELDS:
                data.pop(key, None)
        return data

    def fingerprint(self, data_hash: str, base: str = "") -> str:
        """A short hash of these settings, the data and the base: equal means "same run"."""
        settings = {k: v for k, v in self.hyperparameters().items()
                    if k not in _UNFINGERPRINTED}
        payload = json.dumps({"settings": settings, "data": data_hash, "base": base},
                             sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def vllm_server_checks(url: str | None, vllm_mode: str,
                       use_vllm: bool | None) -> list[tuple[bool, str]]:
    """The checks of ``vllm_server_base_url`` (``--vllm-server-url``): an http(s) URL, server mode.

    Shared by :class:`TrainSettings` and the improve loop's settings.

    >>> [ok for ok, _ in vllm_server_checks("http://gpu-box:8000", "server", None)]
    [True, True, True]
    >>> [ok for ok, _ in vllm_server_checks("gpu-box:8000", "colocate", False)]
    [False, False, False]
    """
    if url is None:
        return []
    parts = urlsplit(url)
    return [
        (parts.scheme in ("http", "https") and bool(parts.hostname),
         f"vllm_server_base_url (--vllm-server-url) must be an http(s) URL such as "
         f"http://localhost:8000, got {url!r}"),
        (vllm_mode == "server",
         "vllm_server_base_url (--vllm-server-url) names the server of --vllm-mode server, "
         f"got vllm_mode={vllm_mode!r}; pass --vllm-mode server, or drop --vllm-server-url"),
        (use_vllm is not False,
         "vllm_server_base_url (--vllm-server-url) is where GRPO generates with vLLM, and "
         "--no-vllm turns vLLM off; drop one of them"),
    ]


def split_validation(rows: list[Any], fraction: float, *, seed: int) -> tuple[list[Any], list[Any]]:
    """``rows`` split into (train, held out): a seeded shuffle, at least one row each side.

    The same seed gives the same split on every process of a multi-GPU run,
    and on a resumed run. ``fraction`` 0 holds nothing out.
    """
    if not fraction:
        return rows, []
    import random

    held = max(1, round(len(rows) * fraction))
    if held >= len(rows):
        raise ConfigError(f"validation_split (--validation-split) {fraction:g} of {len(rows)} "
                          "rows leaves nothing to train on; add rows or lower the split")
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    out = set(order[:held])
    return ([r for i, r in enumerate(rows) if i not in out], [rows[i] for i in order[:held]])
