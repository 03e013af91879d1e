"""Archives shared between processes: persistence, concurrent writers, and SIGKILL mid-append."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from agentic_loop.jsonl_log import LogCorruptionWarning
from agentic_loop.memory import Archive, HashingEmbedder

EMB = HashingEmbedder(dim=64)

# A writer process: adds `count` entries with unique outputs, and after each add returns
# appends the acknowledged id to `ack` with an unbuffered write. It creates `ack`.ready once
# open, and starts writing when `go` exists (so that several writers start together).
WRITER = textwrap.dedent(
    """
    import os, sys, time, uuid
    from agentic_loop.memory import Archive, HashingEmbedder
    root, ack, count, tag, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
    archive = Archive(root, embedder=HashingEmbedder(dim=64))
    fd = os.open(ack, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    open(ack + ".ready", "w").close()
    while not os.path.exists(go):
        time.sleep(0.001)
    for i in range(count):
        result = archive.add(f"{tag} task {i}", f"{tag} output {uuid.uuid4().hex}", score=i % 10)
        if result.added:
            os.write(fd, (result.entry.id + "\\n").encode())
    """
)


def start_writer(
    root: Path, ack: Path, count: int, tag: str, go: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start a writer; without ``go`` it starts writing at once."""
    go = go or root  # an existing path: no waiting
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), str(ack), str(count), tag, str(go)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def acked(ack: Path) -> list[str]:
    if not ack.exists():
        return []
    return [line for line in ack.read_text().splitlines() if line]


def test_entries_written_by_another_process_are_read_back(tmp_path: Path) -> None:
    reader = Archive(tmp_path, embedder=EMB)  # open before the writer runs
    writer = start_writer(tmp_path, tmp_path / "ack", 3, "child")
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err.decode()
    ids = acked(tmp_path / "ack")
    assert len(ids) == 3
    assert sorted(e.id for e in reader.entries()) == sorted(ids)  # the open instance reloads
    assert reader.search("child task 2", k=1)[0].entry.task == "child task 2"
    assert sorted(e.id for e in Archive(tmp_path, embedder=EMB).entries()) == sorted(ids)


def test_two_processes_appending_at_once_lose_nothing(tmp_path: Path) -> None:
    Archive(tmp_path, embedder=EMB)  # create it once, so both writers open an existing archive
    go = tmp_path / "go"
    writers = [start_writer(tmp_path, tmp_path / f"ack{i}", 250, f"w{i}", go) for i in range(2)]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ack{i}.ready").exists() for i in range(2)):
        assert all(w.poll() is None for w in writers) and time.monotonic() < deadline
        time.sleep(0.005)
    go.touch()
    for w in writers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode()
    ids = acked(tmp_path / "ack0") + acked(tmp_path / "ack1")
    assert len(ids) == 500
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not a single unreadable line
        archive = Archive(tmp_path, embedder=EMB)
        assert sorted(e.id for e in archive.entries()) == sorted(ids)
    lines = (tmp_path / "entries.jsonl").read_bytes().splitlines()
    assert len(lines) == 500
    writers_in_log_order = [b'"task":"w1' in line for line in lines]
    switches = sum(a != b for a, b in itertools.pairwise(writers_in_log_order))
    assert switches > 2, "the two writers did not overlap; the test proved nothing"
    assert archive.search("w1 task 123", k=1)[0].entry.task == "w1 task 123"


@pytest.mark.parametrize("kill_after", [150, 600])
def test_sigkill_during_1000_appends_loses_no_acknowledged_entry(
    tmp_path: Path, kill_after: int
) -> None:
    ack = tmp_path / "ack"
    writer = start_writer(tmp_path, ack, 1000, "crash")
    deadline = time.monotonic() + 120
    while len(acked(ack)) < kill_after:
        assert writer.poll() is None, writer.communicate()[1].decode()
        assert time.monotonic() < deadline, "the writer is too slow"
        time.sleep(0.005)
    os.kill(writer.pid, signal.SIGKILL)
    writer.communicate(timeout=30)
    assert writer.returncode == -signal.SIGKILL
    ids = acked(ack)
    assert kill_after <= len(ids) < 1000  # killed mid-run

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        archive = Archive(tmp_path, embedder=EMB)
        stored = {e.id for e in archive.entries()}
    corrupt = [
        w
        for w in caught
        if issubclass(w.category, LogCorruptionWarning) and "torn" not in str(w.message)
    ]
    assert corrupt == []  # at most a torn last line, never a corrupt record
    assert set(ids) <= stored  # no acknowledged entry lost
    assert len(stored) - len(ids) <= 1  # at most the one being acknowledged when killed

    # still writable, and searchable, and clean on the next open
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LogCorruptionWarning)  # a torn tail is repaired here
        assert archive.add("after the crash", "a fresh output written after recovery").added
    assert archive.search("crash task 42", k=1)[0].entry.task == "crash task 42"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(Archive(tmp_path, embedder=EMB)) == len(stored) + 1


def test_a_process_exiting_without_close_leaves_its_index_rows_saved(tmp_path: Path) -> None:
    writer = start_writer(tmp_path, tmp_path / "ack", 5, "short-lived")
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err.decode()
    state = json.loads((tmp_path / "index.json").read_text())
    assert state["rows"] == 5 and state["outputs"] is True
