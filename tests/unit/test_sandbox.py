"""The sandbox: limits hold, tests decide the verdict, every escape is a failure with a reason."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentic_loop.errors import ConfigError, JudgeError
from agentic_loop.judges.sandbox import run as sandbox
from agentic_loop.judges.sandbox.isolation import fallback_isolation, isolation
from agentic_loop.judges.sandbox.run import (
    ALL_LAYERS,
    SandboxUnavailableError,
    run_python_tests,
    sandbox_layers,
)
from agentic_loop.judges.sandbox.seccomp import seccomp_filter

FAST = {"timeout_s": 2.0, "memory_mb": 256}


@pytest.fixture(params=["os-isolation", "fallback"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the machine's isolation and with the runner's own confinement alone."""
    if request.param == "fallback":
        monkeypatch.setattr(sandbox, "isolation", lambda: fallback_isolation("forced by a test"))
    elif isolation().mode != "bwrap":
        pytest.skip(f"bwrap cannot run here ({isolation().note}); the fallback run covers it")
    return request.param


def test_passing_and_failing_tests_are_counted() -> None:
    code = "def add(a, b):\n    return a + b\n"
    result = run_python_tests(code, ["assert add(1, 2) == 3", "assert add(2, 2) == 5",
                                     "assert add(0, 0) == 0"])
    assert (result.passed, result.n_passed, result.n_tests) == (False, 2, 3)
    assert result.pass_rate == pytest.approx(2 / 3)
    assert [c.passed for c in result.cases] == [True, False, True]
    assert result.reason is not None and result.reason.startswith("test 2 failed: AssertionError")
    assert "<test 1> line 1" in result.reason
    ok = run_python_tests(code, "assert add(1, 1) == 2")
    assert ok.passed and ok.reason is None and ok.n_tests == 1


def test_solution_errors_fail_every_test() -> None:
    result = run_python_tests("def f(:\n  pass", ["assert True", "assert True"])
    assert not result.passed and result.n_passed == 0
    assert result.reason == (
        "the solution raised: SyntaxError: invalid syntax (at <solution> line 1)")
    exiting = run_python_tests("import sys\nsys.exit(0)", "assert True")
    assert not exiting.passed and "SystemExit" in (exiting.reason or "")


def test_stdout_is_captured_and_module_data_is_copied_on_first_read() -> None:
    result = run_python_tests("print('hello from the child')\nstate = []",
                              ["state.append(1)", "assert state == [1]"])
    assert result.passed, result.reason
    assert "hello from the child" in result.stdout


def test_objects_classes_exceptions_and_generators_cross_the_boundary() -> None:
    code = (
        "class Empty(Exception):\n    pass\n"
        "class Stack:\n"
        "    def __init__(self):\n        self.items = []\n"
        "    def push(self, v):\n        self.items.append(v)\n"
        "    def pop(self):\n"
        "        if not self.items:\n            raise Empty('empty stack')\n"
        "        return self.items.pop()\n"
        "    def __len__(self):\n        return len(self.items)\n"
        "def squares(n):\n    yield from (i * i for i in range(n))\n"
        "def parse(s):\n    return int(s)\n"
    )
    tests = [
        "s = Stack()\ns.push(3)\ns.push(4)\nassert len(s) == 2 and s.pop() == 4",
        "try:\n    Stack().pop()\nexcept Empty as err:\n    assert str(err) == 'empty stack'\n"
        "else:\n    raise AssertionError('no error')",
        "assert list(squares(4)) == [0, 1, 4, 9]",
        "assert isinstance(Stack(), Stack) and s.items == [3]",
        "assert all(parse(str(i)) == i for i in range(5))",
        "try:\n    parse('x')\nexcept ValueError:\n    pass\nelse:\n    raise AssertionError",
        "assert parse('7') + 1 == 8 and parse('2') in {1: 0, 2: 0}",
    ]
    result = run_python_tests(code, tests)
    assert result.passed, (result.reason, [c.error for c in result.cases])


def test_literals_arrive_with_their_types() -> None:
    code = (
        "from fractions import Fraction\nfrom decimal import Decimal\n"
        "def values():\n"
        "    return [(1, 2), {'a': {1, 2}}, b'x', 1.5, None, True, 2j, frozenset([3]),\n"
        "            Fraction(1, 3), Decimal('1.10'), float('inf'), 10 ** 40]\n"
    )
    test = (
        "from fractions import Fraction\nfrom decimal import Decimal\n"
        "v = values()\n"
        "assert v == [(1, 2), {'a': {1, 2}}, b'x', 1.5, None, True, 2j, frozenset([3]),\n"
        "             Fraction(1, 3), Decimal('1.10'), float('inf'), 10 ** 40]\n"
        "assert type(v[0]) is tuple and type(v[5]) is bool and v[1] != [(1, 2)]"
    )
    result = run_python_tests(code, test)
    assert result.passed, result.reason


