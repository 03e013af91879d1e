"""The sandbox's child program: parts on the host, one ``python -I -c`` program inside.

The parts under ``judges/sandbox/runner/`` are ordinary modules here (so ruff,
mypy and these tests see them); :func:`bootstrap_source` embeds their source
and executes them in :data:`PARTS` order. These tests keep the two views
agreeing: every part is embedded, each imports only parts loaded before it,
and the program reads no file of the package when it starts.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from agentic_loop.judges.sandbox import runner
from agentic_loop.judges.sandbox.bwrap import runner_source
from agentic_loop.judges.sandbox.runner import ARG_MAX_BYTES, PARTS, ROLES, bootstrap_source
from agentic_loop.judges.sandbox.runner.client import MISSING, import_here

FOLDER = Path(runner.__file__).parent
PACKAGE_DIR = FOLDER.parents[2]  # src/agentic_loop


def _imported(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
    return found


def test_every_part_is_embedded_and_imports_only_parts_loaded_before_it() -> None:
    assert sorted(PARTS) == sorted(p.stem for p in FOLDER.glob("*.py") if p.stem != "__init__")
    for i, part in enumerate(PARTS):
        for name in _imported(FOLDER / f"{part}.py"):
            if name.split(".")[0] != "agentic_loop":
                continue  # the standard library, as inside the sandbox
            assert name.startswith(runner.__name__ + "."), f"{part} imports {name}"
            assert name.rsplit(".", 1)[1] in PARTS[:i], f"{part} imports {name}, loaded later"
    assert {part for part, _function in ROLES.values()} <= set(PARTS)


def test_the_program_is_one_argument_and_the_one_the_sandbox_runs() -> None:
    assert runner_source() == bootstrap_source()
    assert len(runner_source().encode()) < ARG_MAX_BYTES  # Linux's cap on one argv string


def test_the_program_loads_its_parts_without_reading_the_package(tmp_path: Path) -> None:
    """Started as the sandbox starts it, every part is a module under its real name and no
    file of the package is opened (the parents are empty stubs, nothing is imported)."""
    spy = f"""
import atexit, json, sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
def report():
    modules = {{n: getattr(m, "__path__", None) for n, m in sys.modules.items()
               if n.startswith("agentic_loop")}}
    wire = sys.modules[{runner.__name__ + ".wire"!r}]
    print(json.dumps({{"opened": opened, "modules": modules,
                      "encode": wire.encode([1, (2,)], repr)}}))
atexit.register(report)
"""
    done = subprocess.run([sys.executable, "-I", "-c", spy + runner_source(), "no-such-role"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert "KeyError: 'no-such-role'" in done.stderr, done.stderr  # every part loaded first
    report = json.loads(done.stdout.strip().splitlines()[-1])
    inside = [p for p in report["opened"] if str(PACKAGE_DIR) in p or "agentic_loop" in p]
    assert inside == [], inside
    expected: dict[str, list[str] | None] = {runner.__name__ + "." + p: None for p in PARTS}
    expected |= {"agentic_loop": [], "agentic_loop.judges": [], "agentic_loop.judges.sandbox": [],
                 runner.__name__: []}
    assert report["modules"] == expected
    assert report["encode"] == {"l": [1, {"t": [2]}]}


def test_the_tests_process_never_imports_the_runner_itself_for_a_name() -> None:
    for module in (runner.__name__, runner.__name__ + ".wire", "agentic_loop", "__main__"):
        assert import_here(module, "") is MISSING
    assert import_here("json", "dumps") is json.dumps
