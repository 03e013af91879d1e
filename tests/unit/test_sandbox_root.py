"""Issue 29's attacks on a root caller's sandbox, and the limits that did not hold.

The suite runs as root (as CI and most containers do), the case the reviewers
found open: tested code wrote the host's ``/proc/sys/kernel/core_pattern``
because the sandbox's uid mapped onto host uid 0, 400 threads started under a
64-process limit, and 1 GB was held through shared memory under
``memory_mb=512``. Every attack first switches the advisory audit hook off (a
solution can: it runs in the same interpreter), so what is tested is the OS
layers alone; each case checks from the host side too (the host's value, the
process's host uid and capabilities).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from agentic_loop.judges.sandbox import run as sandbox
from agentic_loop.judges.sandbox.bwrap import plan_memory
from agentic_loop.judges.sandbox.isolation import (
    Isolation,
    _layers,
    _probe,
    bwrap_executable,
    isolation,
)
from agentic_loop.judges.sandbox.launch import Launcher
from agentic_loop.judges.sandbox.run import (
    ALL_LAYERS,
    SandboxResult,
    SandboxUnavailableError,
    run_python_tests,
)
from agentic_loop.judges.sandbox.runner import audit

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox's layers are Linux's")

HOOK_OFF = f"""
import sys
_audit = sys.modules[{audit.__name__!r}]
_audit._inside = lambda root, path: True  # the advisory hook off: only the OS layers hold
_audit._SPAWN_EVENTS = frozenset()
"""
MEMORY_MB = 128
SETTINGS = ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/overcommit_memory")


def attack(code: str, tests: str | list[str] = "assert True", *,
           memory_mb: int = 512) -> SandboxResult:
    return run_python_tests(HOOK_OFF + code, tests, timeout_s=10.0, memory_mb=memory_mb)


def outcomes(result: SandboxResult) -> list[str]:
    return [line[len("RESULT "):] for line in result.stdout.splitlines()
            if line.startswith("RESULT ")]


@pytest.fixture(autouse=True)
def _only_inside_bwrap() -> None:
    """Never run an attack outside the full sandbox: in the fallback it would hit this host."""
    iso = isolation()
    if iso.mode != "bwrap" or iso.missing:
        pytest.fail(f"the full sandbox is not in force ({iso.describe()}); refusing to attack")


# ------------------------------------------------------------ the host's kernel


def _benign_other(path: str, value: str) -> str:
    if path.endswith("core_pattern"):
        return "core-agentic-loop-attack"
    return "1" if value.strip() != "1" else "0"


def test_kernel_settings_are_not_written_and_the_host_keeps_its_values() -> None:
    before = {p: Path(p).read_text() for p in SETTINGS}
    writes = {p: _benign_other(p, v) for p, v in before.items()}
    code = f"""
import os
for path, value in {writes!r}.items():
    try:
        fd = os.open(path, os.O_WRONLY)
        os.write(fd, value.encode())
        print('RESULT wrote', path)
    except OSError as err:
        print('RESULT refused', path, type(err).__name__)
"""
    try:
        result = attack(code)
        after = {p: Path(p).read_text() for p in SETTINGS}
    finally:
        for path, value in before.items():  # put the host back if the sandbox did not hold
            if Path(path).read_text() != value:
                Path(path).write_text(value)
    assert after == before
    assert result.passed, result.reason
    assert [o.split()[0] for o in outcomes(result)] == ["refused", "refused"], outcomes(result)


SWEEP = """
import os, stat
def sweep(tops):
    opened, tried = [], 0
    for top in tops:
        for root, _dirs, files in os.walk(top):
            for name in files:
                path = os.path.join(root, name)
                try:
                    mode = os.lstat(path).st_mode
                except OSError:
                    continue
                if not stat.S_ISREG(mode) or mode & stat.S_IWOTH:
                    continue
                tried += 1
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                    opened.append(path)
                except OSError:
                    pass
    return opened, tried
