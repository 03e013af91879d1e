"""The shared machinery of every architecture: graph building, nodes, stop rules, results.

An architecture is a small class around a LangGraph ``StateGraph``. The class
owns configuration (model, rubric, targets, memory, trajectory log); the
graph owns control flow, so it can be compiled once, streamed, checkpointed,
resumed, and dropped into a user's own graph as a subgraph.

Every node runs through one wrapper that (1) counts the LLM calls and tokens
it caused, (2) turns an exception into an error recorded in the state (the
run then finalizes with what it has, and a batch never crashes), and
(3) tags the node's LangSmith run with the architecture, node, iteration,
score and features.

Example (a scripted model; real ones come from ``load_chat_model``):
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> from agentic_loop.judges import Rubric
    >>> from agentic_loop.architectures import Reflection
    >>> llm = ScriptedChatModel(responses=["Hi there friend", "Hello"])
    >>> arch = Reflection(llm, rubric=Rubric.for_constraints(exact_words=1), max_iterations=2)
    >>> result = arch.run("Greet me in one word.")
    >>> result.output, result.score, result.iterations, result.stop_reason
    ('Hello', 10.0, 2, 'target')
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Literal, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field

from agentic_loop.architectures.prompts import clean_output, generate_messages, refine_messages
from agentic_loop.architectures.state import LoopState
from agentic_loop.architectures.tracing import annotate_run, node_tags
from agentic_loop.architectures.usage import track_usage
from agentic_loop.judges import Critic, Critique, Feature, Rubric
from agentic_loop.judges.constraints import constraint_feature
from agentic_loop.judges.task_constraints import constraints_from_task
from agentic_loop.models import load_chat_model, model_id_of
from agentic_loop.models.structured import message_text
from agentic_loop.trajectories import Round, TokenUsage, Trajectory, TrajectoryLog, hash_user_id

__all__ = ["Architecture", "RunResult", "TaskError", "task_rubric"]

#: Check features outweigh judged ones: a 135M judge says "true" to nearly anything.
TASK_CHECK_WEIGHT = 4.0
DEFAULT_MAX_TASK_CHARS = 8_000
RefineMode = Literal["feedback", "resample"]
REFINE_MODES: tuple[str, ...] = get_args(RefineMode)


class TaskError(ValueError):
    """The task itself is unusable (empty, not text, or over the size limit)."""


def task_rubric(task: str) -> Rubric:
    """The default rubric: the task's own stated constraints as checks, plus two judged features.

    >>> task_rubric("Write a tagline in exactly 5 words.").names
    ('exact_words', 'on_task', 'well_written')
    """
    checks = [constraint_feature(k, v, weight=TASK_CHECK_WEIGHT)
              for k, v in constraints_from_task(task).items()]
    judged = [
        Feature("on_task", "It does exactly what the task asks (right subject, form and purpose).",
                1.0, kind="bool"),
        Feature("well_written", "It is clear and fluent, with no filler, repetition or "
                "preamble.", 1.0, kind="bool"),
    ]
    return Rubric([*checks, *judged], name="task", version="1")


class RunResult(BaseModel):
    """What one run produced. ``output`` is the best draft, not merely the last."""

    task: str
    output: str | None = None
    score: float | None = None
    features: dict[str, Any] = Field(default_factory=dict)
    passed: bool = False
    iterations: int = 0
    archived: bool = False
    stop_reason: str | None = None
    trace: list[Round] = Field(default_factory=list)
    trajectory_id: str | None = None
    exemplar_ids: list[str] = Field(default_factory=list)
    reflection_ids: list[str] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    latency_s: float | None = None
    errors: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the run finished without errors."""
        return not self.errors


