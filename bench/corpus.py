"""Real English sentences for memory benchmarks, harvested offline from installed docstrings.

Recall of an approximate index must be measured on real embeddings, and
nothing may be downloaded. The docstrings of the standard library and of
installed packages are thousands of real, varied English sentences; this
reads the triple-quoted strings of the source files (no imports, so it is
fast and side-effect free), in a fixed file order, so every run gets the
same corpus.

Usage: ``sentences(5000)`` -> a deterministic list of distinct sentences.
"""

from __future__ import annotations

import re
import sysconfig
from collections.abc import Iterator
from pathlib import Path

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_CODEY = re.compile(r"[`{}\[\]<>=|_\\#@$*~]|\.\.\.|::|\w\(")

# Packages with plenty of prose in their docstrings, in the order they are read.
PACKAGES = ("scipy", "numpy", "transformers", "torch", "sympy", "pydantic", "langchain_core",
            "rich")


def _roots() -> list[Path]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    site = Path(sysconfig.get_paths()["purelib"])
    return [stdlib] + [site / name for name in PACKAGES if (site / name).is_dir()]


_TRIPLE = re.compile(r'"""(.*?)"""', re.DOTALL)


def _docstrings(path: Path) -> Iterator[str]:
    try:
        source = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    yield from _TRIPLE.findall(source)


def _sentences_of(doc: str) -> Iterator[str]:
    for paragraph in re.split(r"\n\s*\n", doc):
        text = " ".join(paragraph.split())
        for sentence in _SENTENCE_END.split(text):
            if 40 <= len(sentence) <= 220 and sentence[-1] in ".!?" and not _CODEY.search(sentence):
                letters = sum(c.isalpha() or c == " " for c in sentence)
                if letters / len(sentence) > 0.9:
                    yield sentence


def sentences(limit: int) -> list[str]:
    ("Up to ``limit`` distinct prose sentences from installed docstrings, "
     "always in the same order.")
    seen: set[str] = set()
    out: list[str] = []
    for root in _roots():
        for path in sorted(root.rglob("*.py")):
            if ("test" in path.parts or "tests" in path.parts
                    or "site-packages" in path.relative_to(root).parts):
                continue
            for doc in _docstrings(path):
                for sentence in _sentences_of(doc):
                    key = sentence.lower()
                    if key not in seen:
                        seen.add(key)
                        out.append(sentence)
                        if len(out) >= limit:
                            return out
    return out


if __name__ == "__main__":
    import sys
    import time

    start = time.perf_counter()
    found = sentences(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
    print(f"{len(found)} sentences in {time.perf_counter() - start:.1f}s; e.g.:")
    for s in found[:: max(1, len(found) // 8)]:
        print(" -", s)
