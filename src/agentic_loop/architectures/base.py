"""The :class:`Architecture` base class: configuration and the LangGraph graph it compiles.

An architecture is a small class around a LangGraph ``StateGraph``. The class
owns configuration (model, rubric, targets, retry policy, memory, trajectory
log); the graph owns control flow, so it can be compiled once, streamed,
checkpointed, resumed, and dropped into a user's own graph as a subgraph.
The class is assembled from three seams: the shared nodes and stop rule
(:mod:`.nodes`), the ways to run the graph (:mod:`.runner`), and what a run
leaves (:mod:`.results`); this module wires nodes into the graph.

Every node runs through one wrapper that (0) on a run's first node, resolves
the run's settings once into the state (:mod:`.settings`), (1) counts the LLM calls and tokens
it caused, (2) turns an exception into an error recorded in the state (the
run then finalizes with what it has, and a batch never crashes), (3) keeps
a new draft within bounds: cleaned of characters no record can hold, cut to
``max_output_chars`` (the cut recorded) and stored with the prompt it came
from, and (4) tags the node's LangSmith run with the architecture, node,
iteration, score and features.

Example (a scripted model; real ones come from ``load_chat_model``):
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> from agentic_loop.judges import Rubric
    >>> from agentic_loop.architectures import Reflection
    >>> llm = ScriptedChatModel(responses=["Hi there friend", "Hello"])
    >>> arch = Reflection(llm, rubric=Rubric.for_constraints(exact_words=1), max_iterations=2)
    >>> result = arch.run("Greet me in one word.")
    >>> result.output, result.score, result.iterations, result.stop_reason
    ('Hello', 10.0, 2, 'target')

An agent writes each draft as a whole episode (:mod:`agentic_loop.agents`); here a
chat model with ``tools=``, whose tool loop the package runs:

    >>> from langchain_core.messages import AIMessage
    >>> def calculator(expression: str) -> str:
    ...     '''Multiply two whole numbers written as a*b.'''
    ...     a, b = expression.split("*")
    ...     return str(int(a) * int(b))
    >>> asks = AIMessage("", tool_calls=[{"name": "calculator", "id": "c1",
    ...                                   "args": {"expression": "53*47"}}])
    >>> agent = Reflection(ScriptedChatModel(responses=[asks, "2491"]), tools=[calculator],
    ...                    rubric=Rubric.for_constraints(exact_words=1), max_steps=4)
    >>> result = agent.run("What is 53 * 47?")
    >>> result.output, result.trace[0].episode.tools_called
    ('2491', ['calculator'])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from agentic_loop.agents import DEFAULT_EPISODE_TIMEOUT_S, DEFAULT_MAX_STEPS, split_generator
from agentic_loop.architectures.nodes import (
    DEFAULT_MAX_OUTPUT_CHARS,
    REFINE_MODES,
    TASK_CHECK_WEIGHT,
    RefineMode,
    active_settings,
    node_metadata,
    recording_prompts,
    task_rubric,
)
from agentic_loop.architectures.results import RunResult, best_round
from agentic_loop.architectures.runner import DEFAULT_MAX_TASK_CHARS, Runner
from agentic_loop.architectures.sampling import (
    TemperatureSchedule,
    check_samples,
    check_schedule,
    recording_draws,
)
from agentic_loop.architectures.schemas import (
    GraphState,
    RunInput,
    RunOutput,
    RunSettings,
    output_fields,
)
from agentic_loop.architectures.settings import resolve_settings
from agentic_loop.architectures.state import (
    LoopState,
    allow_state_types,
    fresh_run,
    merge_updates,
    plain_values,
    with_error,
)
from agentic_loop.architectures.tracing import (
    annotate_run,
    graph_config,
    node_tags,
    post_run_feedback,
)
from agentic_loop.architectures.usage import track_usage
from agentic_loop.errors import ConfigError, TaskError
from agentic_loop.judges import Rubric
from agentic_loop.models.retry import DEFAULT_RETRY, RetryPolicy
from agentic_loop.trajectories import TrajectoryLog
from agentic_loop.trajectory_stores import PostgresTrajectoryLog, open_trajectory_log

__all__ = [
    "DEFAULT_MAX_OUTPUT_CHARS",
    "DEFAULT_MAX_TASK_CHARS",
    "REFINE_MODES",
    "TASK_CHECK_WEIGHT",
    "Architecture",
    "RefineMode",
    "RunResult",
    "TaskError",
    "best_round",
    "retry_policy",
    "task_rubric",
]


def retry_policy(retry: RetryPolicy | None = None, llm_retries: int | None = None,
                 retry_backoff_s: float | None = None) -> RetryPolicy:
    """The policy of generation calls: ``retry``, else the default with the older knobs applied.

    ``llm_retries`` (extra attempts) and ``retry_backoff_s`` (first wait) are the
    keywords architectures took before :class:`RetryPolicy`; they still work.

    >>> retry_policy(llm_retries=0).max_attempts, retry_policy().backoff_s
    (1, 0.5)
    """
    if retry is not None:
        if llm_retries is not None or retry_backoff_s is not None:
            raise ConfigError("pass either retry=RetryPolicy(...) or llm_retries/retry_backoff_s, "
                              "not both")
        return retry
    update: dict[str, Any] = {}
    if llm_retries is not None:
        if isinstance(llm_retries, bool) or not isinstance(llm_retries, int) or llm_retries < 0:
            raise ConfigError(f"llm_retries={llm_retries!r}: pass an integer >= 0")
        update["max_attempts"] = llm_retries + 1
    if retry_backoff_s is not None:
        if retry_backoff_s < 0:
            raise ConfigError(f"retry_backoff_s={retry_backoff_s!r}: pass a number >= 0")
        update["backoff_s"] = float(retry_backoff_s)
    return DEFAULT_RETRY.model_copy(update=update) if update else DEFAULT_RETRY


class Architecture(Runner):
    """Base class: generate -> critique -> refine until a stop rule, then finalize.

    Args:
        llm: a chat model or a spec for :func:`~agentic_loop.models.load_chat_model`; or an
            agent, whose drafts are whole episodes (:mod:`agentic_loop.agents`): a compiled
            LangGraph graph with a ``messages`` state (``create_agent``,
            ``create_react_agent``, your ``StateGraph``) or any Runnable taking and returning
            messages.
        tools: with a chat model ``llm``: the tools it may call; the package runs the tool
            loop (LangGraph's ``ToolNode``), and each draft is an episode.
        judge: the chat model (or spec) that critiques, judges LLM features and reflects;
            default: ``llm``, or the chat model inside an agent. Needed for an agent with no
            chat model found when the rubric has LLM-judged features or the architecture
            reflects.
        max_steps / episode_timeout_s: an agent's episode ends after this many model calls
            (``stop_reason`` ``"step_limit"``) or seconds (``"time_limit"``), keeping what
            it had; per run too (``run(task, max_steps=...)``).
        rubric: scores every draft; ``None`` builds one per task from the
            constraints the task states (see :func:`~agentic_loop.judges.rubric_for_task`).
        target_score: stop once a draft scores at least this (0-10).
        max_iterations: at most this many drafts are written and judged.
        plateau_patience: stop when this many rounds in a row fail to beat
            the best score by ``min_improvement``.
        trajectories: a :class:`TrajectoryLog` (or a path) each run appends to, or a
            :class:`~agentic_loop.trajectory_stores.PostgresTrajectoryLog` (or its
            ``postgresql://`` URL) that workers on many hosts share.
        refine: how a failed draft is followed up. ``"feedback"`` (Self-Refine) shows
            the model its draft and what failed; ``"resample"`` asks the first prompt
            again for a fresh draft (rejection sampling against the same checks).
            Small models tend to copy or talk about a draft they are shown, and
            resampling helped the embedded 135M model more (bench/results/quality.json);
            capable models use feedback well.
        critique_text: also ask the judge for a free-text critique, and show it in the
            refine prompt (off by default: failed checks already say what to fix, and a
            small model's critique text is mostly noise; bench/results/judges.json).
        samples_per_round: best-of-n: each round draws this many answers to its prompt
            in one batched generation; the checks pick the best, which the LLM judge
            then scores (see :mod:`.sampling`); the others are kept on the round
            (``Round.alternatives``). 1 (the default): one answer per round.
        rank_ties: with best-of-n, samples the checks tie (same pass and score) are
            ordered by a :class:`~agentic_loop.judges.GroupRanker` on the judge model
            (the rubric's judged features, two presentation orders) instead of going
            to the earlier one; the round records it (``Round.tie_break``).
        temperature: the sampling temperature per round: a number, a sequence (round
            ``i`` takes item ``i``, the last repeats, e.g. ``(0.3, 0.7, 1.0)``) or a
            callable of the round index; ``None`` (the default) keeps the model's own.
        critic_retries: extra attempts of the critic after an invalid judgement.
        retry: the :class:`~agentic_loop.models.retry.RetryPolicy` of generation,
            refine and reflection calls (default
            :data:`~agentic_loop.models.retry.DEFAULT_RETRY`); after the last
            attempt the error is recorded in the run, not raised.
        llm_retries / retry_backoff_s: the older way to set ``retry``'s attempts
            (``llm_retries + 1``) and first backoff.
        max_task_chars: longer tasks are refused with :class:`TaskError`.
        max_output_chars: a model answer longer than this is cut to it, and the
            round records the length it had (``Round.cut_from``); ``None``: no cap.
        checkpointer / store: passed to ``compile`` (resume, ``runtime.store``).
        graph_name: the compiled graph's name (default: the architecture's).
    """

    def __init__(
        self,
        llm: BaseChatModel | str | Any,
        rubric: Rubric | None = None,
        *,
        tools: Sequence[Any] | None = None,
        judge: BaseChatModel | str | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        episode_timeout_s: float | None = DEFAULT_EPISODE_TIMEOUT_S,
        target_score: float = 8.0,
        max_iterations: int = 3,
        plateau_patience: int = 2,
        min_improvement: float = 0.01,
        trajectories: TrajectoryLog | PostgresTrajectoryLog | str | None = None,
        refine: RefineMode = "feedback",
        critique_text: bool = False,
        critic_retries: int = 2,
        samples_per_round: int = 1,
        rank_ties: bool = False,
        temperature: TemperatureSchedule = None,
        retry: RetryPolicy | None = None,
        llm_retries: int | None = None,
        retry_backoff_s: float | None = None,
        max_task_chars: int = DEFAULT_MAX_TASK_CHARS,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
        checkpointer: Any = None,
        store: Any = None,
        graph_name: str | None = None,
    ) -> None:
        if not 0.0 <= target_score <= 10.0:
            raise ConfigError(f"target_score={target_score}: pass a score on the 0-10 scale")
        if max_iterations < 1:
            raise ConfigError(f"max_iterations={max_iterations}: pass an integer >= 1")
        if plateau_patience < 1:
            raise ConfigError(f"plateau_patience={plateau_patience}: pass an integer >= 1")
        if refine not in REFINE_MODES:
            raise ConfigError(f"refine must be one of {', '.join(REFINE_MODES)}, got {refine!r}")
        if max_output_chars is not None and (isinstance(max_output_chars, bool)
                                             or not isinstance(max_output_chars, int)
                                             or max_output_chars < 1):
            raise ConfigError(f"max_output_chars={max_output_chars!r}: pass an integer >= 1, "
                              "or None for no cap")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ConfigError(f"max_steps={max_steps!r}: pass an integer >= 1 (model calls per "
                              "episode)")
        if episode_timeout_s is not None and not episode_timeout_s > 0:
            raise ConfigError(f"episode_timeout_s={episode_timeout_s!r}: pass seconds > 0, or "
                              "None for no limit")
        generator = split_generator(llm, tools, judge, rubric=rubric,
                                    reflects=callable(getattr(self, "_reflect", None)))
        #: the chat model the loop calls: generation (a plain model), reflection; with an
        #: agent, its judge
        self.llm = cast(BaseChatModel, generator.llm)
        #: the chat model of the critic (``judge=``, else ``llm``)
        self.judge_llm = cast(BaseChatModel, generator.judge)
        #: the agent that writes drafts as episodes (None: ``llm`` writes them)
        self.agent = generator.agent
        self.model_id = generator.model_id
        self.max_steps = max_steps
        self.episode_timeout_s = episode_timeout_s
        self.rubric = rubric
        self.target_score = float(target_score)
        self.max_iterations = int(max_iterations)
        self.plateau_patience = int(plateau_patience)
        self.min_improvement = float(min_improvement)
        self.refine = refine
        self.trajectories = (open_trajectory_log(trajectories) if isinstance(trajectories, str)
                             else trajectories)
        self.critique_text = critique_text
        self.critic_retries = critic_retries
        self.samples_per_round = check_samples(samples_per_round)
        self.rank_ties = bool(rank_ties)
        self.temperature = check_schedule(temperature)
        self.retry = retry_policy(retry, llm_retries, retry_backoff_s)
        self.max_task_chars = max_task_chars
        self.max_output_chars = max_output_chars
        self.checkpointer = checkpointer
        self.store = store
        self.graph_name = graph_name or self.name
        self._graph: CompiledStateGraph | None = None
        self._entry_nodes: frozenset[str] = frozenset()

    def build(self) -> CompiledStateGraph:
        """The compiled graph (built once, then cached).

        Input, output and per-run settings (the context) follow
        :mod:`.schemas`; the tags and metadata of :func:`.tracing.graph_config`
        are set on the graph itself, so they reach every run below it, as a
        subgraph too.
        """
        if self._graph is None:
            # typed as a plain StateGraph: the nodes' signatures predate the context schema
            graph = cast(StateGraph, StateGraph(GraphState, input_schema=RunInput,
                                                output_schema=RunOutput,
                                                context_schema=RunSettings))
            self._define(graph)
            self._entry_nodes = frozenset(end for start, end in graph.edges if start == START)
            compiled = graph.compile(checkpointer=allow_state_types(self.checkpointer),
                                     store=self.store, name=self.graph_name)
            self._graph = compiled.with_config(graph_config(self.name, self.model_id))
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
        """Add ``fn`` as ``node``, wrapped: usage counted, errors recorded, trace annotated.

        The run's first node resolves its settings (context, config, input
        fields and defaults: :func:`.settings.resolve_settings`) into the state,
        once; every node reads them there, and its model calls sample with them
        (:func:`.nodes.active_settings`). ``finalize`` also writes the output
        fields and posts the run's score and ``passed`` as LangSmith feedback.
        """
        arch = self.name

        def run_node(state: GraphState, config: RunnableConfig,
                     runtime: Runtime[Any]) -> dict[str, Any]:
            # the first node of a run starts it afresh: a thread is a conversation, not a run
            reset = fresh_run() if node in self._entry_nodes else {}
            if reset:
                state = cast(GraphState, {**state, **plain_values(reset)})
            with track_usage() as usage, recording_prompts() as sent, recording_draws() as drawn:
                try:
                    if not state.get("settings"):  # the run's first node: resolved once
                        resolved = resolve_settings(self, state, config,
                                                    getattr(runtime, "context", None))
                        reset["settings"] = resolved.model_dump(mode="json")
                        state = cast(GraphState, {**state, "settings": reset["settings"]})
                    with active_settings(self.settings_of(state, config),
                                         run_id=state.get("run_id")):
                        update = fn(state, config)
                    if "draft" in update:
                        update.update(self._bounded_draft(update["draft"], sent, drawn))
                except Exception as exc:  # recorded, never raised: the run finalizes with it
                    update = with_error({}, f"{node}: {type(exc).__name__}: {exc}")
                if node == "finalize":  # the output fields, even when finalize itself failed
                    update.update(self._outputs(state, update, config))
                    rubrics = self.__dict__.get("_run_rubrics")  # the run is over
                    if rubrics is not None:
                        rubrics.forget(state.get("run_id"))
            update = merge_updates(reset, update)
            counted = usage.as_dict()
            update["usage"] = (Overwrite(counted) if isinstance(update.get("usage"), Overwrite)
                               else counted)
            annotate_run(config, {"architecture": arch, "node": node,
                                  **node_metadata(node, state, plain_values(update))},
                         node_tags(arch, node))
            if node == "finalize" and "trajectory" in update:
                post_run_feedback(config, score=update.get("score"),
                                  passed=bool(update.get("passed")))
            return update

        graph.add_node(node, cast(Any, run_node))

    def _outputs(self, state: GraphState, update: dict[str, Any],
                 config: RunnableConfig) -> dict[str, Any]:
        """The output fields of a finished run, from the trajectory ``finalize`` left (or, when
        ``finalize`` failed, from the state and its errors)."""
        trajectory = update.get("trajectory")
        if trajectory is None:
            plain = plain_values(update)
            trajectory = self.trajectory_for(
                {**state, **plain, "errors": [*state.get("errors", []), *plain.get("errors", [])]},
                config)
        return {"trajectory": trajectory, **output_fields(trajectory)}

    def _route(self, state: LoopState) -> str:
        """The stop rule's branch, under the run's target and budget (its settings)."""
        return "finalize" if self.stop_reason(state) else "refine"

    def diagram(self) -> str:
        """The graph as Mermaid text (offline)."""
        return self.build().get_graph().draw_mermaid()
