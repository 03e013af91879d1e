"""Tests resolve their own names and check plain data (issue #29, point 2).

Each attack is a *wrong* solution that would pass its test if the tests
process took the solution's word: a library function it patched, an object
with its own comparisons, a NaN. Every attack must fail; the legit solutions
beside them (classes, closures, generators, exceptions, library values) must
still pass, so a fix that refuses everything would fail here too.
"""

from __future__ import annotations

import importlib.util
import math

import pytest

from agentic_loop.judges.sandbox.run import SandboxResult, run_python_tests
from agentic_loop.judges.sandbox.runner import client, names, solution, wire
from agentic_loop.judges.sandbox.runner.common import NotPlainData

HAS_NUMPY = importlib.util.find_spec("numpy") is not None


def run(code: str, tests: str | list[str]) -> SandboxResult:
    return run_python_tests(code, tests, timeout_s=5.0)


def errors(result: SandboxResult) -> list[str | None]:
    return [c.error for c in result.cases]


# ------------------------------------------------- patched libraries and builtins

PATCHES = {
    "math.isclose": ("import math\nmath.isclose = lambda *a, **k: True\n"
                     "def area(r):\n    return 3 * r * r\n",
                     "assert math.isclose(area(1), 3.14159, rel_tol=1e-4)"),
    "re.search": ("import re\nre.search = lambda *a, **k: True\n"
                  "def slug(s):\n    return s\n",
                  "assert re.search(r'^[a-z-]+$', slug('Hello World'))"),
    "operator.eq": ("import operator\noperator.eq = lambda a, b: True\n"
                    "def add(a, b):\n    return a - b\n",
                    "assert operator.eq(add(2, 3), 5)"),
    "from-import after the patch": ("import math\nmath.isclose = lambda *a, **k: True\n"
                                    "from math import isclose\n"
                                    "def area(r):\n    return 3 * r * r\n",
                                    "assert isclose(area(1), 3.14159, rel_tol=1e-4)"),
    "star import after the patch": ("import math\nmath.isclose = lambda *a, **k: True\n"
                                    "from math import *\n"
                                    "def area(r):\n    return 3 * r * r\n",
                                    "assert isclose(area(1), 3.14159, rel_tol=1e-4)"),
    "module bound at run time": ("m = __import__('math')\nm.isclose = lambda *a, **k: True\n"
                                 "def area(r):\n    return 3 * r * r\n",
                                 "assert m.isclose(area(1), 3.14159, rel_tol=1e-4)"),
    "module under an alias": ("import math as m\nm.isclose = lambda *a, **k: True\n"
                              "def area(r):\n    return 3 * r * r\n",
                              "assert m.isclose(area(1), 3.14159, rel_tol=1e-4)"),
    "builtins.abs": ("import builtins\nbuiltins.abs = lambda x: 3\n"
                     "def distance(a, b):\n    return a + b\n",
                     ["assert abs(distance(1, 4)) == 3",
                      "assert builtins.abs(distance(1, 4)) == 3"]),
    "builtins.len inside the call": ("import builtins\n"
                                     "def items():\n    builtins.len = lambda x: 3\n"
                                     "    return [1]\n",
                                     ["assert len(items()) == 3",
                                      "assert builtins.len(items()) == 3"]),
    "builtins.len at import": ("import builtins\nbuiltins.len = lambda x: 3\n"
                               "def items():\n    return [1]\n",
                               "assert len(items()) == 3"),
}


@pytest.mark.parametrize("attack", sorted(PATCHES))
def test_a_patched_library_does_not_reach_the_tests(attack: str) -> None:
    code, tests = PATCHES[attack]
    result = run(code, tests)
    assert result.n_passed == 0, (attack, errors(result))


def test_the_patched_names_work_for_a_right_solution() -> None:
    """The same tests, without the patch, pass: the failures above are the patch's."""
    code = ("import math, re, operator, builtins\nfrom math import isclose\n"
            "def area(r):\n    return math.pi * r * r\n"
            "def slug(s):\n    return s.lower().replace(' ', '-')\n"
            "def add(a, b):\n    return a + b\n")
    tests = ["assert math.isclose(area(1), 3.14159, rel_tol=1e-4)",
             "assert isclose(area(1), 3.14159, rel_tol=1e-4)",
             "assert re.search(r'^[a-z-]+$', slug('Hello World'))",
             "assert operator.eq(add(2, 3), 5) and builtins.abs(-add(1, 1)) == 2"]
    result = run(code, tests)
    assert result.passed, errors(result)


