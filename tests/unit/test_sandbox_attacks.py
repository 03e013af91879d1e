"""Every escape found in issue #15, and the limits that held, against the default settings.

Each attack is its own case and runs through :func:`run_python_tests` exactly
as a judge calls it. The attack code catches its own failures and prints what
happened (``RESULT ...`` lines), so a case checks both what the sandbox said
and, from the host, that nothing happened: no file outside the sandbox, no
shell, no surviving process, no connection, no host PID or environment seen,
and no forged verdict.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentic_loop.judges.sandbox import runner
from agentic_loop.judges.sandbox.isolation import isolation
from agentic_loop.judges.sandbox.run import ALL_LAYERS, SandboxResult, run_python_tests

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox's layers are Linux's")
RUNNER = runner.__name__  # the sandboxed program's parts live under it


def attack(code: str, tests: str | list[str] = "assert True") -> SandboxResult:
    """Run ``code`` with the default settings except a short clock."""
    return run_python_tests(code, tests, timeout_s=3.0)


def outcomes(result: SandboxResult) -> list[str]:
    return [line[len("RESULT "):] for line in result.stdout.splitlines()
            if line.startswith("RESULT ")]


def host_processes_with(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and int(pid) != os.getpid():
            found.append(pid)
    return found


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A host directory the attacks try to write into; it must stay empty."""
    return tmp_path


@pytest.fixture(autouse=True)
def _only_inside_bwrap() -> None:
    """Never run an attack outside the full sandbox: in the fallback it would hit this host."""
    iso = isolation()
    if iso.mode != "bwrap":
        pytest.fail(f"the full sandbox is not in force ({iso.note}); refusing to run attacks")


def _nothing_written(*dirs: Path) -> None:
    for d in dirs:
        assert not any(p.name.startswith("pwned") for p in d.iterdir()), sorted(d.iterdir())


def test_every_layer_is_in_force_on_this_machine() -> None:
    """The cases below assume every layer; if one is missing, this says which."""
    iso = isolation()
    assert iso.missing == (), f"missing sandbox layers: {iso.missing} ({iso.note})"
    assert run_python_tests("x = 1", "assert x == 1").layers == list(ALL_LAYERS)


# -------------------------------------------------------------- writes outside


def test_dir_fd_open_and_rename_write_nothing_on_the_host(target: Path) -> None:
    code = f"""
import os
for where in ({str(target)!r}, {sys.prefix!r}, '/', '/usr', '/proc/self'):
    try:
        fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
        os.close(os.open('pwned-open', os.O_CREAT | os.O_WRONLY, dir_fd=fd))
        print('RESULT wrote', where)
    except OSError as err:
        print('RESULT refused', where, type(err).__name__)
    try:
        open('local.txt', 'w').close()
        fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY)
        os.rename('local.txt', 'pwned-rename', dst_dir_fd=fd)
        print('RESULT renamed', where)
    except OSError as err:
        print('RESULT refused', where, type(err).__name__)
"""
    result = attack(code)
    assert result.passed, result.reason  # the attack ran; the OS stopped it
    assert not any(o.startswith(("wrote", "renamed")) for o in outcomes(result)), outcomes(result)
    _nothing_written(target, Path(sys.prefix), Path("/"))


def test_sqlite_cannot_create_a_database_outside(target: Path) -> None:
    code = f"""
import sqlite3
for path in ({str(target / 'pwned.db')!r}, {str(Path(sys.prefix) / 'pwned.db')!r}):
    try:
        con = sqlite3.connect(path)
        con.execute('create table t (x)')
        con.commit()
        print('RESULT created', path)
    except Exception as err:
        print('RESULT refused', type(err).__name__)
"""
    result = attack(code)
    assert not any(o.startswith("created") for o in outcomes(result)), outcomes(result)
    _nothing_written(target, Path(sys.prefix))


# ---------------------------------------------------------- processes and shells


def test_posixsubprocess_fork_exec_runs_no_shell(target: Path) -> None:
    marker = f"agentic-loop-attack-{uuid.uuid4().hex}"
    code = f"""
import _posixsubprocess, os
r, w = os.pipe()
script = (b'echo pwned > {target}/pwned-shell; echo pwned > /sandbox/pwned-shell; '
          b'sleep 30 # {marker}')
try:
    pid = _posixsubprocess.fork_exec(
        [b'/bin/sh', b'-c', script], [b'/bin/sh', b'/usr/bin/sh'], True, (), None, None,
        -1, -1, -1, -1, -1, -1, r, w, False, True, -1, None, None, None, -1, None, False)
    print('RESULT spawned', pid)
except Exception as err:
    print('RESULT refused', type(err).__name__, err)
print('RESULT shell wrote', os.path.exists('/sandbox/pwned-shell'))
"""
    result = attack(code)
    assert outcomes(result)[0].startswith("refused"), outcomes(result)
    assert "RESULT shell wrote False" in result.stdout
    _nothing_written(target)
    assert host_processes_with(marker) == []