def test_an_object_that_equals_everything_does_not_pass() -> None:
    code = ("class Anything:\n    def __eq__(self, other):\n        return True\n"
            "    __hash__ = None\n"
            "def f(x):\n    return Anything()\n")
    result = run_python_tests(code, ["assert f(2) == 4", "assert 4 == f(2)", "assert f(1) != 1"])
    assert [c.passed for c in result.cases] == [False, False, False]  # `!=` is refused too
    assert all("NotPlainData: a solution object (Anything) was compared" in (c.error or "")
               for c in result.cases), [c.error for c in result.cases]


def test_the_solution_cannot_rebind_the_tests_builtins() -> None:
    code = ("def len(x):\n    return 3\n"
            "def all(x):\n    return True\n"
            "AssertionError = None\n"
            "def f():\n    return [1]\n")
    result = run_python_tests(code, ["assert len(f()) == 3", "assert all([False])"])
    assert result.n_passed == 0
    assert [c.error for c in result.cases][0].startswith("AssertionError")


def test_test_side_callables_do_not_cross() -> None:
    code = "def apply(fn, x):\n    return fn(x)\n"
    result = run_python_tests(code, "assert apply(lambda v: v + 1, 1) == 2")
    assert not result.passed
    assert result.reason is not None and "cannot pass function" in result.reason


def test_a_solution_that_dies_mid_run_fails_the_remaining_tests() -> None:
    code = "import os\ndef f(x):\n    if x == 2:\n        os._exit(0)\n    return x\n"
    result = run_python_tests(code, ["assert f(1) == 1", "assert f(2) == 2", "assert True"])
    assert [c.passed for c in result.cases] == [True, False, False]
    assert result.reason == "the solution's process exited with code 0 before answering the tests"
    swallowing = "try:\n    f(2)\nexcept BaseException:\n    pass"
    result = run_python_tests(code, ["assert f(1) == 1", swallowing])
    assert [c.passed for c in result.cases] == [True, False]


def test_infinite_loop_is_killed_on_time() -> None:
    started = time.monotonic()
    result = run_python_tests("while True:\n    pass", "assert True", timeout_s=1.0)
    assert time.monotonic() - started < 4
    assert result.timed_out and not result.passed
    assert result.reason == "timed out after 1 s (process group killed)"


def test_fork_bomb_is_refused(mode: str) -> None:
    bomb = "import os\nwhile True:\n    os.fork()\n"
    result = run_python_tests(bomb, "assert True", **FAST)
    assert not result.passed
    assert result.reason is not None and "os.fork is not allowed" in result.reason
    # a bomb that swallows the refusal just spins until the wall clock kills it
    stubborn = ("import os\nwhile True:\n    try:\n        os.fork()\n"
                "    except OSError:\n        pass\n")
    started = time.monotonic()
    spun = run_python_tests(stubborn, "assert True", timeout_s=0.5)
    assert spun.timed_out and time.monotonic() - started < 3


def test_subprocesses_and_signals_are_refused() -> None:
    for code, event in [
        ("import subprocess\nsubprocess.run(['true'])", "subprocess.Popen"),
        ("import os\nos.system('true')", "os.system"),
        ("import os, signal\nos.kill(1, signal.SIGTERM)", "os.kill"),
        ("import multiprocessing as mp\nmp.Process(target=print).start()", "os.fork"),
        ("import ctypes\nctypes.CDLL(None).fork()", "ctypes"),
    ]:
        result = run_python_tests(code, "assert True", **FAST)
        assert not result.passed
        assert result.reason is not None
        assert result.reason.startswith("the solution raised: blocked")
        assert event in result.reason


def test_writes_outside_the_sandbox_are_blocked(tmp_path: Path, mode: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "evil.txt"
    attempts = [
        f"open({str(target)!r}, 'w').write('x')",
        f"import os\nos.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)",
        f"import os\nos.remove({str(victim)!r})",
        f"import os\nos.rename({str(victim)!r}, 'stolen.txt')",
        f"import pathlib\npathlib.Path({str(tmp_path)!r}, 'new').mkdir()",
        "import os\nos.symlink('/etc', 'etc')\nopen('etc/evil', 'w')",
        "open('../escaped.txt', 'w')",
        f"import os\nos.chdir({str(tmp_path)!r})",
    ]
    for code in attempts:
        result = run_python_tests(code, "assert True", **FAST)
        assert not result.passed, code
        assert result.reason is not None
        if mode == "fallback":  # only the hook stands between the code and the host
            assert "outside the sandbox is not allowed" in result.reason
        else:  # the hook, or the host path is simply not there (/tmp is the sandbox's own)
            assert any(why in result.reason for why in (
                "outside the sandbox is not allowed", "No such file", "Read-only file system"))
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]


