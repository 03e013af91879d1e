"""Running a compiled architecture: one task, many tasks, async, streamed, resumed.

Why one module: every way of running a graph must treat a task the same way
(validated, the same config and tags, the result built from the run's one
trajectory), and a batch must never sink on one bad task. :func:`run_specs`
is the one concurrent runner: :meth:`Runner.batch`, the CLI's ``run``, the
demo and the benchmarks all call it, with plain task strings or task specs
that carry their own constraints (anything with ``.task`` and ``.rubric()``,
such as :class:`~agentic_loop.tasks.spec.TaskSpec`).

Example:
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> from agentic_loop.tasks.spec import TaskSpec
    >>> from agentic_loop.architectures import Reflection
    >>> arch = Reflection(ScriptedChatModel(default="one"), max_iterations=1)
    >>> results = run_specs(arch, [TaskSpec(task="Say a word.", constraints={"exact_words": 1}),
    ...                            ""], max_concurrency=2)
    >>> [(r.output, r.score, r.ok) for r in results]
    [('one', 10.0, True), (None, None, False)]
    >>> results[1].errors
    ['TaskError: the task is empty; pass the instruction to carry out']
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from agentic_loop.agents.user_sim import USER_SIM_KEY
from agentic_loop.architectures.nodes import LoopNodes
from agentic_loop.architectures.results import RunResult
from agentic_loop.architectures.schemas import CONTEXT_FIELDS, RunSettings
from agentic_loop.architectures.state import plain_values
from agentic_loop.errors import ConfigError, TaskError
from agentic_loop.judges import Rubric, TaskWithRubric
from agentic_loop.trajectories import hash_user_id

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["DEFAULT_MAX_TASK_CHARS", "Runner", "TaskLike", "run_specs"]

DEFAULT_MAX_TASK_CHARS = 8_000


#: A task that brings its own rubric (``None``: the run's default), e.g. a ``TaskSpec``.
TaskLike = TaskWithRubric


def _task_and_kwargs(item: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A batch item as ``run`` arguments: a spec's own rubric wins over the batch's, and its
    simulated user (``user_sim``) answers the agent (sent in the config, as ``run`` takes it)."""
    if not isinstance(item, TaskLike):
        return item, kwargs
    rubric = item.rubric()
    run_kwargs = {**kwargs, "rubric": rubric} if rubric is not None else dict(kwargs)
    user = getattr(item, "user_sim", None)
    if user is not None:
        config = dict(run_kwargs.get("config") or {})
        config["configurable"] = {**(config.get("configurable") or {}), USER_SIM_KEY: user}
        run_kwargs["config"] = config
    return item.task, run_kwargs


