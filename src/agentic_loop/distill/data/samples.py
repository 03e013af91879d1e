"""Scored samples: every (prompt, response, reward) a trajectory offers to the datasets.

A run of a critique-refine loop leaves one draft per round, each with a
rubric score; its final output is one of them (or, for archive entries, the
only one). Distillation reads them all as :class:`Sample` objects with a
reward in ``[0, 1]``, the scale every threshold of the export uses:

``"rubric"`` (default)
    ``score / 10``, the rubric's own verdict.
``"composite"``
    :func:`agentic_loop.distill.data.reward.composite_reward`: every sample
    gets the rubric part and, when its task has verifier checks (a known
    answer, unit tests), their pass rate; the final output also gets the
    user's thumbs up/down (absent: neutral, left out) and the run's latency;
    intermediate drafts, which no user saw, get no feedback or latency part.

Every sample also carries its verdict (:mod:`agentic_loop.distill.data.verdicts`):
whether every check of its task held (``passed``) and which reward-hacking
guards fired (``flags``); the datasets train only on passing, unflagged samples.

The prompt of every sample is the chat a *fresh draft* is asked with (the
architectures' system message, the task and its requirements), not the
refine prompt the model saw in later rounds: a trained model must produce
the good answer from what it will be asked, and the architectures ask for a
first draft exactly so. It is the run's recorded fresh-draft prompt
(:class:`~agentic_loop.prompt_format.DraftPrompt`) without the retrieved parts
(exemplars, whether a text block or few-shot turns, and lessons): a model trained
on answers written with exemplars in view must learn to write them from the
plain task, which is what it will be asked. ``include_exemplars`` keeps them as
they were sent (a few-shot episode's tool calls and results too); a run logged before
prompts were recorded gets it rebuilt from its task and rubric (:func:`with_fresh_prompt`).
The PII gate sees every text of those prompts (:func:`prompt_texts`) and of the run's agent
episodes (:func:`run_episode_texts`). A draft an agent wrote carries its episode
(``Sample.episode``: from the gated copy of the run, so redacted), from which its rows are the
whole tool-calling conversation. Drafts cut at the output limit are not what the model wrote
and give no sample.

Example:
    >>> from agentic_loop.trajectories import Round, Trajectory
    >>> t = Trajectory(architecture="reflection", model_id="m", task="Say hi.",
    ...                rounds=[Round(iteration=0, draft="yo", score=4.0),
    ...                        Round(iteration=1, draft="Hi!", score=9.0)],
    ...                final_output="Hi!", final_score=9.0, accepted=True)
    >>> samples = trajectory_samples(t)
    >>> [(s.response, s.reward, s.source, s.passed, s.flags) for s in samples]
    [('yo', 0.4, 'round', None, ()), ('Hi!', 0.9, 'final', True, ())]
    >>> [(role, text[:20]) for role, text in samples[0].chat]
    [('system', 'You are a precise wr'), ('user', 'Say hi.')]
    >>> task_key("  Say   HI. ")
    'say hi.'
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from agentic_loop.distill.data.reward import composite_reward
from agentic_loop.distill.data.verdicts import SampleJudge, saved_rubric
from agentic_loop.episodes import Episode, ModelStep, ToolStep
from agentic_loop.errors import ConfigError
from agentic_loop.prompt_format import DraftPrompt, fresh_draft_prompt, rubric_requirements
from agentic_loop.trajectories import Round, Trajectory

__all__ = [
    "RETRIEVED_PARTS",
    "RewardKind",
    "Sample",
    "SampleSource",
    "episode_texts",
    "fresh_prompt",
    "invalid_scores",
    "prompt_texts",
    "redacted_episodes",
    "redacted_prompts",
    "run_episode_texts",
    "task_key",
    "trajectory_samples",
    "with_episode_texts",
    "with_fresh_prompt",
]

#: The parts of a fresh-draft prompt that memory retrieved: left out of training prompts
#: unless ``include_exemplars`` keeps them.
RETRIEVED_PARTS = ("exemplars", "lessons")

RewardKind = Literal["rubric", "composite"]
#: ``"alternative"``: a best-of-n sample that lost to its round's draft (``Round.alternatives``)
SampleSource = Literal["round", "final", "archive", "alternative"]

_SPACES = re.compile(r"\s+")


def task_key(text: str) -> str:
    """The grouping key of a prompt: case-folded, whitespace collapsed (same task, same key)."""
    return _SPACES.sub(" ", text).strip().casefold()


@dataclass(frozen=True)
class Sample:
    """One candidate response to a task, with its reward in ``[0, 1]`` and where it came from."""

    prompt: str
    response: str
    reward: float
    source: SampleSource
    trajectory_id: str
    iteration: int | None
    model_id: str
    #: the chat before the response, as ``(role, content)`` pairs (default: the task alone)
    chat: tuple[tuple[str, str], ...] = ()
    #: every check of the task's rubric held (None: no check verdict is known)
    passed: bool | None = None
    #: reward-hacking guards that fired on the response (recorded or found at export)
    flags: tuple[str, ...] = ()
    #: the agent's episode that wrote the response (None: a plain model's answer)
    episode: Episode | None = field(default=None, compare=False)
    #: a person's verdict on the run (``Trajectory.review``): a rejected run never trains
    review: Literal["accept", "reject"] | None = None

    @property
    def trainable(self) -> bool:
        """Whether the sample may be an SFT row or a chosen response: no check failed, no flag,
        no person rejected its run (an accept rescues nothing the checks failed)."""
        return self.passed is not False and not self.flags and self.review != "reject"

    @property
    def messages(self) -> list[dict[str, str]]:
        """The prompt as chat messages (``{"role", "content"}``), the response left out."""
        return [{"role": r, "content": c} for r, c in self.chat or (("user", self.prompt),)]

    @property
    def key(self) -> str:
        """The task grouping key (see :func:`task_key`)."""
        return task_key(self.prompt)


def invalid_scores(trajectory: Trajectory) -> list[str]:
    """Where a trajectory holds a score outside the rubric's 0-10 range (empty when all are valid).

    >>> t = Trajectory(architecture="a", model_id="m", task="t", final_output="x", final_score=12.0)
    >>> invalid_scores(t)
    ['final_score=12.0']
    """
    found = [
        f"rounds[{i}].score={r.score!r}"
        for i, r in enumerate(trajectory.rounds)
        if r.score is not None and not _valid(r.score)
    ]
    if trajectory.final_score is not None and not _valid(trajectory.final_score):
        found.append(f"final_score={trajectory.final_score!r}")
    return found


def _valid(score: float) -> bool:
    return math.isfinite(score) and 0.0 <= score <= 10.0


def _is_fresh(prompt: DraftPrompt | None) -> bool:
    return prompt is not None and prompt.template == "generate"


def _rebuilt_prompt(trajectory: Trajectory) -> DraftPrompt:
    """The fresh-draft prompt of a run that recorded none: its task and its rubric's checks."""
    rubric = saved_rubric(trajectory)
    requirements = rubric_requirements(rubric) if rubric is not None else ""
    return fresh_draft_prompt(trajectory.task, requirements, rebuilt=True)


