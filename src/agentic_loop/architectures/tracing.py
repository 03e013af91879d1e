"""LangSmith-readable traces: tags a filter can use, and each run's verdict as feedback.

Three things make "show me the failed runs of architecture X on model Y" one
filter in LangSmith:

* :func:`graph_config` is set on the compiled graph itself
  (``graph.with_config``), so its tags (``agentic-loop``, ``arch:<name>``)
  and metadata (architecture, model id, package and version) are inherited
  by every run below the graph (nodes, LLM calls, judge calls) even when the
  graph runs as a subgraph of a user's graph, where our own run config is
  never applied.
* :func:`annotate_run` writes what a node learns while running (iteration,
  score, features, error, ``node:<name>``) into its run before the run ends.
* :func:`post_run_feedback` posts the run's final ``score`` and ``passed`` as
  LangSmith feedback on the architecture's graph run (the trace's root when
  the graph runs on its own), from a background thread: an unreachable
  LangSmith never slows a run, and :func:`flush_feedback` waits for the posts.

With tracing off there are no tracers, and all of this costs nothing.

Example:
    >>> node_tags("reflection", "critique")
    ['agentic-loop', 'arch:reflection', 'node:critique']
    >>> config = graph_config("reflection", "smollm2-135m")
    >>> config["tags"], config["metadata"]["model_id"]
    (['agentic-loop', 'arch:reflection'], 'smollm2-135m')
    >>> post_run_feedback(None, score=9.0, passed=True)  # tracing off: nothing to post
    0
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import RunnableConfig

from agentic_loop.trajectories import Round, Trajectory

__all__ = ["FEEDBACK_KEYS", "annotate_run", "flush_feedback", "graph_config", "node_metadata",
           "node_tags", "post_run_feedback"]

logger = logging.getLogger(__name__)

#: The feedback keys each finished run gets on its graph run.
FEEDBACK_KEYS = ("score", "passed")


def node_tags(architecture: str, node: str) -> list[str]:
    """The tags of one node's run."""
    return ["agentic-loop", f"arch:{architecture}", f"node:{node}"]


def graph_config(architecture: str, model_id: str) -> RunnableConfig:
    """The config set on a compiled graph: tags and metadata every run below it inherits."""
    from agentic_loop import __version__

    return {"tags": ["agentic-loop", f"arch:{architecture}"],
            "metadata": {"architecture": architecture, "model_id": model_id,
                         "package": "agentic-loop", "package_version": __version__}}


def annotate_run(config: RunnableConfig | None, metadata: dict[str, Any],
                 tags: list[str] | None = None) -> None:
    """Merge ``metadata`` and ``tags`` into the run that owns ``config`` (every tracer)."""
    for _, run in _owning_runs(config):
        run.extra.setdefault("metadata", {}).update(metadata)
        run.tags = [*(run.tags or []), *(t for t in tags or [] if t not in (run.tags or []))]


def _owning_runs(config: RunnableConfig | None) -> list[tuple[Any, Any]]:
    """``(tracer, run)`` for each tracer that holds the run ``config`` belongs to."""
    callbacks = (config or {}).get("callbacks")
    if not isinstance(callbacks, BaseCallbackManager) or callbacks.parent_run_id is None:
        return []
    run_id = str(callbacks.parent_run_id)
    found = []
    for handler in callbacks.handlers:
        run_map = getattr(handler, "run_map", None)
        run = run_map.get(run_id) if isinstance(run_map, dict) else None
        if run is not None:
            found.append((handler, run))
    return found