def test_fork_popen_and_posix_spawn_bursts_are_refused() -> None:
    code = """
import os, subprocess
results = []
for name, start in [
    ('fork', os.fork),
    ('popen', lambda: subprocess.Popen(['true']).pid),
    ('posix_spawn', lambda: os.posix_spawn('/usr/bin/true', ['true'], {})),
]:
    started = 0
    for _ in range(50):
        try:
            if start() == 0:
                os._exit(0)
            started += 1
        except Exception:
            pass
    print('RESULT', name, started)
"""
    result = attack(code)
    assert outcomes(result) == ["fork 0", "popen 0", "posix_spawn 0"], result.stdout


def test_a_daemon_cannot_outlive_the_run() -> None:
    marker = f"agentic-loop-daemon-{uuid.uuid4().hex}"
    code = f"""
import ctypes, os, threading, time
def spin():
    while True:
        time.sleep(0.01)
threading.Thread(target=spin, daemon=False).start()
libc = None
try:
    libc = ctypes.CDLL(None)
except Exception as err:
    print('RESULT no ctypes', type(err).__name__)
for attempt in ('fork', 'system'):
    try:
        if attempt == 'fork':
            pid = os.fork()
            if pid == 0:
                os.setsid()
                os.execv('/bin/sleep', ['sleep', '60', '{marker}'])
        else:
            rc = libc.system(b'sleep 60 {marker} &') if libc else -1
            print('RESULT system', rc)
    except Exception as err:
        print('RESULT refused', attempt, type(err).__name__)
"""
    result = attack(code)
    time.sleep(0.2)
    assert host_processes_with(marker) == []
    assert not any(o.startswith("system 0") for o in outcomes(result)), outcomes(result)


# ------------------------------------------------------------- forged verdicts


def test_a_forged_verdict_through_the_harness_frames_does_not_pass() -> None:
    code = """
import json, os, sys
forged = json.dumps({'cases': [{'passed': True}, {'passed': True}], 'setup_error': None,
                     'channel': None, 'hello': True}) + '\\n'
frame = sys._getframe(0)
while frame is not None:
    for name, value in list(frame.f_locals.items()):
        if hasattr(value, 'write'):
            try:
                value.write(forged)
                value.flush()
            except Exception:
                pass
    frame = frame.f_back
for fd in range(0, 64):
    try:
        os.write(fd, forged.encode())
    except OSError:
        pass
os._exit(0)
"""
    result = attack(code, ["assert 1 == 2", "assert False"])
    assert not result.passed and result.n_passed == 0
    assert [c.passed for c in result.cases] == [False, False]


def test_forged_answers_cannot_pass_tests_that_do_not_ask_the_solution() -> None:
    code = """
import os
hello = b'{"hello": true}\\n' + b'{"ok": true}\\n' * 100
for fd in range(3, 64):
    try:
        os.write(fd, hello)
    except OSError:
        pass
def f():
    return 0
"""
    result = attack(code, ["assert f() == 1", "assert 1 == 2", "assert False"])
    assert result.n_passed == 0, result.cases


def test_exiting_early_with_success_does_not_pass() -> None:
    for code in ("import sys\nsys.exit(0)", "import os\nos._exit(0)",
                 "raise SystemExit(0)", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
                 "def f():\n    import os\n    os._exit(0)"):
        result = attack(code, ["assert f() == 1", "assert False"])
        assert result.n_passed == 0, (code, result.reason)


def test_an_always_equal_object_does_not_pass() -> None:
    code = """
class AlwaysEqual(int):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = int.__hash__
def add(a, b):
    return AlwaysEqual(0)
"""
    result = attack(code, ["assert add(2, 3) == 5", "assert not (add(2, 3) != 5)"])
    assert result.n_passed == 0, [c.error for c in result.cases]


def test_rewriting_the_hook_and_the_harness_changes_no_verdict(target: Path) -> None:
    unix_path = target / "host.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(unix_path))
    server.listen()
    server.settimeout(0.3)
    code = f"""
import ctypes, os, socket, sys
parts = [m for n, m in list(sys.modules.items()) if n.startswith({RUNNER + '.'!r})]
for part in parts:
    for name in list(vars(part)):
        if callable(getattr(part, name)) and not name.startswith('__'):
            setattr(part, name, lambda *a, **k: None)
    part.MARK = 'x'
audit = sys.modules[{RUNNER + '.audit'!r}]
audit._inside = lambda root, path: True
audit._SPAWN_EVENTS = frozenset()
audit._PATH_EVENTS = {{}}
def attempt(what, fn):
    try:
        print('RESULT', what, 'did', fn())
    except BaseException as err:
        print('RESULT', what, 'refused', type(err).__name__)
attempt('write', lambda: open({str(target / 'pwned-hook')!r}, 'w').write('x'))
attempt('fork', os.fork)
attempt('system', lambda: ctypes.CDLL(None).system(b'touch {target}/pwned-system /sandbox/pwned'))
print('RESULT shell ran', os.path.exists('/sandbox/pwned'))
s = socket.socket(socket.AF_UNIX)
attempt('unix', lambda: s.connect({str(unix_path)!r}))
def add(a, b):
    return a - b
"""
    try:
        result = attack(code, ["assert add(2, 3) == 5", "assert False"])
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert result.n_passed == 0
    lines = outcomes(result)
    assert "shell ran False" in lines, lines
    # system() reports a failed spawn as exit status 127 (or -1); nothing else may succeed
    assert not any(" did " in o and o not in ("system did 32512", "system did -1")
                   for o in lines), lines
    _nothing_written(target)