class Architecture:
    """Base class: generate -> critique -> refine until a stop rule, then finalize.

    Args:
        llm: a chat model or a spec for :func:`~agentic_loop.models.load_chat_model`.
        rubric: scores every draft; ``None`` builds one per task from the
            constraints the task states (see :func:`task_rubric`).
        target_score: stop once a draft scores at least this (0-10).
        max_iterations: at most this many drafts are written and judged.
        plateau_patience: stop when this many rounds in a row fail to beat
            the best score by ``min_improvement``.
        trajectories: a :class:`TrajectoryLog` (or a path) each run appends to.
        refine: how a failed draft is followed up. ``"feedback"`` (Self-Refine) shows
            the model its draft and what failed; ``"resample"`` asks the first prompt
            again for a fresh draft (rejection sampling against the same checks).
            Small models tend to copy or talk about a draft they are shown, and
            resampling helped the embedded 135M model more (bench/results/quality.json);
            capable models use feedback well.
        critique_text: also ask the judge for a free-text critique (off by default:
            failed checks already say what to fix, and a small model's critique
            text is mostly noise; bench/results/judges.json).
        llm_retries / retry_backoff_s: retries with exponential backoff on
            model errors, before the error is recorded.
        max_task_chars: longer tasks are refused with :class:`TaskError`.
        checkpointer / store: passed to ``compile`` (resume, ``runtime.store``).
        graph_name: the compiled graph's name (default: the architecture's).
    """

    name: ClassVar[str] = "architecture"

    def __init__(
        self,
        llm: BaseChatModel | str,
        rubric: Rubric | None = None,
        *,
        target_score: float = 8.0,
        max_iterations: int = 3,
        plateau_patience: int = 2,
        min_improvement: float = 0.01,
        trajectories: TrajectoryLog | str | None = None,
        refine: RefineMode = "feedback",
        critique_text: bool = False,
        critic_retries: int = 2,
        llm_retries: int = 2,
        retry_backoff_s: float = 0.5,
        max_task_chars: int = DEFAULT_MAX_TASK_CHARS,
        checkpointer: Any = None,
        store: Any = None,
        graph_name: str | None = None,
    ) -> None:
        if not 0.0 <= target_score <= 10.0:
            raise ValueError(f"target_score is on the 0-10 scale, got {target_score}")
        if max_iterations < 1:
            raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
        if plateau_patience < 1:
            raise ValueError(f"plateau_patience must be >= 1, got {plateau_patience}")
        self.llm = load_chat_model(llm)
        self.model_id = model_id_of(self.llm)
        self.rubric = rubric
        self.target_score = float(target_score)
        self.max_iterations = int(max_iterations)
        self.plateau_patience = int(plateau_patience)
        self.min_improvement = float(min_improvement)
        if refine not in REFINE_MODES:
            raise ValueError(f"refine must be one of {', '.join(REFINE_MODES)}, got {refine!r}")
        self.refine: RefineMode = refine
        self.trajectories = (TrajectoryLog(trajectories) if isinstance(trajectories, str)
                             else trajectories)
        self.critique_text = critique_text
        self.critic_retries = critic_retries
        self.max_task_chars = max_task_chars
        self.checkpointer = checkpointer
        self.store = store
        self.graph_name = graph_name or self.name
        self._llm = self.llm.with_retry(
            stop_after_attempt=llm_retries + 1, wait_exponential_jitter=True,
            exponential_jitter_params={"multiplier": retry_backoff_s, "max": 10 * retry_backoff_s,
                                       "jitter": retry_backoff_s},
        )
        self._graph: CompiledStateGraph | None = None

    # -- graph --------------------------------------------------------------
    def build(self) -> CompiledStateGraph:
        """The compiled graph (built once, then cached)."""
        if self._graph is None:
            graph = StateGraph(LoopState)
            self._define(graph)
            self._graph = graph.compile(checkpointer=self.checkpointer, store=self.store,
                                        name=self.graph_name)
        return self._graph

    def _define(self, graph: StateGraph) -> None:
        """Add nodes and edges. The default is the Self-Refine loop."""
        self._add(graph, "generate", self._generate)
        self._add(graph, "critique", self._critique)
        self._add(graph, "refine", self._refine)
        self._add(graph, "finalize", self._finalize)
        prelude = self._prelude(graph)
        graph.set_entry_point(prelude or "generate")
        if prelude:
            graph.add_edge(prelude, "generate")
        graph.add_edge("generate", "critique")
        graph.add_conditional_edges("critique", self._route, {"refine": "refine",
                                                              "finalize": "finalize"})
        graph.add_edge("refine", "critique")
        graph.add_edge("finalize", END)

    def _prelude(self, graph: StateGraph) -> str | None:
        """Add nodes that run before ``generate``; return the first one's name (or None)."""
        return None

    def _add(self, graph: StateGraph, node: str,
             fn: Callable[[LoopState, RunnableConfig], dict[str, Any]]) -> None:
        arch = self.name

        def run_node(state: LoopState, config: RunnableConfig) -> dict[str, Any]:
            with track_usage() as usage:
                try:
                    update = fn(state, config)
                except Exception as exc:  # recorded, never raised: the run finalizes with it
                    update = {"errors": [f"{node}: {type(exc).__name__}: {exc}"]}
            update["usage"] = usage.as_dict()
            annotate_run(config, {"architecture": arch, "node": node,
                                  **_node_metadata(node, state, update)}, node_tags(arch, node))
            return update

        graph.add_node(node, run_node)

    def diagram(self) -> str:
        """The graph as Mermaid text (offline)."""
        return self.build().get_graph().draw_mermaid()

    # -- configuration shared by nodes --------------------------------------
    def rubric_for(self, task: str, config: RunnableConfig | None = None) -> Rubric:
        """The rubric of this run: ``run(rubric=...)``, else the architecture's, else the task's."""
        given = ((config or {}).get("configurable") or {}).get("rubric")
        return given or self.rubric or task_rubric(task)

    def requirements(self, task: str, config: RunnableConfig | None = None) -> str:
        """The verifiable requirements (check features) as a bullet list for prompts.

        Judged features are left out: "it is engaging" is the critic's business,
        and a small model tends to answer such lines instead of the task.
        """
        return "\n".join(f"- {f.description}"
                         for f in self.rubric_for(task, config).check_features)

    def critic_for(self, rubric: Rubric) -> Critic:
        return Critic(self.llm, rubric, max_retries=self.critic_retries,
                      critique_text=self.critique_text)

    def _call(self, messages: Sequence[BaseMessage], config: RunnableConfig,
              iteration: int) -> str:
        cfg: RunnableConfig = {"metadata": {"iteration": iteration}}
        return clean_output(message_text(self._llm.invoke(list(messages), cfg)))

    @staticmethod
    def _start(state: LoopState) -> dict[str, Any]:
        """Fields the first node sets once per run (kept on resume)."""
        if state.get("run_id"):
            return {}
        return {"run_id": uuid.uuid4().hex, "started_at": time.time()}

    # -- nodes ----------------------------------------------------------------
    def _first_messages(self, state: LoopState, config: RunnableConfig) -> list[BaseMessage]:
        """The prompt of a fresh draft: task, requirements, exemplars, lessons."""
        task = state["task"]
        return generate_messages(task, self.requirements(task, config),
                                 state.get("exemplars", ()), state.get("reflections", ()),
                                 vary_structure=bool(state.get("exemplars")))

    def _generate(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        update = self._start(state)
        update.update(draft=self._call(self._first_messages(state, config), config, 0),
                      iteration=0)
        return update

    def _critique(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        if state.get("errors"):
            return {}
        task, draft = state["task"], state["draft"]
        started = time.perf_counter()
        critique = self.critic_for(self.rubric_for(task, config)).critique(task, draft)
        return {"rounds": [_round(state.get("iteration", 0), draft, critique,
                                  time.perf_counter() - started)]}

    def _refine(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        task, last = state["task"], state["rounds"][-1]
        iteration = state.get("iteration", 0) + 1
        messages = (self._first_messages(state, config) if self.refine == "resample" else
                    refine_messages(task, last["draft"], last.get("feedback") or "",
                                    self.requirements(task, config)))
        return {"draft": self._call(messages, config, iteration), "iteration": iteration}

    def _route(self, state: LoopState) -> str:
        return "finalize" if self.stop_reason(state) else "refine"

    def accepts(self, round_: dict[str, Any]) -> bool:
        """A draft is accepted when it reaches ``target_score`` and every check holds.

        The checks are what the task demands verifiably ("EXACTLY 12 words"); a
        draft that misses one is not accepted however well it scores otherwise.
        """
        return round_["score"] >= self.target_score and bool(round_.get("passed"))

    def stop_reason(self, state: LoopState) -> str | None:
        """Why the loop should stop now, or None to go on. Always bounded by max_iterations."""
        if state.get("errors"):
            return "error"
        rounds = state.get("rounds", [])
        if not rounds:
            return None
        if self.accepts(rounds[-1]):
            return "target"
        if len(rounds) >= self.max_iterations:
            return "max_iterations"
        k = self.plateau_patience
        if len(rounds) > k:
            before = max(r["score"] for r in rounds[:-k])
            recent = max(r["score"] for r in rounds[-k:])
            if recent < before + self.min_improvement:
                return "plateau"
        return None

    def _finalize(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        update = self._start(state)
        rounds = state.get("rounds", [])
        best = best_round(rounds)
        final = dict(best) if best else {}
        update["final"] = final
        update["stop_reason"] = self.stop_reason(state) or "max_iterations"
        merged: dict[str, Any] = {**state, **update}
        extra = self._on_finalize(merged, config) if best and not state.get("errors") else {}
        update.update(extra)
        merged.update(extra)
        update["trajectory_id"] = self._log_trajectory(merged, config)
        return update

    def _on_finalize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        """Hook for subclasses (e.g. archive the accepted output)."""
        return {}

    # -- trajectories and results --------------------------------------------
    def _log_trajectory(self, state: dict[str, Any], config: RunnableConfig) -> str:
        run_id = state.get("run_id") or uuid.uuid4().hex
        if self.trajectories is None:
            return run_id
        meta = ((config or {}).get("configurable") or {}).get("run_metadata") or {}
        task = state["task"]
        final = state.get("final") or {}
        record = _record(state)
        trajectory = Trajectory(
            id=run_id, architecture=self.name, model_id=self.model_id, task=task,
            rubric=_rubric_dict(self.rubric_for(task, config)),
            exemplar_ids=record["exemplar_ids"], reflection_ids=record["reflection_ids"],
            rounds=record["rounds"], final_output=final.get("draft"),
            final_score=final.get("score"), accepted=bool(final) and self.accepts(final),
            archived=record["archived"], stop_reason=state.get("stop_reason"),
            latency_s=round(time.time() - state.get("started_at", time.time()), 4),
            usage=record["usage"], errors=record["errors"],
            user_id_hash=meta.get("user_id_hash"), consent=meta.get("consent"),
            metadata=meta.get("metadata") or {},
        )
        self.trajectories.append(trajectory)
        return run_id

    def _result(self, task: str, state: dict[str, Any], elapsed: float) -> RunResult:
        final = state.get("final") or {}
        record = _record(state)
        return RunResult(
            task=task, output=final.get("draft"), score=final.get("score"),
            features=final.get("features", {}), passed=bool(final.get("passed")),
            iterations=len(record["rounds"]), archived=record["archived"],
            stop_reason=state.get("stop_reason"), trace=record["rounds"],
            trajectory_id=state.get("trajectory_id"),
            exemplar_ids=record["exemplar_ids"], reflection_ids=record["reflection_ids"],
            usage=record["usage"], latency_s=round(elapsed, 4), errors=record["errors"],
        )

    # -- running --------------------------------------------------------------
    def validate_task(self, task: Any) -> str:
        """Return the task, or raise :class:`TaskError` saying what is wrong with it."""
        if not isinstance(task, str):
            raise TaskError(f"a task must be a string, got {type(task).__name__}: {task!r:.80}")
        if not task.strip():
            raise TaskError("the task is empty; pass the instruction to carry out")
        if len(task) > self.max_task_chars:
            raise TaskError(
                f"the task is {len(task)} characters, over the limit of {self.max_task_chars} "
                f"(task starts {task[:60]!r}); shorten it or raise max_task_chars")
        return task

    def config(self, *, rubric: Rubric | None = None, thread_id: str | None = None,
               user_id: str | None = None, consent: bool | None = None,
               metadata: dict[str, Any] | None = None,
               config: RunnableConfig | None = None) -> RunnableConfig:
        """The RunnableConfig of one run: rubric, trace tags, recursion limit, thread id."""
        cfg: dict[str, Any] = dict(config or {})
        configurable = dict(cfg.get("configurable") or {})
        if rubric is not None:
            configurable["rubric"] = rubric
        if thread_id is not None:
            configurable["thread_id"] = thread_id
        configurable["run_metadata"] = {
            "user_id_hash": hash_user_id(user_id) if user_id else None,
            "consent": consent, "metadata": metadata or {}}
        cfg["configurable"] = configurable
        cfg.setdefault("recursion_limit", self.recursion_limit)
        cfg.setdefault("run_name", self.graph_name)
        cfg["tags"] = [*cfg.get("tags", []), "agentic-loop", f"arch:{self.name}"]
        cfg["metadata"] = {**cfg.get("metadata", {}), "architecture": self.name,
                           "model_id": self.model_id}
        return cfg  # type: ignore[return-value]

    @property
    def recursion_limit(self) -> int:
        """Enough graph steps for max_iterations rounds, and no more."""
        return 4 * self.max_iterations + 8

    def run(self, task: str, **kwargs: Any) -> RunResult:
        """Run one task to completion. Keywords: see :meth:`config`.

        A bad task raises :class:`TaskError`; model errors are retried, then
        recorded in ``RunResult.errors`` (and the trajectory), not raised.
        """
        task = self.validate_task(task)
        started = time.perf_counter()
        state = self.build().invoke({"task": task}, self.config(**kwargs))
        return self._result(task, state, time.perf_counter() - started)

    def resume(self, thread_id: str, **kwargs: Any) -> RunResult:
        """Finish a checkpointed run that stopped part-way (needs a checkpointer)."""
        if self.checkpointer is None:
            raise ValueError("resume() needs the architecture to be built with a checkpointer")
        started = time.perf_counter()
        cfg = self.config(thread_id=thread_id, **kwargs)
        snapshot = self.build().get_state(cfg)
        if not snapshot.values:
            raise ValueError(f"no checkpoint found for thread_id {thread_id!r}")
        state = self.build().invoke(None, cfg)
        return self._result(state["task"], state, time.perf_counter() - started)

    async def arun(self, task: str, **kwargs: Any) -> RunResult:
        """Async :meth:`run`."""
        task = self.validate_task(task)
        started = time.perf_counter()
        state = await self.build().ainvoke({"task": task}, self.config(**kwargs))
        return self._result(task, state, time.perf_counter() - started)

    def batch(self, tasks: Sequence[str], *, max_concurrency: int = 4,
              **kwargs: Any) -> list[RunResult]:
        """Run many tasks concurrently; a bad task or a failing run never sinks the others.

        With the local model, concurrent runs share decoding batches.
        """
        def one(task: Any) -> RunResult:
            try:
                return self.run(task, **kwargs)
            except Exception as exc:
                text = task if isinstance(task, str) else repr(task)
                return RunResult(task=text, errors=[f"{type(exc).__name__}: {exc}"])

        with ThreadPoolExecutor(max_workers=max(1, max_concurrency)) as pool:
            return list(pool.map(one, tasks))

    async def abatch(self, tasks: Sequence[str], *, max_concurrency: int = 4,
                     **kwargs: Any) -> list[RunResult]:
        """Async :meth:`batch`."""
        gate = asyncio.Semaphore(max(1, max_concurrency))

        async def one(task: Any) -> RunResult:
            async with gate:
                try:
                    return await self.arun(task, **kwargs)
                except Exception as exc:
                    text = task if isinstance(task, str) else repr(task)
                    return RunResult(task=text, errors=[f"{type(exc).__name__}: {exc}"])

        return list(await asyncio.gather(*(one(t) for t in tasks)))

    def stream(self, task: str, **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ``(node, state update)`` as each node finishes."""
        task = self.validate_task(task)
        for chunk in self.build().stream({"task": task}, self.config(**kwargs),
                                         stream_mode="updates"):
            for node, update in chunk.items():
                yield node, update or {}


def _round(iteration: int, draft: str, critique: Critique, seconds: float) -> dict[str, Any]:
    return {"iteration": iteration, "draft": draft, "score": critique.score,
            "passed": critique.passed, "features": dict(critique.values),
            "critique": critique.critique, "overall_score": critique.overall_score,
            "feedback": critique.feedback, "latency_s": round(seconds, 4)}


def _record(state: dict[str, Any]) -> dict[str, Any]:
    """What a trajectory and a RunResult both report about a finished state."""
    usage = state.get("usage") or {}
    return {
        "rounds": [Round(**r) for r in state.get("rounds", [])],
        "exemplar_ids": [e["id"] for e in state.get("exemplars", [])],
        "reflection_ids": [r["id"] for r in state.get("reflections", [])],
        "usage": TokenUsage(**{k: usage.get(k, 0) for k in TokenUsage.model_fields}),
        "archived": bool(state.get("archived")),
        "errors": list(state.get("errors", [])),
    }


def best_round(rounds: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Highest score first, then passing checks, then the earliest (fewest edits)."""
    if not rounds:
        return None
    return max(rounds, key=lambda r: (r["score"], bool(r.get("passed")), -r["iteration"]))


def _rubric_dict(rubric: Rubric) -> dict[str, Any] | None:
    try:
        return rubric.to_dict()
    except Exception:  # a rubric with custom Python checks cannot be serialized
        return {"name": rubric.name, "version": rubric.version, "features": list(rubric.names)}


def _node_metadata(node: str, state: LoopState, update: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"iteration": update.get("iteration", state.get("iteration", 0))}
    rounds = update.get("rounds")
    if rounds:
        meta["score"] = rounds[-1]["score"]
        meta["features"] = rounds[-1]["features"]
    if "final" in update and update["final"]:
        meta["score"] = update["final"].get("score")
    if update.get("errors"):
        meta["error"] = update["errors"][-1]
    return meta
