"""Reflexion: attempt -> evaluate -> reflect on the failure -> retry with the lesson.

Verifiable checks run first; the LLM judge is asked only about attempts that
pass them (the critic's ``checks_first`` mode: a failed check already decides
the attempt, and the judge's call is saved). A failed attempt gets a short
structured reflection (root cause, correction, lesson), asked through the
architecture's retry policy and stored as a
:class:`~agentic_loop.memory.ReflectionEntry`; the next attempt, and later
runs on similar tasks, see those lessons. Reflections are read and written
through the graph's LangGraph store, in ``("reflexion", <namespace>)``: by
default a local :class:`~agentic_loop.memory.ReflexionMemory` on disk, or
any store passed as ``store=`` (see :mod:`agentic_loop.memory.store.slots`).
When the generator is an agent, the reflection prompt also shows what it did
in the failed episode (each tool call with its arguments and result or error,
the step count, the tools the task asked for that it never called; see
:func:`~agentic_loop.architectures.prompts.attempt_summary`), so a lesson can
name a tool: "use the calculator for products of two-digit numbers".

Example:
    >>> import tempfile
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> from agentic_loop.judges import Rubric
    >>> from agentic_loop.memory import ReflexionMemory, HashingEmbedder
    >>> memory = ReflexionMemory(tempfile.mkdtemp(), embedder=HashingEmbedder())
    >>> llm = ScriptedChatModel(responses=["We sell books", "Stories on every shelf"],
    ...     structured={"ReflectionNote": [{"root_cause": "used we", "correction": "drop we",
    ...                                     "lesson": "Never address the reader as we."}]})
    >>> arch = Reflexion(llm, rubric=Rubric.for_constraints(exclude_words=["we"]), memory=memory)
    >>> result = arch.run("Tagline for a bookstore without 'we'.")
    >>> result.output, result.iterations, len(memory)
    ('Stories on every shelf', 2, 1)
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, StateGraph
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, ConfigDict, Field

from agentic_loop.architectures.archive_refine import DEFAULT_MIN_SIMILARITY
from agentic_loop.architectures.base import Architecture
from agentic_loop.architectures.prompts import reflect_messages, tools_asked_for
from agentic_loop.architectures.state import LoopState
from agentic_loop.episodes import Episode
from agentic_loop.memory import ReflexionMemory
from agentic_loop.memory.store.slots import UNSET, memory_slot

__all__ = ["ReflectionNote", "Reflexion", "create_reflexion_graph"]


_WORD = re.compile(r"[A-Za-z]{2,}")


def usable_lesson(text: str) -> bool:
    """Whether a lesson is worth storing: two or more words and no template placeholder.

    A small model sometimes fills the schema with the field's name (``{{lesson}}}``) or a
    fragment; stored, it would be recalled into every later prompt on similar tasks.

    >>> usable_lesson("Count the words before answering."), usable_lesson("{{lesson}}}")
    (True, False)
    """
    return "{{" not in text and "}}" not in text and len(_WORD.findall(text)) >= 2


class ReflectionNote(BaseModel):
    """What the model concludes about a failed attempt."""

    model_config = ConfigDict(extra="forbid")
    root_cause: str = Field(max_length=160, description="Why the attempt failed.")
    correction: str = Field(max_length=160, description="What to do differently.")
    lesson: str = Field(max_length=200, description="One sentence to remember next time.")


class Reflexion(Architecture):
    """Retry with verbal reflections. ``max_iterations`` is the number of trials.

    Every trial is a fresh draft from the task and the lessons (never the failed
    draft itself), so the ``refine`` option of :class:`Architecture` does not apply.

    Args (beyond :class:`Architecture`):
        memory: a :class:`~agentic_loop.memory.ReflexionMemory` or a path to one (default
            ``data/reflections``); omit it and pass ``store=`` to keep reflections in
            that LangGraph store instead.
        k: reflections recalled for a task.
        min_similarity: ignore reflections on tasks less similar than this (cosine; the
            archive's floor). Lessons from other tasks mislead a small model's first
            attempt: on the bench's 200 quick held-out tasks with the 135M model, a floor
            of 0.3 passed 28 (20 first attempts) and 0.6 passed 40 (32 first attempts;
            21 tasks won, 9 lost, exact McNemar p=0.043), in less time (617 s vs 687).
        memory_namespace: namespace used when ``memory`` is a path, or in ``store``.
    """

    name = "reflexion"
    checks_first = True

    def __init__(self, llm: BaseChatModel | str, rubric: Any = None, *,
                 memory: ReflexionMemory | str = UNSET, k: int = 3,
                 min_similarity: float | None = DEFAULT_MIN_SIMILARITY,
                 memory_namespace: str | None = None,
                 **kwargs: Any) -> None:
        super().__init__(llm, rubric, **kwargs)
        self.memory_slot = memory_slot("reflexion", memory, kwargs.get("store"),
                                       memory_namespace, default_path="data/reflections",
                                       owner=type(self).__name__)
        self.store = self.memory_slot.store
        self.memory: ReflexionMemory | None = self.memory_slot.local  # type: ignore[assignment]
        self.k = k
        self.min_similarity = min_similarity
        #: the tools given with a chat model (``tools=``), whose names a reflection may name
        self._given_tools = list(kwargs.get("tools") or ())

    def _define(self, graph: StateGraph) -> None:
        self._add(graph, "recall", self._recall)
        self._add(graph, "attempt", self._attempt)
        self._add(graph, "evaluate", self._evaluate)
        self._add(graph, "reflect", self._reflect)
        self._add(graph, "finalize", self._finalize)
        graph.set_entry_point("recall")
        graph.add_edge("recall", "attempt")
        graph.add_edge("attempt", "evaluate")
        graph.add_conditional_edges("evaluate", self._route,
                                    {"refine": "reflect", "finalize": "finalize"})
        graph.add_edge("reflect", "attempt")
        graph.add_edge("finalize", END)

    def stop_reason(self, state: LoopState) -> str | None:
        rounds = state.get("rounds", [])
        if rounds and not state.get("errors"):
            settings = self.settings_of(state)
            if self.accepts(rounds[-1], settings):
                return "target"
            return "max_iterations" if len(rounds) >= settings.max_iterations else None
        return super().stop_reason(state)

    def _recall(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        update = self._start(state)
        hits = self.memory_slot.view(get_store()).search(state["task"], k=self.k,
                                                         min_score=self.min_similarity)
        update["reflections"] = [{"id": h.entry.id, "task": h.entry.task,
                                  "reflection": h.entry.reflection} for h in hits]
        return update

    def _attempt(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        iteration = len(state.get("rounds", []))
        return {"draft": self._call(self._first_messages(state, config), config, iteration),
                "iteration": iteration}

    def _evaluate(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        """Judge the attempt (checks first: see ``checks_first``), even after an error."""
        return self._judge(state, config)

    def _reflect(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        task, last = state["task"], state["rounds"][-1]
        failure = last.feedback or f"It scored {last.score or 0.0:.1f}/10."
        episode = last.episode
        asked = tools_asked_for(task, self.tool_names(episode)) if episode is not None else []
        note, _ = self.retry.invoke_structured(
            self.judge_llm, ReflectionNote,
            reflect_messages(task, last.draft, failure, episode=episode, asked=asked),
            what="reflection")
        if not usable_lesson(note.lesson):  # a placeholder or a fragment teaches nothing
            return {}
        tools = ({"tools_called": episode.tools_called,
                  "tool_errors": len(episode.tool_errors), "tools_skipped":
                  [n for n in asked if n not in episode.tools_called]}
                 if episode is not None else {})
        stored = self.memory_slot.view(get_store()).add_many([{
            "task": task, "reflection": note.lesson, "failure_summary": failure,
            "outcome": "failed", "trial": last.iteration,
            "metadata": {"root_cause": note.root_cause, "correction": note.correction,
                         "score": last.score, "run_id": state.get("run_id"), **tools}}])[0]
        fresh = {"id": stored.entry.id, "task": task, "reflection": note.lesson}
        return {"reflections": [fresh, *state.get("reflections", [])][: self.k + 1]}

    def tool_names(self, episode: Episode) -> list[str]:
        """The tools the agent could call: those given with ``tools=`` (or an architecture's
        ``tools``) and those the episode called; the reflection prompt names the ones the task
        asked for that the episode skipped."""
        given = [*self._given_tools, *(getattr(self, "tools", None) or ())]
        names = [getattr(t, "name", None) or getattr(t, "__name__", None) for t in given]
        return list(dict.fromkeys([*(n for n in names if isinstance(n, str)),
                                   *episode.tools_called]))

    @property
    def recursion_limit(self) -> int:
        return 3 * self.max_iterations + 6


def create_reflexion_graph(llm: BaseChatModel | str, *,
                           memory: ReflexionMemory | str = UNSET,
                           checkpointer: Any = None, store: Any = None, name: str | None = None,
                           **kwargs: Any) -> CompiledStateGraph:
    """A compiled Reflexion graph for apps that compose graphs (input: ``{"task": ...}``).

    Reflections live in ``store`` when one is given, else in ``memory``
    (default ``data/reflections``); see :class:`Reflexion`.
    """
    return Reflexion(llm, memory=memory, checkpointer=checkpointer, store=store,
                     graph_name=name, **kwargs).build()
