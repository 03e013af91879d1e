"""Checks over the agent's episode: which tools ran, with what, how often, and what they said.

A check keeps its ``(task, output)`` signature and reads the episode of the
answer it judges from :func:`~agentic_loop.episodes.current_episode` (the
critic sets it; see :meth:`~agentic_loop.judges.critic.Critic.critique`'s
``episode=``). So "did the agent really run the verification?" is asked of
the record, not of the answer's claims, and the checks are ordinary
constraint keywords: a rubric of them saves as ``keyword -> value`` and
rebuilds from JSON like any other.

Keywords (:data:`EPISODE_BUILDERS`):

- ``tool_called="calculator"`` or ``{"name": "calculator", "args": {"expression": "53*47"}}``:
  the tool ran without an error (with these argument values, when given); a list of
  them: every one ran;
- ``no_tool_errors=True``: no tool call ended in an error;
- ``max_steps=n``: at most ``n`` model calls;
- ``max_tool_calls=n``: at most ``n`` tool calls;
- ``verified_with="run_tests"`` or ``{"tool": "run_tests", "contains": "passed"}`` (or
  ``"equals": ...``): the verification tool ran without an error, and its last result
  contains (equals) the text, when given (a list: every one);
- ``restates_tool_result=True`` (any tool) or ``"calculator"``: the answer contains a value a
  tool returned (a number, compared as a number, or a short result's text).

A name matches a tool by its words (:func:`~.tool_phrases.tool_matches`: "python" is
``run_python``). With no episode (a plain model's answer) no tool ran: ``tool_called``,
``verified_with`` and ``restates_tool_result`` fail, the limits and ``no_tool_errors`` hold.
A blank answer fails every one, like every yes/no constraint.

Example:
    >>> from agentic_loop.episodes import Episode, ModelStep, ToolCall, ToolStep, judging_episode
    >>> episode = Episode(steps=[
    ...     ModelStep(tool_calls=[ToolCall(name="calculator", args={"expression": "53*47"})]),
    ...     ToolStep(name="calculator", args={"expression": "53*47"}, content="2491"),
    ...     ModelStep(text="53 * 47 = 2,491.")], final="53 * 47 = 2,491.")
    >>> check = EPISODE_BUILDERS["tool_called"]("calculator").check
    >>> with judging_episode(episode):
    ...     check("What is 53 * 47?", episode.final)
    CheckResult(value=True, detail='calculator ran 1 time')
    >>> check("What is 53 * 47?", "2491")          # no episode: nothing was called
    CheckResult(value=False, detail='no tool ran (not an agent episode)')
    >>> with judging_episode(episode):
    ...     EPISODE_BUILDERS["restates_tool_result"](True).check("t", episode.final)
    CheckResult(value=True, detail='the answer restates 2491 (calculator)')
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from agentic_loop.episodes import Episode, ToolStep, current_episode
from agentic_loop.judges.check_result import CheckResult
from agentic_loop.judges.checks.constraint_builders import Built, bad_value
from agentic_loop.judges.checks.tool_phrases import tool_matches

__all__ = ["EPISODE_BUILDERS", "EPISODE_KEYWORDS", "numbers_in", "runs_of"]

_EMPTY = CheckResult(False, "the output is empty")
_NO_EPISODE = CheckResult(False, "no tool ran (not an agent episode)")
_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])|(?<![\w.])-?\d+(?:\.\d+)?")
#: A tool result this short may be restated as text ("Paris", "5 km").
_SHORT_RESULT = 40


def numbers_in(text: str) -> list[float]:
    """The numbers written in ``text`` (thousands separators allowed).

    >>> numbers_in("53 * 47 = 2,491.0 (approx. -3.5)")
    [53.0, 47.0, 2491.0, -3.5]
    """
    return [float(m.group(0).replace(",", "")) for m in _NUMBER.finditer(text)]


def _same(value: Any, wanted: Any) -> bool:
    if isinstance(value, str) and isinstance(wanted, str):
        return re.sub(r"\s+", "", value).lower() == re.sub(r"\s+", "", wanted).lower()
    return bool(value == wanted)


def runs_of(episode: Episode, name: str, args: Mapping[str, Any] | None = None) -> list[ToolStep]:
    """The steps of tool ``name`` (matched by its words) with these argument values, in order.

    >>> ep = Episode(steps=[ToolStep(name="run_python", args={"code": "print(1)"}, content="1")])
    >>> len(runs_of(ep, "python")), len(runs_of(ep, "python", {"code": "print( 1 )"}))
    (1, 1)
    """
    return [s for s in episode.tool_steps if tool_matches(s.name, name)
            and all(k in s.args and _same(s.args[k], v) for k, v in (args or {}).items())]


def _ran(steps: list[ToolStep], name: str, episode: Episode) -> CheckResult:
    ok = [s for s in steps if s.error is None]
    if ok:
        return CheckResult(True, f"{name} ran {len(ok)} time{'s' * (len(ok) != 1)}")
    if steps:
        return CheckResult(False, f"{name} ran but failed: {steps[-1].error or ''}"[:200])
    others = ", ".join(dict.fromkeys(episode.tools_called)) or "none"
    return CheckResult(False, f"{name} never ran (tools that ran: {others})")


def _name(keyword: str, value: Any, expected: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise bad_value(keyword, value, expected)
    return value.strip()


_TOOL_VALUE = ('a tool name, or {"name": tool, "args": {argument: value}} to require '
               "argument values")


def _tool_called(value: Any) -> Built:
    args: dict[str, Any] = {}
    if isinstance(value, Mapping):
        if set(value) - {"name", "args"} or not isinstance(value.get("args", {}), Mapping):
            raise bad_value("tool_called", value, _TOOL_VALUE)
        name = _name("tool_called", value.get("name"), _TOOL_VALUE)
        args = dict(value.get("args", {}))
    else:
        name = _name("tool_called", value, _TOOL_VALUE)
    shown = ", ".join(f"{k}={v!r}" for k, v in args.items())

    def check(task: str, output: str) -> CheckResult:
        episode = current_episode()
        if not output.strip():
            return _EMPTY
        if episode is None:
            return _NO_EPISODE
        return _ran(runs_of(episode, name, args), name + (f"({shown})" if shown else ""), episode)

    saved: Any = {"name": name, "args": args} if args else name
    where = f" with {shown}" if shown else ""
    return Built(saved, f'Use the tool "{name}"{where}.', check)


def _flag(keyword: str, value: Any) -> None:
    if value is not True:
        raise bad_value(keyword, value, "True (leave the keyword out to drop the constraint)")


def _no_tool_errors(value: Any) -> Built:
    _flag("no_tool_errors", value)

    def check(task: str, output: str) -> CheckResult:
        episode = current_episode()
        if not output.strip():
            return _EMPTY
        failed = [] if episode is None else episode.tool_errors
        if not failed:
            return CheckResult(True, "no tool failed")
        return CheckResult(False, f"{len(failed)} tool call(s) failed, first {failed[0].name}: "
                                  f"{failed[0].error}"[:200])

    return Built(True, "Make tool calls that succeed (no tool errors).", check)


def _limit(keyword: str, noun: str, count: Callable[[Episode], int],
           floor: int) -> Callable[[Any], Built]:
    def build(value: Any) -> Built:
        if isinstance(value, bool) or not isinstance(value, int) or value < floor:
            raise bad_value(keyword, value, f"an int >= {floor}")

        def check(task: str, output: str) -> CheckResult:
            episode = current_episode()
            if not output.strip():
                return _EMPTY
            n = 1 if episode is None and keyword == "max_steps" else (
                0 if episode is None else count(episode))
            return CheckResult(n <= value, f"{n} {noun if n != 1 else noun[:-1]}")

        return Built(value, f"Answer in at most {value} {noun}.", check)

    return build


def _tool_calls(episode: Episode) -> int:
    asked = sum(len(s.tool_calls) for s in episode.model_steps)
    return max(asked, len(episode.tool_steps))


_VERIFY_VALUE = ('a tool name, or {"tool": name, "contains": text} / {"tool": name, '
                 '"equals": text} to require what its last result says')


def _verified_with(value: Any) -> Built:
    expect: dict[str, str] = {}
    if isinstance(value, Mapping):
        extra = set(value) - {"tool", "contains", "equals"}
        if extra or len(set(value) & {"contains", "equals"}) > 1 or not all(
                isinstance(value[k], str) for k in value if k != "tool"):
            raise bad_value("verified_with", value, _VERIFY_VALUE)
        name = _name("verified_with", value.get("tool"), _VERIFY_VALUE)
        expect = {k: value[k] for k in ("contains", "equals") if k in value}
    else:
        name = _name("verified_with", value, _VERIFY_VALUE)

    def check(task: str, output: str) -> CheckResult:
        episode = current_episode()
        if not output.strip():
            return _EMPTY
        if episode is None:
            return _NO_EPISODE
        ran = _ran(runs_of(episode, name), name, episode)
        if not ran.value or not expect:
            return ran
        last = [s for s in runs_of(episode, name) if s.error is None][-1].content
        kind, text = next(iter(expect.items()))
        ok = (text.lower() in last.lower()) if kind == "contains" else (
            last.strip() == text.strip())
        return CheckResult(ok, f"{name} returned {last[:80]!r}")

    saved: Any = {"tool": name, **expect} if expect else name
    return Built(saved, f'Verify your answer with the tool "{name}" before answering.', check)


def _close(number: float, among: list[float]) -> bool:
    return any(math.isclose(number, n, rel_tol=1e-9, abs_tol=1e-9) for n in among)


def _restated(task: str, output: str, steps: list[ToolStep]) -> str | None:
    """The first tool value (newest step first) the answer states; numbers the task gave
    (the tool's inputs, echoed in "53*47 = 2491") are not a result."""
    said, given = numbers_in(output), numbers_in(task)
    lowered = output.lower()
    for step in steps:
        for number in numbers_in(step.content):
            if not _close(number, given) and _close(number, said):
                return f"{number:g} ({step.name})"
        text = step.content.strip()
        if text and len(text) <= _SHORT_RESULT and not numbers_in(text) and text.lower() in lowered:
            return f"{text!r} ({step.name})"
    return None


def _restates_tool_result(value: Any) -> Built:
    name = None if value is True else _name(
        "restates_tool_result", value, "True (any tool) or a tool name")

    def check(task: str, output: str) -> CheckResult:
        episode = current_episode()
        if not output.strip():
            return _EMPTY
        if episode is None:
            return _NO_EPISODE
        steps = [s for s in (episode.tool_steps if name is None else runs_of(episode, name))
                 if s.error is None and s.content.strip()]
        if not steps:
            return CheckResult(False, f"no result of {name or 'any tool'} to restate")
        found = _restated(task, output, steps[::-1])
        return CheckResult(True, f"the answer restates {found}") if found else CheckResult(
            False, f"the answer states no value {name or 'a tool'} returned")

    which = f'the tool "{name}"' if name else "your tools"
    return Built(True if name is None else name,
                 f"State the result {which} returned in your answer.", check)


def _each(keyword: str, build: Callable[[Any], Built]) -> Callable[[Any], Built]:
    """A builder that also takes a list: every item's check must hold (several tools named).

    >>> built = _each("tool_called", _tool_called)(["calculator", "search"])
    >>> built.value, built.description
    (['calculator', 'search'], 'Use the tool "calculator". Use the tool "search".')
    """
    def many(value: Any) -> Built:
        if not isinstance(value, (list, tuple)):
            return build(value)
        if not value:
            raise bad_value(keyword, value, "a non-empty list of tools")
        parts = [build(v) for v in value]
        if len(parts) == 1:
            return parts[0]

        def check(task: str, output: str) -> CheckResult:
            results = [p.check(task, output) for p in parts]
            return CheckResult(all(r.value for r in results),
                               "; ".join(r.detail for r in results))

        return Built([p.value for p in parts], " ".join(p.description for p in parts), check)

    return many


#: Episode keyword -> builder (joined into the constraint keywords table).
EPISODE_BUILDERS: dict[str, Callable[[Any], Built]] = {
    "tool_called": _each("tool_called", _tool_called),
    "no_tool_errors": _no_tool_errors,
    "max_steps": _limit("max_steps", "steps", lambda ep: ep.model_calls, 1),
    "max_tool_calls": _limit("max_tool_calls", "tool calls", _tool_calls, 0),
    "verified_with": _each("verified_with", _verified_with),
    "restates_tool_result": _restates_tool_result,
}
#: The keywords that read the episode (a rubric without them needs none).
EPISODE_KEYWORDS: tuple[str, ...] = tuple(EPISODE_BUILDERS)
