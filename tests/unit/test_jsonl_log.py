"""JsonlLog: durable appends, torn tails, corrupt lines, incremental reads, atomic rewrite."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentic_loop.jsonl_log import (
    JsonlLog,
    LogCorruptionWarning,
    RecordTooLargeError,
    StaleLogError,
    write_jsonl,
)


class Note(BaseModel):
    n: int
    text: str = ""


@pytest.fixture
def log(tmp_path: Path) -> JsonlLog[Note]:
    return JsonlLog(tmp_path / "notes.jsonl", Note)


def test_append_then_read_returns_records_in_order(log: JsonlLog[Note]) -> None:
    log.append(Note(n=1))
    assert log.append_many([Note(n=2), {"n": 3}]) == 2
    assert [r.n for r in log.read().records] == [1, 2, 3]
    assert log.path.read_bytes().count(b"\n") == 3


def test_read_is_incremental_and_sees_other_writers(log: JsonlLog[Note], tmp_path: Path) -> None:
    other = JsonlLog(tmp_path / "notes.jsonl", Note)
    log.append(Note(n=1))
    assert [r.n for r in log.read().records] == [1]
    other.append(Note(n=2))
    read = log.read()
    assert [r.n for r in read.records] == [2] and not read.reset
    assert log.read().records == []


def test_empty_batch_writes_nothing(log: JsonlLog[Note]) -> None:
    assert log.append_many([]) == 0
    assert not log.path.exists()


def test_invalid_record_is_rejected_before_anything_is_written(log: JsonlLog[Note]) -> None:
    log.append(Note(n=1))
    before = log.path.read_bytes()
    with pytest.raises(ValueError, match=r"record 1 is not a valid record for .*notes.jsonl: n"):
        log.append_many([Note(n=2), {"n": "not a number"}])
    assert log.path.read_bytes() == before


def test_huge_record_is_rejected_with_its_size(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "notes.jsonl", Note, max_record_bytes=100)
    with pytest.raises(
        RecordTooLargeError, match=r"record 0 serializes to .* bytes, over the 100-byte limit"
    ):
        log.append(Note(n=1, text="x" * 200))
    assert not log.path.exists() or log.path.read_bytes() == b""


def test_torn_last_line_is_skipped_with_file_and_line_then_repaired(log: JsonlLog[Note]) -> None:
    log.append_many([Note(n=1), Note(n=2)])
    with log.path.open("ab") as fh:
        fh.write(b'{"n": 3, "te')  # a writer killed mid-line
    with pytest.warns(LogCorruptionWarning, match=r"notes\.jsonl:3: torn last line \(12 bytes"):
        read = log.read()
    assert [r.n for r in read.records] == [1, 2] and read.torn_bytes == 12
    with pytest.warns(LogCorruptionWarning, match=r"repaired a torn last line at line 3"):
        log.append(Note(n=4))
    assert log.path.read_bytes().endswith(b"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r.n for r in log.read_all()] == [1, 2, 4]
        assert [r.n for r in log.read().records] == [4]
    assert b'{"n": 3, "te' in log.path.with_name("notes.jsonl.corrupt").read_bytes()


def test_corrupt_middle_line_is_reported_and_skipped_never_losing_others(
    log: JsonlLog[Note]
) -> None:
    log.append_many([Note(n=1), Note(n=2), Note(n=3)])
    lines = log.path.read_bytes().splitlines(keepends=True)
    lines[1] = b"\x00\x00garbage\n"
    log.path.write_bytes(b"".join(lines))
    with pytest.warns(
        LogCorruptionWarning, match=r"notes\.jsonl:2: .*skipped, the other records are intact"
    ):
        read = log.read()
    assert [r.n for r in read.records] == [1, 3]
    assert [str(p).rsplit("/", 1)[-1][:14] for p in read.problems] == ["notes.jsonl:2:"]


def test_blank_lines_are_ignored(log: JsonlLog[Note]) -> None:
    log.path.write_bytes(b'{"n": 1}\n\n{"n": 2}\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r.n for r in log.read().records] == [1, 2]


def test_rewrite_replaces_atomically_and_keeps_corrupt_lines_aside(log: JsonlLog[Note]) -> None:
    log.append_many([Note(n=i) for i in range(5)])
    with log.path.open("ab") as fh:
        fh.write(b"not json\n")
    with pytest.warns(LogCorruptionWarning):
        log.read()
    with log.locked():
        assert log.rewrite([Note(n=0), Note(n=4)]) == 2
    assert [r.n for r in log.read_all()] == [0, 4]
    assert log.read().records == []  # the rewriter's own view stays current
    assert b"not json" in log.path.with_name("notes.jsonl.corrupt").read_bytes()
    assert not [p for p in log.path.parent.iterdir() if p.name.endswith(".tmp")]


def test_rewrite_refuses_when_records_were_not_seen(log: JsonlLog[Note], tmp_path: Path) -> None:
    log.append(Note(n=1))
    log.read()
    JsonlLog(tmp_path / "notes.jsonl", Note).append(Note(n=2))
    with pytest.raises(StaleLogError, match="holds records this reader has not seen"):
        log.rewrite([Note(n=1)])
    assert [r.n for r in log.read_all()] == [1, 2]


def test_reader_notices_a_rewrite_by_another_instance(log: JsonlLog[Note], tmp_path: Path) -> None:
    log.append_many([Note(n=1), Note(n=2)])
    log.read()
    other = JsonlLog(tmp_path / "notes.jsonl", Note)
    other.read()
    other.rewrite([Note(n=9)])
    read = log.read()
    assert read.reset and [r.n for r in read.records] == [9]


def test_consume_requires_a_current_reader(log: JsonlLog[Note], tmp_path: Path) -> None:
    JsonlLog(tmp_path / "notes.jsonl", Note).append(Note(n=1))
    with pytest.raises(StaleLogError):
        log.append(Note(n=2), consume=True)
    log.read()
    log.append(Note(n=2), consume=True)
    assert log.read().records == []
    assert [r.n for r in log.read_all()] == [1, 2]


def test_missing_file_reads_as_empty(log: JsonlLog[Note]) -> None:
    assert log.read().records == [] and log.read_all() == []


def test_write_jsonl_writes_a_readable_log(tmp_path: Path) -> None:
    path = tmp_path / "out" / "export.jsonl"
    assert write_jsonl(path, [Note(n=1), {"n": 2}], Note) == 2
    assert [r.n for r in JsonlLog(path, Note).read_all()] == [1, 2]


class Loose(BaseModel):
    data: dict[str, object]


def test_a_value_json_cannot_hold_is_a_clear_error(tmp_path: Path) -> None:
    log = JsonlLog(tmp_path / "loose.jsonl", Loose)
    with pytest.raises(ValueError, match="record 0 for .*cannot be written as JSON"):
        log.append(Loose(data={"x": object()}))
    assert not log.path.exists() or log.path.read_bytes() == b""


def _refuse_lock_files(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make every open of a ``*.lock`` file fail, as on a read-only disk; return the attempts."""
    import os

    real_open = os.open
    attempts: list[str] = []

    def guarded(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).endswith(".lock"):
            attempts.append(str(path))
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded)
    return attempts


