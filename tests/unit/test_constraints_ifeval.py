"""IFEval-style constraints: each check passes and fails where it should, the task parser reads
the common phrasings (and invents nothing), and every generated family parses back exactly."""

from __future__ import annotations

from typing import Any

import pytest

from agentic_loop.judges import Rubric
from agentic_loop.judges.checks.constraint_features import constraint_feature
from agentic_loop.judges.checks.language_id import detect_language, in_language
from agentic_loop.judges.checks.task_constraint_parser import constraints_from_task
from agentic_loop.tasks.sets_ifeval import IFEVAL_FAMILIES, ifeval_tasks


def holds(keyword: str, value: Any, output: str, task: str = "task") -> bool:
    feature = constraint_feature(keyword, value)
    return feature.credit(feature.run_check(task, output).value) == 1.0


THREE_DIVIDED = "First part here.\n\n***\n\nSecond part.\n***\nThird **bold** part.  \n"
GERMAN = "Der Hund schläft im Garten, und die Katze spielt mit dem Ball. Es ist ein schöner Tag."


@pytest.mark.parametrize(("keyword", "value", "output", "expected"), [
    ("paragraph_count", {"count": (3, 3), "separator": "***"}, THREE_DIVIDED, True),
    ("paragraph_count", {"count": (3, 3), "separator": "***"}, "a\n\nb\n\nc", False),
    ("paragraph_count", (3, 3), "a b\n\n  c\n \n\nd e\n\n", True),  # blank lines, whitespace
    ("paragraph_count", (3, 3), THREE_DIVIDED, True),  # *** lines also separate blank-line ones
    ("paragraph_count", (2, 2), "one\ntwo\nthree", False),
    ("paragraph_first_word", {"index": 2, "word": "Then"}, "Intro.\n\n**Then** more.", True),
    ("paragraph_first_word", {"index": 2, "word": "then"}, "Intro.\n\n\"Then,\" he said.", True),
    ("paragraph_first_word", {"index": 2, "word": "Then"}, "Then intro.\n\nNow more.", False),
    ("paragraph_first_word", {"index": 3, "word": "Then"}, "a\n\nb", False),
    ("title", True, "<<Poem of Joy>>\nLines of joy.", True),
    ("title", True, "«« Poem »» text", True),
    ("title", True, "# Poem of Joy\ntext", False),
    ("title", True, "<<>> text", False),
    ("postscript", "P.S.", "Dear Ann,\nSee you.\n\nP.S. Bring cake.", True),
    ("postscript", "P.S.", "Dear Ann,\nSee you.\n\n**P.S.** Bring cake.  ", True),
    ("postscript", "P.S.", "Dear Ann,\nSee you.", False),
    ("postscript", "P.P.S.", "Hi.\nP.S. one\nP.P.S two", True),
    ("postscript", "P.P.S.", "Hi.\nP.S. one", False),
    ("quoted", True, '"All of it is quoted."\n', True),
    ("quoted", True, "\u201cCurly quotes work.\u201d", True),
    ("quoted", True, 'Not "all" of it.', False),
    ("highlight_count", (2, None), "A *key point* and **another** one.", True),
    ("highlight_count", (2, None), "* a bullet\n* another bullet\n*one*", False),
    ("highlight_count", (1, None), "2*3*4 is math", False),
    ("section_count", {"count": (2, 2), "marker": "SECTION"}, "SECTION 1\nx\n## Section 2:\ny",
     True),
    ("section_count", {"count": (3, 3), "marker": "SECTION"}, "SECTION 1\nsee section 2", False),
    ("capital_word_count", (3, None), "I LOVE this SO much", True),
    ("capital_word_count", (0, 2), "I LOVE this SO much", False),
    ("word_frequency", {"word": "rain", "count": (3, None)}, "Rain, RAIN and rain!", True),
    ("word_frequency", {"word": "rain", "count": (3, None)}, "rain, rainy rains", False),
    ("word_frequency", {"word": "rain", "count": (0, 1)}, "no drops today", True),
    ("letter_frequency", {"letter": "q", "count": (3, None)}, "Quick quiet Qatar", True),
    ("letter_frequency", {"letter": "q", "count": (3, None)}, "quick", False),
    ("letter_frequency", {"letter": "z", "count": (0, 1)}, "lazy", True),
    ("placeholder_count", (2, None), "Send it to [address] by [date].", True),
    ("placeholder_count", (2, None), "See [docs](http://x) and [ ].", False),
    ("first_word", "Yes", "**Yes**, of course.", True),
    ("first_word", "Yes", "  \"yes!\" she said", True),
    ("first_word", "Yes", "Yesterday was fine.", False),
    ("first_word", "Yes", "", False),
    ("repeat_request", "Write a haiku about rain.",
     "Write a haiku about  rain.\n\nDrops on a tin roof", True),
    ("repeat_request", "Write a haiku about rain.", "Sure! Write a haiku about rain. Drops",
     False),
    ("repeat_request", "Write a haiku about rain.", "Write a haiku about rain.", False),
    ("two_responses", True, "First answer.\n******\nSecond answer.", True),
    ("two_responses", True, "Same.\n******\nsame.", False),
    ("two_responses", True, "One.\n******\nTwo.\n******\nThree.", False),
    ("language", "de", GERMAN, True),
    ("language", "German", GERMAN, True),
    ("language", "en", GERMAN, False),
    ("language", "en", "The dog sleeps in the garden. Der Hund schläft und die Katze spielt mit "
     "dem Ball.", False),
    ("language", "es", "¿Qué es la felicidad? Es una pregunta muy difícil para todos.", True),
    ("language", "ru", "Это очень хорошая книга, и я её люблю.", True),
    ("language", "de", "", False),
    ("ends_with", "Any other questions?", "Bye.\n**Any other questions?**\n", True),
    ("json", True, "```json\n{\"a\": [1, 2]}\n```  ", True),
    ("bullet_count", (4, 4), "* a\n* b\n- c\n* d", True),
    ("no_commas", True, "No commas at all here.", True),
    ("no_commas", True, "One\uff0c two", False),
])
def test_checks(keyword: str, value: Any, output: str, expected: bool) -> None:
    assert holds(keyword, value, output) is expected