def run_specs(architecture: Runner, tasks: Sequence[str | TaskLike], *,
              max_concurrency: int = 4, progress: str | None = None,
              console: Console | None = None, **kwargs: Any) -> list[RunResult]:
    """Run many tasks concurrently; results in input order; a bad task never sinks the others.

    Items are task strings or specs with ``.task`` and ``.rubric()``. A task
    that is refused or whose run raises comes back as a :class:`RunResult`
    holding the error. ``progress`` names a progress bar drawn on ``console``
    (rich; none by default). ``kwargs`` go to every :meth:`Runner.run`. With
    the local model, concurrent runs share decoding batches. Tasks given one
    ``thread_id`` are a conversation: they run one after another, in order,
    each a fresh run on that thread.
    """
    if kwargs.get("thread_id") is not None:
        max_concurrency = 1

    def one(item: Any) -> RunResult:
        task, run_kwargs = _task_and_kwargs(item, kwargs)
        try:
            return architecture.run(task, **run_kwargs)
        except Exception as exc:  # recorded: one failing task never sinks the batch
            return RunResult.refused(task, exc, architecture=architecture.name,
                                     model_id=architecture.model_id)

    results: list[RunResult | None] = [None] * len(tasks)
    with _progress_bar(progress, len(tasks), console) as advance, \
            ThreadPoolExecutor(max_workers=max(1, max_concurrency)) as pool:
        futures = {pool.submit(one, item): i for i, item in enumerate(tasks)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            advance()
    return [r for r in results if r is not None]


@contextmanager
def _progress_bar(label: str | None, total: int,
                  console: Console | None) -> Iterator[Callable[[], None]]:
    """Yield ``advance()``: a rich progress bar's when ``label`` is set, else a no-op."""
    if label is None:
        yield lambda: None
        return
    from agentic_loop.progress import progress_bar

    with progress_bar(console=console) as bar:
        job = bar.add_task(label, total=total, unit="tasks")
        yield lambda: bar.advance(job)


class Runner(LoopNodes):
    """The ways to run an architecture's graph; :class:`Architecture` is one."""

    graph_name: str
    max_task_chars: int
    checkpointer: Any

    def build(self) -> CompiledStateGraph:
        """The compiled graph (see :class:`~agentic_loop.architectures.Architecture`)."""
        raise NotImplementedError

    # -- one run's inputs ---------------------------------------------------------
    def validate_task(self, task: Any) -> str:
        """Return the task, or raise :class:`TaskError` saying what is wrong with it."""
        if not isinstance(task, str):
            raise TaskError(f"a task must be a string, got {type(task).__name__}: {task!r:.80}; "
                            "pass the instruction as text")
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

    def _result(self, state: dict[str, Any], config: RunnableConfig) -> RunResult:
        """The view of the run's trajectory (built here if ``finalize`` itself failed)."""
        trajectory = state.get("trajectory") or self.trajectory_for(state, config)
        return RunResult(trajectory=trajectory)

    # -- running ------------------------------------------------------------------
    def context(self, kwargs: dict[str, Any]) -> tuple[RunSettings, dict[str, Any]]:
        """The run's LangGraph context from ``kwargs``' settings keywords, and the other keywords.

        The settings keywords (``constraints``, ``target_score``,
        ``max_iterations``, ``samples_per_round``, ``temperature``) become the
        same :class:`~.schemas.RunSettings` context a LangGraph server sends;
        unset ones keep the architecture's.

        >>> from agentic_loop.testing import ScriptedChatModel
        >>> from agentic_loop.architectures import Reflection
        >>> context, rest = Reflection(ScriptedChatModel()).context(
        ...     {"max_iterations": 2, "user_id": "u1", "temperature": None})
        >>> context.max_iterations, rest
        (2, {'user_id': 'u1'})
        """
        given = {k: kwargs[k] for k in CONTEXT_FIELDS if kwargs.get(k) is not None}
        rest = {k: v for k, v in kwargs.items() if k not in CONTEXT_FIELDS}
        return RunSettings(**given), rest

    def _graph_of_runs(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        """:meth:`build`, typed as the graph that takes a :class:`RunSettings` context."""
        return self.build()

    def _invocation(self, kwargs: dict[str, Any]) -> tuple[RunSettings, RunnableConfig]:
        """The context and config of one run; the recursion limit covers the context's budget."""
        context, rest = self.context(kwargs)
        cfg = self.config(**rest)
        extra = (context.max_iterations or self.max_iterations) - self.max_iterations
        if extra > 0 and cfg.get("recursion_limit") == self.recursion_limit:
            cfg["recursion_limit"] = self.recursion_limit + 4 * extra
        return context, cfg

    def run(self, task: str, **kwargs: Any) -> RunResult:
        """Run one task to completion. Keywords: see :meth:`config` and :meth:`context`.

        A bad task raises :class:`TaskError`; model errors are retried, then
        recorded in ``RunResult.errors`` (and the trajectory), not raised.
        """
        task = self.validate_task(task)
        context, cfg = self._invocation(kwargs)
        return self._result(self._graph_of_runs().invoke({"task": task}, cfg, context=context), cfg)

    def resume(self, thread_id: str, **kwargs: Any) -> RunResult:
        """Finish a checkpointed run that stopped part-way (needs a checkpointer)."""
        if self.checkpointer is None:
            raise ConfigError("resume() needs a checkpointer; build the architecture with "
                              "checkpointer=... (e.g. langgraph's InMemorySaver)")
        cfg = self.config(thread_id=thread_id, **kwargs)
        if not self.build().get_state(cfg).values:
            raise ConfigError(f"no checkpoint found for thread_id {thread_id!r}; pass the "
                              "thread_id of a run started with this checkpointer")
        return self._result(self.build().invoke(None, cfg), cfg)

    async def arun(self, task: str, **kwargs: Any) -> RunResult:
        """Async :meth:`run`."""
        task = self.validate_task(task)
        context, cfg = self._invocation(kwargs)
        return self._result(await self._graph_of_runs().ainvoke({"task": task}, cfg,
                                                                 context=context),
                            cfg)

    def batch(self, tasks: Sequence[str | TaskLike], *, max_concurrency: int = 4,
              **kwargs: Any) -> list[RunResult]:
        """Run many tasks concurrently: :func:`run_specs` on this architecture."""
        return run_specs(self, tasks, max_concurrency=max_concurrency, **kwargs)

    async def abatch(self, tasks: Sequence[str | TaskLike], *, max_concurrency: int = 4,
                     **kwargs: Any) -> list[RunResult]:
        """Async :meth:`batch` (items as in :func:`run_specs`; one thread: in order)."""
        gate = asyncio.Semaphore(max(1, max_concurrency))

        async def one(item: Any) -> RunResult:
            task, run_kwargs = _task_and_kwargs(item, kwargs)
            async with gate:
                try:
                    return await self.arun(task, **run_kwargs)
                except Exception as exc:  # as in run_specs
                    return RunResult.refused(task, exc, architecture=self.name,
                                             model_id=self.model_id)

        if kwargs.get("thread_id") is not None:  # a conversation: one run after another
            return [await one(t) for t in tasks]
        return list(await asyncio.gather(*(one(t) for t in tasks)))

    def stream(self, task: str, **kwargs: Any) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield ``(node, state update)`` as each node finishes (reducer overwrites unwrapped)."""
        task = self.validate_task(task)
        context, cfg = self._invocation(kwargs)
        for chunk in self._graph_of_runs().stream({"task": task}, cfg, context=context,
                                         stream_mode="updates"):
            for node, update in chunk.items():
                yield node, plain_values(update or {})
