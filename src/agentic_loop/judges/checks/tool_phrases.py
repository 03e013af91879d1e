"""Tools in plain words: what a task demands of an agent's tools, and what an answer claims of them.

"Use the calculator", "run the tests before answering", "verify with
``run_python``", "at most 5 steps", "in no more than 3 tool calls": a task that
says this states something Python can check against the agent's episode (see
:mod:`agentic_loop.judges.checks.episode_checks`). "The calculator returned
2492", "I ran the tests and they pass": an answer that says this claims
something the episode can refute (the ``tool_claim`` guard of
:mod:`agentic_loop.judges.guards`).

Only tool names are read, conservatively: a name followed by the word "tool"
("the search tool", "the ``lookup`` tool"), or one of the nouns in
:data:`TOOL_NOUNS` (calculator, interpreter, python interpreter, search,
lookup, tests). "Use the following words", "use the passive voice", "how to
use the calculator", "do not use the search tool" state no demand. A step
limit counts only with a tool in sight ("at most 5 steps" in "explain in at
most 5 steps" is a demand on the text), and only as an upper bound.

A named tool matches a real one by its words (:func:`tool_matches`): "the
python interpreter" is any tool whose name holds "python" (``python``,
``run_python``), "the tests" any whose name holds "test" (``run_tests``).

Example:
    >>> tool_demands("What is 53 * 47? Use the calculator, and verify with run_python.")
    {'tool_called': ['calculator'], 'verified_with': ['run_python']}
    >>> tool_demands("Use the passive voice and use the following words: sun, sea.")
    {}
    >>> tool_matches("run_python_tests", "tests"), tool_matches("search", "calculator")
    (True, False)
"""

from __future__ import annotations

import re

from agentic_loop.judges.checks.constraint_phrases import TaskText

__all__ = ["TOOL_NOUNS", "ToolClaim", "max_steps", "max_tool_calls", "tool_claims",
           "tool_demands", "tool_matches"]

#: Nouns that name a tool without the word "tool" ("use the calculator").
TOOL_NOUNS = ("calculator", "python interpreter", "code interpreter", "interpreter",
              "python repl", "search engine", "web search", "search", "lookup table", "lookup",
              "test suite", "unit tests", "tests")
_NOUN = "|".join(n.replace(" ", r"\s+") for n in TOOL_NOUNS)
#: Words before "tool" that describe a tool rather than name one ("the right tool").
_NOT_NAMES = {"right", "appropriate", "best", "proper", "correct", "available", "same", "given",
              "following", "relevant", "provided", "necessary", "any", "each", "one", "other",
              "new", "suitable", "needed", "required", "first", "last", "second", "this", "that",
              "a", "an", "the", "your", "my", "our", "every", "only", "same", "external"}
#: Words of a tool's name that say what kind of tool it is, not which one.
_GENERIC = {"tool", "tools", "engine", "repl", "runner", "code", "interpreter", "table", "suite",
            "unit", "web"}
_QUOTE = "`'\"\u2018\u2019\u201c\u201d"
_NAME = rf"[{_QUOTE}]?(?P<name>[A-Za-z_][\w.-]*?)[{_QUOTE}]?"
_DET = r"(?:the|a|an|your|its|our)\s+"
#: A clause that talks about using a tool rather than demanding it.
_NOT_A_DEMAND = re.compile(
    r"\b(?:how\s+(?:to|you|one|we|i)|why|when\s+(?:to|you|would)|whether|would|could|might|"
    r"instructions?|guide|tutorial|explain|describe|not|never|no|without|avoid\w*|don't|"
    r"doesn't|cannot|can't|shouldn't|mustn't|"
    # someone else's use, in a story or a scenario ("the hero must use the calculator")
    r"story|poem|essay|scene|character|hero|he|she|they|people|users?|students?|someone|"
    r"customers?|children|kids)\b", re.IGNORECASE)


def _words(name: str) -> set[str]:
    parts = re.findall(r"[a-z]+|\d+", re.sub(r"(?<=[a-z])(?=[A-Z])", " ", name).lower())
    return {p[:-1] if len(p) > 3 and p.endswith("s") else p for p in parts}