def test_forged_origin_hints_cannot_choose_the_tests_code() -> None:
    """The solution's process rewrites its own hints; the tests only import a library
    object under its own name, so `solve` cannot become unittest.mock's always-equal `_ANY`."""
    forge = f"import sys\nsys.modules[{solution.__name__!r}]._origin = lambda v: "
    code = (forge + "{'lib': ['unittest.mock', '_ANY']}\n"
            "def solve():\n    return 0\n"
            "def label():\n    return 'no'\n")
    result = run(code, ["assert solve() == 42", "assert label() == 'yes'"])
    assert result.n_passed == 0, errors(result)
    as_module = forge + "{'mod': 'unittest.mock'}\n" + (
        "def solve():\n    return 0\n")
    assert run(as_module, "assert solve() == 42").n_passed == 0


# ---------------------------------------------------------- values that are not data

LIAR = ("    def __eq__(self, o):\n        return True\n"
        "    def __ne__(self, o):\n        return False\n"
        "    def __hash__(self):\n        return 0\n")
VALUES = {
    "always-equal object": f"class A:\n{LIAR}def f():\n    return A()\n",
    "NaN": "def f():\n    return float('nan')\n",
    "NaN in a list": "def f():\n    return [1, float('nan')]\n",
    "NaN in a dict": "def f():\n    return {'a': {'b': float('nan')}}\n",
    "NaN as a dict key": "def f():\n    return {float('nan'): 1}\n",
    "complex NaN": "def f():\n    return complex(float('nan'), 0)\n",
    "Decimal NaN": "from decimal import Decimal\ndef f():\n    return Decimal('NaN')\n",
    "a returned function": "def f():\n    return f\n",
    "a returned class": "def f():\n    class C:\n        pass\n    return C\n",
}
#: Each is a check a wrong answer must not pass; the right answer is 6 (or [6] / {'a': 6}).
CHECKS = ["assert f() == 6", "assert f() != 7", "assert not (f() != 6)", "assert f() == [6]",
          "assert f() == {'a': {'b': 6}}", "assert f() not in {7, 8}", "assert f() not in (7,)",
          "try:\n    assert f() != 7\nexcept BaseException:\n    pass"]


#: A subclass of a plain type arrives as that type: its own methods stay behind.
SUBCLASSES = {
    "int": ("I(int)", "I(0)", "int"), "float": ("F(float)", "F(0.5)", "float"),
    "str": ("S(str)", "S('x')", "str"), "list": ("L(list)", "L([0])", "list"),
    "tuple": ("T(tuple)", "T((0,))", "tuple"), "dict": ("D(dict)", "D({'a': 0})", "dict"),
}


@pytest.mark.parametrize("kind", sorted(SUBCLASSES))
def test_a_subclass_with_its_own_eq_arrives_as_the_plain_type(kind: str) -> None:
    cls, value, plain = SUBCLASSES[kind]
    code = f"class {cls}:\n{LIAR}def f():\n    return {value}\n"
    result = run(code, ["assert f() == 6", "assert not (f() != 6)", f"assert f() == {value[2:-1]}",
                        f"assert type(f()) is {plain}"])
    assert [c.passed for c in result.cases] == [False, False, True, True], errors(result)


@pytest.mark.parametrize("value", sorted(VALUES))
def test_a_value_that_is_not_plain_data_fails_its_test(value: str) -> None:
    result = run(VALUES[value], CHECKS)
    passed = [CHECKS[c.index] for c in result.cases if c.passed]
    assert passed == [], (value, errors(result))
    assert result.exit_code == 0  # the solution kept answering: only the tests that got it failed


def test_a_refused_value_fails_only_the_test_that_received_it() -> None:
    code = "def f(x):\n    return float('nan') if x < 0 else x * 2\n"
    caught = "try:\n    assert f(-1) != 5\nexcept BaseException:\n    pass"
    result = run(code, ["assert f(1) == 2", caught, "assert f(3) == 6", "assert f(-1) != 5"])
    assert [c.passed for c in result.cases] == [True, False, True, False]
    assert (result.cases[1].error or "").startswith("NotPlainData: NaN in the solution's value")
    assert "(the test caught it)" in (result.cases[1].error or "")
    assert result.reason is not None and "NotPlainData: NaN" in result.reason