def fresh_prompt(trajectory: Trajectory) -> DraftPrompt:
    """The prompt a fresh draft of this run's task is asked with: the first one recorded,
    else rebuilt from the task and rubric (``rebuilt=True``)."""
    recorded = next((r.prompt for r in trajectory.rounds if _is_fresh(r.prompt)), None)
    return recorded if recorded is not None else _rebuilt_prompt(trajectory)


def with_fresh_prompt(trajectory: Trajectory) -> Trajectory:
    """``trajectory`` with a rebuilt fresh-draft prompt on its first round, when none is recorded.

    Runs logged before prompts were recorded get theirs before the PII gate,
    so the rebuilt text (the rubric's requirements too) passes the gate like
    every other dataset-bound text. Runs without rounds are left as they are.
    """
    if not trajectory.rounds or any(_is_fresh(r.prompt) for r in trajectory.rounds):
        return trajectory
    first = trajectory.rounds[0].model_copy(update={"prompt": _rebuilt_prompt(trajectory)})
    return trajectory.model_copy(update={"rounds": [first, *trajectory.rounds[1:]]})


def prompt_texts(trajectory: Trajectory) -> list[tuple[str, str]]:
    """Every ``(field, text)`` of the run's fresh-draft prompts that can reach a dataset: their
    parts, then the texts of their few-shot episodes (:meth:`DraftPrompt.step_texts`: tool
    results and string arguments an archived agent's episode showed).

    The PII gate anonymizes them with the run's other texts;
    :func:`redacted_prompts` puts the results back, in this order.
    """
    return [(f"rounds[{i}].prompt.{name}", text)
            for i, r in enumerate(trajectory.rounds) if r.prompt is not None and _is_fresh(r.prompt)
            for name, text in [*r.prompt.parts.items(), *r.prompt.step_texts()]]