def test_reads_of_a_missing_log_create_nothing(tmp_path: Path) -> None:
    log: JsonlLog[Note] = JsonlLog(tmp_path / "no" / "such" / "notes.jsonl", Note)
    assert log.read().records == [] and log.read_all() == []
    assert list(tmp_path.iterdir()) == []


def test_reads_create_no_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"n": 1}\n{"n": 2}\n')  # written elsewhere (copied, another machine)
    log: JsonlLog[Note] = JsonlLog(path, Note)
    assert [r.n for r in log.read().records] == [1, 2] and [r.n for r in log.read_all()] == [1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.jsonl"]


def test_reading_works_when_the_lock_file_cannot_be_opened(
        log: JsonlLog[Note], monkeypatch: pytest.MonkeyPatch) -> None:
    log.append_many([Note(n=1), Note(n=2)])  # a writer left its lock file
    attempts = _refuse_lock_files(monkeypatch)
    reader: JsonlLog[Note] = JsonlLog(log.path, Note)
    assert [r.n for r in reader.read().records] == [1, 2]
    assert [r.n for r in reader.read_all()] == [1, 2]
    assert attempts  # the lock was tried, and its refusal did not stop the read
    with pytest.raises(PermissionError):  # writing still needs the lock
        reader.append(Note(n=3))


def test_trajectory_log_reads_need_no_write_access(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentic_loop.trajectories import Trajectory, TrajectoryLog

    missing = TrajectoryLog(tmp_path / "missing" / "logs")
    assert missing.read() == [] and len(missing) == 0
    assert not (tmp_path / "missing").exists()
    written = TrajectoryLog(tmp_path / "logs")
    written.append(Trajectory(architecture="reflection", model_id="m", task="Say hi."))
    written.record_feedback(written.read()[0].id, "up")
    _refuse_lock_files(monkeypatch)
    assert [(t.task, t.feedback) for t in TrajectoryLog(tmp_path / "logs").read()] == [
        ("Say hi.", "up")]


def test_a_batch_is_one_fsync_and_a_crash_mid_batch_loses_at_most_that_batch(
    log: JsonlLog[Note], monkeypatch: pytest.MonkeyPatch
) -> None:
    log.append(Note(n=0))
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    assert log.append_many([Note(n=i, text="t" * i) for i in range(1, 201)]) == 200
    assert len(fsyncs) == 1
    monkeypatch.undo()
    # A writer killed during its next batch: the OS had written part of the bytes.
    payload = b"".join(Note(n=1000 + i).model_dump_json().encode() + b"\n" for i in range(10))
    with open(log.path, "ab") as f:
        f.write(payload[: len(payload) // 2 + 3])
    other = JsonlLog(log.path, Note)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = [note.n for note in other.read().records]
    assert kept[:201] == list(range(201))  # every acknowledged batch, whole
    assert all(1000 <= n < 1010 for n in kept[201:]) and len(kept) < 211  # a prefix at most
    assert any("torn" in str(w.message) or "unfinished" in str(w.message) for w in caught)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        log.append(Note(n=9999))  # the torn tail is cut off, nothing else
        assert [note.n for note in other.read().records] == [9999]
