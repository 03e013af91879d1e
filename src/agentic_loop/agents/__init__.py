"""Agents as generators: run any tool-using LangGraph agent (or a chat model with tools) to
its final answer as one recorded episode, under a step and a wall-clock limit.

* :mod:`.adapt`: what the user passes (a compiled graph with a messages state, a
  messages Runnable, a chat model plus ``tools=``) as an :class:`AgentRunner`
  (:func:`as_agent`; ``None`` for a plain chat model);
* :mod:`.episode_run`: one or ``n`` concurrent episodes of a prompt, each on a
  thread id of its own, ended by its final answer or its limits, always as data;
* :mod:`.generator`: the generator and the judge of what an architecture was given;
* :mod:`.recorder`: the callback handler that times each step and enforces the limits;
* :mod:`.user_sim`: a simulated user (scripted replies or a chat model with a persona and a
  goal) that answers the agent after each final answer, so one episode is a conversation.

The architectures use them when ``llm`` is an agent (``Reflection(agent, judge=...)``).
"""

from agentic_loop.agents.adapt import (
    CUT_FROM_KEY,
    TEMPERATURE_KEY,
    AgentKind,
    AgentRunner,
    agent_chat_model,
    agent_options,
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
from agentic_loop.agents.user_sim import (
    DEFAULT_DONE_MARKER,
    MAX_USER_TURNS,
    USER_SIM_KEY,
    UserSimulator,
    UserTurn,
    current_user_sim,
    simulating,
    user_sim_of,
)

__all__ = [
    "CUT_FROM_KEY",
    "DEFAULT_DONE_MARKER",
    "DEFAULT_EPISODE_TIMEOUT_S",
    "DEFAULT_MAX_STEPS",
    "MAX_USER_TURNS",
    "TEMPERATURE_KEY",
    "USER_SIM_KEY",
    "AgentKind",
    "AgentRunner",
    "agent_options",
    "EpisodeLimitReached",
    "EpisodeRecorder",
    "EpisodeThread",
    "Generator",
    "NoJudge",
    "StepLimitReached",
    "TimeLimitReached",
    "UserSimulator",
    "UserTurn",
    "agent_chat_model",
    "as_agent",
    "current_user_sim",
    "episode_config",
    "episode_thread_id",
    "output_messages",
    "run_episode",
    "run_episodes",
    "simulating",
    "split_generator",
    "tool_agent",
    "user_sim_of",
]