def redacted_prompts(rounds: list[Round], texts: Iterable[str]) -> list[DraftPrompt | None]:
    """Each round's prompt with its parts and few-shot step texts replaced by ``texts`` (from
    :func:`prompt_texts`; an iterator is consumed only as far as the prompts need).

    Prompts that never reach a dataset (refine and custom ones) are blanked.
    """
    remaining = iter(texts)
    prompts: list[DraftPrompt | None] = []
    for r in rounds:
        if r.prompt is None or not _is_fresh(r.prompt):
            prompts.append(None)
            continue
        parts = {name: next(remaining) for name in r.prompt.parts}
        prompt = r.prompt.model_copy(update={"parts": parts})
        if steps := len(r.prompt.step_texts()):
            prompt = prompt.with_step_texts([next(remaining) for _ in range(steps)])
        prompts.append(prompt)
    return prompts


def _map_strings(value: Any, where: str, swap: Callable[[str, str], str]) -> Any:
    """``value`` (tool arguments: JSON-like) with every non-empty string passed through ``swap``."""
    if isinstance(value, str):
        return swap(where, value) if value else value
    if isinstance(value, dict):
        return {k: _map_strings(v, f"{where}.{k}", swap) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_map_strings(v, f"{where}[{i}]", swap) for i, v in enumerate(value)]
    return value


def _map_episode(episode: Episode, swap: Callable[[str, str], str], where: str) -> Episode:
    """``episode`` with each text :func:`episode_texts` lists passed through ``swap(field,
    text)``, in that order: one walk for listing and for putting back, so they cannot drift."""
    def text(field: str, value: str | None) -> str | None:
        return swap(field, value) if value else value

    steps: list[Any] = []
    for i, step in enumerate(episode.steps):
        at = f"{where}.steps[{i}]"
        if isinstance(step, ModelStep):
            steps.append(step.model_copy(update={
                "text": text(f"{at}.text", step.text),
                "tool_calls": [c.model_copy(update={"args": _map_strings(
                    c.args, f"{at}.tool_calls[{j}].{c.name}", swap)})
                    for j, c in enumerate(step.tool_calls)]}))
        elif isinstance(step, ToolStep):
            steps.append(step.model_copy(update={
                "args": _map_strings(step.args, f"{at}.{step.name}", swap),
                "content": text(f"{at}.content", step.content),
                "error": text(f"{at}.error", step.error)}))
        else:  # a simulated user's turn
            steps.append(step.model_copy(update={"text": text(f"{at}.text", step.text)}))
    return episode.model_copy(update={"steps": steps,
                                      "final": text(f"{where}.final", episode.final),
                                      "error": text(f"{where}.error", episode.error)})