def tool_matches(tool: str, wanted: str) -> bool:
    """True when the tool named ``tool`` is the one ``wanted`` names (its defining words).

    >>> tool_matches("calculator", "calculator"), tool_matches("run_python", "python_interpreter")
    (True, True)
    >>> tool_matches("python_interpreter", "code_interpreter"), tool_matches("lookup", "search")
    (True, False)
    """
    if tool.strip().lower() == wanted.strip().lower():
        return True
    have, want = _words(tool), _words(wanted)
    core = want - _GENERIC
    if core:
        return core <= have
    return bool((want - {"tool", "code", "unit", "web"}) & have)


def _normal(name: str) -> str:
    return re.sub(r"\s+", "_", name.strip().lower())


def _demanded(text: str, start: int) -> bool:
    clause = re.split(r"[.;,!?]|\n\s*\n|\b(?:but|and|then)\b", text[:start])[-1]
    return _NOT_A_DEMAND.search(clause) is None


#: Verbs that demand a tool; a bare noun ("use the calculator") needs one of the first kind,
#: a name before "tool" ("with the search tool") may follow "with" / "via" / "through" too.
_USE_VERB = r"\b(?:use|using|call|calling|invoke|invoking|by\s+running|run|running)\s+"
_USE = rf"(?:{_USE_VERB}|\b(?:with|via|through)\s+)"
#: What may follow a tool noun: the end of the phrase, not more of a noun phrase
#: ("use the search results", "use the calculator app" name no tool).
_NOUN_END = (r"(?=\s*(?:[.,;:!?)\n]|$)|\s+(?:to|for|and|before|after|on|with|then|when|if|so|"
             r"in|instead|rather|at|once|again|first|where|whenever)\b)")
#: What may not follow "tool": it is then part of another noun ("tool calls").
_NOT_AFTER_TOOL = (r"(?![\w-]|\s+(?:calls?|results?|outputs?|uses?|descriptions?|messages?|"
                   r"names?|steps?|errors?))")
_VERIFY = (r"\b(?:verify|verifying|check|checking|confirm|confirming|double-check|validate|"
           r"test)\s+(?:(?:it|this|that|them|the\s+(?:answer|result|results|code|solution|output)"
           r"|your\s+(?:answer|result|results|code|solution|work|output))\s+)?"
           r"(?:with|using|by\s+running|by\s+calling|through|via|against)\s+")
_RUN_TESTS = re.compile(
    r"\brun(?:ning)?\s+(?:the|your|its|all\s+(?:of\s+)?the|all)\s+(?:unit\s+)?tests\b",
    re.IGNORECASE)


_TESTS = re.compile(r"test\s+suite|unit\s+tests|tests", re.IGNORECASE)


def _named(pattern: str, text: str, *, loose: bool, verb: str | None = None
           ) -> list[tuple[int, int, str]]:
    """Tool names after ``pattern``: "<name> tool", a tool noun (after ``verb`` when given),
    or (``loose``) a code-like name (``run_tests``, a quoted name) and the tests. Without
    ``loose``, "the tests" are material of the task ("use the tests below"), not a tool."""
    found: list[tuple[int, int, str]] = []
    tool = re.compile(rf"{pattern}{_DET}{_NAME}(?:\s+(?P<name2>[a-z][\w-]*))?\s+tool"
                      rf"{_NOT_AFTER_TOOL}", re.IGNORECASE)
    for m in tool.finditer(text):
        parts = [m.group("name"), m.group("name2")]
        parts = [p for p in parts if p and p.lower() not in _NOT_NAMES]
        if parts and m.group("name").lower() not in _NOT_NAMES:
            found.append((m.start(), m.end(), "_".join(parts)))
    noun = re.compile(rf"{verb or pattern}{_DET}(?P<name>{_NOUN}){_NOUN_END}", re.IGNORECASE)
    found += [(m.start(), m.end(), m.group("name")) for m in noun.finditer(text)
              if loose or not _TESTS.fullmatch(m.group("name"))]
    if loose:
        code = re.compile(rf"{pattern}(?:{_DET})?(?:[{_QUOTE}](?P<q>[A-Za-z_][\w.-]*)[{_QUOTE}]"
                          rf"|(?P<snake>[A-Za-z]\w*_\w+))", re.IGNORECASE)
        found += [(m.start(), m.end(), m.group("q") or m.group("snake"))
                  for m in code.finditer(text)]
    return found