"""


def test_no_kernel_interface_opens_for_writing_inside() -> None:
    """A sweep over ``/proc/sys``, ``/sys`` and ``/proc``'s own files; none is written."""
    namespace: dict[str, object] = {}
    exec(SWEEP, namespace)  # noqa: S102 - our own sweep, run on the host to show it can see
    opened_here, tried_here = namespace["sweep"](["/proc/sys"])  # type: ignore[operator]
    assert tried_here > 100
    if os.geteuid() == 0:  # the same sweep, as root on the host, finds what it looks for
        assert "/proc/sys/kernel/core_pattern" in opened_here
    code = SWEEP + """
top_files = [os.path.join('/proc', n) for n in os.listdir('/proc') if not n[0].isdigit()]
opened, tried = sweep(['/proc/sys', '/sys', '/proc/irq', '/proc/bus', '/proc/fs', '/proc/driver'])
for path in top_files:
    if os.path.isfile(path) and not os.path.islink(path) and not os.stat(path).st_mode & 0o002:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            opened.append(path)
        except OSError:
            pass
print('RESULT opened', sorted(opened)[:10])
print('RESULT sys', os.path.exists('/sys'), sorted(os.listdir('/proc/sys')))
"""
    result = attack(code)
    assert result.passed, result.reason
    assert outcomes(result) == ["opened []", "sys False []"], outcomes(result)


