"""Which names a test may take from the solution, read from the solution's *source*.

Why a module: a name a test uses without defining it resolves, in order, to
a builtin, then to what the solution's source binds only by ``import`` (this
process imports it itself, so the solution patching ``math.isclose`` changes
nothing here), then to the solution's own value (:class:`SolutionNames`).
The source is parsed with :mod:`ast`, a stack walk a deeply nested solution
cannot stop.

Example:
    >>> imports, others, stars = module_scope("from math import isclose\\nx = 1")
    >>> imports["isclose"], others, stars
    ([('from', 'math', 'isclose')], {'x'}, [])
"""

from __future__ import annotations

import sys
from typing import Any

from agentic_loop.judges.sandbox.runner.client import MISSING, Client, import_here

_Import = tuple[str, str, str]  # ("import" | "as" | "from", module, attribute)
_Scope = tuple[dict[str, list[_Import]], set[str], list[str]]


def module_scope(code: str) -> _Scope | None:
    """How the solution's source binds its module-level names: imports, other bindings, ``*``.

    Read from the source the parent passed, not asked of the solution (which
    could say anything). ``None`` when the source cannot be parsed here.

    >>> imports, others, stars = module_scope(
    ...     "import numpy as np\\nimport os.path\\nfrom math import *\\nfrom re import search\\n"
    ...     "search = 1\\ndef f():\\n    global g\\n    import json")
    >>> imports["np"], imports["os"], sorted(others), stars
    ([('as', 'numpy', '')], [('import', 'os.path', '')], ['f', 'g', 'search'], ['math'])
    """
    import ast  # noqa: PLC0415 - only when a test uses a name it did not define

    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    imports: dict[str, list[_Import]] = {}
    others = {n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names}
    stars: list[str] = []
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:  # a stack, not recursion: a deeply nested solution cannot stop the walk
        node, in_comprehension = todo.pop()
        children: list[ast.AST] = []
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports.setdefault(alias.asname, []).append(("as", alias.name, ""))
                else:
                    top = alias.name.split(".")[0]
                    imports.setdefault(top, []).append(("import", alias.name, ""))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    stars += [node.module] if node.module and not node.level else []
                elif node.level or not node.module or node.module == "__future__":
                    others.add(alias.asname or alias.name)
                else:
                    imports.setdefault(alias.asname or alias.name, []).append(
                        ("from", node.module, alias.name))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            # their bodies are their own scope; decorators, bases and defaults are this one
            if not isinstance(node, ast.Lambda):
                others.add(node.name)
                children += node.decorator_list
            if isinstance(node, ast.ClassDef):
                children += node.bases + [k.value for k in node.keywords]
            else:
                children += node.args.defaults + [d for d in node.args.kw_defaults if d]
        elif isinstance(node, ast.AnnAssign) and node.value is None:
            children = [node.annotation]  # `x: int` alone binds nothing
        else:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                if not in_comprehension:  # a comprehension's own targets stay inside it
                    others.add(node.id)  # (`del x` binds nothing: x is gone, or imported)
            elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                others.add(node.target.id)
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
                others.add(node.name)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                others.add(node.rest)
            children = list(ast.iter_child_nodes(node))
            in_comprehension = in_comprehension or isinstance(node, comprehensions)
        todo += [(child, in_comprehension) for child in children]
    return imports, others, stars


def _import_spec(spec: _Import, name: str) -> Any:
    """What one of the solution's import statements binds ``name`` to, imported here."""
    how, module, attr = spec
    if how == "from":
        found = import_here(module, attr)
        if found is MISSING:
            found = import_here(f"{module}.{attr}", "")
        # `from m import f as g` is the solution's name g: only modules cross renamed
        return found if attr == name or isinstance(found, type(sys)) else MISSING
    found = import_here(module, "")
    if how == "import" and found is not MISSING:
        return sys.modules.get(module.split(".")[0], MISSING)  # `import a.b` binds `a`
    return found


def _star_export(module: str, name: str) -> Any:
    found = import_here(module, "")
    public = getattr(found, "__all__", None)
    exported = not name.startswith("_") if public is None else name in list(public)
    return getattr(found, name, MISSING) if found is not MISSING and exported else MISSING


class SolutionNames:
    """Resolves a name a test uses but neither defines nor finds among the builtins.

    A name the solution's source binds only by ``import`` is imported by the
    tests process itself (so ``math.isclose`` is the real one even if the
    solution rebound it before importing); so is a module, and a library
    function or class under its own name. Every other name is the solution's
    own: its value crosses as plain data, or stays behind a handle.
    """

    def __init__(self, client: Client, code: str | None) -> None:
        self.client = client
        self.code = code
        self.scope: _Scope | None = None

    def resolve(self, name: str) -> Any:
        if self.code is not None and self.scope is None:
            self.scope = module_scope(self.code)
            if self.scope is None:
                raise self.client.refuse(
                    "the tests' process could not parse the solution's source to tell its "
                    "imports from its own names")
        imports, others, stars = self.scope or ({}, set(), [])
        if name not in others:
            for spec in imports.get(name, ()):
                found = _import_spec(spec, name)
                if found is not MISSING:
                    return found
            for module in reversed(stars):
                found = _star_export(module, name)
                if found is not MISSING:
                    return found
        return self.client.lookup(name)
