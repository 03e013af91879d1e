"""Run an agent to its final answer as one recorded :class:`~agentic_loop.episodes.Episode`.

Why here: a draft written by an agent is a whole episode, and an episode
must end, and end as data, whatever the agent does. :func:`run_episodes`
runs ``n`` episodes of one prompt concurrently (best-of-n; with the embedded
model, concurrent calls share decoding batches), each in its own thread and
its own LangGraph thread id (:func:`episode_thread_id`: the run, the round, the
sample), so the agent's checkpointer, store and interrupts work per episode.
Every episode is bounded by a step limit (model calls, enforced by the
:class:`~.recorder.EpisodeRecorder` and, for graphs, a ``recursion_limit``
derived from it) and a wall-clock limit; an episode that hits either, or
whose agent raises, comes back with what it had and its ``stop_reason``
(``step_limit``, ``time_limit``, ``error``), never as an exception.

A task may name a simulated user (:class:`~.user_sim.UserSimulator`, given as
``user=`` or bound by the run's settings: :func:`~.user_sim.simulating`).
Then the episode is a conversation: after each final answer the user
replies (a :class:`~agentic_loop.episodes.UserStep`) and the agent goes on
with the whole conversation, on the same thread id, under the same step and
wall-clock limits, until the user's goal is met or its turns run out
(``Episode.user_stop``); the episode's ``final`` is the agent's last answer.

The episode's run is named ``episode`` and tagged with the architecture,
round and sample; it is created below the caller's run (the node's config
callbacks), so in LangSmith the agent's model and tool runs nest inside it,
and the usage counter of the node sees its model calls.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langchain_core.runnables import RunnableLambda
    >>> from agentic_loop.agents.adapt import as_agent
    >>> agent = as_agent(RunnableLambda(lambda m: "4"))
    >>> [ep.final for ep in run_episodes(agent, [HumanMessage("2+2?")], n=2)]
    ['4', '4']
    >>> def boom(messages):
    ...     raise RuntimeError("the agent fell over")
    >>> episode = run_episode(as_agent(RunnableLambda(boom)), [HumanMessage("hi")])
    >>> episode.stop_reason, episode.error
    ('error', 'RuntimeError: the agent fell over')
    >>> from agentic_loop.agents.user_sim import UserSimulator
    >>> talk = run_episode(agent, [HumanMessage("2+2?")],
    ...                    user=UserSimulator.scripted(["Are you sure?"]))
    >>> [s.kind for s in talk.steps], talk.user_stop
    (['model', 'user', 'model'], 'turn_limit')
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackManager
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphRecursionError

from agentic_loop.agents.adapt import (
    TEMPERATURE_KEY,
    AgentRunner,
    output_messages,
)
from agentic_loop.agents.recorder import EpisodeRecorder, StepLimitReached, TimeLimitReached
from agentic_loop.agents.user_sim import UserSimulator, current_user_sim
from agentic_loop.episodes import Episode, EpisodeStop, UserStop, episode_from_messages

__all__ = ["DEFAULT_EPISODE_TIMEOUT_S", "DEFAULT_MAX_STEPS", "EpisodeThread",
           "episode_config", "episode_thread_id", "run_episode", "run_episodes"]

#: Model calls an episode may make by default (Architecture(max_steps=...)).
DEFAULT_MAX_STEPS = 8
#: Wall-clock seconds an episode may take by default (Architecture(episode_timeout_s=...)).
DEFAULT_EPISODE_TIMEOUT_S = 300.0
#: An error message kept on an episode is cut to this many characters.
_MAX_ERROR = 2_000


def episode_thread_id(run_id: str | None, iteration: int, sample: int) -> str:
    """The LangGraph thread of one episode: its run, round and sample.

    >>> episode_thread_id("abc", 1, 0)
    'abc:episode:1:0'
    """
    return f"{run_id or 'run'}:episode:{iteration}:{sample}"


def episode_config(parent: RunnableConfig | None, recorder: EpisodeRecorder, *,
                   thread_id: str, recursion_limit: int, tags: Sequence[str] = (),
                   metadata: Mapping[str, Any] | None = None,
                   temperature: float | None = None) -> RunnableConfig:
    """The config an episode's agent runs under: the parent's callbacks plus the recorder
    (so the episode's run nests under the caller's), a thread of its own, the limits."""
    callbacks = (parent or {}).get("callbacks")
    handlers: Any
    if isinstance(callbacks, BaseCallbackManager):
        handlers = callbacks.copy()
        handlers.add_handler(recorder, inherit=True)
    else:
        handlers = [*(callbacks or []), recorder]
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if temperature is not None:
        configurable[TEMPERATURE_KEY] = temperature
    return {"callbacks": handlers, "run_name": "episode", "tags": list(tags),
            "metadata": dict(metadata or {}), "recursion_limit": recursion_limit,
            "configurable": configurable}


def _stop_of(exc: BaseException) -> EpisodeStop:
    if isinstance(exc, StepLimitReached | GraphRecursionError):
        return "step_limit"
    if isinstance(exc, TimeLimitReached):
        return "time_limit"
    return "error"


def _timings(recorder: EpisodeRecorder, messages: Sequence[BaseMessage],
             user_latencies: Sequence[float | None] = ()) -> list[float | None]:
    out: list[float | None] = []
    model_index = user_index = 0
    for message in messages:
        if isinstance(message, AIMessage):
            out.append(recorder.latency_of(message, model_index))
            model_index += 1
        elif isinstance(message, ToolMessage):
            out.append(recorder.latency_of(message, 0))
        elif isinstance(message, HumanMessage):
            known = user_index < len(user_latencies)
            out.append(user_latencies[user_index] if known else None)
            user_index += 1
    return out


def _opening(messages: Sequence[BaseMessage]) -> str:
    """The user's first message of an episode (the last user message of its prompt)."""
    last = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    if last is None:
        return ""
    content = last.content
    return content if isinstance(content, str) else " ".join(
        p if isinstance(p, str) else str(p.get("text", "")) for p in content)