def episode_texts(episode: Episode, where: str = "episode") -> list[tuple[str, str]]:
    """Every ``(field, text)`` an agent's episode holds: the model's texts, string tool
    arguments (nested ones too, in the call and in its result's step), tool results and
    errors, a simulated user's turns, the final answer and the error it stopped on. What a
    PII gate or an erasure must see of an episode; :func:`with_episode_texts` puts changed
    texts back, in this order.
    (Its ``system`` prompt, the package's and the tools' own words, is not listed.)

    >>> from agentic_loop.episodes import ToolCall, ToolStep
    >>> ep = Episode(steps=[ModelStep(tool_calls=[ToolCall(name="mail", args={"to": "a@b.io"})]),
    ...                     ToolStep(name="mail", args={"to": "a@b.io"}, content="sent"),
    ...                     ModelStep(text="Done.")], final="Done.")
    >>> episode_texts(ep)  # doctest: +NORMALIZE_WHITESPACE
    [('episode.steps[0].tool_calls[0].mail.to', 'a@b.io'), ('episode.steps[1].mail.to', 'a@b.io'),
     ('episode.steps[1].content', 'sent'), ('episode.steps[2].text', 'Done.'),
     ('episode.final', 'Done.')]
    >>> with_episode_texts(ep, ["<E>", "<E>", "sent", "Done.", "Done."]).steps[1].args
    {'to': '<E>'}
    """
    found: list[tuple[str, str]] = []

    def keep(field: str, text: str) -> str:
        found.append((field, text))
        return text

    _map_episode(episode, keep, where)
    return found


def with_episode_texts(episode: Episode, texts: Iterable[str]) -> Episode:
    """A copy of ``episode`` with the texts :func:`episode_texts` lists replaced by ``texts``,
    in order (an iterator is consumed only as far as this episode needs)."""
    remaining = iter(texts)
    return _map_episode(episode, lambda _field, _text: next(remaining), "episode")


def _gated_texts(episode: Episode, where: str) -> list[tuple[str, str]]:
    """:func:`episode_texts`, then the strings of the tool schemas it was offered (a row's
    ``tools`` column: a tool's description may quote a customer or a key too)."""
    found = episode_texts(episode, where)

    def keep(field: str, text: str) -> str:
        found.append((field, text))
        return text

    _map_strings(episode.tools or [], f"{where}.tools", keep)
    return found


def run_episode_texts(trajectory: Trajectory) -> list[tuple[str, str]]:
    """Every ``(field, text)`` of the run's episodes (each round's, then its best-of-n
    samples'), their tool schemas' strings included, for the PII gate beside the drafts;
    :func:`redacted_episodes` puts them back.

    An agent's rows are its whole episode (tool arguments and results included) and the tools
    it was offered, so none of these texts may reach a dataset ungated.
    """
    found: list[tuple[str, str]] = []
    for i, r in enumerate(trajectory.rounds):
        if r.episode is not None:
            found += _gated_texts(r.episode, f"rounds[{i}].episode")
        for j, c in enumerate(r.alternatives):
            if c.episode is not None:
                found += _gated_texts(c.episode, f"rounds[{i}].alternatives[{j}].episode")
    return found


def redacted_episodes(rounds: list[Round], texts: Iterable[str]) -> list[Round]:
    """``rounds`` with their episodes' texts replaced by ``texts`` (from
    :func:`run_episode_texts`, in order) and the episodes' system prompts left out (no
    dataset reads them)."""
    remaining = iter(texts)

    def redacted(episode: Episode | None) -> Episode | None:
        if episode is None:
            return None
        out = with_episode_texts(episode, remaining)
        tools = None if episode.tools is None else _map_strings(
            episode.tools, "tools", lambda _field, _text: next(remaining))
        return out.model_copy(update={"system": None, "tools": tools})

    return [r.model_copy(update={
        "episode": redacted(r.episode),
        "alternatives": [c.model_copy(update={"episode": redacted(c.episode)})
                         for c in r.alternatives]}) for r in rounds]


def _chat(prompt: DraftPrompt, include_exemplars: bool) -> tuple[tuple[str, str], ...]:
    messages = prompt.messages(drop=() if include_exemplars else RETRIEVED_PARTS)
    return tuple((m["role"], m["content"]) for m in messages)


def _alternatives_scored_in_full(trajectory: Trajectory) -> bool:
    """Whether a best-of-n alternative's check-only score is its whole score.

    :func:`~agentic_loop.architectures.sampling.pick_best` scores the losers of
    a round by the checks alone, the judged features counted as unmet: a true
    score only when the run's rubric judges nothing. A run whose rubric is
    unknown or unreadable gives no unjudged alternatives (a too-low reward
    would make a wrong pair).
    """
    rubric = saved_rubric(trajectory)
    return rubric is not None and not rubric.llm_features


