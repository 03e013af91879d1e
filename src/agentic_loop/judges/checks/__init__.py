"""Checks: what Python can verify about an output, without asking a model.

Why a package: a rubric's check features come from a task's declared
constraints (``word_count=(10, 12)``, ``exclude_words=[...]``, the IFEval
instruction kinds) or from the task's own words ("in exactly 12 words").
:mod:`.constraint_features` turns a constraint into a
:class:`~agentic_loop.judges.features.Feature` through the builders of
:mod:`.constraint_builders` and :mod:`.constraint_builders_ifeval`;
:mod:`.task_constraint_parser` (with :mod:`.constraint_phrases` and
:mod:`.task_layout_phrases` and :mod:`.tool_phrases`) reads constraints out of a task's
text; the measures they count with live in :mod:`.text_measures`, :mod:`.text_layout`,
:mod:`.language_id` and :mod:`.lexicon`. Code checks run in
:mod:`agentic_loop.judges.sandbox`. An agent's answer is also checked against its
episode (the tools it ran, their errors and results, its steps): :mod:`.episode_checks`.

Example:
    >>> from agentic_loop.judges.checks.task_constraint_parser import constraints_from_task
    >>> constraints_from_task("Write a tagline in exactly 12 words, without commas.")
    {'exact_words': 12, 'no_commas': True}
"""