def test_stop_iteration_from_a_call_does_not_end_the_tests_iteration() -> None:
    """Without the conversion, `map` would end early and `all()` of nothing is True."""
    code = ("def valid(x):\n    raise StopIteration\n"
            "def numbers():\n    yield 1\n    yield 2\n")
    result = run(code, ["assert all(map(valid, ['a', 'b']))",
                        "assert list(zip(map(valid, [1]), [1])) == []",
                        "assert list(numbers()) == [1, 2]"])  # inside iteration it still ends it
    assert [c.passed for c in result.cases] == [False, False, True], errors(result)
    assert "RuntimeError: the solution raised StopIteration outside iteration" in (
        result.cases[0].error or "")


def test_solution_objects_are_never_compared() -> None:
    code = ("class Stack:\n"
            "    def __init__(self):\n        self.items = []\n"
            "    def push(self, v):\n        self.items.append(v)\n        return self\n"
            "    def __eq__(self, other):\n        return True\n"
            "    __hash__ = object.__hash__\n")
    tests = ["assert Stack() == Stack()", "assert not (Stack() != Stack().push(1))",
             "assert Stack() < Stack()",
             "s = Stack()\nassert s.push(1) is s and s.items == [1]",  # identity and data: fine
             "assert Stack() in [Stack()]",
             "s = Stack()\nassert s == s and not (s != s) and s in [s]"]  # identity, no __eq__
    result = run(code, tests)
    assert [c.passed for c in result.cases] == [False, False, False, True, False, True], \
        errors(result)
    assert "a solution object (Stack) was compared with ==" in (result.cases[0].error or "")


def test_an_enum_member_equals_itself_only() -> None:
    code = ("import enum\nclass Color(enum.Enum):\n    RED = 1\n    GREEN = 2\n"
            "    def __eq__(self, other):\n        return True\n"
            "    __hash__ = enum.Enum.__hash__\n"
            "def light(go):\n    return Color.GREEN if go else Color.RED\n")
    result = run(code, ["assert light(False) == Color.RED and light(False) is Color.RED",
                        "assert light(True) != Color.RED", "assert light(True) == Color.RED"])
    assert [c.passed for c in result.cases] == [True, False, False], errors(result)


def test_what_stays_the_test_authors_job() -> None:
    """Documented limits, pinned: a weak check passes a plain wrong answer, and a name the
    solution itself binds is its own unless the test imports the library's."""
    code = ("import math\n"
            "isclose = lambda *a, **k: True\n"  # the solution's own name, not an import
            "def area(r):\n    return 3 * r * r\n")
    result = run(code, ["assert area(1) != 6",  # 3 is wrong, and `!= 6` cannot tell
                        "assert isclose(area(1), 3.14159, rel_tol=1e-4)",  # asks the solution
                        "from math import isclose\nassert isclose(area(1), 3.14159, rel_tol=1e-4)"])
    assert [c.passed for c in result.cases] == [True, True, False], errors(result)


# ------------------------------------------------------- legit solutions still pass


