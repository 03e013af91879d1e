"""Instruction-following task families (IFEval-style) whose every constraint Python checks.

Quality is judged on outside instruction-following prompts with their own
verifiers, so the dev set must exercise the same kinds of demand: paragraphs
and their first words, ``<<titles>>``, ``P.S.``, quoted answers,
``*highlights*``, ``SECTION X``, capital-word / keyword / letter frequencies,
``[placeholders]``, JSON, bullets, end phrases, first words, repeating the
request, two responses, the response language, casing, commas, word and
sentence counts. Each task is a plain request about a varied topic plus one
instruction (sometimes two), phrased from one of several templates.

The split is **by template**: every family keeps one phrasing in three for
the held-out split, so held-out tasks word their demands differently from
anything trained on. Every task's stated demands read back through
:func:`~agentic_loop.judges.checks.task_constraint_parser.constraints_from_task` as
exactly its ``constraints`` (the unit tests check every family).

Example:
    >>> tasks = ifeval_tasks(4, seed=1, split="held_out")
    >>> [t.split for t in tasks], ifeval_tasks(4, seed=1, split="held_out") == tasks
    (['held_out', 'held_out', 'held_out', 'held_out'], True)
    >>> from agentic_loop.judges.checks.task_constraint_parser import constraints_from_task
    >>> all(constraints_from_task(t.task) == t.constraints for t in tasks)
    True
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentic_loop.errors import ConfigError
from agentic_loop.tasks.spec import TaskSpec

__all__ = ["IFEVAL_FAMILIES", "IFEVAL_SPLITS", "ifeval_tasks"]

IFEVAL_SPLITS = ("train", "held_out")

_SUBJECTS = [
    "the history of the bicycle", "a rainy day in a small town", "how bees make honey",
    "learning to play the violin", "a night market in Taipei", "the benefits of walking",
    "why people keep houseplants", "a visit to a lighthouse", "the life of a street musician",
    "planning a camping trip", "the first day at a new job", "how tides work",
    "a family recipe for soup", "the invention of the printing press", "saving money on groceries",
    "a robot that learns to paint", "the migration of whales", "a city park in winter",
    "how to care for a puppy", "the future of electric trains", "a friendship between rivals",
    "a village festival", "the importance of sleep", "an abandoned amusement park",
    "starting a vegetable garden", "a trip to the mountains", "the rules of chess",
    "a bakery that opens at dawn", "why the sky is blue", "a lost umbrella",
    "volunteering at an animal shelter", "the sound of the sea", "building a treehouse",
    "a day without the internet", "the life cycle of a butterfly", "a new coffee machine",
]
_REQUESTS = [
    "Write a short blog post about {s}.", "Write a letter to a friend about {s}.",
    "Write a short story about {s}.", "Write a poem about {s}.", "Explain {s} to a child.",
    "Write a product pitch inspired by {s}.", "Write a diary entry about {s}.",
    "Write a speech about {s}.", "Give advice to a student about {s}.",
    "Write a newsletter introduction about {s}.",
]
_NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                 "ten"]
_ORDINAL_WORDS = ["", "first", "second", "third", "fourth", "fifth"]
_KEYWORDS = ["light", "journey", "river", "hope", "window", "silver", "bridge", "storm", "garden",
             "music", "morning", "stone", "paper", "dream", "harbor", "forest"]
_OPENERS = ["Imagine", "Today", "Yesterday", "Sometimes", "Honestly", "Listen", "Once", "Every"]
_TITLES = ["poem of joy", "a quiet morning", "the long road", "notes from home"]
_END_PHRASES = ["Any other questions?", "Is there anything else I can help with?",
                "Let me know if you have additional questions.", "Peace out!"]
_LANGUAGES = [("German", "de"), ("French", "fr"), ("Spanish", "es"), ("Italian", "it"),
              ("Portuguese", "pt"), ("Dutch", "nl")]

Made = tuple[dict[str, Any], dict[str, Any]]  # (template fields, constraints)


def _n(r: random.Random, lo: int, hi: int) -> tuple[int, str]:
    n = r.randint(lo, hi)
    return n, _NUMBER_WORDS[n]


def _rel(r: random.Random, n: int, floor: int) -> tuple[str, tuple[int, int | None]]:
    if r.random() < 0.5:
        return "at least", (n, None)
    return "less than", (floor, n - 1)


@dataclass(frozen=True)
class _Family:
    """One kind of demand: its phrasings (template i % 3 == 2 is held out) and value maker."""

    name: str
    templates: tuple[str, ...]
    make: Callable[[random.Random], Made]
    addon: bool = False  # may be added to another family's task as a second demand
    alone: bool = False  # takes no second demand


def _paragraphs(r: random.Random) -> Made:
    n, nw = _n(r, 2, 5)
    return {"n": n, "nw": nw}, {"paragraph_count": {"count": [n, n], "separator": "***"}}


def _first_word_of(r: random.Random) -> Made:
    n, nw = _n(r, 2, 4)
    i = r.randint(1, n)
    word = r.choice(_OPENERS)
    return ({"n": n, "nw": nw, "i": i, "ord": _ORDINAL_WORDS[i], "w": word},
            {"paragraph_count": (n, n), "paragraph_first_word": {"index": i, "word": word}})


def _count_of(keyword: str, lo: int, hi: int, relation: bool = False,
              floor: int = 0) -> Callable[[random.Random], Made]:
    def make(r: random.Random) -> Made:
        n, nw = _n(r, lo, hi)
        if relation:
            rel, value = _rel(r, n, floor)
        else:
            rel, value = "at least", (n, None)
        return {"n": n, "nw": nw, "rel": rel}, {keyword: value}

    return make


def _flags(**constraints: Any) -> Callable[[random.Random], Made]:
    return lambda r: ({}, dict(constraints))


def _title(r: random.Random) -> Made:
    return {"t": r.choice(_TITLES)}, {"title": True}


def _postscript(r: random.Random) -> Made:
    marker = r.choice(["P.S.", "P.P.S"])
    return {"m": marker}, {"postscript": "P.P.S." if marker == "P.P.S" else "P.S."}


def _sections(r: random.Random) -> Made:
    n, nw = _n(r, 2, 5)
    marker = r.choice(["SECTION", "Section", "PART"])
    return {"n": n, "nw": nw, "M": marker}, {"section_count": {"count": [n, n], "marker": marker}}


def _frequency(keyword: str, item: str, pool: Sequence[str], lo: int,
               hi: int) -> Callable[[random.Random], Made]:
    def make(r: random.Random) -> Made:
        n, nw = _n(r, lo, hi)
        rel, (a, b) = _rel(r, n, 0)
        chosen = r.choice(pool)
        return {"n": n, "nw": nw, "rel": rel, "w": chosen}, {keyword: {item: chosen,
                                                                    "count": [a, b]}}

    return make


def _words_list(r: random.Random) -> Made:
    a, b = r.sample(_KEYWORDS, 2)
    return {"a": a, "b": b}, {}


def _excluded(r: random.Random) -> Made:
    fields, _ = _words_list(r)
    return fields, {"exclude_words": [fields["a"], fields["b"]]}


def _included(r: random.Random) -> Made:
    fields, _ = _words_list(r)
    return fields, {"include_words": [fields["a"], fields["b"]]}


def _word_range(r: random.Random) -> Made:
    n = r.choice([30, 50, 80, 100, 150, 200, 300])
    rel, value = _rel(r, n, 1)
    return {"n": n, "rel": rel}, {"word_count": value}


def _picked(keyword: str, pool: Sequence[Any]) -> Callable[[random.Random], Made]:
    return lambda r: ({"p": (choice := r.choice(pool))}, {keyword: choice})


def _language(r: random.Random) -> Made:
    name, code = r.choice(_LANGUAGES)
    return {"L": name}, {"language": code}


IFEVAL_FAMILIES: tuple[_Family, ...] = (
    _Family("paragraphs", (
        "There should be {n} paragraphs. Paragraphs are separated with the markdown divider: ***",
        "Your response should contain {n} paragraphs, separated by the markdown divider ***.",
        "Write exactly {nw} paragraphs and put a line of *** (the markdown divider) between them.",
    ), _paragraphs),
    _Family("paragraph_first_word", (
        "There should be {n} paragraphs. Paragraphs and only paragraphs are separated with each "
        "other by two new lines. Paragraph {i} must start with word {w}.",
        "Write {n} paragraphs separated by blank lines; paragraph {i} should begin with the word "
        '"{w}".',
        "Your answer needs {nw} paragraphs separated by blank lines. The {ord} paragraph must "
        "start with the word {w}.",
    ), _first_word_of),
    _Family("title", (
        "Your answer must contain a title, wrapped in double angular brackets, such as <<{t}>>.",
        "Give your response a title in double angular brackets, like <<{t}>>.",
        "Include a title wrapped in double angle brackets, e.g. <<{t}>>.",
    ), _title, addon=True),
    _Family("postscript", (
        "At the end of your response, please explicitly add a postscript starting with {m}",
        "Add a postscript starting with {m} at the end.",
        "Close your reply with a postscript that begins with {m}",
    ), _postscript),
    _Family("quotation", (
        "Wrap your entire response with double quotation marks.",
        "Your entire answer should be wrapped in double quotes.",
        "Enclose the whole response in double quotation marks.",
    ), _flags(quoted=True), alone=True),
    _Family("highlights", (
        "Highlight at least {n} sections in your answer with markdown, i.e. *highlighted section*.",
        "Use markdown to highlight at least {n} parts of your answer, for example *highlighted "
        "part*.",
        "In your answer, highlight no fewer than {nw} sections with markdown, such as *this one*.",
    ), _count_of("highlight_count", 1, 4), addon=True),
    _Family("sections", (
        "Your response must have {n} sections. Mark the beginning of each section with {M} X, "
        "such as:\n{M} 1\n[content of section 1]\n{M} 2\n[content of section 2]",
        "Organize the answer into {n} sections and begin each section with {M} X.",
        "Split your reply into exactly {nw} sections; label every section with {M} X.",
    ), _sections),
    _Family("capital_words", (
        "In your response, words with all capital letters should appear {rel} {n} times.",
        "Use words in all caps {rel} {n} times.",
        "Words written in capital letters should appear {rel} {n} times in your answer.",
    ), _count_of("capital_word_count", 2, 6, relation=True)),
    _Family("keyword_frequency", (
        "In your response, the word {w} should appear {rel} {n} times.",
        "Make sure the word '{w}' appears {rel} {n} times.",
        "Use the keyword {w} {rel} {n} times.",
    ), _frequency("word_frequency", "word", _KEYWORDS, 2, 4)),
    _Family("letter_frequency", (
        "In your response, the letter {w} should appear {rel} {n} times.",
        "Make sure the letter '{w}' appears {rel} {n} times.",
        "The letter {w} must occur {rel} {n} times in your answer.",
    ), _frequency("letter_frequency", "letter", list("bkqvwxyz"), 3, 9)),
    _Family("placeholders", (
        "The response must contain at least {n} placeholders represented by square brackets, "
        "such as [address].",
        "Include at least {n} placeholders in square brackets, like [name].",
        "Your answer should have no fewer than {nw} placeholders written in square brackets, "
        "e.g. [date].",
    ), _count_of("placeholder_count", 1, 4), addon=True),
    _Family("json_format", (
        "Entire output should be wrapped in JSON format. You can use markdown ticks such as ```.",
        "Wrap your whole answer in JSON format.",
        "Your entire response must be valid JSON.",
    ), _flags(json=True), alone=True),
    _Family("bullet_list", (
        "Your answer must contain exactly {n} bullet points. Use the markdown bullet points "
        "such as:\n* This is point 1.\n* This is point 2",
        "There should be exactly {n} bullet points, using markdown such as * point.",
        "Answer with precisely {nw} markdown bullet points.",
    ), lambda r: (lambda n: ({"n": n, "nw": _NUMBER_WORDS[n]}, {"bullet_count": (n, n)}))(
        r.randint(2, 6))),
    _Family("end_phrase", (
        "Finish your response with this exact phrase {p}. No other words should follow this "
        "phrase.",
        'End your answer with the exact phrase "{p}"',
        'Conclude your reply with the following exact phrase: "{p}" and nothing after it.',
    ), _picked("ends_with", _END_PHRASES)),
    _Family("first_word", (
        "The first word of your response should be the word {p}.",
        "Start your answer with the word '{p}'.",
        "Begin your reply with the word {p}.",
    ), _picked("first_word", _OPENERS)),
    _Family("repeat_request", (
        "First repeat the request word for word without change, then give your answer (1. do "
        "not say any words or characters before repeating the request; 2. the request you need "
        "to repeat does not include this sentence)",
        "First, repeat the request above word for word, then answer it.",
        "Begin by repeating the request word for word without change, and only then give your "
        "answer.",
    ), _flags(), alone=True),
    _Family("two_responses", (
        "Give two different responses. Responses and only responses should be separated by 6 "
        "asterisk symbols: ******.",
        "Write two different answers, separated by six asterisks (******).",
        "Provide 2 distinct responses separated by ******.",
    ), _flags(two_responses=True), alone=True),
    _Family("response_language", (
        "Your ENTIRE response should be in {L} language, no other language is allowed.",
        "Respond only in {L}, no other language is allowed.",
        "Please write your whole answer in {L}.",
    ), _language),
    _Family("lowercase_english", (
        "Your entire response should be in English, and in all lowercase letters. No capital "
        "letters are allowed.",
        "Respond in English, using only lowercase letters.",
        "Answer in English and entirely in lowercase; no capital letters are allowed.",
    ), _flags(lowercase=True, language="en")),
    _Family("capital_english", (
        "Your entire response should be in English, and in all capital letters.",
        "Respond in English, using capital letters only.",
        "Answer in English, and write entirely in uppercase letters.",
    ), _flags(uppercase=True, language="en")),
    _Family("no_comma", (
        "In your entire response, refrain from the use of any commas.",
        "Do not use any commas in your response.",
        "Your answer must not contain any commas.",
    ), _flags(no_commas=True), addon=True),
    _Family("word_count", (
        "Answer with {rel} {n} words.",
        "Your response should be {rel} {n} words long.",
        "Keep the answer {rel} {n} words.",
    ), _word_range),
    _Family("sentence_count", (
        "Your response should contain {rel} {n} sentences.",
        "Write {rel} {n} sentences.",
        "Use {rel} {nw} sentences in your answer.",
    ), _count_of("sentence_count", 3, 8, relation=True, floor=1)),
    _Family("forbidden_words", (
        "Do not include keywords {a}, {b} in the response.",
        "Do not include the words {a} or {b} in your answer.",
        'Avoid the words "{a}" and "{b}".',
    ), _excluded),
    _Family("include_keywords", (
        "Include keywords {a}, {b} in the response.",
        "Include the keywords {a} and {b} in your answer.",
        'Make sure to use the words "{a}" and "{b}".',
    ), _included),
)
_ADDONS = tuple(f for f in IFEVAL_FAMILIES if f.addon)
# Second demands that would contradict or hide the first.
_CLASH = {("lowercase_english", "title"), ("capital_words", "no_comma")}


def _templates(family: _Family, split: str) -> list[int]:
    held = [i for i in range(len(family.templates)) if i % 3 == 2]
    return held if split == "held_out" else [i for i in range(len(family.templates))
                                              if i % 3 != 2]


def _instruction(r: random.Random, family: _Family, split: str) -> tuple[str, dict[str, Any],
                                                                          int]:
    index = r.choice(_templates(family, split))
    fields, constraints = family.make(r)
    return family.templates[index].format(**fields), constraints, index


def _one(r: random.Random, family: _Family, split: str) -> TaskSpec:
    request = r.choice(_REQUESTS).format(s=r.choice(_SUBJECTS))
    text, constraints, index = _instruction(r, family, split)
    parts = [request, text]
    addon_name = None
    if not family.alone and r.random() < 0.35:
        addon = r.choice(_ADDONS)
        if addon.name != family.name and (family.name, addon.name) not in _CLASH \
                and not (set(addon.make(random.Random(0))[1]) & set(constraints)):
            extra, more, _ = _instruction(r, addon, split)
            parts.append(extra)
            constraints = {**constraints, **more}
            addon_name = addon.name
    if family.name == "repeat_request":
        constraints = {"repeat_request": request}
    metadata = {"family": family.name, "template": index, "suite": "ifeval"}
    if addon_name:
        metadata["addon"] = addon_name
    return TaskSpec(task=" ".join(parts), constraints=constraints, split=split, metadata=metadata)


def ifeval_tasks(n: int, seed: int = 0, split: str = "train",
                 families: Sequence[str] | None = None) -> list[TaskSpec]:
    """``n`` distinct IFEval-style tasks of ``split`` ("train" or "held_out"), cycling families.

    ``families`` picks some of :data:`IFEVAL_FAMILIES` by name (all by
    default). Same arguments, same tasks; the two splits never share a
    phrasing of a demand.
    """
    if split not in IFEVAL_SPLITS:
        raise ConfigError(f"split must be one of {IFEVAL_SPLITS}, got {split!r}")
    chosen = [f for f in IFEVAL_FAMILIES if families is None or f.name in families]
    unknown = set(families or ()) - {f.name for f in IFEVAL_FAMILIES}
    if unknown or not chosen:
        raise ConfigError(f"unknown ifeval families {sorted(unknown)}; choose from "
                          + ", ".join(f.name for f in IFEVAL_FAMILIES))
    r = random.Random(f"ifeval-{seed}-{split}")
    seen: set[str] = set()
    out: list[TaskSpec] = []
    misses = 0
    while len(out) < n:
        spec = _one(r, chosen[len(out) % len(chosen)], split)
        if spec.task in seen:
            misses += 1
            if misses > 50 * (n + 10):
                raise ConfigError(f"cannot make {n} distinct ifeval tasks (made {len(out)}); "
                                  "ask for fewer")
            continue
        seen.add(spec.task)
        out.append(spec.model_copy(update={"id": f"if{seed}-{split[0]}{len(out)}"}))
    return out