def tool_demands(task: str) -> dict[str, list[str]]:
    """The tools ``task`` tells the agent to use (``tool_called``) and to verify with
    (``verified_with``), in order, without repeats; a keyword with none is left out.

    >>> tool_demands("Run the tests before answering.")
    {'verified_with': ['tests']}
    >>> tool_demands("Find it using the `geo_lookup` tool.")
    {'tool_called': ['geo_lookup']}
    >>> tool_demands("Explain how to use the calculator. Do not use the search tool.")
    {}
    """
    verified = [hit for hit in _named(_VERIFY, task, loose=True) if _demanded(task, hit[0])]
    verified += [(m.start(), m.end(), "tests") for m in _RUN_TESTS.finditer(task)
                 if _demanded(task, m.start())]
    # "verify using the calculator" holds "using the calculator": one demand, to verify
    used = [hit for hit in _named(_USE, task, loose=False, verb=_USE_VERB)
            if _demanded(task, hit[0]) and not any(a <= hit[0] < b for a, b, _ in verified)]
    out: dict[str, list[str]] = {}
    for key, hits in (("tool_called", used), ("verified_with", verified)):
        names = list(dict.fromkeys(_normal(n) for _, _, n in sorted(hits)))
        if names:
            out[key] = names
    return out


class ToolClaim:
    """An answer's claim about a tool: which tool, and the value it says the tool gave.

    ``passed`` is the claim "the tests pass" (True) / "fail" (False), else None.
    """

    __slots__ = ("passed", "text", "tool", "value")

    def __init__(self, tool: str, value: str | None, text: str,
                 passed: bool | None = None) -> None:
        self.tool, self.value, self.text, self.passed = tool, value, text, passed

    def __repr__(self) -> str:
        return f"ToolClaim({self.tool!r}, {self.value!r})"


_CLAIM_TOOL = rf"(?:(?P<noun>{_NOUN})|{_NAME}\s+tool)"
_SAID = (r"(?:returned|returns|gave|gives|output|outputs|outputted|printed|prints|reported|"
         r"reports|says|said|shows|showed|confirmed|confirms|came\s+back\s+with|answered)")
_VALUE = rf"(?P<value>-?\$?\d[\d,]*(?:\.\d+)?|[{_QUOTE}][^{_QUOTE}\n]{{1,60}}[{_QUOTE}])"
_CLAIMS = (
    # "the calculator returned 2492", "the lookup tool gave '5 km'"
    re.compile(rf"\b(?:the|my|a)\s+{_CLAIM_TOOL}\s+(?:\w+\s+)?{_SAID}\s+(?:that\s+|me\s+|"
               rf"(?:a\s+)?(?:result|value|answer)\s+(?:of\s+)?)?(?:it\s+is\s+|is\s+)?{_VALUE}",
               re.IGNORECASE),
    # "I ran the calculator and it returned 2492", "using the python tool, I got 12"
    re.compile(rf"\b(?:I|we)\s+(?:ran|used|called|ran\s+it\s+through|checked\s+(?:it\s+)?with|"
               rf"verified\s+(?:it\s+)?with)\s+(?:the|my|a)\s+{_CLAIM_TOOL}\b[^.\n]{{0,40}}?"
               rf"\b(?:returned|returns|gave|gives|got|get|printed|shows|showed|says|said|"
               rf"output|outputs)\s+(?:me\s+)?{_VALUE}", re.IGNORECASE),
)
_TESTS_CLAIM = re.compile(
    r"\b(?:I|we)\s+(?:ran|executed|run)\s+(?:the|all\s+(?:of\s+)?the|all|my)\s+(?:unit\s+)?tests?"
    r"\b[^.\n]{0,30}?\b(?P<verdict>pass(?:ed|es)?|succeed(?:ed|s)?|fail(?:ed|s)?)\b"
    r"|\ball\s+(?:the\s+)?(?:unit\s+)?tests\s+(?P<verdict2>pass(?:ed)?)\b", re.IGNORECASE)
_USED = re.compile(rf"\b(?:I|we)\s+(?:ran|used|called|checked\s+(?:it\s+|this\s+)?with|"
                   rf"verified\s+(?:it\s+|this\s+)?with)\s+(?:the|my|a)\s+{_CLAIM_TOOL}\b",
                   re.IGNORECASE)