def test_classes_closures_generators_and_exceptions_still_work() -> None:
    code = (
        "import json\n"
        "class Node:\n"
        "    def __init__(self, val, next=None):\n        self.val, self.next = val, next\n"
        "def from_list(values):\n"
        "    head = None\n"
        "    for v in reversed(values):\n        head = Node(v, head)\n"
        "    return head\n"
        "def make_counter():\n"
        "    n = 0\n"
        "    def step():\n        nonlocal n\n        n += 1\n        return n\n"
        "    return step\n"
        "def fib():\n    a, b = 0, 1\n    while True:\n        yield a\n        a, b = b, a + b\n"
        "class Vector:\n"
        "    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
        "    def __add__(self, o):\n        return Vector(self.x + o.x, self.y + o.y)\n"
        "def parse(text):\n    return json.loads(text)\n"
        "def check(n):\n"
        "    if n < 0:\n        raise ValueError(f'negative: {n}')\n    return n\n"
        "class Invalid(ValueError):\n"
        "    def __init__(self, field):\n        super().__init__(f'bad {field}')\n"
        "        self.field = field\n"
        "def validate(record):\n    return [Invalid(k) for k, v in record.items() if v is None]\n"
    )
    tests = [
        "head, out = from_list([1, 2, 3]), []\n"
        "while head is not None:\n    out.append(head.val)\n    head = head.next\n"
        "assert out == [1, 2, 3]",
        "c = make_counter()\nc()\nassert c() == 2 and callable(c)",
        "g = fib()\nassert [next(g) for _ in range(6)] == [0, 1, 1, 2, 3, 5]",
        "v = Vector(1, 2) + Vector(3, 4)\nassert (v.x, v.y) == (4, 6)",
        "assert isinstance(Vector(0, 0), Vector) and isinstance(from_list([1]), Node)",
        "try:\n    check(-1)\nexcept ValueError as err:\n    assert str(err) == 'negative: -1'\n"
        "else:\n    raise AssertionError('no error')",
        "import json\ntry:\n    parse('{')\nexcept json.JSONDecodeError as err:\n"
        "    assert err.pos == 1\nelse:\n    raise AssertionError('no error')",
        "assert parse('[1, 2.5, null]') == [1, 2.5, None] and check(3) == 3",
        "errs = validate({'a': 1, 'b': None})\n"  # exceptions returned as values are data too
        "assert len(errs) == 1 and isinstance(errs[0], Invalid)\n"
        "assert isinstance(errs[0], ValueError)\n"
        "assert str(errs[0]) == 'bad b' and errs[0].field == 'b'",
    ]
    result = run(code, tests)
    assert result.passed, errors(result)


def test_library_values_arrive_as_the_tests_own() -> None:
    code = (
        "import datetime, enum\n"
        "from collections import Counter, OrderedDict, defaultdict, deque, namedtuple\n"
        "from fractions import Fraction\nfrom decimal import Decimal\n"
        "Point = namedtuple('Point', 'x y')\n"
        "class Color(enum.IntEnum):\n    RED = 1\n"
        "def values():\n"
        "    groups = defaultdict(list)\n    groups['a'].append(1)\n"
        "    return {'point': Point(1, 2), 'count': Counter('aab'), 'groups': groups,\n"
        "            'ordered': OrderedDict([('b', 1), ('a', 2)]), 'queue': deque([1, 2], 3),\n"
        "            'day': datetime.date(2024, 2, 29), 'gap': datetime.timedelta(hours=1),\n"
        "            'at': datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc),\n"
        "            'color': Color.RED, 'third': Fraction(1, 3), 'price': Decimal('1.10'),\n"
        "            'inf': float('inf'), 'span': range(1, 9, 2)}\n"
    )
    test = (
        "import datetime\nfrom collections import Counter, OrderedDict, defaultdict, deque\n"
        "from fractions import Fraction\nfrom decimal import Decimal\n"
        "v = values()\n"
        "assert v['point'] == (1, 2) and v['point'].y == 2\n"
        "assert type(v['point']).__name__ == 'Point'\n"
        "assert v['count'] == Counter(a=2, b=1) and type(v['count']) is Counter\n"
        "assert v['groups']['missing'] == [] and v['groups']['a'] == [1]\n"
        "assert list(v['ordered']) == ['b', 'a'] and type(v['ordered']) is OrderedDict\n"
        "assert v['queue'] == deque([1, 2]) and v['queue'].maxlen == 3\n"
        "assert v['day'] == datetime.date(2024, 2, 29) and v['gap'].seconds == 3600\n"
        "assert v['at'] == datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone.utc)\n"
        "assert v['color'] == 1 and type(v['color']) is int\n"
        "assert v['third'] == Fraction(1, 3) and v['price'] == Decimal('1.10')\n"
        "assert v['inf'] == float('inf') and v['span'] == range(1, 9, 2)"
    )
    result = run(code, test)
    assert result.passed, errors(result)


def test_names_the_solution_imported_resolve_in_the_tests() -> None:
    """A test may lean on the solution's imports: modules and library functions are its own."""
    code = ("import math\nimport os.path\nfrom collections import Counter\n"
            "from math import sqrt as root\n"
            "def hyp(a, b):\n    return math.sqrt(a * a + b * b)\n")
    tests = ["assert math.isclose(hyp(3, 4), 5.0)",
             "assert os.path.join('a', 'b') == 'a/b'",
             "assert Counter('aab') == {'a': 2, 'b': 1}",
             "assert root(16) == 4.0"]  # renamed: the solution's name, called in its process
    result = run(code, tests)
    assert result.passed, errors(result)


