"""Best-of-n inside a round, and the temperature each round samples at.

Why: a verifier is only worth what the loop does with its signal. A small
model fails a check often but not always, so drawing several answers to the
*same* prompt and letting the checks pick turns its occasional pass into a
round's pass (on 200 held-out tasks with the 135M model, best-of-4 passed
31% against single-shot's 17% at 1.9x its LLM-seconds, and resampling 25%,
bench/results/quality.json; best-of-n is the same idea inside one round, at
the cost of one batched generation). The n samples of a round are asked
together: the calls run concurrently, so the embedded engine decodes them as
one batch (each row still prefills the shared prompt; that prefill is short
next to decoding) and an OpenAI-compatible server such as vLLM shares the
prompt's prefill through its prefix cache. A model with a fixed ``seed``
gets ``seed + i`` for sample ``i``, or all n would be the same.

When the generator is an agent, each sample is a whole episode
(:func:`draw_episodes`): the ``n`` episodes run concurrently, each on a
thread of its own, and each sample keeps its episode (``Drawn.episode``,
then ``Candidate.episode``), so the checks that read episodes rank them too.

The samples are ranked by the rubric's Python checks (cheap; judged
features count as unmet), and only the best is judged by the LLM critic.
A rubric with no checks has nothing cheap to rank by, so every sample is
judged (one batched critic call) and the best judged score wins. The other
samples are kept on the round as :class:`~agentic_loop.trajectories.Candidate`
records: scored negatives for preference data. Samples the checks tie (same
pass and score) go to the earlier one, or, given a
:class:`~agentic_loop.judges.GroupRanker`, to the one the judge ranks first among
the tied (:func:`rank_ties`): the checks still decide, the judge only orders
what they cannot tell apart.

A temperature schedule sets each round's sampling temperature: a number (every
round), a sequence (round ``i`` takes item ``i``, the last repeats) or a
callable of the round index (``None``: the model's own). It is applied by
binding ``temperature`` on the call, which the local model, OpenAI-compatible
models and LangChain's other chat models all read.

Example:
    >>> temperature_at((0.3, 0.7, 1.0), 0), temperature_at((0.3, 0.7, 1.0), 5)
    (0.3, 1.0)
    >>> temperature_at(None, 2) is None, temperature_at(lambda i: 0.2 * i, 2)
    (True, 0.4)
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> llm = ScriptedChatModel(responses=["a", "b", "c"])
    >>> sorted(m.content for m in draw(llm, "Say a letter.", n=3, temperature=0.9))
    ['a', 'b', 'c']
    >>> {c.kwargs["temperature"] for c in llm.calls}
    {0.9}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeAlias

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableParallel

from agentic_loop.agents import AgentRunner, run_episodes
from agentic_loop.architectures.prompts import refine_feedback
from agentic_loop.episodes import Episode
from agentic_loop.errors import ConfigError
from agentic_loop.judges import Critic, Critique, GroupRanker
from agentic_loop.models.retry import DEFAULT_RETRY, RetryPolicy
from agentic_loop.models.wrappers import chat_model_of
from agentic_loop.prompt_format import DraftPrompt
from agentic_loop.trajectories import Candidate, Round

__all__ = ["MAX_SAMPLES_PER_ROUND", "Drawn", "TemperatureSchedule", "check_samples",
           "check_schedule", "draw", "draw_episodes", "judged_round", "pick_best", "rank_ties",
           "record_draws", "record_prompt", "recording_draws", "recording_prompts",
           "shown_outputs", "temperature_at"]

#: The most samples one round may draw: each is a model call, and a served graph takes
#: settings from anyone who can reach it.
MAX_SAMPLES_PER_ROUND = 16

TemperatureSchedule: TypeAlias = "float | Sequence[float] | Callable[[int], float | None] | None"


def check_schedule(schedule: Any) -> Any:
    """``schedule`` if it is a valid temperature schedule, else :class:`ConfigError`.

    >>> check_schedule([0.2, -1])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.errors.ConfigError: temperature=[0.2, -1]: pass a number >= 0, ...
    """
    if schedule is None or callable(schedule):
        return schedule
    values = [schedule] if isinstance(schedule, (int, float)) else schedule
    if (isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
                       for v in values)):
        raise ConfigError(f"temperature={schedule!r}: pass a number >= 0, a sequence of them "
                          "(one per round, the last repeats) or a callable of the round index")
    return schedule


def temperature_at(schedule: Any, iteration: int) -> float | None:
    """The temperature of round ``iteration`` (0-based) under ``schedule``; None: the model's."""
    if schedule is None:
        return None
    if callable(schedule):
        value = schedule(iteration)
        return None if value is None else float(value)
    if isinstance(schedule, (int, float)):
        return float(schedule)
    return float(schedule[min(iteration, len(schedule) - 1)])


