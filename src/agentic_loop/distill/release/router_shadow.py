"""Shadow calls: ask the candidate model the same question, off the answer's path, and log both.

Why apart from the router: a shadowed request must cost the caller (almost)
nothing and must never fail because of the candidate. So the candidate runs
in a small thread pool of its own, *beside* the current model's call (it
starts first and runs while the current model answers); the worker then waits
for the current answer, scores both with a scorer callable and appends one
:class:`ShadowRecord` to a durable JSONL log
(:class:`~agentic_loop.jsonl_log.JsonlLog`). Nothing from the worker reaches
the caller: a candidate error, a slow candidate, a scorer that raises or a
log that cannot be written are recorded (or warned about once), never raised.
Before its first record the log is recorded in the data folder's
``places.jsonl`` (:mod:`agentic_loop.text_places`): it holds users' prompts and
both answers, and ``agentic-loop forget`` erases a user's lines from it.
A full pool (``max_pending`` jobs waiting) skips the shadow call rather than
queueing without bound; :attr:`ShadowRunner.skipped` counts those.

The candidate's call gets no callbacks of the request, so neither a LangGraph
``stream_mode="messages"`` stream nor the request's trace ever sees its tokens.

Example:
    >>> import tempfile, pathlib
    >>> from langchain_core.messages import HumanMessage
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> log = pathlib.Path(tempfile.mkdtemp()) / "shadow.jsonl"
    >>> runner = ShadowRunner(ScriptedChatModel(default="four words right here", model_id="cand"),
    ...                       log, scorer=rubric_scorer(), current_id="cur")
    >>> job = runner.start([HumanMessage("Write exactly 4 words.")], key=None)
    >>> job.current_done("only three words", 0.01)
    >>> runner.flush()
    True
    >>> r = read_shadow_log(log)[0]
    >>> (r.current_output, r.current_score, r.candidate_output, r.candidate_score)
    ('only three words', 7.5, 'four words right here', 10.0)
    >>> runner.close()
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from pydantic import BaseModel, Field

from agentic_loop.clock import utc_stamp
from agentic_loop.jsonl_log import JsonlLog
from agentic_loop.models.structured_output import message_text
from agentic_loop.text_places import data_root, record_place

if TYPE_CHECKING:
    from agentic_loop.judges import Rubric

__all__ = ["Scorer", "ShadowJob", "ShadowRecord", "ShadowRunner", "ShadowWarning",
           "read_shadow_log", "rubric_scorer"]

#: ``scorer(messages, answer) -> score or None``: how good ``answer`` is for the request.
Scorer = Callable[[Sequence[BaseMessage], str], "float | None"]

#: Longest a shadow worker waits for the current model's answer before logging without it.
CURRENT_WAIT_S = 900.0


class ShadowWarning(UserWarning):
    """A shadow record could not be scored or written; the caller's answer was not affected."""


class ShadowRecord(BaseModel):
    """One shadowed request: both answers, both scores, both latencies."""

    at: str = Field(default_factory=utc_stamp)
    #: a salted hash of the user (or of the prompt), never the raw user id
    key: str | None = None
    prompt: list[dict[str, str]] = Field(default_factory=list)
    current_model: str
    candidate_model: str
    current_output: str | None = None
    candidate_output: str | None = None
    current_score: float | None = None
    candidate_score: float | None = None
    current_latency_s: float | None = None
    candidate_latency_s: float | None = None
    current_error: str | None = None
    candidate_error: str | None = None
    score_error: str | None = None


def read_shadow_log(path: str | os.PathLike[str]) -> list[ShadowRecord]:
    """Every record of a shadow log, oldest first (empty when the log does not exist yet)."""
    log: JsonlLog[ShadowRecord] = JsonlLog(Path(path), ShadowRecord)
    return log.read_all() if log.path.is_file() else []


def _task_of(messages: Sequence[BaseMessage]) -> str:
    """The request's last human message (the task and its requirements), else all of it."""
    humans = [m for m in messages if m.type == "human"]
    return message_text(humans[-1] if humans else messages[-1]) if messages else ""


def rubric_scorer(rubric: Rubric | None = None) -> Scorer:
    """A scorer from a rubric's *checks* (Python only: no judge model is called per request).

    ``rubric=None`` uses the task's own stated constraints
    (:func:`~agentic_loop.judges.rubric_for_task` of the last human
    message). A rubric with no checks scores ``None``; for judged features
    pass your own scorer (e.g. one calling a
    :class:`~agentic_loop.judges.Critic`), which runs in the shadow worker too.
    """
    from agentic_loop.judges import Rubric, rubric_for_task

    def score(messages: Sequence[BaseMessage], answer: str) -> float | None:
        task = _task_of(messages)
        chosen = rubric if rubric is not None else rubric_for_task(task)
        checks = chosen.check_features
        if not checks:
            return None
        checked = Rubric(checks, name=chosen.name, version=chosen.version)
        return checked.evaluate(task, answer).score

    return score


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:500]}"


