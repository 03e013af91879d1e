"""ArchiveRefine: Self-Refine whose accepted outputs teach later runs.

``retrieve`` shows the top-K archived outputs of the most *similar* tasks as
few-shot chat turns before the task (user: the exemplar's task and
requirements; assistant: its accepted output); ``critique``/``refine`` loop
as in Reflection; ``finalize`` archives the best draft when it is accepted:
its composite score reaches ``target_score`` and every check holds.

Why turns, a floor and matching kinds: a small model shown accepted answers
as text in its prompt copied them, and a warm archive measured *worse* than
an empty one (10% vs 20% on the 135M model, pooled over three 20-task runs);
with turns, the floor and matching kinds it measures 30.5% warm against 23.5%
cold and 17% single-shot on 200 held-out tasks (bench/results/quality.json). As
turns, an exemplar is a worked example of the task -> answer pattern rather
than text to reuse; it is shown only when its task is similar
(``min_similarity``, a cosine floor) and states the same kinds of
constraints (an exemplar of "exactly 5 words" teaches nothing about "all in
lowercase"), kept in each entry's metadata (``constraint_kinds``; older
entries have theirs read from their task). A draft that nearly copies a
shown exemplar is voided anyway (the ``exemplar_copy`` guard), so a copy
never passes, is never archived and never becomes training data; the
exporter trains on the plain task prompt, without the turns.
When the generator is an agent, the accepted round's episode (its tool calls
and results) is archived with the output, and a retrieved exemplar that has
one is shown as a few-shot *episode*: task -> tool call -> tool result ->
answer (see :mod:`agentic_loop.prompt_format`), under the same floor.
The archive is read and written through the graph's LangGraph store, in
the namespace ``("archive", <namespace>)``: by default a local archive on
disk (quality compounds across runs and processes), or any store passed as
``store=`` (a ``PostgresStore`` shared by many workers); see
:mod:`agentic_loop.memory.store.slots`.
(Known in the seed walkthrough as "RLHF-style self-improvement", which it is
not: no reward model is trained. ``RLHFSelfImprovement`` is kept as an alias.)

Example:
    >>> import tempfile
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> from agentic_loop.judges import Rubric
    >>> from agentic_loop.memory import Archive, HashingEmbedder
    >>> archive = Archive(tempfile.mkdtemp(), embedder=HashingEmbedder())
    >>> llm = ScriptedChatModel(default="Stories on every shelf")
    >>> arch = ArchiveRefine(llm, rubric=Rubric.for_constraints(word_count=(3, 6)),
    ...                      archive=archive)
    >>> arch.run("Tagline for a bookstore.").archived, len(archive)
    (True, 1)
    >>> arch.run("Tagline for a bookshop.").exemplar_ids == [archive.entries()[0].id]
    True

    The same with memory in a LangGraph store:

    >>> from langgraph.store.memory import InMemoryStore
    >>> from agentic_loop.memory import store_index
    >>> store = InMemoryStore(index=store_index(HashingEmbedder()))
    >>> arch = ArchiveRefine(llm, rubric=Rubric.for_constraints(word_count=(3, 6)), store=store)
    >>> arch.run("Tagline for a bookstore.").archived
    True
    >>> [item.value["output"] for item in store.search(("archive", "default"))]
    ['Stories on every shelf']
    >>> stored = store.search(("archive", "default"))[0].key
    >>> arch.run("Tagline for a bookshop.").exemplar_ids == [stored]
    True
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph

from agentic_loop.architectures.base import Architecture
from agentic_loop.architectures.state import LoopState
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Rubric, rubric_for_task
from agentic_loop.memory import Archive
from agentic_loop.memory.records import ArchiveEntry
from agentic_loop.memory.store.slots import UNSET, memory_slot
from agentic_loop.prompt_format import ExemplarStyle, rubric_requirements
from agentic_loop.trajectories import Round

__all__ = ["DEFAULT_MIN_SIMILARITY", "ArchiveRefine", "RLHFSelfImprovement", "check_kinds",
           "create_archive_refine_graph", "entry_kinds", "entry_requirements"]

#: The cosine floor below which an archived task is not shown (see ``ArchiveRefine``).
DEFAULT_MIN_SIMILARITY = 0.6


def check_kinds(rubric: Rubric) -> frozenset[str]:
    """The kinds of checks a rubric makes (its check features' names: ``exact_words``...).

    >>> sorted(check_kinds(Rubric.for_constraints(exact_words=3, lowercase=True)))
    ['exact_words', 'lowercase']
    """
    return frozenset(f.name for f in rubric.check_features)


def entry_kinds(entry: ArchiveEntry) -> frozenset[str]:
    """The check kinds an archived output was accepted under: stored with it, or (for entries
    archived before they were stored) those its task states."""
    stored = entry.metadata.get("constraint_kinds")
    if isinstance(stored, list):
        return frozenset(str(k) for k in stored)
    return check_kinds(rubric_for_task(entry.task))


def entry_requirements(entry: ArchiveEntry) -> str:
    """The requirements an exemplar's turn shows: stored with it, else those its task states."""
    stored = entry.metadata.get("requirements")
    return stored if isinstance(stored, str) else rubric_requirements(rubric_for_task(entry.task))


class ArchiveRefine(Architecture):
    """Generate from similar archived exemplars, critique, refine, archive the accepted.

    Args (beyond :class:`Architecture`):
        archive: an :class:`~agentic_loop.memory.Archive` or a path to one (default
            ``data/archive``); omit it and pass ``store=`` to keep the archive in
            that LangGraph store instead.
        k: exemplars put in the prompt.
        min_similarity: ignore archived tasks less similar than this (cosine). Exemplars
            of unrelated tasks mislead a small model more than they help it. The default
            0.6 comes from the bundled embedder (all-MiniLM-L6-v2) on the bench's task
            families (60 held-out vs 140 train tasks of ``agentic_loop.tasks.sets``): the
            most similar train task with the same kinds of checks scores >= 0.6 for 97%
            of held-out tasks (median 0.78), while one with other kinds reaches 0.6 for
            22% (median best 0.38; 0.5 lets 32% through, 0.7 keeps only 75% of the
            same-kind hits). The kinds filter removes the rest.
        match_kinds: show only exemplars whose task has the same kinds of checks
            (``exact_words``, ``lowercase``...) as this one.
        exemplars_as: ``"turns"`` (few-shot chat turns, the default) or ``"text"``
            (one block of examples in the user message, as before).
        mmr: MMR lambda for varied exemplars (``None``: pure similarity).
        show_episodes: show an exemplar an agent wrote as a few-shot episode, its tool
            calls and results included (``False``: as its task and answer only). The
            default ``None`` shows episodes when the generator is an agent, and to a plain
            chat model (which has no tools to call) only the task and the answer.
        archive_namespace: namespace used when ``archive`` is a path, or in ``store``.
    """

    name = "archive_refine"

    def __init__(self, llm: BaseChatModel | str, rubric: Any = None, *,
                 archive: Archive | str = UNSET, k: int = 3,
                 min_similarity: float | None = DEFAULT_MIN_SIMILARITY,
                 match_kinds: bool = True, exemplars_as: ExemplarStyle = "turns",
                 mmr: float | None = 0.7, show_episodes: bool | None = None,
                 archive_namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(llm, rubric, **kwargs)
        self.memory_slot = memory_slot("archive", archive, kwargs.get("store"),
                                       archive_namespace, default_path="data/archive",
                                       owner=type(self).__name__)
        self.store = self.memory_slot.store
        self.archive: Archive | None = self.memory_slot.local  # type: ignore[assignment]
        self.k = k
        self.min_similarity = min_similarity
        self.match_kinds = match_kinds
        if exemplars_as not in ("turns", "text"):
            raise ConfigError(f"exemplars_as={exemplars_as!r}: pass 'turns' or 'text'")
        self.exemplars_as = exemplars_as
        self.mmr = mmr
        self.show_episodes = (getattr(self, "agent", None) is not None if show_episodes is None
                              else bool(show_episodes))

    def _prelude(self, graph: StateGraph) -> str | None:
        self._add(graph, "retrieve", self._retrieve)
        return "retrieve"

    @property
    def recursion_limit(self) -> int:
        return super().recursion_limit + 1

    def _retrieve(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        update = self._start(state)
        task = state["task"]
        wanted = check_kinds(self.run_rubric(state, config))
        pool = self.k * 4 if self.match_kinds else self.k  # room for the kinds filter
        hits = self.memory_slot.view(get_store()).search(
            task, k=pool, min_score=self.min_similarity, mmr=self.mmr)
        if self.match_kinds:
            hits = [h for h in hits if entry_kinds(h.entry) == wanted]
        update["exemplars"] = [{"id": h.entry.id, "task": h.entry.task, "output": h.entry.output,
                                "requirements": entry_requirements(h.entry),
                                "score": h.entry.score, "similarity": round(h.similarity, 4),
                                **self._shown_episode(h.entry)}
                               for h in hits[: self.k]]
        return update

    def _shown_episode(self, entry: ArchiveEntry) -> dict[str, Any]:
        """The exemplar's episode as the state keeps it (plain JSON, checkpointable), if shown."""
        if not self.show_episodes or entry.episode is None:
            return {}
        return {"episode": entry.episode.model_dump(mode="json")}

    def _on_finalize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        final: Round = state["final"]
        if not self.accepts(final, self.settings_of(state, config)):
            return {"archived": False}
        rubric = self.run_rubric(state, config)
        result = self.memory_slot.view(get_store()).add_many([{
            "task": state["task"], "output": final.draft, "score": final.score,
            "features": dict(final.features), "iterations": len(state.get("rounds", [])),
            "model_id": final.model or self.model_id, "trajectory_id": state.get("run_id"),
            "metadata": {"architecture": self.name, "passed": bool(final.passed),
                         "constraint_kinds": sorted(check_kinds(rubric)),
                         "requirements": rubric_requirements(rubric)},
            # the accepted round's agent episode (tool calls and results), shown to later runs
            **({"episode": final.episode} if final.episode is not None else {})}])[0]
        return {"archived": result.status != "duplicate"}


RLHFSelfImprovement = ArchiveRefine


def create_archive_refine_graph(llm: BaseChatModel | str, *,
                                archive: Archive | str = UNSET,
                                checkpointer: Any = None, store: Any = None,
                                name: str | None = None, **kwargs: Any) -> CompiledStateGraph:
    """A compiled ArchiveRefine graph for apps that compose graphs (input: ``{"task": ...}``).

    The archive lives in ``store`` when one is given, else in ``archive``
    (default ``data/archive``); see :class:`ArchiveRefine`.
    """
    return ArchiveRefine(llm, archive=archive, checkpointer=checkpointer, store=store,
                         graph_name=name, **kwargs).build()
