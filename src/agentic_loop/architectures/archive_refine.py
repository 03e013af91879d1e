"""ArchiveRefine: Self-Refine whose accepted outputs teach later runs.

``retrieve`` puts the top-K archived outputs of the most *similar* tasks in
the generation prompt (with an instruction to vary the structure, against
mode collapse); ``critique``/``refine`` loop as in Reflection; ``finalize``
archives the best draft when it is accepted: its composite score reaches
``target_score`` and every check holds.
The archive is read and written through the graph's LangGraph store, in
the namespace ``("archive", <namespace>)``: by default a local archive on
disk (quality compounds across runs and processes), or any store passed as
``store=`` (a ``PostgresStore`` shared by many workers); see
:mod:`agentic_loop.memory.slots`.
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
from agentic_loop.memory import Archive
from agentic_loop.memory.slots import UNSET, memory_slot
from agentic_loop.trajectories import Round

__all__ = ["ArchiveRefine", "RLHFSelfImprovement", "create_archive_refine_graph"]


class ArchiveRefine(Architecture):
    """Generate from similar archived exemplars, critique, refine, archive the accepted.

    Args (beyond :class:`Architecture`):
        archive: an :class:`~agentic_loop.memory.Archive` or a path to one (default
            ``data/archive``); omit it and pass ``store=`` to keep the archive in
            that LangGraph store instead.
        k: exemplars put in the prompt.
        min_similarity: ignore archived tasks less similar than this (cosine). Exemplars
            of unrelated tasks mislead a small model more than they help it.
        mmr: MMR lambda for varied exemplars (``None``: pure similarity).
        archive_namespace: namespace used when ``archive`` is a path, or in ``store``.
    """

    name = "archive_refine"

    def __init__(self, llm: BaseChatModel | str, rubric: Any = None, *,
                 archive: Archive | str = UNSET, k: int = 3,
                 min_similarity: float | None = 0.5, mmr: float | None = 0.7,
                 archive_namespace: str | None = None, **kwargs: Any) -> None:
        super().__init__(llm, rubric, **kwargs)
        self.memory_slot = memory_slot("archive", archive, kwargs.get("store"),
                                       archive_namespace, default_path="data/archive",
                                       owner=type(self).__name__)
        self.store = self.memory_slot.store
        self.archive: Archive | None = self.memory_slot.local  # type: ignore[assignment]
        self.k = k
        self.min_similarity = min_similarity
        self.mmr = mmr

    def _prelude(self, graph: StateGraph) -> str | None:
        self._add(graph, "retrieve", self._retrieve)
        return "retrieve"

    @property
    def recursion_limit(self) -> int:
        return super().recursion_limit + 1

    def _retrieve(self, state: LoopState, config: RunnableConfig) -> dict[str, Any]:
        update = self._start(state)
        hits = self.memory_slot.view(get_store()).search(
            state["task"], k=self.k, min_score=self.min_similarity, mmr=self.mmr)
        update["exemplars"] = [{"id": h.entry.id, "task": h.entry.task, "output": h.entry.output,
                                "score": h.entry.score, "similarity": round(h.similarity, 4)}
                               for h in hits]
        return update

    def _on_finalize(self, state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        final: Round = state["final"]
        if not self.accepts(final):
            return {"archived": False}
        result = self.memory_slot.view(get_store()).add_many([{
            "task": state["task"], "output": final.draft, "score": final.score,
            "features": dict(final.features), "iterations": len(state.get("rounds", [])),
            "model_id": self.model_id, "trajectory_id": state.get("run_id"),
            "metadata": {"architecture": self.name, "passed": bool(final.passed)}}])[0]
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
