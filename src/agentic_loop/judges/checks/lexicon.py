"""A shipped lexicon of marketing clichés, for a cliché check that needs no model.

"Is this cliché-free?" is a question a small judge model answers "yes" to
every time; matching a list is exact and explainable. Entries are matched as
whole words or phrases, case-insensitively (see
:func:`agentic_loop.judges.checks.text_measures.find_words`), so each inflection a writer
might use is listed. Pass your own list to
:func:`~agentic_loop.judges.ready_rubrics.copywriting_rubric` to extend or replace it.

Example:
    >>> from agentic_loop.judges.checks.text_measures import find_words
    >>> find_words("A game-changer that will unleash your potential.", CLICHES)
    ['game-changer', 'unleash', 'unleash your potential']
"""

from __future__ import annotations

__all__ = ["CLICHES"]

CLICHES: tuple[str, ...] = (
    # hype adjectives
    "cutting-edge", "cutting edge", "state-of-the-art", "state of the art", "world-class",
    "best-in-class", "best in class", "next-generation", "next-gen", "revolutionary",
    "groundbreaking", "game-changing", "game changing", "game-changer", "game changer",
    "seamless", "seamlessly", "innovative", "unparalleled", "unrivaled", "unrivalled",
    "second to none", "one of a kind", "one-of-a-kind", "top-notch", "top notch",
    "world-renowned", "bespoke", "synergy", "synergies",
    "holistic", "disruptive", "paradigm shift", "leverage", "leverages", "leveraging",
    # empty verbs and phrases
    "unleash", "unleashes", "unleashed", "unlock", "unlocks", "unlocked",
    "unlock your potential", "unleash your potential", "elevate", "elevates", "elevated",
    "elevate your", "take it to the next level", "next level", "next-level",
    "revolutionize", "revolutionise", "revolutionizes", "revolutionises",
    "transform your", "empower", "empowers", "empowering", "supercharge", "supercharges",
    "skyrocket", "dive into", "dive in", "delve", "delve into", "embark on a journey",
    "look no further", "whether you're", "in today's fast-paced world",
    "fast-paced world", "ever-evolving", "ever-changing", "rich tapestry", "tapestry of",
    "a testament to", "at the end of the day", "think outside the box",
    "outside the box", "the sky's the limit", "sky is the limit", "like never before",
    "experience the difference", "the wait is over", "you won't believe",
    "something for everyone", "taste of paradise", "hidden gem", "one-stop shop",
    "one stop shop", "peace of mind", "the perfect blend", "perfect blend",
    "where quality meets", "more than just", "not just a", "redefine", "redefines",
    "redefining", "reimagine", "reimagined", "reimagining", "your one-stop",
    "crafted with love", "made with love", "with passion", "passion for excellence",
)