def _simulator_config(parent: RunnableConfig | None, thread_id: str) -> RunnableConfig:
    """The config a simulated user's model runs under: traced under the caller's run, but not
    under the episode's recorder (its calls are not the agent's steps)."""
    return {"callbacks": (parent or {}).get("callbacks"), "run_name": "user_simulator",
            "tags": ["user_simulator"], "metadata": {"episode_thread": thread_id}}


class EpisodeThread:
    """One episode running in a thread of its own; :meth:`finish` waits for it (or its deadline)
    and returns the :class:`Episode`."""

    def __init__(self, agent: AgentRunner, messages: Sequence[BaseMessage], *,
                 max_steps: int, timeout_s: float | None, config: RunnableConfig | None,
                 thread_id: str, temperature: float | None = None,
                 tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None,
                 user: UserSimulator | None = None) -> None:
        self.agent, self.sent, self.timeout_s = agent, list(messages), timeout_s
        self.user = user
        self.user_config = _simulator_config(config, thread_id)
        #: the whole conversation so far, when a simulated user takes part
        self.conversation: list[BaseMessage] | None = None
        self.user_latencies: list[float | None] = []
        self.user_stop: UserStop | None = None
        self.started = time.perf_counter()
        deadline = None if timeout_s is None else self.started + timeout_s
        self.recorder = EpisodeRecorder(max_steps=max_steps, deadline=deadline)
        self.config = episode_config(config, self.recorder, thread_id=thread_id,
                                     recursion_limit=agent.recursion_limit(max_steps),
                                     tags=tags, metadata=metadata, temperature=temperature)
        self.output: Any = None
        self.error: BaseException | None = None
        context = contextvars.copy_context()  # usage counting and tracing follow the episode
        self.thread = threading.Thread(target=context.run, args=(self._work,), daemon=True,
                                       name="agentic-loop-episode")
        self.thread.start()

    def _work(self) -> None:
        try:
            self.output = self.agent.runnable.invoke(self.agent.input_of(self.sent), self.config)
            if self.user is not None:
                self._converse(self.user)
        except BaseException as exc:  # recorded on the episode: an agent never sinks a run
            self.error = exc

    def _converse(self, user: UserSimulator) -> None:
        """After each final answer, the user's reply, then the agent again on the whole
        conversation, until the user stops (its goal, its turns) or the agent stops answering."""
        sent, opening, turn = self.sent, _opening(self.sent), 0
        while True:
            if isinstance(self.output, dict) and self.output.get("__interrupt__"):
                return  # a human-in-the-loop pause: finish() records it
            messages, start = output_messages(self.agent, sent, self.output)
            self.conversation = messages if start else [*sent, *messages]
            so_far = episode_from_messages(self.conversation, start=len(self.sent))
            if not so_far.final:
                return
            if self.recorder.cancelled or (
                    self.recorder.deadline is not None
                    and time.perf_counter() > self.recorder.deadline):
                raise TimeLimitReached("the episode ran past its wall-clock limit")
            said = user.reply(opening, so_far, turn, model=self.agent.chat_model,
                              config=self.user_config)
            if said.stop is not None or said.text is None:
                self.user_stop = said.stop or "goal"
                return
            self.user_latencies.append(said.latency_s)
            sent, turn = [*self.conversation, HumanMessage(said.text)], turn + 1
            self.output = self.agent.runnable.invoke(self.agent.input_of(sent), self.config)

    def finish(self) -> Episode:
        """Wait for the episode (at most until its deadline) and record it."""
        left = (None if self.timeout_s is None
                else max(0.0, self.started + self.timeout_s - time.perf_counter()))
        self.thread.join(left)
        elapsed = round(time.perf_counter() - self.started, 4)
        recorder = self.recorder
        stop: EpisodeStop = "final"
        error: str | None = None
        if self.thread.is_alive():  # past its deadline: stop it at its next step
            recorder.cancelled = True
            stop, error = "time_limit", f"the episode ran past its limit of {self.timeout_s}s"
        elif self.error is not None:
            stop, error = _stop_of(self.error), f"{type(self.error).__name__}: {self.error}"
        if stop == "final" and self.conversation is not None and not (
                isinstance(self.output, dict) and self.output.get("__interrupt__")):
            return self._episode(self.conversation, len(self.sent), stop, error, elapsed)
        if stop == "final":
            try:
                messages, start = output_messages(self.agent, self.sent, self.output)
            except Exception as exc:  # an odd output is the agent's error, recorded
                stop, error = "error", f"{type(exc).__name__}: {exc}"
            else:
                paused = (self.output.get("__interrupt__") if isinstance(self.output, dict)
                          else None)
                if paused:  # a human-in-the-loop pause: kept on the episode's own thread
                    thread = self.config["configurable"]["thread_id"]
                    stop, error = "error", (f"interrupted: the agent paused ({paused!r:.200}); "
                                            f"resume its thread {thread!r} with "
                                            "Command(resume=...)")
                    return self._episode(messages, start, stop, error, elapsed)
        if stop != "final":
            messages, start = list(recorder.conversation), recorder.prompt_len or 0
        return self._episode(messages, start, stop, error, elapsed)

    def _episode(self, messages: Sequence[BaseMessage], start: int, stop: EpisodeStop,
                 error: str | None, elapsed: float) -> Episode:
        episode = episode_from_messages(messages, start=start, stop_reason=stop,
                                        error=None if error is None else error[:_MAX_ERROR],
                                        latency_s=elapsed,
                                        timings=_timings(self.recorder, messages[start:],
                                                         self.user_latencies))
        return episode.model_copy(update={"system": self.recorder.system,
                                          "tools": self.recorder.tools or _specs(self.agent),
                                          "user_stop": self.user_stop})


