"""Check functions saved by reference: an import path or a registered name, resolved on load.

Why: a user's own verifier (a domain validator, a business rule, a
benchmark's checker) is code, and code cannot be written into a JSONL row.
Yet every stage after a run reads its rubric from data: ``improve`` writes
its pool and reads it back each round, the gate reads the golden set, the
export re-scores logged runs, GRPO sends rubrics to reward workers. So a
check is saved as a *reference* to its function and resolved when the rubric
is read back, the way entry points and uvicorn's app strings name code:

* an import path ``"package.module:function"`` (``"mypkg.checks:valid_invoice"``),
  resolved by importing the module, in any process that can import it (installed, on
  ``PYTHONPATH``, or, as uvicorn's app strings, in the current folder);
* a name registered in code (``register_check("valid_invoice", fn)`` or the
  decorator ``@register_check("valid_invoice")``), resolved in processes
  that ran the registering code (the registry is per process).

A function without an importable name (a lambda, a function defined inside
another) still works in a single run, but saving it fails with an error that
says how to make it saveable.

Example:
    >>> import math
    >>> resolve_check("math:isclose") is math.isclose
    True
    >>> @register_check("no_shouting")
    ... def no_shouting(task: str, output: str) -> bool:
    ...     return not output.isupper()
    >>> check_reference(no_shouting), resolve_check("no_shouting") is no_shouting
    ('no_shouting', True)
    >>> resolve_check("mypkg_that_is_not_there.checks:valid")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.judges.check_refs.CheckReferenceError: check 'mypkg_that_is_not_there...': ...
    >>> unregister_check("no_shouting")
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, overload

from agentic_loop.errors import ConfigError

__all__ = ["CheckReferenceError", "check_reference", "register_check", "registered_checks",
           "registrations", "resolve_check", "restore_registrations", "unregister_check"]

F = TypeVar("F", bound=Callable[..., Any])

_DOTTED = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
#: ``package.module:function`` (the attribute part may be dotted: ``module:Class.method``).
_IMPORT_PATH = re.compile(rf"^({_DOTTED}):({_DOTTED})$")
#: A registered name: no colon (that marks an import path), no spaces.
_NAME = re.compile(r"^[A-Za-z_][\w.\-]*$")

_HOW_TO_SAVE = ("define it with `def` at module level in an importable module (saved as "
                "'module:function'), or register it: register_check('name', fn)")

_registry: dict[str, Callable[..., Any]] = {}
_lock = threading.Lock()


class CheckReferenceError(ConfigError):
    """A check reference does not resolve, or a check function cannot be saved by reference.

    A :class:`~agentic_loop.errors.ConfigError`; the message names the
    reference (or the function), what was tried, and the fix.
    """


@overload
def register_check(name: str, fn: F) -> F: ...


@overload
def register_check(name: str, fn: None = None) -> Callable[[F], F]: ...


def register_check(name: str, fn: F | None = None) -> F | Callable[[F], F]:
    """Register ``fn`` under ``name`` so rubrics save it as ``name``; usable as a decorator.

    Registering the same function again is a no-op; another function under a
    taken name is refused (a saved rubric would silently change meaning).

    >>> register_check("x:y", len)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.judges.check_refs.CheckReferenceError: check name 'x:y' ...
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise CheckReferenceError(
            f"check name {name!r} cannot be registered: use letters, digits, '_', '.' or '-' "
            "and no ':' (a colon marks an import path such as 'mypkg.checks:valid_invoice')")

    def add(function: F) -> F:
        if not callable(function):
            raise CheckReferenceError(
                f"register_check({name!r}, ...) needs a callable (task, output) -> bool | int, "
                f"got {type(function).__name__}")
        with _lock:
            known = _registry.get(name)
            if known is not None and known is not function:
                raise CheckReferenceError(
                    f"check name {name!r} is already registered to {_describe(known)}; pick "
                    f"another name, or unregister_check({name!r}) first")
            _registry[name] = function
        return function

    return add(fn) if fn is not None else add


def unregister_check(name: str) -> None:
    """Forget a registered name (tests, reloads); an unknown name is ignored."""
    with _lock:
        _registry.pop(name, None)


def registered_checks() -> dict[str, Callable[..., Any]]:
    """A copy of the registry: name -> function.

    >>> isinstance(registered_checks(), dict)
    True
    """
    with _lock:
        return dict(_registry)


def resolve_check(reference: str) -> Callable[..., Any]:
    """The function ``reference`` names: ``"module:function"`` is imported, a name is looked up.

    >>> resolve_check("math:no_such_function")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.judges.check_refs.CheckReferenceError: check 'math:no_such_function': module ...
    """
    if not isinstance(reference, str) or not reference.strip():
        raise CheckReferenceError(
            f"a saved check must be a reference string ('module:function' or a registered "
            f"name), got {reference!r}")
    reference = reference.strip()
    found = _IMPORT_PATH.match(reference)
    if found:
        return _import(reference, found.group(1), found.group(2))
    if ":" in reference:
        raise CheckReferenceError(
            f"check {reference!r} is not a valid import path; write 'package.module:function' "
            "(dotted names on both sides of one colon), e.g. 'mypkg.checks:valid_invoice'")
    with _lock:
        function = _registry.get(reference)
        known = sorted(_registry)
    if function is None:
        listed = ", ".join(known) if known else "none"
        raise CheckReferenceError(
            f"check {reference!r} is not a registered check name (registered: {listed}); "
            f"import the module that calls register_check({reference!r}, fn) before loading, "
            "or save the check by import path ('package.module:function')")
    return function


