"""The package's shape, checked by walking it: one error root, one message style, one-way layers.

These are the habits issue #13 set; a test keeps them, so a new module that
raises a bare ``ValueError`` or imports the CLI from library code fails here.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import agentic_loop
from agentic_loop.errors import AgenticLoopError

PACKAGE_DIR = Path(agentic_loop.__file__).parent
SOURCES = sorted(PACKAGE_DIR.rglob("*.py"))
#: The sandbox's child program runs inside the sandbox without the package, so it cannot use the
#: error root: its raises emulate Python's own to the tested code (NameError for a missing name,
#: PermissionError for a refused call), and its two BaseException signals are wire protocol.
#: Only the error-root checks skip it; length, message style and layering apply as everywhere.
SANDBOX_PROGRAM = PACKAGE_DIR / "judges" / "sandbox" / "runner"

#: Builtins the package may still raise: protocol errors Python itself expects.
PROTOCOL_ERRORS = {"NotImplementedError", "AttributeError", "StopIteration", "StopAsyncIteration",
                   "KeyboardInterrupt", "SystemExit", "GeneratorExit"}
#: Inside these dunder methods the protocol fixes the error type (a mapping's missing key).
PROTOCOL_METHODS = {"__getitem__": {"KeyError", "IndexError"}, "__getattr__": {"AttributeError"}}
BUILTIN_ERRORS = {name for name, obj in vars(builtins).items()
                  if isinstance(obj, type) and issubclass(obj, BaseException)}


def _modules() -> list[str]:
    names = ["agentic_loop"]
    for info in pkgutil.walk_packages([str(PACKAGE_DIR)], prefix="agentic_loop."):
        names.append(info.name)
    return names


def _rel(path: Path) -> str:
    return str(path.relative_to(PACKAGE_DIR.parent))


def _raises(tree: ast.AST) -> list[ast.Raise]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Raise) and node.exc is not None]


def _protocol_raises(tree: ast.AST) -> set[int]:
    """Line numbers of raises a dunder protocol method must make with a builtin type."""
    lines = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name in PROTOCOL_METHODS:
            allowed = PROTOCOL_METHODS[fn.name]
            lines |= {r.lineno for r in _raises(fn) if _raised_name(r) in allowed}
    return lines


def _raised_name(node: ast.Raise) -> str | None:
    exc = node.exc
    target = exc.func if isinstance(exc, ast.Call) else exc
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None


def test_every_exception_class_derives_from_the_root() -> None:
    """Every exception class defined in the package (warnings aside) is an AgenticLoopError."""
    offenders = []
    seen = 0
    for name in _modules():
        if name.startswith("agentic_loop.judges.sandbox.runner"):  # see SANDBOX_PROGRAM
            continue
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name or not issubclass(cls, BaseException):
                continue
            if issubclass(cls, Warning):  # warnings are reported, not raised as errors
                continue
            seen += 1
            if not issubclass(cls, AgenticLoopError):
                offenders.append(f"{name}.{cls.__qualname__}")
    assert seen >= 20, f"only {seen} exception classes found: the walk is broken"
    assert offenders == [], f"exception classes outside the AgenticLoopError tree: {offenders}"


def test_the_package_raises_no_bare_builtin_error() -> None:
    """On-purpose raises use our classes; only protocol errors stay builtin."""
    offenders = []
    for path in SOURCES:
        if path.is_relative_to(SANDBOX_PROGRAM):
            continue
        tree = ast.parse(path.read_text(), str(path))
        allowed = _protocol_raises(tree)
        for node in _raises(tree):
            name = _raised_name(node)
            if (name in BUILTIN_ERRORS and name not in PROTOCOL_ERRORS
                    and node.lineno not in allowed):
                offenders.append(f"{_rel(path)}:{node.lineno} raises {name}")
    assert offenders == [], "\n".join(offenders)


def _message_ends(node: ast.Raise) -> tuple[str, str] | None:
    """The literal text at the start and end of a raise's first argument, when it is literal."""
    exc = node.exc
    if not isinstance(exc, ast.Call) or not exc.args:
        return None
    arg = exc.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value, arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        first, last = arg.values[0], arg.values[-1]
        head = first.value if isinstance(first, ast.Constant) else ""
        tail = last.value if isinstance(last, ast.Constant) else ""
        return str(head), str(tail)
    return None


def _identifiers() -> set[str]:
    """Class and function names defined in the package: a message may start with one."""
    names = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                names.add(node.name)
    return names


def test_error_messages_share_one_style() -> None:
    """Lower-case start (names and acronyms aside) and no trailing period, as errors.py says."""
    offenders = []
    identifiers = _identifiers()
    for path in SOURCES:
        for node in _raises(ast.parse(path.read_text(), str(path))):
            ends = _message_ends(node)
            if ends is None:
                continue
            head, tail = ends
            first_word = head.split(" ", 1)[0].rstrip(":,;.")
            capitalized = (len(head) > 1 and head[0].isupper() and head[1].islower()
                           and first_word.split(".")[0] not in identifiers)
            if capitalized or tail.rstrip().endswith("."):
                offenders.append(f"{_rel(path)}:{node.lineno}: {head[:40]!r} ... {tail[-20:]!r}")
    assert offenders == [], "\n".join(offenders)


def _imports(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


@pytest.mark.parametrize("layer, forbidden", [
    ("", "agentic_loop.cli"),                       # nothing but the CLI imports the CLI
    ("judges", "agentic_loop.architectures"),      # judges know no graph
    ("judges", "agentic_loop.distill"),
    ("memory", "agentic_loop.architectures"),      # storage knows no graph
    ("memory", "agentic_loop.distill"),
    ("models", "agentic_loop.architectures"),
    ("distill/data", "agentic_loop.architectures"),  # training reads records;
                                                     # only release/ runs graphs
    ("distill/train", "agentic_loop.architectures"),
])
def test_layers_import_one_way(layer: str, forbidden: str) -> None:
    offenders = []
    root = PACKAGE_DIR / layer
    for path in SOURCES:
        if not path.is_relative_to(root) or path.is_relative_to(PACKAGE_DIR / "cli"):
            continue
        for name in _imports(ast.parse(path.read_text(), str(path))):
            if name == forbidden or name.startswith(forbidden + "."):
                offenders.append(f"{_rel(path)} imports {name}")
    assert offenders == [], "\n".join(offenders)


def test_no_module_is_too_long_to_hold() -> None:
    """~400 lines is what a reader holds; a module past 450 has a seam to cut along."""
    long = [f"{_rel(p)}: {n}" for p in SOURCES
            if (n := len(p.read_text().splitlines())) > 450]
    assert long == [], long


def test_no_folder_is_too_crowded_to_scan() -> None:
    """A folder past ~15 modules (its __init__ aside) has a sub-package waiting in it."""
    crowded = {}
    for folder in {p.parent for p in SOURCES}:
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        if len(modules) > 15:
            crowded[_rel(folder)] = len(modules)
    assert crowded == {}, crowded


def test_the_root_is_public() -> None:
    assert agentic_loop.AgenticLoopError is AgenticLoopError


def test_importing_the_library_does_not_load_torch() -> None:
    """The CLI's --help, a LangGraph server's module scan and apps that only use a remote model
    must not pay for torch: it loads with the local engine or the embedder, on first use."""
    import subprocess
    import sys

    code = ("import sys, agentic_loop.architectures, agentic_loop.judges, agentic_loop.distill, "
            "agentic_loop.memory, agentic_loop.cli, agentic_loop.graphs; "
            "print(sorted(m for m in ('torch', 'transformers', 'trl') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
