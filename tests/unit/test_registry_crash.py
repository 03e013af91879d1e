"""kill -9 at every step of register, promote and rollback: the audit log always explains the index.

Real processes, real SIGKILL, a real registry on disk. A zygote process imports
the registry once and forks one child per try (a fork is instant; an import is
1.5 s), so the test can afford many kills:

* **injected**: the child wraps the registry's own steps (the audit append,
  each atomic file write, each rename, the weight copy) and kills itself with
  SIGKILL before or after the k-th one, for k = 1, 2, ... until an operation
  finishes: every step of every operation is hit once;
* **random**: the child registers, promotes and rolls back in a loop until the
  test kills it after a random delay (at least 50 kills).

After every kill: what a reader sees equals the replay of the audit log alone;
the ``index.json`` on disk is never ahead of the log (it equals the replay of
the lines up to its own sequence number; each kill between a line and its index
leaves one more line pending, and readers apply them all); a copy of
the registry with ``index.json`` deleted rebuilds to the same versions, current
version and rollback stack; every version's folder exists; the sequence numbers
run 1, 2, 3 ... with no gap or repeat.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentic_loop.distill.release.registry import IndexRebuiltWarning, Registry
from agentic_loop.distill.release.registry_audit import RegistryIndex, replay_audit
from agentic_loop.jsonl_log import LogCorruptionWarning

ZYGOTE = textwrap.dedent('''
    import os, random, shutil, signal, sys, uuid
    from pathlib import Path
    import agentic_loop.distill.release.registry as registry_module
    from agentic_loop.jsonl_log import JsonlLog

    def new_model():
        path = models / uuid.uuid4().hex
        path.mkdir(parents=True)
        (path / "config.json").write_text("{}")
        (path / "model.safetensors").write_bytes(os.urandom(64))
        return path

    def one(reg, rng, op):
        if op.startswith("register"):
            copy = {"register": False, "register-copy": True}.get(op, rng.random() < 0.3)
            reg.register(new_model(), copy=copy)
        elif op == "promote":
            current = reg.current
            others = [v.version for v in reg.versions()
                      if current is None or v.version != current.version]
            if others:
                reg.promote(rng.choice(others), reason="test")
        elif op == "rollback" and reg.previous:
            reg.rollback(reason="test")

    def loop(seed):
        rng, reg = random.Random(seed), registry_module.Registry(root)
        while True:
            one(reg, rng, rng.choices(["register-any", "promote", "rollback"], [1, 3, 2])[0])

    def inject(op, step):
        events = 0
        def wrap(fn):
            def inner(*args, **kwargs):
                nonlocal events
                for when in ("before", "after"):
                    events += 1
                    if events == step:
                        os.kill(os.getpid(), signal.SIGKILL)
                    if when == "before":
                        out = fn(*args, **kwargs)
                return out
            return inner
        registry_module.atomic_write_bytes = wrap(registry_module.atomic_write_bytes)
        JsonlLog.append = wrap(JsonlLog.append)
        shutil.copytree = wrap(shutil.copytree)
        os.replace = wrap(os.replace)
        one(registry_module.Registry(root), random.Random(step), op)
        return events

    for line in sys.stdin:
        command = line.split()
        root, models = Path(command[1]), Path(command[2])
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                code = 0 if command[0] == "loop" else inject(command[3], int(command[4]))
                if command[0] == "loop":
                    loop(int(command[3]))
            except BaseException:
                import traceback; traceback.print_exc(); os._exit(255)
            os._exit(code)
        print("pid", pid, flush=True)
        print("status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
''')


class Zygote:
    """The forking process: ``run`` a command in a fresh child, optionally kill it, its exit."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)

    def run(self, command: str, root: Path, kill_after: float | None = None) -> int:
        """``inject OP STEP`` or ``loop SEED`` on the registry in ``root`` (models beside it)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        name, *args = command.split()
        line = " ".join([name, str(root), str(root.parent / "models"), *args])
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        pid = int(self.process.stdout.readline().split()[1])
        if kill_after is not None:
            import time

            time.sleep(kill_after)
            os.kill(pid, signal.SIGKILL)
        return int(self.process.stdout.readline().split()[1])

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    z = Zygote()
    yield z
    z.close()


def _view(index: RegistryIndex) -> tuple[list[tuple[str, str]], str | None, list[str]]:
    return [(v.version, v.path) for v in index.versions], index.current, list(index.previous)


def check_consistent(root: Path, scratch: Path) -> str:
    """Assert the module doc's invariants; say how the index on disk stood to the log."""
    if not root.exists():  # killed before its first write (a loaded machine starts slowly)
        return "nothing written yet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogCorruptionWarning)  # a torn last line is expected
        warnings.simplefilter("ignore", IndexRebuiltWarning)
        reg = Registry(root)
        history = reg.history()
        full = replay_audit(history, {}, root)
        seen = ([(v.version, v.path) for v in reg.versions()],
                reg.current.version if reg.current else None, reg.previous)
        assert seen == _view(full), "a reader sees what the audit log says"
        assert [e.seq for e in history] == list(range(1, len(history) + 1))
        for version in reg.versions():
            assert Path(version.path).is_dir(), f"{version.version}'s folder is missing"
        where = "no index yet"
        if reg.index_path.is_file():
            raw = RegistryIndex.model_validate_json(reg.index_path.read_bytes())
            assert raw.seq is not None and raw.seq <= len(history), "the index is never ahead"
            upto = replay_audit([e for e in history if (e.seq or 0) <= raw.seq], {}, root)
            assert _view(raw) == _view(upto), "the index on disk is a state the log explains"
            where = "index behind the log" if raw.seq < len(history) else "index up to date"
        copy = scratch / "rebuilt"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("models", "*.lock", ".lock"))
        for name in ("index.json", "index.json.bak"):
            (copy / name).unlink(missing_ok=True)
        rebuilt = Registry(copy)
        assert ([v.version for v in rebuilt.versions()],
                rebuilt.current.version if rebuilt.current else None,
                rebuilt.previous) == ([v for v, _ in seen[0]], seen[1], seen[2])
    return where