def _specs(agent: AgentRunner) -> list[dict[str, Any]] | None:
    return list(agent.tool_specs) if agent.tool_specs else None


def run_episodes(agent: AgentRunner, messages: Sequence[BaseMessage], *, n: int = 1,
                 max_steps: int = DEFAULT_MAX_STEPS,
                 timeout_s: float | None = DEFAULT_EPISODE_TIMEOUT_S,
                 config: RunnableConfig | None = None, run_id: str | None = None,
                 iteration: int = 0, temperature: float | None = None,
                 tags: Sequence[str] = (), metadata: Mapping[str, Any] | None = None,
                 user: UserSimulator | None = None) -> list[Episode]:
    """``n`` episodes of one prompt, run concurrently; each ends as an :class:`Episode`.

    ``user``: a simulated user who answers each final answer (None: the one
    :func:`~.user_sim.simulating` bound, if any); each episode is then a whole conversation.
    """
    user = user if user is not None else current_user_sim()
    threads = [EpisodeThread(agent, messages, max_steps=max_steps, timeout_s=timeout_s,
                             config=config, thread_id=episode_thread_id(run_id, iteration, i),
                             temperature=temperature, user=user,
                             tags=[*tags, f"iteration:{iteration}", f"sample:{i}"],
                             metadata={**(metadata or {}), "iteration": iteration, "sample": i})
               for i in range(n)]
    return [t.finish() for t in threads]


def run_episode(agent: AgentRunner, messages: Sequence[BaseMessage], **kwargs: Any) -> Episode:
    """One episode (see :func:`run_episodes` for the keywords)."""
    return run_episodes(agent, messages, n=1, **kwargs)[0]