def test_tested_code_is_an_unprivileged_host_user_with_no_capability() -> None:
    """Seen from the host: the solution's process is not uid 0 and holds no capability."""
    tag = f"al{uuid.uuid4().hex[:12]}"
    code = f"""
import os, time
with open('/proc/self/comm', 'w') as fh:
    fh.write({tag!r})
caps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')]
print('RESULT inside', os.getuid(), os.geteuid(), os.getgid(), set(caps))
time.sleep(1.5)
"""
    results: list[SandboxResult] = []
    runner = threading.Thread(target=lambda: results.append(attack(code)))
    runner.start()
    seen: dict[str, str] = {}
    deadline = time.monotonic() + 8
    while not seen and time.monotonic() < deadline:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == tag:
                    seen = dict(line.split(":", 1) for line in
                                Path(f"/proc/{pid}/status").read_text().splitlines())
            except OSError:
                continue
        time.sleep(0.05)
    runner.join()
    assert seen, "the solution's process was never seen from the host"
    uids, gids = seen["Uid"].split(), seen["Gid"].split()
    assert "0" not in uids and "0" not in gids, (uids, gids)
    assert {int(seen[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == {0}
    assert results[0].passed, results[0].reason
    assert outcomes(results[0]) == ["inside 65534 65534 65534 {'0000000000000000'}"]


# -------------------------------------------------------------------- memory

BOMBS = {
    "dev-shm-files": """
def bomb(keep):
    i = 0
    while True:
        with open(f'/dev/shm/f{i}', 'wb') as fh:
            fh.write(b'x' * CHUNK)
        keep.append(CHUNK)
        i += 1
""",
    "shared-memory": """
import _posixshmem, mmap  # what multiprocessing.shared_memory uses, minus its tracker process
def bomb(keep):
    i = 0
    while True:
        fd = _posixshmem.shm_open(f'/bomb{i}', os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        os.ftruncate(fd, CHUNK)
        block = mmap.mmap(fd, CHUNK)
        block[::4096] = b'x' * len(block[::4096])  # past a full tmpfs: SIGBUS
        keep.append(block)
        i += 1
""",
    "memfd": """
import mmap
def bomb(keep):
    while True:
        fd = os.memfd_create('bomb')
        os.ftruncate(fd, CHUNK)
        with mmap.mmap(fd, CHUNK) as m:
            m[::4096] = b'x' * len(m[::4096])
        keep.append((fd,))
""",
    "sysv-shm": """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
def bomb(keep):
    while True:
        ident = libc.shmget(0, CHUNK, 0o1600)
        if ident < 0:
            raise OSError(ctypes.get_errno(), 'shmget')
        address = libc.shmat(ident, None, 0)
        ctypes.memset(address, 1, CHUNK)
        libc.shmdt(ctypes.c_void_p(address))  # detached, the segment still holds its pages
        keep.append((ident,))
""",
    "tmpfs-files": """
def bomb(keep):
    i = 0
    while True:
        for where in ('/sandbox', '/tmp'):
            with open(f'{where}/f{i}', 'wb') as fh:
                fh.write(b'x' * CHUNK)
            keep.append(CHUNK)
        i += 1
""",
    "everything-at-once": """
import socket
def bomb(keep):
    data = b'x' * CHUNK
    try:
        while True:
            keep.append(bytearray(CHUNK))
    except MemoryError:
        keep.pop()  # room for the calls below and their own small allocations
    for where in ('/sandbox', '/dev/shm'):
        try:
            for i in range(1000):
                with open(f'{where}/g{i}', 'wb') as fh:
                    fh.write(data)
                keep.append(CHUNK)
        except OSError:
            pass
    held = []
    try:  # kernel buffers: pipes and Unix sockets, grown as far as they let themselves be
        while True:
            r, w = os.pipe()
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            held.append((r, w, a, b))
            for end in (w, a.fileno(), b.fileno()):
                try:
                    fcntl(end, 1031, 1 << 20)  # F_SETPIPE_SZ
                except OSError:
                    pass
                try:
                    socket.socket(fileno=os.dup(end)).setsockopt(
                        socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 26)
                except OSError:
                    pass
                os.set_blocking(end, False)
                sent = 0
                try:
                    while True:
                        sent += os.write(end, data[:65536])
                except BlockingIOError:
                    pass
                keep.append(sent)
    except OSError:
        pass
    raise OSError('every place is full')
""",
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_shared_memory_bombs_stop_at_the_memory_limit(name: str) -> None:
    code = "import os\nfrom fcntl import fcntl\nCHUNK = 4 * 1024 * 1024\n" + BOMBS[name] + """
class Keep(list):
    total = 0
    def append(self, item):
        super().append(item)
        self.total += item if isinstance(item, int) else CHUNK
        print('RESULT held', self.total >> 20, flush=True)
    def pop(self):
        item = super().pop()
        self.total -= item if isinstance(item, int) else CHUNK
        return item
try:
    bomb(Keep())
except BaseException as err:
    print('RESULT stop', type(err).__name__, flush=True)
"""
    result = attack(code, memory_mb=MEMORY_MB)
    held = [int(o.split()[1]) for o in outcomes(result) if o.startswith("held")]
    stops = [o.split()[1] for o in outcomes(result) if o.startswith("stop")]
    # a bomb either gets an error or, touching a mapped page past a full tmpfs, is killed
    assert stops in (["OSError"], ["MemoryError"], ["PermissionError"]) or (
        not stops and "SIGBUS" in (result.reason or "")), (stops, result.reason)
    assert max(held, default=0) <= MEMORY_MB, f"{name} held {max(held)} MiB"


# --------------------------------------------------------------- processes


def test_thread_and_fork_bombs_stop_at_the_process_limit() -> None:
    code = """
import os, threading
threading.stack_size(64 * 1024)
release = threading.Event()
threads = 0
try:
    for _ in range(400):
        threading.Thread(target=release.wait, daemon=True).start()
        threads += 1
except RuntimeError:
    pass
release.set()
forks = 0
for _ in range(50):
    try:
        if os.fork() == 0:
            os._exit(0)
        forks += 1
    except OSError:
        pass
print('RESULT', threads, forks)
"""
    result = attack(code)
    threads, forks = (int(v) for v in outcomes(result)[0].split())
    assert forks == 0
    assert 0 < threads < 64, f"{threads} threads started under a 64-process limit"


# ---------------------------------------------------- reported = verified


@pytest.mark.skipif(os.geteuid() != 0, reason="bwrap maps a non-root caller's own uid")
def test_a_sandbox_mapped_to_host_root_is_reported_without_those_layers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The old start (uid 65534 mapped onto a root caller) lists what the kernel did, not asked."""
    launcher = Launcher("bwrap", leave_root=False)
    found = _probe(launcher)
    assert not isinstance(found, str), found
    old = _layers(launcher, *found, "")
    assert {"non-root-uid", "process-limit"} <= set(old.missing), old.describe()
    assert "user-namespace" in old.layers
    assert set(old.layers) | set(old.missing) == set(ALL_LAYERS)
    monkeypatch.setattr(sandbox, "isolation", lambda: old)
    with pytest.raises(SandboxUnavailableError, match="non-root-uid"):
        run_python_tests("x = 1", "assert x == 1", strict=True)
    weak = run_python_tests("x = 1", "assert x == 1")
    assert weak.passed and "non-root-uid" not in weak.layers


def test_a_layer_the_probe_did_not_see_is_missing() -> None:
    """An empty report (a probe that said nothing) lists only what the parent itself does."""
    empty = _layers(Launcher("fallback", leave_root=False), {}, None, "")
    assert isinstance(empty, Isolation)
    assert set(empty.layers) == {"process-group-kill", "separate-verdict-process"}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a child as another user")
def test_a_non_root_caller_gets_every_layer_too(tmp_path: Path) -> None:
    """The same library run by an unprivileged user (its own uid, bwrap's own mapping)."""
    uid = 40000 + os.getpid() % 20000
    def as_user(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, user=uid, group=uid, extra_groups=[], cwd=tmp_path,
                              capture_output=True, text=True, check=False, timeout=120)

    try:
        check = as_user([sys.executable, "-c", "import agentic_loop"])
    except PermissionError as exc:
        pytest.skip(f"this interpreter is not readable by an unprivileged user ({exc})")
    if check.returncode != 0:
        pytest.skip(f"an unprivileged user cannot import the package ({check.stderr[-200:]})")
    bare = as_user([str(bwrap_executable()), "--unshare-all", "--ro-bind", "/", "/", "true"])
    if bare.returncode != 0:
        pytest.skip(f"this kernel refuses user namespaces to unprivileged users ({bare.stderr})")
    script = ("from agentic_loop.judges.sandbox.run import run_python_tests, sandbox_layers\n"
              "r = run_python_tests('def f():\\n    return 2', 'assert f() == 2')\n"
              "print(r.passed, len(sandbox_layers()), r.isolation)\n")
    done = as_user([sys.executable, "-c", script])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"True {len(ALL_LAYERS)} bwrap"), done.stdout


# ------------------------------------------- memory the byte caps did not count


def test_a_file_count_bomb_stops_at_the_mounts_file_cap() -> None:
    """518,000 empty directories held 596 MiB of kernel memory under ``memory_mb=128``."""
    code = """
import os
made, stop = 0, None
try:
    for where in ('/sandbox', '/dev/shm', '/tmp'):
        for i in range(10 ** 6):
            os.mkdir(f'{where}/d{i}-' + 'x' * 200)
            made += 1
except OSError as err:
    stop = err.errno
print('RESULT', made, stop)
"""
    result = attack(code, memory_mb=MEMORY_MB)
    made, stop = outcomes(result)[0].split()
    cap = sum(files for _mb, files in plan_memory(MEMORY_MB, 16).mounts().values())
    assert stop == str(errno.ENOSPC) and 0 < int(made) <= cap, (made, stop, cap)


def test_host_wide_pools_and_pipe_pinned_pages_are_refused() -> None:
    """Linux AIO took 63,488 of the host's 65,536 events; vmsplice pinned 767 MiB of huge pages."""
    code = """
import ctypes, os, shutil
libc = ctypes.CDLL(None, use_errno=True)
ctx = ctypes.c_ulong(0)
r, w = os.pipe()
calls = {'io_setup': (206, 4096, ctypes.byref(ctx)), 'vmsplice': (278, w, 0, 0, 0),
         'splice': (275, r, 0, w, 0, 1, 0), 'tee': (276, r, w, 1, 0),
         'sendfile': (40, w, r, 0, 1), 'open_tree_attr (newer than the list)': (467, -1, 0, 0)}
for name, args in calls.items():
    got = libc.syscall(*args)
    print('RESULT', name, got, got < 0 and os.strerror(ctypes.get_errno()))
with open('a', 'wb') as fh:
    fh.write(b'x' * 100000)
shutil.copyfile('a', '/tmp/b')  # falls back from sendfile to reads and writes
print('RESULT copied', os.path.getsize('/tmp/b'))
"""
    lines = outcomes(attack(code))
    assert lines[:5] == [f"{n} -1 Operation not permitted" for n in
                         ("io_setup", "vmsplice", "splice", "tee", "sendfile")], lines
    assert lines[5:] == ["open_tree_attr (newer than the list) -1 Function not implemented",
                         "copied 100000"], lines


@pytest.mark.skipif(os.geteuid() != 0, reason="reads other users' /proc/<pid>/root")
def test_no_sandboxed_process_is_left_when_a_timed_out_run_returns() -> None:
    """Busy threads at the time limit: the runner was still dying when the result came back."""
    marker = f"alive-{uuid.uuid4().hex}"
    code = f"""
import threading
open('/sandbox/{marker}', 'w').close()
def spin():
    while True:
        pass
for _ in range(8):
    threading.Thread(target=spin).start()
f = spin
"""
    for _ in range(3):
        result = run_python_tests(HOOK_OFF + code, "assert f() is None", timeout_s=0.5)
        left = [pid for pid in filter(str.isdigit, os.listdir("/proc"))
                if os.path.exists(f"/proc/{pid}/root/sandbox/{marker}")]
        assert result.timed_out and left == [], left


def test_a_crash_inside_dumps_no_core_not_even_to_a_piped_helper() -> None:
    """A host whose core_pattern pipes to a helper (apport, systemd-coredump) runs it as root on
    every crash whatever RLIMIT_CORE says, except for the kernel's special value 1: the solution
    holds exactly that, and cannot raise it again."""
    code = """
import resource
CORE = resource.getrlimit(resource.RLIMIT_CORE)
try:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    RAISED = True
except (ValueError, OSError):
    RAISED = False
"""
    result = attack(code, ["assert CORE == (1, 1), CORE", "assert RAISED is False"])
    assert result.passed, (result.reason, result.stdout, result.stderr)
