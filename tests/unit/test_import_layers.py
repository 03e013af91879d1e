"""The import graph's contract: no circles between modules, models/ on the ground floor.

`make lint` runs import-linter's contracts (``[tool.importlinter]`` in
pyproject.toml: floors, distill's stages, who drives the architectures, and no
circles between siblings); this test adds what sibling checks cannot see, a
circle through a package's ``__init__`` (a child importing its parent package
that imports it back), over every import, a lazy one inside a function too.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def _circles(graph) -> list[list[str]]:  # noqa: ANN001 - a grimp.ImportGraph
    """Tarjan's strongly connected components of more than one module (iterative)."""
    adjacency = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(adjacency):
        if root in index:
            continue
        work = [(root, iter(adjacency[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(adjacency.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles_between_modules() -> None:
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("agentic_loop", cache_dir=None)
    circles = _circles(graph)
    assert circles == [], f"import circles (cut each one): {circles}"


def test_the_circle_finder_sees_a_planted_circle() -> None:
    grimp = pytest.importorskip("grimp")
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _circles(graph) == [["p.a", "p.b", "p.c"]]


def test_models_imports_nothing_above_it_and_still_finds_the_registry() -> None:
    """``registry:`` comes from an entry point: models/ loads it without importing distill."""
    code = (
        "import sys\n"
        "import agentic_loop.models as m\n"
        "above = sorted(n for n in sys.modules if n.startswith(('agentic_loop.distill', "
        "'agentic_loop.architectures')))\n"
        "assert not above, above\n"
        "print(m.parse_spec('registry:runs/registry'))\n"
        "print('agentic_loop.distill.release.live_model' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [
        "ModelSpec(provider='registry', target='runs/registry')", "True"]
