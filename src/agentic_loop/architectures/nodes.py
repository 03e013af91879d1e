"""The nodes every architecture shares: generate, critique, refine, the stop rule, finalize.

Why a module of its own: these are the loop's *steps*, the part a new
architecture reuses or overrides one at a time (Reflexion swaps refine for
reflect, ArchiveRefine adds retrieve and archives in finalize), apart from
the graph wiring (:mod:`.base`) and the ways to run a graph (:mod:`.runner`).
Every model call of a node goes through the architecture's one
:class:`~agentic_loop.models.retry.RetryPolicy`; every judgement becomes a
:class:`~agentic_loop.trajectories.Round`, the one round model from state to disk,
holding the prompt its draft was written from (recorded by :meth:`LoopNodes._call`).

No run is lost in ``finalize``: the memory hook (:meth:`LoopNodes._on_finalize`,
e.g. the archive add) and the trajectory append each run on their own, and a
failure of either becomes an error of the run, never a lost output or record.

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> critic = Critic(ScriptedChatModel(), Rubric.for_constraints(exact_words=1),
    ...                 critique_text=False)
    >>> critique = critic.critique("One word.", "two words")
    >>> judged_round(0, "two words", critique, 0.01).model_dump(include={"score", "passed"})
    {'score': 0.0, 'passed': False}
    >>> rubric_for_task("Write a tagline in exactly 5 words.").names
    ('exact_words', 'on_task', 'well_written')

A run's settings (rubric, target, budgets, sampling, run metadata) are read
from the state, where the run's first node left them
(:mod:`.settings`); the node wrapper binds them for the node's model calls
(:func:`active_settings`), so no node copies the architecture.
"""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from agentic_loop.agents import AgentRunner
from agentic_loop.architectures.prompts import (
    bound_output,
    chat_messages,
    clean_output,
    fresh_draft_prompt,
    refine_prompt,
)
from agentic_loop.architectures.results import MAX_ERROR_CHARS, best_round, trajectory_of
from agentic_loop.architectures.sampling import (
    Drawn,
    draw,
    draw_episodes,
    judged_round,
    pick_best,
    record_draws,
    record_prompt,
    recording_prompts,
    shown_outputs,
    temperature_at,
)
from agentic_loop.architectures.settings import (
    ResolvedSettings,
    RubricCache,
    UncheckedConstraintsWarning,
    active_settings,
    current_run_id,
    current_settings,
    resolve_settings,
    warn_unchecked_constraints,
)
from agentic_loop.architectures.state import LoopState
from agentic_loop.architectures.tracing import node_metadata, with_langsmith_run
from agentic_loop.judges import Critic, GroupRanker, Rubric, rubric_for_task
from agentic_loop.judges.task_rubric import TASK_CHECK_WEIGHT
from agentic_loop.models.retry import RetryPolicy
from agentic_loop.models.structured_output import message_text
from agentic_loop.models.wrappers import model_id_of
from agentic_loop.prompt_format import DraftPrompt, ExemplarStyle, rubric_requirements
from agentic_loop.trajectories import Candidate, Round, Trajectory, TrajectoryLog
from agentic_loop.trajectory_stores import PostgresTrajectoryLog

__all__ = ["DEFAULT_MAX_OUTPUT_CHARS", "REFINE_MODES", "TASK_CHECK_WEIGHT", "LoopNodes",
           "RefineMode", "UncheckedConstraintsWarning", "active_settings", "judged_round",
           "node_metadata", "recording_prompts", "task_rubric", "warn_unchecked_constraints"]

#: Longer model answers are cut (and the cut recorded): no task here wants more, and a
#: runaway generation must not make a run too large to judge, archive or log.
DEFAULT_MAX_OUTPUT_CHARS = 20_000
RefineMode = Literal["feedback", "resample"]
REFINE_MODES: tuple[str, ...] = get_args(RefineMode)


def task_rubric(task: str) -> Rubric:
    """Deprecated alias of :func:`agentic_loop.judges.rubric_for_task` (kept for one release)."""
    warnings.warn("agentic_loop.architectures.task_rubric is deprecated; use "
                  "agentic_loop.judges.rubric_for_task", DeprecationWarning, stacklevel=2)
    return rubric_for_task(task)