def check_samples(n: Any) -> int:
    """``n`` as a number of samples per round, or :class:`ConfigError`."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_SAMPLES_PER_ROUND:
        raise ConfigError(f"samples_per_round={n!r}: pass an integer from 1 to "
                          f"{MAX_SAMPLES_PER_ROUND}")
    return n


def _sampler(llm: Runnable[Any, Any], n: int, temperature: float | None) -> Runnable[Any, Any]:
    """One runnable answering with ``n`` samples (a dict of them when ``n > 1``)."""
    bound = llm.bind(temperature=temperature) if temperature is not None else llm
    if n == 1:
        return bound
    seed = getattr(chat_model_of(llm), "seed", None)
    seeded = isinstance(seed, int) and not isinstance(seed, bool)
    return RunnableParallel({
        str(i): bound.bind(seed=seed + i) if seeded else bound  # type: ignore[operator]
        for i in range(n)})


def draw(llm: Runnable[Any, Any], messages: LanguageModelInput, *, n: int = 1,
         temperature: float | None = None, retry: RetryPolicy = DEFAULT_RETRY,
         config: RunnableConfig | None = None, what: str = "generation") -> list[AIMessage]:
    """``n`` answers to one prompt, asked together, through the retry policy.

    A failed call retries all ``n`` (one attempt is one batched generation).
    """
    answer = retry.invoke(_sampler(llm, n, temperature), messages, config, what=what)
    if n == 1:
        return [answer]
    return [answer[str(i)] for i in range(n)]


@dataclass(frozen=True)
class Drawn:
    """One sample of a generation call: its cleaned text, the model that wrote it, and the
    episode it ended (an agent's sample; None for a plain model's)."""

    text: str
    model: str | None
    episode: Episode | None = None


def draw_episodes(agent: AgentRunner, messages: LanguageModelInput, *, n: int = 1,
                  temperature: float | None = None, config: RunnableConfig | None = None,
                  iteration: int = 0, architecture: str = "", model_id: str = "",
                  run_id: str | None = None, limits: Any = None) -> list[Drawn]:
    """``n`` episodes of ``agent`` on one prompt, concurrently, as samples (see the module).

    ``limits``: the run's settings (or anything with ``max_steps`` and
    ``episode_timeout_s``; None: the defaults); ``run_id`` names the episodes'
    threads. The draft is the episode's final answer.
    """
    from agentic_loop.architectures.prompts import clean_output

    bounds: dict[str, Any] = ({} if limits is None else
                              {"max_steps": limits.max_steps,
                               "timeout_s": limits.episode_timeout_s})
    episodes = run_episodes(agent, list(messages), n=n, config=config,  # type: ignore[arg-type]
                            run_id=run_id, iteration=iteration, temperature=temperature,
                            tags=["agentic-loop", f"arch:{architecture}"],
                            metadata={"architecture": architecture}, **bounds)
    return [Drawn(clean_output(ep.final),
                  next((s.model for s in reversed(ep.model_steps) if s.model), None) or model_id,
                  ep) for ep in episodes]


_drawn: ContextVar[list[list[Drawn]] | None] = ContextVar("agentic_loop_drawn", default=None)


@contextmanager
def recording_draws() -> Iterator[list[list[Drawn]]]:
    """Collect the samples of every generation call made in this context (one node's run)."""
    drawn: list[list[Drawn]] = []
    token = _drawn.set(drawn)
    try:
        yield drawn
    finally:
        _drawn.reset(token)


def record_draws(samples: list[Drawn]) -> None:
    """Note one call's samples for the node wrapper (no-op outside :func:`recording_draws`)."""
    drawn = _drawn.get()
    if drawn is not None:
        drawn.append(samples)


_sent: ContextVar[list[DraftPrompt] | None] = ContextVar("agentic_loop_sent", default=None)


@contextmanager
def recording_prompts() -> Iterator[list[DraftPrompt]]:
    """Collect the prompt of every generation call made in this context (one node's run).

    ``LoopNodes._call`` appends to it (:func:`record_prompt`); the node wrapper
    stores the last one with the draft it produced, so a subclass node that only
    returns ``{"draft": self._call(...)}`` still gets its prompt recorded.
    """
    sent: list[DraftPrompt] = []
    token = _sent.set(sent)
    try:
        yield sent
    finally:
        _sent.reset(token)


def record_prompt(prompt: DraftPrompt) -> None:
    """Note one generation call's prompt (no-op outside :func:`recording_prompts`)."""
    sent = _sent.get()
    if sent is not None:
        sent.append(prompt)


_SPACES = re.compile(r"\s+")


def shown_outputs(task: str, exemplars: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """The exemplar outputs a draft must not copy: those of *other* tasks (an exemplar of the
    very same task may be repeated rightly).

    >>> shown_outputs("Say hi.", [{"task": "say  HI.", "output": "hi"},
    ...                           {"task": "Say bye.", "output": "bye"}])
    ['bye']
    """
    def key(text: str) -> str:
        return _SPACES.sub(" ", text).strip().casefold()

    return [str(e["output"]) for e in exemplars or ()
            if key(str(e.get("task", ""))) != key(task)]


def rank_ties(task: str, order: Sequence[int], keys: Sequence[tuple[bool, float]],
              drafts: Sequence[str], episodes: Sequence[Episode | None], ranker: GroupRanker,
              notes: list[str] | None = None) -> list[int]:
    """``order`` (sample indices, best first by ``keys``: (passed, score)) with the samples
    tied at the top reordered by ``ranker``; unchanged when fewer than two tie or the
    ranker fails. What happened is appended to ``notes`` when given.

    >>> from agentic_loop.judges.group_rank import candidates_shown
    >>> from agentic_loop.testing import ScriptedChatModel
    >>> judge = ScriptedChatModel(default_structured=lambda schema, msgs: {  # likes "warm"
    ...     f"candidate_{k}": 9 if text == "warm" else 2
    ...     for k, text in candidates_shown(msgs[-1].content).items()})
    >>> notes: list[str] = []
    >>> rank_ties("Describe tea.", [0, 1, 2], [(True, 8.0), (True, 8.0), (False, 3.0)],
    ...           ["cold", "warm", "x"], [None] * 3, GroupRanker(judge), notes)
    [1, 0, 2]
    >>> notes[0].split(":")[0]
    'group ranker scripted broke a tie of samples [0, 1]'
    """
    order = list(order)
    tied = [i for i in order if keys[i] == keys[order[0]]]
    if len(tied) < 2:
        return order
    ranking = ranker.rank(task, [drafts[i] for i in tied], episodes=[episodes[i] for i in tied])
    if not ranking.ok or ranking.scores is None:
        if notes is not None:
            notes.append(f"group ranker {ranking.judge} could not break a tie of samples "
                         f"{tied}: {ranking.error}")
        return order
    scores = ranking.scores
    ranked = [tied[k] for k in sorted(range(len(tied)), key=lambda k: (-scores[k], k))]
    if notes is not None:
        shown = ", ".join(f"{s:g}" for s in scores)
        consistency = ("n/a" if ranking.consistency is None
                       else f"{ranking.consistency:.2f}")
        notes.append(f"group ranker {ranking.judge} broke a tie of samples {tied}: scores "
                     f"[{shown}], consistency across orders {consistency}, picked {ranked[0]}")
    return ranked + [i for i in order if i not in tied]


def pick_best(task: str, samples: Sequence[Mapping[str, Any]], critic: Critic,
              exemplars: Sequence[str] = (), *, ranker: GroupRanker | None = None,
              notes: list[str] | None = None) -> tuple[int, Critique, list[Candidate]]:
    """The best of a round's samples, its full critique, and the others as candidates.

    ``samples`` are ``{"draft", "model", "cut_from", "episode"}`` mappings. Ranked by the
    checks (the LLM judges only the winner), or, for a rubric with no checks,
    judged all together; ties go to the earlier sample, or, with ``ranker``, to
    the order the group ranker gives the tied ones (:func:`rank_ties`; a note
    is appended to ``notes`` when given). Candidates come best first.
    """
    drafts = [str(s["draft"]) for s in samples]
    episodes: list[Episode | None] = [s.get("episode") for s in samples]
    judged = not critic.rubric.check_features
    verdicts = (critic.batch([(task, d) for d in drafts], exemplars=exemplars,
                             episodes=episodes) if judged
                else [critic.by_checks(task, d, exemplars, episode=e)
                      for d, e in zip(drafts, episodes, strict=True)])
    order = sorted(range(len(drafts)),
                   key=lambda i: (verdicts[i].passed, verdicts[i].score, -i), reverse=True)
    if ranker is not None:
        keys = [(v.passed, v.score) for v in verdicts]
        order = rank_ties(task, order, keys, drafts, episodes, ranker, notes)
    best = order[0]
    critique = verdicts[best] if judged else critic.critique(task, drafts[best],
                                                             exemplars=exemplars,
                                                             episode=episodes[best])
    others = [Candidate(draft=drafts[i], score=verdicts[i].score, passed=verdicts[i].passed,
                        features=dict(verdicts[i].values),
                        guards=dict(verdicts[i].evaluation.guards), judged=judged,
                        model=samples[i].get("model"), cut_from=samples[i].get("cut_from"),
                        episode=episodes[i])
              for i in order[1:]]
    return best, critique, others


def judged_round(iteration: int, draft: str, critique: Critique, seconds: float, *,
                 prompt: DraftPrompt | None = None, cut_from: int | None = None,
                 model: str | None = None, alternatives: Sequence[Candidate] = (),
                 critique_text: bool = False, episode: Episode | None = None,
                 judge: str | None = None, tie_break: str | None = None) -> Round:
    """The round a critique makes of a draft (written from ``prompt`` by ``model``, cut from
    ``cut_from``, in ``episode`` when an agent wrote it); its feedback is
    :func:`~.prompts.refine_feedback` of the critique (the critic's advice only with
    ``critique_text``). ``judge`` (the critic's model id) is recorded only when that model
    was asked (``critique.attempts > 0``): a verdict of the checks alone names no judge."""
    return Round(iteration=iteration, draft=draft, score=critique.score, passed=critique.passed,
                 features=dict(critique.values), critique=critique.critique,
                 overall_score=critique.overall_score,
                 feedback=refine_feedback(critique.evaluation,
                                          critique.critique if critique_text else None),
                 latency_s=round(seconds, 4), guards=dict(critique.evaluation.guards),
                 prompt=prompt, cut_from=cut_from, model=model, alternatives=list(alternatives),
                 episode=episode, judge=judge if critique.attempts > 0 else None,
                 tie_break=tie_break)