@pytest.mark.parametrize(("keyword", "value"), [
    ("paragraph_count", {"count": (2, 2), "separator": "---"}),
    ("paragraph_count", 3),
    ("paragraph_first_word", {"index": 0, "word": "x"}),
    ("paragraph_first_word", {"index": 1, "word": "two words"}),
    ("title", "yes"),
    ("postscript", "P.S. 2"),
    ("section_count", {"count": (2, 2), "marker": "two words"}),
    ("word_frequency", {"word": "x"}),
    ("letter_frequency", {"letter": "ab", "count": (1, None)}),
    ("first_word", "two words"),
    ("repeat_request", "  "),
    ("language", "Klingon"),
])
def test_bad_values_name_the_keyword(keyword: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"constraint {keyword}="):
        constraint_feature(keyword, value)


def test_explain_and_saved_form() -> None:
    rubric = Rubric.for_constraints(paragraph_count={"count": (2, 2), "separator": "***"},
                                    title=True, language="German")
    assert rubric.constraints["language"] == "de"
    ev = rubric.evaluate("t", "Hallo und guten Tag.")
    text = ev.explain()
    assert "paragraph_count" in text and "title" in text and "no <<title>> found" in text
    assert not ev.passed
    assert Rubric.from_dict(rubric.to_dict()).to_dict() == rubric.to_dict()


def test_language_detection_is_offline_and_undetermined_when_short() -> None:
    assert detect_language("Bonjour") is None  # no function word: not guessed
    assert detect_language("Le chat et le chien sont dans la maison.") == "fr"
    assert in_language("Bonjour", "fr")
    assert not in_language("Hello and good morning to you all", "fr")


