"""Agents as generators: run any tool-using LangGraph agent (or a chat model with tools) to
its final answer as one recorded episode, under a step and a wall-clock limit.

* :mod:`.adapt`: what the user passes (a compiled graph with a messages state, a
  messages Runnable, a chat model plus ``tools=``) as an :class:`AgentRunner`
  (:func:`as_agent`; ``None`` for a plain chat model);
* :mod:`.episode_run`: one or ``n`` concurrent episodes of a prompt, each on a
  thread id of its own, ended by its final answer or its limits, always as data;
* :mod:`.generator`: the generator and the judge of what an architecture was given;
* :mod:`.recorder`: the callback handler that times each step and enforces the limits.

The architectures use them when ``llm`` is an agent (``Reflection(agent, judge=...)``).
"""

from agentic_loop.agents.adapt import (
    CUT_FROM_KEY,
    TEMPERATURE_KEY,
    AgentKind,
    AgentRunner,
    agent_chat_model,
    as_agent,
    output_messages,
    tool_agent,
)
from agentic_loop.agents.episode_run import (
    DEFAULT_EPISODE_TIMEOUT_S,
    DEFAULT_MAX_STEPS,
    EpisodeThread,
    episode_config,
    episode_thread_id,
    run_episode,
    run_episodes,
)
from agentic_loop.agents.generator import Generator, NoJudge, split_generator
from agentic_loop.agents.recorder import (
    EpisodeLimitReached,
    EpisodeRecorder,
    StepLimitReached,
    TimeLimitReached,
)

__all__ = [
    "CUT_FROM_KEY",
    "DEFAULT_EPISODE_TIMEOUT_S",
    "DEFAULT_MAX_STEPS",
    "TEMPERATURE_KEY",
    "AgentKind",
    "AgentRunner",
    "EpisodeLimitReached",
    "EpisodeRecorder",
    "EpisodeThread",
    "Generator",
    "NoJudge",
    "StepLimitReached",
    "TimeLimitReached",
    "agent_chat_model",
    "as_agent",
    "episode_config",
    "episode_thread_id",
    "output_messages",
    "run_episode",
    "run_episodes",
    "split_generator",
    "tool_agent",
]