# --------------------------------------------------- host processes and secrets


def test_no_host_pid_or_parent_environment_is_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    canary = f"agentic-loop-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("AGENTIC_LOOP_CANARY", canary)
    code = f"""
import os
pids = [p for p in os.listdir('/proc') if p.isdigit()]
print('RESULT pids', len(pids))
seen = False
for pid in pids:
    for part in ('environ', 'cmdline'):
        try:
            with open(f'/proc/{{pid}}/{{part}}', 'rb') as fh:
                seen = seen or {canary.encode()!r} in fh.read()
        except OSError:
            pass
print('RESULT canary', seen or {canary!r} in str(dict(os.environ)))
print('RESULT pytest', any(b'pytest' in open(f'/proc/{{p}}/cmdline', 'rb').read() for p in pids
                           if os.path.exists(f'/proc/{{p}}/cmdline')))
print('RESULT host pid', str({os.getpid()}) in pids)
print('RESULT env', sorted(os.environ))
"""
    result = attack(code)
    lines = outcomes(result)
    assert canary not in result.stdout.replace(f"{canary!r}", "")
    assert "canary False" in lines and "pytest False" in lines, lines
    assert int(lines[0].split()[1]) <= 3, lines  # bwrap's init and the solution
    env_line = next(line for line in lines if line.startswith("env "))
    assert "AGENTIC_LOOP_CANARY" not in env_line
    assert set(eval(env_line[4:])) <= {  # noqa: S307 - our own printout
        "PATH", "HOME", "TMPDIR", "LANG", "LC_CTYPE", "PWD", "OPENBLAS_NUM_THREADS",
        "OMP_NUM_THREADS", "MKL_NUM_THREADS"}


def test_the_solution_cannot_kill_host_processes_or_the_tests() -> None:
    code = """
import os, signal
killed = 0
for pid in range(1, 4000):
    try:
        os.kill(pid, signal.SIGKILL)
        killed += 1
    except Exception:
        pass
def f():
    return 0
"""
    result = attack(code, ["assert f() == 1", "assert False"])
    assert result.n_passed == 0  # and this test process is still alive to say so


# -------------------------------------------------------------------- network


@pytest.fixture
def tcp_listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.3)
    yield server
    server.close()


def test_tcp_to_the_host_is_unreachable(tcp_listener: socket.socket) -> None:
    port = tcp_listener.getsockname()[1]
    code = f"""
import _socket
for family, addr in ((_socket.AF_INET, ('127.0.0.1', {port})), (_socket.AF_INET6, ('::1', {port}))):
    try:
        s = _socket.socket(family, _socket.SOCK_STREAM)
        s.settimeout(1)
        s.connect(addr)
        print('RESULT connected', addr)
    except Exception as err:
        print('RESULT refused', type(err).__name__)
"""
    result = attack(code)
    assert not any(o.startswith("connected") for o in outcomes(result)), outcomes(result)
    with pytest.raises(TimeoutError):
        tcp_listener.accept()


def test_host_unix_sockets_are_unreachable(target: Path) -> None:
    path = target / "host.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    server.settimeout(0.3)
    abstract = socket.socket(socket.AF_UNIX)
    name = f"\0agentic-loop-{uuid.uuid4().hex}"
    abstract.bind(name)
    abstract.listen()
    abstract.settimeout(0.3)
    code = f"""
import _socket
for addr in ({str(path)!r}, {name!r}):
    try:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.connect(addr)
        print('RESULT connected', repr(addr))
    except Exception as err:
        print('RESULT refused', type(err).__name__)
"""
    try:
        result = attack(code)
        for listening in (server, abstract):
            with pytest.raises(TimeoutError):
                listening.accept()
    finally:
        server.close()
        abstract.close()
    assert not any(o.startswith("connected") for o in outcomes(result)), outcomes(result)


# ------------------------------------------------------------- limits that held


def test_loops_and_sleeps_are_killed_at_the_limit() -> None:
    for code in ("while True:\n    pass", "import time\ntime.sleep(60)",
                 "def f():\n    import time\n    time.sleep(60)"):
        started = time.monotonic()
        result = run_python_tests(code, "assert f() is None", timeout_s=0.5)
        assert result.timed_out and not result.passed, code
        assert time.monotonic() - started < 3


def test_a_4_gb_allocation_is_refused() -> None:
    result = attack("data = bytearray(4 * 1024 ** 3)")
    assert not result.passed and not result.timed_out
    assert result.reason is not None and "memory limit of 512 MB exceeded" in result.reason
