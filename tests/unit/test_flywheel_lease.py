"""The flywheel's lease: one service per registry, and a holder killed with SIGKILL loses it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentic_loop.distill.flywheel.lease import Lease, LeaseHeldError, lease_holder, read_holder
from agentic_loop.distill.flywheel.service import Flywheel
from agentic_loop.distill.flywheel.settings import FlywheelSettings
from agentic_loop.errors import ReleaseError

HOLDER = textwrap.dedent("""
    import sys, time
    from agentic_loop.distill.flywheel.lease import Lease
    Lease(sys.argv[1]).acquire()
    print("held", flush=True)
    time.sleep(600)
""")


def _wheel(tmp: Path) -> Flywheel:
    return Flywheel(tmp / "reg", [tmp / "traj"], tmp / "golden.jsonl", tmp / "work",
                    FlywheelSettings(min_new_runs=5))


def test_a_second_service_on_the_same_registry_is_refused(tmp_path: Path) -> None:
    with _wheel(tmp_path):
        with pytest.raises(ReleaseError, match=rf"pid {os.getpid()} on .*stop that one first"):
            _wheel(tmp_path).start()
    with _wheel(tmp_path) as again:  # released on close: the next one takes it
        assert again.lease.held


def test_a_holder_killed_with_sigkill_loses_the_lease(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(root)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LeaseHeldError, match=f"pid {holder.pid} "):
            _wheel(tmp_path).start()
        assert (read_holder(root) or {}).get("pid") == holder.pid
        assert (lease_holder(root) or {}).get("pid") == holder.pid
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    assert lease_holder(root) is None  # the file still names the dead pid; nobody holds it
    assert (read_holder(root) or {}).get("pid") == holder.pid
    with _wheel(tmp_path) as wheel:  # no cleanup needed: the kernel dropped the flock
        assert wheel.lease.held and (read_holder(root) or {}).get("pid") == os.getpid()


def test_release_is_idempotent_and_a_lease_reacquires(tmp_path: Path) -> None:
    lease = Lease(tmp_path)
    lease.acquire()
    lease.release()
    lease.release()
    assert not lease.held and read_holder(tmp_path) is None
    with lease:
        assert lease.held


CLI = ("import sys; import agentic_loop.cli.monitor; from agentic_loop.cli import main; "
       "sys.argv[0] = 'agentic-loop'; main()")


def test_the_cli_service_stops_on_sigterm_and_lets_the_lease_go(tmp_path: Path) -> None:
    root = tmp_path / "reg"
    service = subprocess.Popen(
        [sys.executable, "-c", CLI, "flywheel", "run", "--registry", str(root),
         "--trajectories", str(tmp_path / "traj"), "--golden", str(tmp_path / "g.jsonl"),
         "--work-dir", str(tmp_path / "work"), "--tick", "0.1s", "--min-new-runs", "3"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "COLUMNS": "200"})
    assert service.stdout is not None
    seen = []
    for line in service.stdout:
        seen.append(line)
        if "tick: idle" in line:
            break
    assert (lease_holder(root) or {}).get("pid") == service.pid, seen
    service.send_signal(signal.SIGTERM)
    rest = service.communicate(timeout=60)[0]
    assert service.returncode == 0 and "stopped" in rest, seen + [rest]
    assert lease_holder(root) is None