def check_reference(fn: Callable[..., Any], *, feature: str = "") -> str:
    """The reference ``fn`` is saved as: its registered name, else ``module:qualname``.

    The import path is used only when importing it gives back this very
    function; a lambda, a nested function or one defined in ``__main__`` has
    no such path and cannot be saved.

    >>> check_reference(lambda task, out: True, feature="short")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.judges.check_refs.CheckReferenceError: feature 'short': its check <lambda> ...
    """
    who = f"feature {feature!r}: its check" if feature else "check"
    with _lock:
        names = [name for name, known in _registry.items() if known is fn]
    if names:
        return sorted(names)[0]
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    label = qualname or type(fn).__name__
    if not isinstance(qualname, str) or not isinstance(module, str):
        raise CheckReferenceError(
            f"{who} {label} has no importable name (a {type(fn).__name__} object) and cannot be "
            f"saved by reference; {_HOW_TO_SAVE}")
    if "<lambda>" in qualname:
        raise CheckReferenceError(
            f"{who} {qualname} is a lambda and cannot be saved by reference; {_HOW_TO_SAVE}")
    if "<locals>" in qualname:
        raise CheckReferenceError(
            f"{who} {qualname} is defined inside a function (a closure) and cannot be saved by "
            f"reference; {_HOW_TO_SAVE}")
    if module == "__main__":
        raise CheckReferenceError(
            f"{who} {qualname} is defined in the script being run (__main__), which another "
            f"process cannot import; move it into a module, or register it: "
            f"register_check('name', fn) (then register it in every process that loads it)")
    reference = f"{module}:{qualname}"
    try:
        same = _import(reference, module, qualname) is fn
    except CheckReferenceError:
        same = False
    if not same:
        raise CheckReferenceError(
            f"{who} {qualname} cannot be found again at {reference!r} (importing it gives "
            f"another object); {_HOW_TO_SAVE}")
    return reference


def registrations(functions: Iterable[object]) -> dict[str, str]:
    """The registered names among ``functions``, each with where its function lives.

    A registry is per process: a spawned worker (GRPO's reward workers) gets
    these and calls :func:`restore_registrations`, so the names a saved
    rubric uses resolve there too.

    >>> registrations([len])
    {}
    """
    with _lock:
        entries = list(_registry.items())
    found: dict[str, str] = {}
    for fn in functions:
        for name, known in entries:
            if fn is not None and known is fn:
                found[name] = f"{getattr(fn, '__module__', '?')}:" \
                              f"{getattr(fn, '__qualname__', type(fn).__name__)}"
    return found


def restore_registrations(entries: Mapping[str, str]) -> None:
    """Register ``entries`` (from :func:`registrations`) in this process.

    Each function's module is imported first (its own ``register_check``
    calls run); a name still missing is registered from the function's import
    path. An entry neither can restore is an error naming it.

    >>> restore_registrations({})
    """
    for name, where in entries.items():
        module = where.partition(":")[0]
        if module != "__main__":
            try:
                importlib.import_module(module)
            except Exception as exc:  # the user's module: name it with its own error
                raise CheckReferenceError(
                    f"check {name!r} is registered in module {module!r}, which cannot be "
                    f"imported here ({type(exc).__name__}: {exc}); make it importable in every "
                    "process that loads the rubric (install it or put its folder on PYTHONPATH)"
                ) from None
        with _lock:
            if name in _registry:
                continue
        if not _IMPORT_PATH.match(where) or module == "__main__":
            raise CheckReferenceError(
                f"check {name!r} ({where}) cannot be registered in another process: it has no "
                "import path; define it with `def` at module level in an importable module and "
                "register it there, at import time")
        register_check(name, _import(where, *where.split(":")))


def _import_module(module_name: str) -> Any:
    """Import ``module_name``; as uvicorn's app strings, the current folder is looked in too
    (appended to ``sys.path``, so it never shadows an installed package)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        if exc.name != module_name.partition(".")[0] or here in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(module_name)


def _import(reference: str, module_name: str, attribute: str) -> Callable[..., Any]:
    try:
        module = _import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and not _is_prefix(exc.name, module_name):
            raise CheckReferenceError(
                f"check {reference!r}: module {module_name!r} was found but its import of "
                f"{exc.name!r} failed ({exc}); install {exc.name!r} in this environment") from None
        raise CheckReferenceError(
            f"check {reference!r}: module {module_name!r} cannot be imported (no module named "
            f"{exc.name or module_name!r} on sys.path or in the current folder); install the "
            "package that provides it, or put its folder on PYTHONPATH, or fix the spelling"
        ) from None
    except Exception as exc:  # the user's module itself is broken: say so, with its error
        raise CheckReferenceError(
            f"check {reference!r}: importing module {module_name!r} raised "
            f"{type(exc).__name__}: {exc}; fix that module") from None
    target: Any = module
    walked = module_name
    for part in attribute.split("."):
        if not hasattr(target, part):
            public = [n for n, v in vars(target).items() if callable(v) and not n.startswith("_")]
            close = difflib.get_close_matches(part, public, n=3)
            hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
            raise CheckReferenceError(
                f"check {reference!r}: module {walked!r} has no attribute {part!r}{hint}; "
                "fix the function name after the colon") from None
        target = getattr(target, part)
        walked = f"{walked}.{part}"
    if not callable(target):
        raise CheckReferenceError(
            f"check {reference!r} names a {type(target).__name__}, not a function; point it at "
            "a function (task, output) -> bool | int | CheckResult")
    return target


def _is_prefix(missing: str, module_name: str) -> bool:
    """Whether the missing module is ``module_name`` itself or one of its parent packages."""
    return module_name == missing or module_name.startswith(missing + ".")


def _describe(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", "?")
    return f"{module}.{getattr(fn, '__qualname__', type(fn).__name__)}"