class LoopNodes:
    """The shared nodes and stop rule; :class:`~agentic_loop.architectures.Architecture` uses them.

    Subclasses override single nodes (``_generate``, ``_refine``, ...), the stop
    rule (:meth:`stop_reason`) or the finalize hook (:meth:`_on_finalize`).
    """

    name: ClassVar[str] = "architecture"
    #: Judge the checks first and skip the LLM judge when one fails (see ``Critic``).
    checks_first: ClassVar[bool] = False

    # set by Architecture.__init__
    llm: BaseChatModel
    judge_llm: BaseChatModel
    agent: AgentRunner | None
    model_id: str
    rubric: Rubric | None
    target_score: float
    max_iterations: int
    plateau_patience: int
    min_improvement: float
    refine: RefineMode
    trajectories: TrajectoryLog | PostgresTrajectoryLog | None
    critique_text: bool
    critic_retries: int
    retry: RetryPolicy
    max_output_chars: int | None
    samples_per_round: int
    rank_ties: bool
    temperature: Any
    #: how a fresh draft shows retrieved exemplars (ArchiveRefine: few-shot ``"turns"``)
    exemplars_as: ExemplarStyle = "text"

    # -- configuration shared by nodes --------------------------------------
    def rubric_for(self, task: str, config: RunnableConfig | None = None) -> Rubric:
        """The rubric of this run: ``run(rubric=...)``, else the architecture's, else the task's."""
        given = ((config or {}).get("configurable") or {}).get("rubric")
        rubric: Rubric | None = given or self.rubric
        if rubric is None:
            return rubric_for_task(task)
        warned: set[tuple[int, int]] = self.__dict__.setdefault("_unchecked_warned", set())
        key = (hash(task), id(rubric))
        if key not in warned:  # once per task and rubric, not once per node
            warned.add(key)
            warn_unchecked_constraints(task, rubric)
        return rubric

    def requirements(self, task: str, config: RunnableConfig | None = None) -> str:
        """The verifiable requirements of a run's rubric, as prompts show them.

        See :func:`~agentic_loop.prompt_format.rubric_requirements`; nodes use
        :meth:`run_rubric`, which reads the rubric the run resolved once.
        """
        return rubric_requirements(self.rubric_for(task, config))

    def settings_of(self, state: Mapping[str, Any],
                    config: RunnableConfig | None = None) -> ResolvedSettings:
        """The run's settings, as its first node left them in the state.

        A state without them (a node called outside the graph) gets them
        resolved from the config and the architecture's defaults.
        """
        saved = state.get("settings")
        if saved:
            return (saved if isinstance(saved, ResolvedSettings)
                    else ResolvedSettings.model_validate(saved))
        return resolve_settings(self, state, config or {}, None)

    def run_rubric(self, state: Mapping[str, Any],
                   config: RunnableConfig | None = None) -> Rubric:
        """The rubric of the run ``state`` belongs to: built once per run, then cached.

        Built from the settings' record (:class:`~.settings.ResolvedSettings`):
        the context's constraints, the ``run(rubric=...)`` of the config, the
        architecture's rubric, or the task's (:func:`~agentic_loop.judges.rubric_for_task`).
        """
        settings = self.settings_of(state, config)
        task = state["task"]

        def build() -> Rubric:
            given: Rubric | None = None
            if settings.rubric_from == "context" and settings.constraints:
                given = Rubric.for_constraints(**settings.constraints)
            elif settings.rubric_from == "run":
                given = ((config or {}).get("configurable") or {}).get("rubric")
            return self.rubric_for(task, {"configurable": {"rubric": given}})

        cache: RubricCache = self.__dict__.setdefault("_run_rubrics", RubricCache())
        return cache.get(state.get("run_id"), build)

    def run_requirements(self, state: Mapping[str, Any],
                         config: RunnableConfig | None = None) -> str:
        """The verifiable requirements of the run's rubric (:meth:`run_rubric`)."""
        return rubric_requirements(self.run_rubric(state, config))

    def critic_for(self, rubric: Rubric) -> Critic:
        """The critic of a rubric, with this architecture's judging options."""
        return Critic(self.judge_llm, rubric, max_retries=self.critic_retries,
                      critique_text=self.critique_text, checks_first=self.checks_first)

    def _call(self, prompt: DraftPrompt | Sequence[BaseMessage], config: RunnableConfig,
              iteration: int) -> str:
        """One generation call, through the retry policy; the cleaned text.

        ``prompt`` is a :class:`DraftPrompt` (sent as its messages) or messages
        built by hand (recorded as a ``"custom"`` prompt); either way the node
        wrapper keeps it with the draft (see :func:`recording_prompts`). The
        call samples at round ``iteration``'s temperature and draws
        ``samples_per_round`` answers together; the first is returned and the
        node wrapper hands all of them to the judge, which keeps the best
        (see :mod:`.sampling`).
        """
        if isinstance(prompt, DraftPrompt):
            record, messages = prompt, chat_messages(prompt)
        else:
            record, messages = DraftPrompt.of_messages(prompt), list(prompt)
        record_prompt(record)
        cfg: RunnableConfig = {"metadata": {"iteration": iteration}}
        settings = current_settings()
        n, temperature = ((self.samples_per_round, temperature_at(self.temperature, iteration))
                          if settings is None else
                          (settings.samples_per_round,
                           settings.temperature_at(iteration, self.temperature)))
        if self.agent is not None:  # an agent: each sample is a whole episode
            samples = draw_episodes(self.agent, messages, n=n, temperature=temperature,
                                    config=config, iteration=iteration, architecture=self.name,
                                    model_id=self.model_id, run_id=current_run_id(),
                                    limits=settings or self)
        else:
            answers = draw(self.llm, messages, n=n, temperature=temperature,
                           retry=self.retry, config=cfg)
            samples = [Drawn(clean_output(message_text(a)),
                             (a.response_metadata or {}).get("model_name") or self.model_id)
                       for a in answers]
        record_draws(samples)
        return samples[0].text

    def _bounded_draft(self, draft: Any, sent: Sequence[DraftPrompt],
                       drawn: Sequence[Sequence[Drawn]] = ()) -> dict[str, Any]:
        """A node's new draft as the state keeps it: clean, cut to ``max_output_chars``, with
        the prompt it came from, the length it was cut from (see :func:`bound_output`) and the
        model that wrote it; and, when the draft is the first of several samples the node's
        last call drew, all of them (``draft_samples``), for the judge to pick from. A draft
        the node rewrote after the call keeps no samples and is credited to this model."""
        raw = draft if isinstance(draft, str) else str(draft)
        text, cut_from = bound_output(raw, self.max_output_chars)
        last = list(drawn[-1]) if drawn and drawn[-1] and drawn[-1][0].text == raw else []
        samples = []
        if len(last) > 1:
            for sample in last:
                body, cut = bound_output(sample.text, self.max_output_chars)
                samples.append({"draft": body, "cut_from": cut, "model": sample.model,
                                "episode": sample.episode})
        return {"draft": text, "draft_cut_from": cut_from,
                "draft_prompt": sent[-1] if sent else None,
                "draft_model": last[0].model if last else self.model_id,
                "draft_samples": samples, "draft_episode": last[0].episode if last else None}

    @staticmethod
    def _start(state: LoopState) -> dict[str, Any]:
        """Fields the first node sets once per run (kept on resume).

        The node wrapper starts every run with
        :func:`~agentic_loop.architectures.state.fresh_run`, which sets them; this
        covers a node run outside that wrapper.
        """
        if state.get("run_id"):
            return {}
        return {"run_id": uuid.uuid4().hex, "started_at": time.time()}

    # -- nodes ----------------------------------------------------------------
    def _first_messages(self, state: LoopState, config: RunnableConfig) -> DraftPrompt:
        """The prompt of a fresh draft: task, requirements, exemplars, lessons.

        A :class:`DraftPrompt`, which :meth:`_call` sends as its messages.
        """
        task = state["task"]
        return fresh_draft_prompt(task, self.run_requirements(state, config),
                                  state.get("exemplars") or (), state.get("reflections") or (),
                                  vary_structure=bool(state.get("exemplars")),
                                  exemplars_as=self.exemplars_as)

    def _generate(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        update = self._start(state)
        update.update(draft=self._call(self._first_messages(state, config), config, 0),
                      iteration=0)
        return update

    def _judge(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Critique the current draft into one more round; of a best-of-n round's samples,
        the best (see :func:`~.sampling.pick_best`), the others kept as its alternatives.

        A draft that nearly copies an exemplar it was shown is voided (the
        ``exemplar_copy`` guard).
        """
        task, draft = state["task"], state["draft"]
        started = time.perf_counter()
        critic = self.critic_for(self.run_rubric(state, config))
        shown = shown_outputs(task, state.get("exemplars"))
        samples = state.get("draft_samples") or []
        others: list[Candidate] = []
        notes: list[str] = []
        if len(samples) > 1:
            ranker = (GroupRanker(self.judge_llm, critic.rubric, max_retries=self.critic_retries)
                      if self.rank_ties else None)
            best, critique, others = pick_best(task, samples, critic, shown, ranker=ranker,
                                               notes=notes)
            chosen = dict(samples[best])
        else:
            episode = state.get("draft_episode")
            critique = critic.critique(task, draft, exemplars=shown, episode=episode)
            chosen = {"draft": draft, "cut_from": state.get("draft_cut_from"),
                      "model": state.get("draft_model") or self.model_id, "episode": episode}
        return {"rounds": [judged_round(state.get("iteration", 0), chosen["draft"], critique,
                                        time.perf_counter() - started,
                                        prompt=state.get("draft_prompt"),
                                        cut_from=chosen.get("cut_from"),
                                        model=chosen.get("model"), alternatives=others,
                                        critique_text=self.critique_text,
                                        episode=chosen.get("episode"),
                                        judge=model_id_of(self.judge_llm),
                                        tie_break="; ".join(notes) or None)]}

    def _critique(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        return {} if state.get("errors") else self._judge(state, config)

    def _refine(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        task, last = state["task"], state["rounds"][-1]
        iteration = state.get("iteration", 0) + 1
        prompt = (self._first_messages(state, config) if self.refine == "resample" else
                  refine_prompt(task, last.draft, last.feedback or "",
                                self.run_requirements(state, config)))
        return {"draft": self._call(prompt, config, iteration), "iteration": iteration}

    def _route(self, state: LoopState) -> str:
        return "finalize" if self.stop_reason(state) else "refine"

    # -- the stop rule ----------------------------------------------------------
    def accepts(self, round_: Round, settings: ResolvedSettings | None = None) -> bool:
        """A draft is accepted when it reaches ``target_score`` and every check holds.

        The checks are what the task demands verifiably ("EXACTLY 12 words"); a
        draft that misses one is not accepted however well it scores otherwise.
        ``settings``: the run's (its target), else the architecture's target.
        """
        target = self.target_score if settings is None else settings.target_score
        return (round_.score or 0.0) >= target and bool(round_.passed)

    def stop_reason(self, state: LoopState) -> str | None:
        """Why the loop should stop now, or None to go on. Always bounded by max_iterations.

        The target and budgets are the run's (:meth:`settings_of` the state).
        """
        if state.get("errors"):
            return "error"
        rounds = state.get("rounds", [])
        if not rounds:
            return None
        settings = self.settings_of(state)
        if self.accepts(rounds[-1], settings):
            return "target"
        if len(rounds) >= settings.max_iterations:
            return "max_iterations"
        k = settings.plateau_patience
        if len(rounds) > k:
            before = max(r.score or 0.0 for r in rounds[:-k])
            recent = max(r.score or 0.0 for r in rounds[-k:])
            if recent < before + settings.min_improvement:
                return "plateau"
        return None

    # -- finalize -----------------------------------------------------------------
    def _finalize(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Pick the best round, run the hook, and log the run's one trajectory.

        The hook (memory) and the log are independent: a failure of either is
        recorded as an error of the run and the other still happens; the
        output is set before both, so it survives them.
        """
        update: dict[str, Any] = {}
        best = best_round(state.get("rounds", []))
        update["final"] = best
        update["stop_reason"] = self.stop_reason(state) or "max_iterations"
        merged: dict[str, Any] = {**state, **update}
        errors: list[str] = []
        if best and not state.get("errors"):
            try:
                extra = self._on_finalize(merged, config)
            except Exception as exc:  # recorded: the run and its trajectory go on without it
                extra = {"archived": False}
                error = f"finalize: {self.name} memory: {type(exc).__name__}: {exc}"
                errors.append(error[:MAX_ERROR_CHARS])
            update.update(extra)
            merged.update(extra)
        merged["errors"] = [*state.get("errors", []), *errors]
        trajectory = with_langsmith_run(self.trajectory_for(merged, config), config)
        if self.trajectories is not None:
            try:
                self.trajectories.append(trajectory)
            except Exception as exc:  # recorded in the result: the output is kept
                error = f"finalize: trajectory log: {type(exc).__name__}: {exc}"
                errors.append(error[:MAX_ERROR_CHARS])
                trajectory = trajectory.model_copy(
                    update={"errors": [*trajectory.errors, errors[-1]]}).storable()
        update.update(trajectory=trajectory, trajectory_id=trajectory.id, errors=errors)
        return update

    def _on_finalize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Hook for subclasses (e.g. archive the accepted output)."""
        return {}

    def trajectory_for(self, state: LoopState | dict[str, Any],
                       config: RunnableConfig | None = None) -> Trajectory:
        """The trajectory of a graph state: what ``finalize`` logs and a RunResult shows.

        Rubric, target and run metadata are the run's settings when the state
        holds them (a graph's run), else the config's and the architecture's.
        """
        final: Round | None = state.get("final")
        saved = state.get("settings")
        settings = self.settings_of(state, config) if saved else None
        meta = (settings.run_metadata if settings is not None
                else ((config or {}).get("configurable") or {}).get("run_metadata"))
        model_id = (model_id_of(self.llm, config) if config is not None and self.agent is None
                    else self.model_id)
        rubric = (self.run_rubric(state, config) if settings is not None
                  else self.rubric_for(state["task"], config))
        return trajectory_of(state, architecture=self.name, model_id=model_id, rubric=rubric,
                             accepted=final is not None and self.accepts(final, settings),
                             run_metadata=meta)
