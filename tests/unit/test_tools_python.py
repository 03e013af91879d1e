"""The Python tool runs an agent's code in the judges' sandbox: output comes back as text,
failures as error results, and the code cannot reach the host's files (the real sandbox)."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

import agentic_loop
from agentic_loop.errors import ConfigError
from agentic_loop.judges.sandbox import run as sandbox_run
from agentic_loop.judges.sandbox.isolation import Isolation, isolation
from agentic_loop.tools import echo_last_expression, python_tool

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox's layers are Linux's")
REPO = Path(agentic_loop.__file__).resolve().parents[2]


def run(code: str, tool_: BaseTool | None = None) -> ToolMessage:
    tool_ = tool_ or python_tool(timeout_s=3.0)
    out = tool_.invoke({"type": "tool_call", "name": "python", "args": {"code": code}, "id": "c"})
    assert isinstance(out, ToolMessage)
    return out


@pytest.fixture
def full_sandbox() -> None:
    """Isolation tests run only where the sandbox has its own mount namespace."""
    iso = isolation()
    if "mount-namespace" not in iso.layers:
        pytest.skip(f"no mount namespace here ({iso.describe()}); run_python_tests' "
                    "fallback applies")


def test_prints_and_the_last_expression_come_back() -> None:
    assert run("print(53 * 47)").content == "2491"
    assert run("x = 53\nx * 47").content == "2491"
    assert run("sum(range(10))\n").content == "45"
    assert run("print('a')\nprint('b')").content == "a\nb"
    assert run("x = 1").content.startswith("(no output")
    stderr = run("import sys\nprint('out')\nprint('warn', file=sys.stderr)")
    assert stderr.status == "success" and stderr.content == "out\nstderr: warn"


def test_an_exception_is_an_error_result_with_the_output_before_it() -> None:
    result = run("print('start')\n1 / 0")
    assert result.status == "error"
    assert result.content == ("start\nthe code raised: ZeroDivisionError: division by zero "
                              "(at <code> line 2)")
    assert run("def f(:\n  pass").status == "error"
    assert "SystemExit" in run("raise SystemExit(3)").content


def test_an_infinite_loop_times_out() -> None:
    started = time.monotonic()
    result = run("while True:\n    pass", python_tool(timeout_s=0.5))
    assert time.monotonic() - started < 5.0
    assert result.status == "error" and "timed out after 0.5 s" in result.content


def test_nine_megabytes_of_output_come_back_short() -> None:
    result = run("print('x' * 9 * 1024 * 1024)")
    assert result.status == "success"
    assert result.content.startswith("[only the last 2000 characters of the output are shown]")
    assert len(result.content) < 2100


def test_a_memory_hog_is_stopped() -> None:
    result = run("x = bytearray(2 * 1024 ** 3)", python_tool(timeout_s=3.0, memory_mb=128))
    assert result.status == "error" and "memory" in result.content.lower()


def test_the_code_cannot_read_or_write_host_files(tmp_path: Path, full_sandbox: None) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the-verdict-key")
    written = [tmp_path / f"pwned-{uuid.uuid4().hex}", REPO / f"pwned-{uuid.uuid4().hex}",
               Path.home() / f"pwned-{uuid.uuid4().hex}"]
    code = "\n".join([
        "import os",
        "for path in " + repr([str(secret), str(REPO / "pyproject.toml")]) + ":",
        "    try:",
        "        print('READ', open(path).read()[:40])",
        "    except OSError as err:",
        "        print('REFUSED', type(err).__name__)",
        "for path in " + repr([str(p) for p in written]) + ":",
        "    try:",
        "        open(path, 'w').write('x')",
        "        print('WROTE', path)",
        "    except OSError as err:",
        "        print('REFUSED', type(err).__name__)",
        "print('PROCS', sorted(p for p in os.listdir('/proc') if p.isdigit()))",
    ])
    result = run(code)
    assert "the-verdict-key" not in result.content and "READ" not in result.content
    assert result.content.count("REFUSED") == 5, result.content
    assert not any(path.exists() for path in written)
    procs = next(line for line in result.content.splitlines() if line.startswith("PROCS"))
    assert len(eval(procs.removeprefix("PROCS "))) <= 3  # noqa: S307 - its own PID namespace


def test_the_code_sees_neither_the_hosts_environment_nor_the_archive_code(
        monkeypatch: pytest.MonkeyPatch, full_sandbox: None) -> None:
    monkeypatch.setenv("AGENTIC_LOOP_TEST_SECRET", "s3cret-token")
    result = run("import os, sys\nprint(sorted(os.environ.items()))\n"
                 "try:\n    import agentic_loop.memory\n    print('IMPORTED')\n"
                 "except ImportError as err:\n    print('NO PACKAGE')")
    assert "s3cret-token" not in result.content and "AGENTIC_LOOP_TEST_SECRET" not in result.content
    assert "NO PACKAGE" in result.content, result.content


def test_files_written_in_the_sandbox_do_not_outlive_the_call(full_sandbox: None) -> None:
    # the call's scratch folder is its working directory and its TMPDIR (the host's /tmp
    # may be mounted read-only inside, when the interpreter lives under it)
    write = ("import os, tempfile\nother = os.path.join(tempfile.gettempdir(), 'note2')\n"
             "open('note', 'w').write('hi')\nopen(other, 'w').write('ho')\n"
             "print(open('note').read() + open(other).read())")
    assert run(write).content == "hiho"
    assert run("import os, tempfile\n(os.path.exists('note'), "
               "os.path.exists(os.path.join(tempfile.gettempdir(), 'note2')))"
               ).content == "(False, False)"


def test_no_network(full_sandbox: None) -> None:
    result = run("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)")
    assert result.status == "error"


def test_strict_refuses_where_a_layer_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    weak = Isolation(mode="fallback", layers=("rlimits",), missing=("seccomp",), note="test")
    monkeypatch.setattr(sandbox_run, "isolation", lambda: weak)
    result = run("print(1)", python_tool(strict=True))
    assert result.status == "error" and "strict=True" in result.content


@pytest.mark.parametrize("bad", [{"timeout_s": 0}, {"timeout_s": 601}, {"memory_mb": 32},
                                 {"fsize_mb": 0}, {"memory_mb": True}])
def test_bad_limits_are_refused_when_the_tool_is_made(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        python_tool(**bad)


def test_empty_code_is_an_error_result() -> None:
    assert run("   ").status == "error"


def test_echo_last_expression_keeps_statements_and_line_numbers() -> None:
    assert echo_last_expression("x = 1") == "x = 1"
    assert echo_last_expression("if True:\n    3") == "if True:\n    3"
    assert echo_last_expression("not python (") == "not python ("
    echoed = echo_last_expression("a = 2\nb = 3\n(a *\n b)")
    assert echoed.splitlines()[:2] == ["a = 2", "b = 3"]
    assert run("a = 2\nb = 3\n(a *\n b)").content == "6"
    assert run("print(7)").content == "7"  # print returns None: shown once
