"""The child program of :func:`agentic_loop.judges.sandbox.run.run_python_tests`, in parts.

Why a package whose parts never run here: the sandbox starts a fresh
``python -I -c <program> <role>`` (so a child never imports the
``agentic_loop`` package or anything heavy, and reads no file of it). The
program, :func:`bootstrap_source`, embeds each part's source as a string,
registers this package and the packages above it as empty module objects in
``sys.modules``, then executes the parts in :data:`PARTS` order as modules
under their real dotted names, so they import each other as ordinary
modules (and the host's tests, ruff and mypy see them as such). Loading a
part only imports the standard library and defines names; the role then
starts, and each role confines its own process (:mod:`.confinement`) before
anything untrusted runs.
``argv[1]`` names the role (:data:`ROLES`):

``solution`` (:mod:`.solution`)
    The **untrusted** process. It lowers its limits, installs the seccomp
    filter and an audit hook, runs the solution, sends one ``hello`` line
    and then serves the test process's requests. Values cross back as
    *plain data* or as opaque handles; nothing it sends can carry code.
``tests`` (:mod:`.verdict`)
    The process that **decides**. It never runs solution code: the test
    sources run here against their own standard library and third-party
    modules, and only the solution's own names are fetched from the solution
    process (see below). It writes the verdict on a pipe only the parent reads.
``probe`` (:mod:`.probe`)
    Reports which isolation layers are in force, as JSON on stdout.

Everything the solution process does is advisory: the solution runs in that
process and may rewrite any of it. What the verdict rests on is that the
tests process, which only parses JSON from the solution, decides.

**Names.** A name a test uses resolves to, in order: the test's own (its
``import math`` is this process's ``math``), a builtin, then a name the
solution's *source* binds only by ``import`` (``import math``, ``from math
import isclose``, ``from math import *``), which this process imports itself,
so patching ``math.isclose`` before importing it changes nothing here. Any
other name is the solution's: a module or a library function under its own
name is still imported here; the rest crosses as plain data or a handle.

**Values** cross as plain data: ``None``, bools, numbers, strings, bytes,
lists, tuples, dicts, sets, fractions, decimals, and data this process rebuilds
with its own classes (namedtuples, ``OrderedDict``, ``Counter``,
``defaultdict`` of a builtin, ``deque``, ``datetime`` values, numeric numpy
arrays). A subclass of a plain type arrives as the plain type (an ``int``
whose ``__eq__`` always says True arrives as its ``int`` value). Exceptions
arrive by type (builtin, library or a stand-in named like the solution's),
arguments and plain attributes. A NaN anywhere in a value fails the test that
received it (:class:`.common.NotPlainData`, even if the test catches it): no
comparison can check it. Anything else stays a handle that can be called,
read, indexed, iterated and sized, each answer again plain data or a handle,
but never compared or hashed: ``==``, ``!=``, ``<`` or a set lookup on a
solution object (``f() != 6``, ``f() not in {6}``, ``Stack() == Stack()``)
fails its test; only an object's identity answers ``==`` with itself.
A ``StopIteration`` from anything but ``next()`` arrives as ``RuntimeError``
(as in a generator), so it cannot silently end a test's ``map()``.

**What stays the test author's job.** A check is only as strong as what it
asks: ``assert f() != 6`` passes every other wrong answer and ``assert f()``
any truthy one, so assert the right value (``== 5``). The truth value,
``len``, ``str`` and ``in`` of a solution object, and whatever its methods
return, are the solution's own answers. A name the test uses without
defining or importing it is the solution's: ``from math import isclose as
close`` or ``close = math.isclose`` make ``close`` a solution function, so
import the helpers a check relies on in the test itself. A task whose right
answer is NaN must ask for another value (``None``); one that asks for an
``__eq__`` must check it through plain data (the fields of two objects).

Example:
    >>> source = bootstrap_source()
    >>> compile(source, "<runner>", "exec") is not None, len(source.encode()) < ARG_MAX_BYTES
    (True, True)
"""

from __future__ import annotations

from pathlib import Path

#: The parts, each imported only by the ones after it: the order the program executes them in.
PARTS = ("common", "privileges", "mounts", "confinement", "audit", "wire", "solution",
         "client", "names", "verdict", "probe")
#: ``argv[1]`` -> (part, function) that the program calls once every part is loaded.
ROLES = {"solution": ("solution", "serve_solution"), "tests": ("verdict", "run_tests"),
         "probe": ("probe", "probe")}
#: Linux refuses one argument longer than this (``MAX_ARG_STRLEN``, 32 pages).
ARG_MAX_BYTES = 128 * 1024

_BOOTSTRAP = '''\
import sys
_PACKAGE = {package!r}
_PARTS = {parts}


def _load():
    module_type = type(sys)
    names = _PACKAGE.split(".")
    parent = None
    for depth in range(1, len(names) + 1):  # the packages above the parts hold nothing
        stub = module_type(".".join(names[:depth]))
        stub.__path__ = []
        stub.__package__ = stub.__name__
        sys.modules[stub.__name__] = stub
        if parent is not None:
            setattr(parent, names[depth - 1], stub)
        parent = stub
    for part, source in _PARTS:
        name = _PACKAGE + "." + part
        module = module_type(name)
        module.__package__ = _PACKAGE
        sys.modules[name] = module
        setattr(parent, part, module)
        exec(compile(source, "<" + name + ">", "exec", dont_inherit=True), module.__dict__)


_load()
_part, _function = {roles}[sys.argv[1]]
getattr(sys.modules[_PACKAGE + "." + _part], _function)()
'''


def bootstrap_source() -> str:
    """The whole child program, for ``python -I -c``: a bootstrap with every part embedded.

    A part's code objects are named ``<agentic_loop.judges.sandbox.runner.PART>``
    (a name ``linecache`` never opens), so a traceback inside the sandbox
    reads no file either.
    """
    folder = Path(__file__).parent
    parts = "(\n" + "".join(
        f"    ({part!r}, {(folder / f'{part}.py').read_text(encoding='utf-8')!r}),\n"
        for part in PARTS) + ")"
    return _BOOTSTRAP.format(package=__name__, parts=parts, roles=ROLES)