def trajectory_samples(trajectory: Trajectory, reward: RewardKind = "rubric", *,
                       include_exemplars: bool = False) -> list[Sample]:
    """The scored, non-empty drafts of a run, in round order; the final one is marked ``"final"``.

    A final output that matches no round (an archive entry, or a log that
    kept only the final) becomes a sample of its own. Archive entries (runs
    whose ``architecture`` is ``"archive"``) give ``source="archive"``. The losing
    samples of a best-of-n round follow their round's draft as
    ``source="alternative"`` (same iteration and prompt), when their score is
    their whole score (see :func:`_alternatives_scored_in_full`).
    Scores must be valid (see :func:`invalid_scores`). Each sample's ``chat``
    is the fresh-draft prompt (see the module docstring); with
    ``include_exemplars`` a fresh draft keeps the exemplars and lessons it was
    sent with, and a refined one those of the run's first draft.
    """
    if reward not in ("rubric", "composite"):
        raise ConfigError(f"reward must be 'rubric' or 'composite', got {reward!r}")
    fresh = fresh_prompt(trajectory)
    run_chat = _chat(fresh, include_exemplars)
    final = trajectory.final_output if trajectory.final_score is not None else None
    final_round = None
    if final is not None:
        matches = [i for i, r in enumerate(trajectory.rounds)
                   if r.draft == final and r.score is not None]
        final_round = matches[-1] if matches else None
    final_source: SampleSource = "archive" if trajectory.architecture == "archive" else "final"

    judge = SampleJudge(trajectory)
    # an accepted run's final passed its checks (archive entries are accepted outputs)
    accepted: bool | None = True if trajectory.accepted else None

    def make(text: str, score: float, iteration: int | None, is_final: bool,
             sent: DraftPrompt | None = None, source: SampleSource = "round", *,
             passed: bool | None = None, guards: dict[str, str] | None = None,
             features: dict[str, Any] | None = None, episode: Episode | None = None) -> Sample:
        verdict = judge.verdict(text, passed, guards or {}, features or {}, episode)
        if reward == "rubric":
            value = composite_reward(score)
        elif is_final:
            value = composite_reward(score, verdict.verifier, feedback=trajectory.feedback,
                                     latency_s=trajectory.latency_s)
        else:
            value = composite_reward(score, verdict.verifier)
        return Sample(
            prompt=trajectory.task,
            response=text,
            reward=value,
            source=final_source if is_final else source,
            trajectory_id=trajectory.id,
            iteration=iteration,
            model_id=trajectory.model_id,
            chat=_chat(sent, True) if include_exemplars and sent is not None else run_chat,
            passed=verdict.passed,
            flags=verdict.flags,
            episode=episode,
            review=trajectory.review.verdict if trajectory.review is not None else None,
        )

    # parsed only for runs with best-of-n losers: the export reads every run
    exact = (any(r.alternatives for r in trajectory.rounds)
             and _alternatives_scored_in_full(trajectory))
    samples = []
    for i, r in enumerate(trajectory.rounds):
        sent = r.prompt if r.prompt is not None and _is_fresh(r.prompt) else None
        if r.score is not None and r.draft.strip() and r.cut_from is None:
            is_final = i == final_round
            passed = r.passed if r.passed is not None or not is_final else accepted
            samples.append(make(r.draft, r.score, r.iteration, is_final, sent, passed=passed,
                                guards=r.guards, features=r.features, episode=r.episode))
        samples += [make(c.draft, c.score, r.iteration, False, sent, "alternative",
                         passed=c.passed, guards=c.guards, features=c.features,
                         episode=c.episode)
                    for c in r.alternatives
                    if c.score is not None and c.draft.strip() and c.cut_from is None
                    and (c.judged or exact)]
    if final is not None and final_round is None and final.strip():
        assert trajectory.final_score is not None
        samples.append(make(final, trajectory.final_score, None, True, passed=accepted))
    return samples