def test_writes_inside_the_sandbox_are_allowed(mode: str) -> None:
    code = (
        "import os, tempfile, pathlib\n"
        "pathlib.Path('data').mkdir()\n"
        "pathlib.Path('data/a.txt').write_text('hi')\n"
        "os.rename('data/a.txt', 'data/b.txt')\n"
        "with tempfile.NamedTemporaryFile('w', delete=False) as fh:\n"
        "    fh.write('tmp')\n"
        "def read():\n    return open('data/b.txt').read()\n"
    )
    result = run_python_tests(code, "assert read() == 'hi'", **FAST)
    assert result.passed, result.reason


def test_memory_hog_is_stopped() -> None:
    started = time.monotonic()
    hog = "chunks = []\nwhile True:\n    chunks.append(bytearray(10 * 1024 * 1024))\n"
    result = run_python_tests(hog, "assert True", timeout_s=5, memory_mb=128)
    assert time.monotonic() - started < 4
    assert not result.passed and not result.timed_out
    assert result.reason is not None and "memory limit of 128 MB exceeded" in result.reason


def test_output_flood_is_capped() -> None:
    result = run_python_tests("while True:\n    print('x' * 10000)", "assert True",
                              timeout_s=5, memory_mb=256, fsize_mb=1)
    assert not result.passed and not result.timed_out
    assert result.reason is not None and "File too large" in result.reason
    assert len(result.stdout) <= 2000


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    yield server
    server.close()


def test_network_is_unreachable(mode: str, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    code = (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
            "s.send(b'hi')")
    result = run_python_tests(code, "assert True", **FAST)
    assert not result.passed
    assert result.reason is not None and "network access is not allowed" in result.reason
    with pytest.raises(TimeoutError):
        listener.accept()  # nothing ever connected
    dns = run_python_tests("import socket\nsocket.getaddrinfo('example.com', 80)", "assert True",
                           **FAST)
    assert not dns.passed and "network access is not allowed" in (dns.reason or "")


def test_layers_are_reported(mode: str) -> None:
    result = run_python_tests("x = 1", "assert x == 1", **FAST)
    assert result.passed, result.reason
    assert set(result.layers) <= set(ALL_LAYERS)
    assert {"rlimits", "process-group-kill", "separate-verdict-process"} <= set(result.layers)
    if mode == "fallback":
        assert result.isolation.startswith("fallback: ")
        assert "pid-namespace" not in result.layers and "missing: " in result.isolation
    else:
        assert result.isolation.startswith("bwrap: ") and result.layers == list(sandbox_layers())
        assert "user-namespace" in result.layers and "mount-namespace" in result.layers
    if seccomp_filter() is not None:
        assert "seccomp" in result.layers


def test_strict_refuses_a_machine_missing_a_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "isolation", lambda: fallback_isolation("forced by a test"))
    with pytest.raises(SandboxUnavailableError, match="lacks the sandbox layers .*pid-namespace"):
        run_python_tests("x = 1", "assert x == 1", strict=True)
    assert issubclass(SandboxUnavailableError, JudgeError)


def test_strict_runs_where_every_layer_is_in_force() -> None:
    if isolation().missing:
        pytest.skip(f"this machine lacks {isolation().missing}")
    assert run_python_tests("x = 1", "assert x == 1", strict=True).passed


def test_hard_exit_without_results_is_a_failure() -> None:
    result = run_python_tests("import os\nos._exit(0)", "assert True", **FAST)
    assert not result.passed
    assert result.reason == "the solution's process exited with code 0 before answering the tests"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"code": 3, "tests": "assert True"}, "code must be a string"),
        ({"code": "x=1", "tests": []}, "tests must be a non-empty"),
        ({"code": "x=1", "tests": ["assert 1", " "]}, "tests must be a non-empty"),
        ({"code": "x=1", "tests": "assert 1", "timeout_s": 0}, "timeout_s must be"),
        ({"code": "x=1", "tests": "assert 1", "memory_mb": 10}, "memory_mb must be"),
        ({"code": "x=1", "tests": "assert 1", "fsize_mb": 0}, "fsize_mb must be"),
        ({"code": "x=1", "tests": "assert 1", "strict": "yes"}, "strict must be"),
    ],
)
def test_bad_arguments_raise(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        run_python_tests(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, (TypeError, ValueError))
    assert not str(info.value).endswith(".")
