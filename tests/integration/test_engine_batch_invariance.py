"""A greedy answer must not depend on the batch it was decoded in, in each dtype the engine runs.

Why: the loops compare answers (self-consistency votes, judges, best-of-n's greedy
baseline) and the suite pins greedy outputs; if a prompt's answer changed with its
neighbours, results would depend on timing. This is what kept int8 out, and what
the CPU's default dtype has to pass before it follows the hardware (issue 36). Each
prompt is decoded alone, then in batches of 8 with different neighbours, with the
prefix cache on (a shared system prompt computed once, remembered prefixes copied).
"""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from agentic_loop.models import load_chat_model
from agentic_loop.models.cpu_caps import native_bf16
from agentic_loop.models.engine.engine import GenerationParams

pytestmark = pytest.mark.slow

PROMPTS = ["Name a fruit.", "Write one word about the sea, then explain it at length.",
           "What is 3 plus 4?", "Say goodbye.", "List three colours.",
           "Explain what a compiler does in one sentence.", "Translate 'cat' into French.",
           "Give me a tip for sleeping better."]
NEIGHBOURS = ["Count from one to ten.", "Describe a cloud.", "Why is the sky blue?",
              "Write a haiku about rain."]


@pytest.mark.parametrize("dtype", ["float32", pytest.param("bfloat16", marks=pytest.mark.skipif(
    not native_bf16(), reason="bf16 is the default only where the CPU has it natively"))])
def test_greedy_answers_do_not_depend_on_the_batch(dtype: str) -> None:
    llm = load_chat_model("local", dtype=dtype, prefix_cache=True)
    engine = llm.engine
    params = GenerationParams(max_tokens=24, temperature=0.0)

    def ids(text: str) -> list[int]:
        return llm.prompt_ids([HumanMessage(content=text)])

    def texts(prompts: list[str]) -> list[str]:
        return [out.text for out in engine.generate([ids(p) for p in prompts], params)]

    alone = {p: texts([p])[0] for p in PROMPTS}
    before = dict(engine.stats)
    batches = [PROMPTS, PROMPTS[::-1], [*PROMPTS[4:], *NEIGHBOURS], [*NEIGHBOURS, *PROMPTS[:4]]]
    differing = []
    for batch in batches:
        for prompt, text in zip(batch, texts(batch), strict=True):
            if prompt in alone and text != alone[prompt]:
                differing.append(f"{prompt!r}: alone {alone[prompt]!r}, in a batch {text!r}")
    # each batch was decoded together (one busy period each), reusing remembered prefixes
    assert engine.stats["batches"] - before["batches"] == len(batches)
    assert engine.stats["reused_prefix_tokens"] > before["reused_prefix_tokens"]
    assert differing == [], "\n".join(differing)