def _prepare(root: Path, models: Path, op: str) -> None:
    """Give ``op`` something to do: versions to promote, a stack to roll back."""
    reg = Registry(root)
    while len(reg.versions()) < 3:
        folder = models / f"setup-{len(list(models.glob('setup-*')))}"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(os.urandom(64))
        reg.register(folder)
    if op == "rollback" and not reg.previous:
        current = reg.current
        for version in [v.version for v in reg.versions()][:2]:
            if current is None or version != current.version:
                reg.promote(version)


@pytest.mark.parametrize("op", ["register", "register-copy", "promote", "rollback"])
def test_a_kill_at_every_step_leaves_the_audit_and_the_index_consistent(
        tmp_path: Path, zygote: Zygote, op: str) -> None:
    root, models = tmp_path / "registry", tmp_path / "models"
    outcomes: Counter[str] = Counter()
    step = 0
    while True:
        step += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LogCorruptionWarning)
            _prepare(root, models, op)
        code = zygote.run(f"inject {op} {step}", root)
        assert code in (-signal.SIGKILL, step - 1) or code < step, code
        if code != -signal.SIGKILL:  # the operation finished before step: every step was hit
            break
        outcomes[check_consistent(root, tmp_path)] += 1
        assert step < 60, "an operation with this many steps means the wrapping is broken"
    assert step > 6, f"{op} ran only {step - 1} steps: the injection did not reach the registry"
    print(f"{op}: killed at each of {step - 1} steps: {dict(outcomes)}")
    assert outcomes["index behind the log"] >= 1  # the write-ahead window was hit
    # and the registry goes on working after all those kills
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogCorruptionWarning)
        _prepare(root, models, "rollback")
        Registry(root).rollback(reason="after the kills")
    assert check_consistent(root, tmp_path) == "index up to date"


def test_fifty_random_kills_during_register_promote_and_rollback(tmp_path: Path,
                                                                  zygote: Zygote) -> None:
    root = tmp_path / "registry"
    rng = random.Random(29)
    outcomes: Counter[str] = Counter()
    for attempt in range(50):
        code = zygote.run(f"loop {attempt}", root, kill_after=rng.uniform(0.002, 0.12))
        assert code == -signal.SIGKILL, f"the loop ended by itself ({code}): it raised"
        outcomes[check_consistent(root, tmp_path)] += 1
    history = Registry(root).history()
    actions = Counter(e.action for e in history)
    assert actions["register"] >= 1 and actions["promote"] >= 1, actions  # the loops did work
    print(f"50 kills: {dict(outcomes)}; audit: {dict(actions)}")


def test_a_promote_killed_before_its_index_moved_is_still_followed(tmp_path: Path,
                                                                    zygote: Zygote) -> None:
    """In-process ``registry:`` models watch the audit log too: the promote is in it."""
    from agentic_loop.distill.release.live_model import RegistryChatModel
    from agentic_loop.testing import ScriptedChatModel

    root = tmp_path / "registry"
    reg = Registry(root)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
        (tmp_path / name / "model.safetensors").write_bytes(name.encode())
        reg.register(tmp_path / name)
    reg.promote("v1")
    llm = RegistryChatModel(registry=str(root),
                            loader=lambda path: ScriptedChatModel(default=Path(path).name))
    assert llm.invoke("hi").content == "a"
    before = reg.index_path.read_bytes()
    # step 2: right after the promote's audit line is on disk, before the index moves
    assert zygote.run("inject promote 2", root) == -signal.SIGKILL
    assert reg.index_path.read_bytes() == before
    assert llm.invoke("hi").content == "b" and llm.version == "v2"