class ShadowJob:
    """One shadowed request; the router reports the current model's answer to it."""

    def __init__(self, messages: list[BaseMessage], key: str | None) -> None:
        self.messages = messages
        self.key = key
        self._current: Future[tuple[str | None, float | None, str | None]] = Future()

    def current_done(self, text: str, latency_s: float) -> None:
        """The current model answered ``text`` in ``latency_s`` seconds."""
        if not self._current.done():
            self._current.set_result((text, latency_s, None))

    def current_failed(self, exc: BaseException | str, latency_s: float | None) -> None:
        """The current model's call failed (or the caller stopped reading its stream)."""
        if not self._current.done():
            error = exc if isinstance(exc, str) else _error_text(exc)
            self._current.set_result((None, latency_s, error))

    def current(self, timeout_s: float) -> tuple[str | None, float | None, str | None]:
        """The current answer, its latency and its error (waits up to ``timeout_s``)."""
        try:
            return self._current.result(timeout=timeout_s)
        except TimeoutError:
            return None, None, f"no answer from the current model within {timeout_s:g}s"


class ShadowRunner:
    """Runs ``candidate`` beside the current model and logs both answers to ``log_path``."""

    def __init__(self, candidate: Any, log_path: str | os.PathLike[str], *,
                 scorer: Scorer | None = None, current_id: str = "current",
                 candidate_id: str | None = None, workers: int = 2,
                 max_pending: int = 64) -> None:
        from agentic_loop.models import model_id_of

        self.candidate = candidate
        self.scorer = scorer
        self.current_id = current_id
        self.candidate_id = candidate_id or model_id_of(candidate)
        self.log: JsonlLog[ShadowRecord] = JsonlLog(Path(log_path).expanduser(), ShadowRecord)
        self.max_pending = max(1, int(max_pending))
        self.skipped = 0
        self.logged = 0
        self._pool = ThreadPoolExecutor(max_workers=max(1, int(workers)),
                                        thread_name_prefix="agentic-loop-shadow")
        self._pending: set[Future[None]] = set()
        self._lock = threading.Lock()
        self._warned = False
        self._recorded = False
        self._place_lock = threading.Lock()

    def start(self, messages: list[BaseMessage], *, key: str | None,
              stop: list[str] | None = None, **kwargs: Any) -> ShadowJob | None:
        """Start the candidate on ``messages`` now; None when the pool is full (skipped)."""
        job = ShadowJob(list(messages), key)
        with self._lock:
            if len(self._pending) >= self.max_pending:
                self.skipped += 1
                return None
            try:
                future = self._pool.submit(self._run, job, stop, kwargs)
            except RuntimeError:  # the runner was closed: shadowing stops, answers do not
                self.skipped += 1
                return None
            self._pending.add(future)
        future.add_done_callback(self._finished)
        return job

    def _finished(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _run(self, job: ShadowJob, stop: list[str] | None, kwargs: dict[str, Any]) -> None:
        started = time.perf_counter()
        text: str | None = None
        error: str | None = None
        try:
            answer = self.candidate.invoke(job.messages, {"run_name": "shadow",
                                                          "tags": ["shadow"]},
                                           stop=stop, **kwargs)
            text = message_text(answer)
        except Exception as exc:  # noqa: BLE001 - a candidate error is data, never the caller's
            error = _error_text(exc)
        latency = time.perf_counter() - started
        current, current_latency, current_error = job.current(CURRENT_WAIT_S)
        record = ShadowRecord(
            key=job.key, prompt=[{"role": m.type, "content": message_text(m)}
                                 for m in job.messages],
            current_model=self.current_id, candidate_model=self.candidate_id,
            current_output=current, candidate_output=text, current_latency_s=current_latency,
            candidate_latency_s=latency, current_error=current_error, candidate_error=error)
        if self.scorer is not None:
            try:
                record.current_score = (None if current is None
                                        else self.scorer(job.messages, current))
                record.candidate_score = None if text is None else self.scorer(job.messages, text)
            except Exception as exc:  # noqa: BLE001 - recorded with the answers
                record.score_error = _error_text(exc)
        try:
            self._record_place()
            self.log.append(record)
            self.logged += 1
        except Exception as exc:  # noqa: BLE001 - the answer already went out; say so once
            if not self._warned:
                self._warned = True
                warnings.warn(f"shadow log {self.log.path} could not be written ({exc}); "
                              "shadow records are being lost; fix the path or the disk",
                              ShadowWarning, stacklevel=1)

    def _record_place(self) -> None:
        """Before the first record: the log holds users' prompts and answers, so `forget`
        must find it (:func:`~agentic_loop.text_places.record_place`, in the data folder)."""
        with self._place_lock:  # held while recording: no worker appends before it is done
            if not self._recorded:
                record_place("log", self.log.path, what="shadow log", near=[data_root()])
                self._recorded = True

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait for every started shadow job; True when all finished within ``timeout_s``."""
        with self._lock:
            pending = set(self._pending)
        _, not_done = wait(pending, timeout=timeout_s)
        return not not_done

    def close(self, *, wait: bool = True) -> None:
        """Stop taking shadow jobs; with ``wait``, let the started ones finish and log."""
        self._pool.shutdown(wait=wait, cancel_futures=not wait)
