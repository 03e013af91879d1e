"""The sandbox: limits hold, every escape attempt is a failure with a reason, never a hang."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentic_loop.judges import sandbox
from agentic_loop.judges.sandbox import run_python_tests

FAST = {"timeout_s": 1.0, "memory_mb": 256}


@pytest.fixture(params=["namespaces", "hooks-only"])
def isolation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test both with the system's namespaces and with the in-process hooks alone."""
    if request.param == "hooks-only":
        monkeypatch.setattr(sandbox, "_namespace_prefix", lambda: ())
    elif not sandbox._namespace_prefix():
        pytest.skip("no network namespace on this system; the hooks-only run covers it")
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
    assert result.reason == "the solution raised: SyntaxError: invalid syntax (at <solution> line 1)"
    exiting = run_python_tests("import sys\nsys.exit(0)", "assert True")
    assert not exiting.passed and "SystemExit" in (exiting.reason or "")


def test_stdout_is_captured_and_tests_share_the_namespace() -> None:
    result = run_python_tests("print('hello from the child')\nstate = []",
                              ["state.append(1)", "assert state == [1]"])
    assert result.passed
    assert "hello from the child" in result.stdout


def test_infinite_loop_is_killed_on_time() -> None:
    started = time.monotonic()
    result = run_python_tests("while True:\n    pass", "assert True", **FAST)
    assert time.monotonic() - started < 4
    assert result.timed_out and not result.passed
    assert result.reason == "timed out after 1 s (process group killed)"


def test_fork_bomb_is_refused(isolation: str) -> None:
    bomb = "import os\nwhile True:\n    os.fork()\n"
    result = run_python_tests(bomb, "assert True", **FAST)
    assert not result.passed
    assert result.reason is not None and "os.fork is not allowed" in result.reason
    # a bomb that swallows the refusal just spins until the wall clock kills it
    stubborn = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
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
        assert result.reason is not None and result.reason.startswith("the solution raised: blocked")
        assert event in result.reason


def test_writes_outside_the_sandbox_are_blocked(tmp_path: Path) -> None:
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
        assert result.reason is not None and "outside the sandbox is not allowed" in result.reason
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]


def test_writes_inside_the_sandbox_are_allowed() -> None:
    code = (
        "import os, tempfile, pathlib\n"
        "pathlib.Path('data').mkdir()\n"
        "pathlib.Path('data/a.txt').write_text('hi')\n"
        "os.rename('data/a.txt', 'data/b.txt')\n"
        "with tempfile.NamedTemporaryFile('w', delete=False) as fh:\n"
        "    fh.write('tmp')\n"
    )
    result = run_python_tests(code, "assert open('data/b.txt').read() == 'hi'", **FAST)
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


def test_network_is_unreachable(isolation: str, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\ns.send(b'hi')"
    result = run_python_tests(code, "assert True", **FAST)
    assert not result.passed
    assert result.reason is not None and "network access is not allowed" in result.reason
    with pytest.raises(TimeoutError):
        listener.accept()  # nothing ever connected
    dns = run_python_tests("import socket\nsocket.getaddrinfo('example.com', 80)", "assert True", **FAST)
    assert not dns.passed and "network access is not allowed" in (dns.reason or "")


def test_isolation_is_reported(isolation: str) -> None:
    result = run_python_tests("x = 1", "assert x == 1", **FAST)
    assert result.passed
    expected = "hooks only" if isolation == "hooks-only" else "namespaces (net, pid)"
    assert expected in result.isolation


def test_hard_exit_without_results_is_a_failure() -> None:
    result = run_python_tests("import os\nos._exit(0)", "assert True", **FAST)
    assert not result.passed
    assert result.reason == "the process exited with code 0 before reporting results"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"code": 3, "tests": "assert True"}, "code must be a string"),
        ({"code": "x=1", "tests": []}, "tests must be a non-empty"),
        ({"code": "x=1", "tests": ["assert 1", " "]}, "tests must be a non-empty"),
        ({"code": "x=1", "tests": "assert 1", "timeout_s": 0}, "timeout_s must be"),
        ({"code": "x=1", "tests": "assert 1", "memory_mb": 10}, "memory_mb must be"),
    ],
)
def test_bad_arguments_raise(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        run_python_tests(**kwargs)  # type: ignore[arg-type]