#: A clause that supposes rather than claims ("if the calculator returned 0, ...").
_SUPPOSED = re.compile(r"\b(?:if|would|could|might|should|whether|suppose|unless|when|once)\b",
                       re.IGNORECASE)


def _supposed(text: str, start: int) -> bool:
    clause = re.split(r"[.;!?\n]", text[:start])[-1]
    return _SUPPOSED.search(clause) is not None


def tool_claims(answer: str) -> list[ToolClaim]:
    """What ``answer`` says its tools did: a value a tool gave, tests passing, a tool used.
    A supposition ("if the calculator returned 0") claims nothing.

    >>> tool_claims("The calculator returned 2,492, so the answer is 2492.")
    [ToolClaim('calculator', '2,492')]
    >>> [(c.tool, c.passed) for c in tool_claims("I ran the tests and they all pass.")]
    [('tests', True)]
    >>> tool_claims("The function returns 5 when x is 2.")
    []
    >>> tool_claims("If the calculator returned 0, check the input.")
    []
    """
    claims: list[ToolClaim] = []
    spans: list[tuple[int, int]] = []
    for pattern in _CLAIMS:
        for m in pattern.finditer(answer):
            if any(a <= m.start() < b for a, b in spans):
                continue
            spans.append(m.span())
            name = m.group("noun") or m.group("name") or ""
            if name.lower() in _NOT_NAMES or _supposed(answer, m.start()):
                continue
            value = m.group("value").strip(_QUOTE).rstrip(",")
            claims.append(ToolClaim(_normal(name), value, m.group(0)))
    for m in _TESTS_CLAIM.finditer(answer):
        if _supposed(answer, m.start()):
            continue
        verdict = (m.group("verdict") or m.group("verdict2") or "").lower()
        claims.append(ToolClaim("tests", None, m.group(0), passed=not verdict.startswith("fail")))
        spans.append(m.span())
    for m in _USED.finditer(answer):
        name = m.group("noun") or m.group("name") or ""
        if not any(a <= m.start() < b for a, b in spans) and name.lower() not in _NOT_NAMES \
                and not _supposed(answer, m.start()):
            claims.append(ToolClaim(_normal(name), None, m.group(0)))
    return claims


_TOOL_CONTEXT = re.compile(r"\btools?\b|\bagent\b|\bfunction\s+calls?\b", re.IGNORECASE)


def _upper_bound(text: TaskText, noun: str) -> int | None:
    """The n of "at most n <noun>" / "no more than" / "fewer than" / "within", consumed;
    an exact or lower bound is no limit and is left for other readers (so is a bare "0
    tool calls", a count rather than a demand)."""
    probe = TaskText(text.text)
    found = probe.count(noun, floor=0)
    if found is None or found[0] != 0 or not found[1]:
        return None
    text.text = probe.text
    return found[1]


def max_steps(text: TaskText) -> int | None:
    """A limit on the agent's steps (model calls): "at most 5 steps", "within 3 model calls".

    A bare "steps" counts only where the task speaks of tools (else "explain it in at most
    5 steps" would be read as a limit on the agent).

    >>> max_steps(TaskText("Use the calculator and answer in at most 5 steps."))
    5
    >>> max_steps(TaskText("Explain in at most 5 steps how to bake bread.")) is None
    True
    """
    found = _upper_bound(text, r"(?:tool|model|agent|llm)\s+steps?|(?:model|llm)\s+calls?")
    if found is None and (tool_demands(text.original) or _TOOL_CONTEXT.search(text.original)):
        found = _upper_bound(text, r"steps?")
    return found


def max_tool_calls(text: TaskText) -> int | None:
    """A limit on the tool calls: "in no more than 3 tool calls", "at most 2 calls to tools".

    >>> max_tool_calls(TaskText("Solve it in no more than 3 tool calls."))
    3
    >>> max_tool_calls(TaskText("Make exactly 3 tool calls.")) is None
    True
    """
    return _upper_bound(text, r"(?:tool|function)\s+calls?|calls?\s+to\s+(?:the\s+|a\s+)?tools?"
                              r"|tool\s+(?:uses|invocations?)")