def with_langsmith_run(trajectory: Trajectory, config: RunnableConfig | None) -> Trajectory:
    """``trajectory`` with its LangSmith run id in ``metadata["langsmith_run_id"]`` when a
    LangSmith tracer holds the graph run above the node of ``config`` (unchanged otherwise).

    The review queue needs the id to send a run to a LangSmith annotation queue, where
    people label the very trace they read.

    >>> t = Trajectory(architecture="a", model_id="m", task="t")
    >>> with_langsmith_run(t, None) is t     # tracing off
    True
    """
    from langchain_core.tracers.langchain import LangChainTracer

    for handler, node_run in _owning_runs(config):
        if isinstance(handler, LangChainTracer) and node_run.parent_run_id is not None:
            metadata = {**trajectory.metadata, "langsmith_run_id": str(node_run.parent_run_id)}
            return trajectory.model_copy(update={"metadata": metadata})
    return trajectory


def post_run_feedback(config: RunnableConfig | None, *, score: float | None,
                      passed: bool) -> int:
    """Queue ``score`` and ``passed`` as feedback on the graph run above a node's run.

    ``config`` is a node's config (the node run's parent is the graph run).
    Each LangSmith tracer on the run gets the feedback through its own client.
    Returns how many posts were queued (0 with tracing off).
    """
    from langchain_core.tracers.langchain import LangChainTracer

    queued = 0
    for handler, node_run in _owning_runs(config):
        if not isinstance(handler, LangChainTracer) or node_run.parent_run_id is None:
            continue
        values: dict[str, float] = {"passed": 1.0 if passed else 0.0}
        if score is not None:
            values["score"] = float(score)
        target = str(node_run.parent_run_id)
        trace_id = str(node_run.trace_id) if node_run.trace_id else None
        project = getattr(node_run, "session_name", None)
        for key, value in values.items():
            _FEEDBACK.put(_post(handler.client, target, trace_id, project, key, value))
            queued += 1
    return queued


def _post(client: Any, run_id: str, trace_id: str | None, project: str | None, key: str,
          value: float) -> Callable[[], None]:
    def send() -> None:
        client.create_feedback(run_id, key, score=value, trace_id=trace_id,
                               session_id=_project_id(client, project),
                               source_info={"source": "agentic-loop"}, stop_after_attempt=3)
    return send


_PROJECT_IDS: dict[tuple[int, str], str] = {}


def _project_id(client: Any, project: str | None) -> str | None:
    """The id of a LangSmith project (feedback names it); None when it cannot be read yet."""
    if not project:
        return None
    key = (id(client), project)
    if key not in _PROJECT_IDS:
        try:
            _PROJECT_IDS[key] = str(client.read_project(project_name=project).id)
        except Exception:  # not created yet, or no server: the feedback goes without it
            return None
    return _PROJECT_IDS[key]


class _FeedbackQueue:
    """A daemon thread that sends feedback posts; never delays a run or the process exit."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[Callable[[], None]] = queue.Queue()
        self._pending = 0
        self._done = threading.Condition()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, job: Callable[[], None]) -> None:
        with self._done:
            self._pending += 1
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, daemon=True,
                                                name="agentic-loop-feedback")
                self._thread.start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                job()
            except Exception as exc:  # feedback is best effort: a run never fails on it
                logger.warning("LangSmith feedback not sent: %s: %s", type(exc).__name__, exc)
            finally:
                with self._done:
                    self._pending -= 1
                    self._done.notify_all()

    def flush(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._done:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._done.wait(left)
        return True


_FEEDBACK = _FeedbackQueue()


def flush_feedback(timeout: float = 30.0) -> bool:
    """Wait until every queued feedback post was sent (or failed); False on timeout.

    Call it before a short-lived process exits (the posts run on a daemon
    thread, which never holds the process up).
    """
    return _FEEDBACK.flush(timeout)


def node_metadata(node: str, state: Mapping[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """What a node's trace run is tagged with: iteration, and score/features/error if any."""
    meta: dict[str, Any] = {"iteration": update.get("iteration", state.get("iteration", 0))}
    rounds: list[Round] | None = update.get("rounds")
    if rounds:
        meta["score"] = rounds[-1].score
        meta["features"] = rounds[-1].features
    final: Round | None = update.get("final")
    if final is not None:
        meta["score"] = final.score
    if update.get("errors"):
        meta["error"] = update["errors"][-1]
    return meta