IFEVAL_PHRASINGS = {
    "Answer with at least 300 words.": {"word_count": (300, None)},
    "Answer with less than 50 words.": {"word_count": (1, 49)},
    "Write no fewer than three hundred words.": {},  # "three hundred" is not read as 3
    "Use a minimum of 40 words.": {"word_count": (40, None)},
    "Your response should contain less than 5 sentences.": {"sentence_count": (1, 4)},
    "Your response should contain at least 3 sentences.": {"sentence_count": (3, None)},
    "Your response should contain 3 paragraphs. Paragraphs are separated with the markdown "
    "divider: ***": {"paragraph_count": {"count": [3, 3], "separator": "***"}},
    "There should be 2 paragraphs. Paragraphs and only paragraphs are separated with each other "
    "by two new lines. Paragraph 2 must start with word jazz.":
        {"paragraph_count": (2, 2), "paragraph_first_word": {"index": 2, "word": "jazz"}},
    "Write NO FEWER THAN FOUR paragraphs.": {"paragraph_count": (4, None)},
    "Do not include keywords sleep, cloth in the response.": {"exclude_words": ["sleep", "cloth"]},
    "Include keywords river, stone in the response.": {"include_words": ["river", "stone"]},
    "Finish your response with this exact phrase Any other questions?. No other words should "
    "follow this phrase.": {"ends_with": "Any other questions?"},
    "Wrap your entire response with double quotation marks.": {"quoted": True},
    "Your entire response should be in English, and in all lowercase letters. No capital letters "
    "are allowed.": {"lowercase": True, "language": "en"},
    "Your entire response should be in English, and in all capital letters.":
        {"uppercase": True, "language": "en"},
    "Highlight at least 2 sections in your answer with markdown, i.e. *highlighted section*.":
        {"highlight_count": (2, None)},
    "Your answer must contain a title, wrapped in double angular brackets, such as "
    "<<poem of joy>>.": {"title": True},
    "At the end of your response, please explicitly add a postscript starting with P.S.":
        {"postscript": "P.S."},
    "At the end of your response, please explicitly add a postscript starting with P.P.S":
        {"postscript": "P.P.S."},
    "Your response must have 3 sections. Mark the beginning of each section with SECTION X, "
    "such as: SECTION 1": {"section_count": {"count": [3, 3], "marker": "SECTION"}},
    "The response must contain at least 2 placeholders represented by square brackets, such as "
    "[address].": {"placeholder_count": (2, None)},
    "In your response, the word flight should appear at least 3 times.":
        {"word_frequency": {"word": "flight", "count": [3, None]}},
    "In your response, the word 'data' should appear less than 2 times.":
        {"word_frequency": {"word": "data", "count": [0, 1]}},
    "In your response, the letter q should appear at least 5 times.":
        {"letter_frequency": {"letter": "q", "count": [5, None]}},
    "In your entire response, refrain from the use of any commas.": {"no_commas": True},
    "Your ENTIRE response should be in Spanish language, no other language is allowed.":
        {"language": "es"},
    "There should be exactly 4 bullet points.": {"bullet_count": (4, 4)},
    "List exactly 3 birds as bullet points, one per line starting with '- '.":
        {"bullet_count": (3, 3)},
    "Give at least four reasons as a bulleted list.": {"bullet_count": (4, None)},
    "Entire output should be wrapped in JSON format.": {"json": True},
    "In your response, words with all capital letters should appear at least 3 times.":
        {"capital_word_count": (3, None)},
    "Write a limerick. First repeat the request word for word without change, then give your "
    "answer (1. do not say any words or characters before repeating the request; 2. the request "
    "you need to repeat does not include this sentence)": {"repeat_request": "Write a limerick."},
    "Give two different responses. Responses and only responses should be separated by 6 "
    "asterisk symbols: ******.": {"two_responses": True},
    "The first word of your response should be the word Once.": {"first_word": "Once"},
}


@pytest.mark.parametrize("task", list(IFEVAL_PHRASINGS))
def test_parser_reads_ifeval_phrasings(task: str) -> None:
    assert constraints_from_task("Write about tea. " * (not task.startswith("Write")) + task) \
        == IFEVAL_PHRASINGS[task]


@pytest.mark.parametrize("task", [
    "Summarize the first 3 paragraphs of this article.",
    "Describe the first 3 steps as bullet points.",
    "Suggest a title for my novel about pirates.",
    "Translate the second paragraph into German.",
    "Explain the difference between a paragraph and a section.",
    "What does P.S. mean at the end of a letter?",
    "Use commas to separate the list items.",
    "Write about a person who highlights books with markers.",
    "Describe the history of the English language.",
    "Write an essay on trends in English literature.",
    "How many letters are in the word banana?",
    "Write an essay about Section 8 housing.",
    "Name 3 words that rhyme with cat.",
    "Do not repeat the question in your answer.",
    "Quote two famous lines from Hamlet.",
    "Why do people put placeholders in templates?",
])
def test_parser_invents_nothing(task: str) -> None:
    assert constraints_from_task(task) == {}


@pytest.mark.parametrize("family", [f.name for f in IFEVAL_FAMILIES])
def test_every_family_parses_back_to_its_constraints(family: str) -> None:
    for split in ("train", "held_out"):
        for spec in ifeval_tasks(12, seed=5, split=split, families=[family]):
            assert constraints_from_task(spec.task) == spec.constraints, spec.task
            rubric = spec.rubric()
            assert rubric is not None
            assert rubric.constraints == Rubric.for_constraints(
                **constraints_from_task(spec.task)).constraints


def test_many_tasks_round_trip_and_splits_use_different_phrasings() -> None:
    train = ifeval_tasks(300, seed=0, split="train")
    held = ifeval_tasks(300, seed=0, split="held_out")
    assert ifeval_tasks(300, seed=0, split="held_out") == held
    assert len({t.task for t in held}) == 300
    for spec in train + held:
        assert constraints_from_task(spec.task) == spec.constraints, spec.task
    by_family = {(t.metadata["family"], t.metadata["template"]) for t in train}
    assert not by_family & {(t.metadata["family"], t.metadata["template"]) for t in held}
    assert {t.metadata["family"] for t in held} == {f.name for f in IFEVAL_FAMILIES}


def test_unknown_family_and_split_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown ifeval families"):
        ifeval_tasks(2, families=["nope"])
    with pytest.raises(ValueError, match="split must be one of"):
        ifeval_tasks(2, split="test")