@pytest.mark.skipif(not HAS_NUMPY, reason="numpy is not installed")
def test_numpy_arrays_cross_as_data_and_nan_in_them_is_refused() -> None:
    code = ("import numpy as np\n"
            "def grid():\n    return np.arange(6, dtype=np.int32).reshape(2, 3)\n"
            "def total():\n    return np.int64(15)\n"
            "def broken():\n    return np.array([1.0, np.nan])\n")
    tests = ["assert np.array_equal(grid(), np.arange(6).reshape(2, 3))",
             "g = grid()\nassert g.dtype == np.int32 and g.shape == (2, 3)",
             "assert total() == 15 and type(total()) is int",
             "assert not np.array_equal(broken(), [1.0, 2.0])"]
    # numpy imports in both sandboxed processes: a budget for a loaded machine, not a 5 s one
    result = run_python_tests(code, tests, timeout_s=30.0)
    assert [c.passed for c in result.cases] == [True, True, True, False], errors(result)
    assert (result.cases[3].error or "").startswith("NotPlainData: NaN")


# --------------------------------------------------------------- the runner's pieces


@pytest.mark.parametrize(
    ("source", "imported_only"),
    [
        ("import math", {"math"}),
        ("from math import isclose\nisclose = isclose", set()),  # rebound: the solution's
        ("from math import isclose\n[isclose for isclose in []]", {"isclose"}),  # local to it
        ("from math import isclose\n[(isclose := 1) for _ in []]", set()),  # walrus leaks out
        ("from math import isclose\ntry:\n    pass\nexcept ValueError as isclose:\n    pass",
         set()),
        ("from math import isclose\ndef f():\n    global isclose\n    isclose = 1", set()),
        ("from math import isclose\ndef f():\n    isclose = 1", {"isclose"}),  # a local
        ("from math import isclose\nclass C:\n    isclose = 1", {"isclose"}),  # class scope
        ("from math import isclose\nfor isclose in []:\n    pass", set()),
        ("from math import isclose\nmatch 1:\n    case isclose:\n        pass", set()),
        ("from . import isclose", set()),  # relative: never imported by the tests
        ("from math import isclose\nisclose: object", {"isclose"}),  # annotation only
        ("from math import isclose\ndel isclose", {"isclose"}),  # gone, not rebound
        ("import numpy as np\ntry:\n    pass\nexcept ImportError:\n    np = None", set()),
    ],
)
def test_the_source_tells_imports_from_the_solutions_names(source: str,
                                                          imported_only: set[str]) -> None:
    scope = names.module_scope(source)
    assert scope is not None
    imports, others, _stars = scope
    assert {n for n in imports if n not in others} == imported_only


def test_values_round_trip_and_subclasses_lose_their_methods() -> None:
    class Liar(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    value = wire.decode(wire.encode([Liar(3), {"k": (1.5, b"x")}, {2, 3}], repr), repr)
    assert value == [3, {"k": (1.5, b"x")}, {2, 3}]
    assert type(value[0]) is int and value[0] != 4
    with pytest.raises(NotPlainData, match="NaN"):
        wire.decode(wire.encode({"a": [math.nan]}, repr), repr, strict=True)
    assert math.isnan(wire.decode(math.nan, repr))  # the solution's side may receive NaN
    for malformed in ({"q": [1, 0]}, {"nt": ["P", ["1x"], [1]]}, {"dd": ["print", []]},
                      {"dt": ["date", [2024, 13, 1], None]}, {"zz": 1}, {"l": [1], "t": []}):
        with pytest.raises((ValueError, TypeError, ArithmeticError)):
            wire.decode(malformed, repr, strict=True)


def test_imports_are_only_what_the_tests_process_finds_itself() -> None:
    assert client.import_here("math", "isclose") is math.isclose
    for module, qualname in [("__main__", ""), ("os; import sys", ""), ("math", "__import__('os')"),
                             ("no_such_module_here", ""), ("math", "no_such_name")]:
        assert client.import_here(module, qualname) is client.MISSING
    assert client.own_name(["unittest.mock", "_ANY"], "solve") is None
    assert client.own_name(["math", "isclose"], "isclose") == ("math", "isclose")
