"""Read an exported dataset folder into the rows TRL's trainers take, with clear errors.

``export_datasets`` writes ``sft.jsonl`` (``{"messages": [...]}``) and
``pairs.jsonl`` (``{"prompt": [...], "chosen": [...], "rejected": [...]}``)
in TRL's conversational format, plus ``manifest.json``. A training run is
minutes to hours, so every row is checked *before* a model is loaded: a bad
line fails at once, naming ``file:line`` and what is wrong with it.

SFT rows are turned into TRL's conversational *prompt-completion* form (the
last assistant message is the completion), so the loss is computed on the
answer only, not on the user's prompt (``completion_only_loss`` is TRL's
default for that form). Extra keys such as ``metadata`` are dropped.

Example:
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> row = {"messages": [{"role": "user", "content": "Hi?"},
    ...                     {"role": "assistant", "content": "Hello."}], "metadata": {"x": 1}}
    >>> _ = (d / "sft.jsonl").write_text(json.dumps(row) + "\\n")
    >>> [(row["prompt"][0]["content"], row["completion"][0]["content"])
    ...  for row in read_sft_rows(d / "sft.jsonl")]
    [('Hi?', 'Hello.')]
    >>> _ = (d / "sft.jsonl").write_text('{"messages": [{"role": "user", "content": "Hi?"}]}\\n')
    >>> read_sft_rows(d / "sft.jsonl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.distill.train.training_data.TrainingDataError: .../sft.jsonl:1: the last ...
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentic_loop.distill.data.export import MANIFEST_FILE, PAIRS_FILE, SFT_FILE
from agentic_loop.distill.data.sources import sha256_file
from agentic_loop.errors import DataError

__all__ = [
    "TrainingData",
    "TrainingDataError",
    "load_training_data",
    "read_pair_rows",
    "read_sft_rows",
]

_ROLES = ("system", "user", "assistant")


class TrainingDataError(DataError):
    """A dataset folder or row cannot be trained on; the message names the file and line.

    A :class:`~agentic_loop.errors.DataError` (so still a ``ValueError``).
    """


@dataclass(frozen=True)
class TrainingData:
    """The rows of one dataset folder, checked, and the identity of what they came from.

    ``manifest_sha256`` hashes ``manifest.json`` when the folder has one (an
    export always does), else the data files themselves, so a model card
    always names exactly the data a model was trained on.
    """

    data_dir: Path
    sft: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    manifest_sha256: str
    manifest: dict[str, Any] | None

    def counts(self) -> dict[str, int]:
        """Rows per file, for the model card."""
        return {"sft_rows": len(self.sft), "pairs": len(self.pairs)}

    @property
    def prompt_format(self) -> dict[str, Any] | None:
        """How the export built the rows' prompts (``manifest.json``), for the model card.

        None for a folder without a manifest, or one exported before prompts
        were recorded (its rows are a bare task, answered with the chat
        template's default system prompt).
        """
        found = (self.manifest or {}).get("prompt_format")
        return dict(found) if isinstance(found, dict) else None


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("r", encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TrainingDataError(
                    f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno}); each "
                    "line must be one JSON object; re-export the dataset or fix that line"
                ) from None
            if not isinstance(row, dict):
                raise TrainingDataError(
                    f"{path}:{number}: expected a JSON object, got {type(row).__name__}; "
                    "re-export the dataset or fix that line")
            yield number, row


def _messages(value: Any, where: str, key: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise TrainingDataError(f"{where}: {key!r} must be a non-empty list of chat messages "
                                '({"role": ..., "content": ...}), got ' f"{value!r:.120}")
    out = []
    for i, message in enumerate(value):
        if not isinstance(message, dict):
            raise TrainingDataError(f"{where}: {key}[{i}] must be an object, "
                                    f"got {message!r:.80}")
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise TrainingDataError(
                f"{where}: {key}[{i}] has role {role!r}; use one of {', '.join(_ROLES)}")
        if not isinstance(content, str):
            raise TrainingDataError(f"{where}: {key}[{i}] content must be a string, "
                                    f"got {content!r:.80}")
        out.append({"role": role, "content": content})
    return out


def _assistant_answer(messages: list[dict[str, str]], where: str, key: str) -> None:
    if messages[-1]["role"] != "assistant":
        raise TrainingDataError(
            f"{where}: the last message must be the assistant's answer, got role "
            f"{messages[-1]['role']!r}; {key} rows end with the response to learn")
    if not messages[-1]["content"].strip():
        raise TrainingDataError(f"{where}: the assistant's answer in {key!r} is empty; "
                                "drop the row or give it an answer")


def read_sft_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """``sft.jsonl`` rows as TRL conversational prompt-completion rows (see the module doc)."""
    path = Path(path)
    rows = []
    for number, row in _lines(path):
        where = f"{path}:{number}"
        if "messages" not in row:
            raise TrainingDataError(f'{where}: an SFT row needs "messages" (TRL conversational '
                                    f"format), got keys {sorted(row)}")
        messages = _messages(row["messages"], where, "messages")
        _assistant_answer(messages, where, "messages")
        if len(messages) < 2:
            raise TrainingDataError(f"{where}: an SFT row needs a prompt before the answer; "
                                    "add the user message")
        rows.append({"prompt": messages[:-1], "completion": messages[-1:]})
    return rows


def read_pair_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """``pairs.jsonl`` rows as TRL conversational preference rows (extra keys dropped)."""
    path = Path(path)
    rows = []
    for number, row in _lines(path):
        where = f"{path}:{number}"
        missing = [k for k in ("prompt", "chosen", "rejected") if k not in row]
        if missing:
            raise TrainingDataError(f"{where}: a preference row needs prompt, chosen and rejected; "
                                    f"missing {missing}")
        prompt = _messages(row["prompt"], where, "prompt")
        chosen = _messages(row["chosen"], where, "chosen")
        rejected = _messages(row["rejected"], where, "rejected")
        _assistant_answer(chosen, where, "chosen")
        _assistant_answer(rejected, where, "rejected")
        if chosen == rejected:
            raise TrainingDataError(f"{where}: chosen and rejected are identical; the pair "
                                    "teaches nothing")
        rows.append({"prompt": prompt, "chosen": chosen, "rejected": rejected})
    return rows


def load_training_data(data_dir: str | os.PathLike[str], *, need_sft: bool,
                       need_pairs: bool) -> TrainingData:
    """Read and check the files a method needs from ``data_dir``.

    Raises :class:`TrainingDataError` naming the folder and the missing file
    when a needed file is absent or empty.
    """
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise TrainingDataError(
            f"dataset folder {root} does not exist; pass the folder `agentic-loop export` "
            f"wrote (with {SFT_FILE} and/or {PAIRS_FILE})")
    wanted = [(need_sft, SFT_FILE, read_sft_rows, "sft"),
              (need_pairs, PAIRS_FILE, read_pair_rows, "dpo")]
    found: dict[str, list[dict[str, Any]]] = {SFT_FILE: [], PAIRS_FILE: []}
    for needed, name, reader, method in wanted:
        path = root / name
        if not needed:  # what a method does not train on is neither read nor counted
            continue
        if path.is_file():
            found[name] = reader(path)
        if not found[name]:
            state = "is empty" if path.is_file() else "is missing"
            raise TrainingDataError(
                f"{path} {state}, and method {method!r} trains on it; export more data (lower "
                "--min-score / --min-gap), or pick a method whose file is there")
    manifest_path = root / MANIFEST_FILE
    manifest = None
    if manifest_path.is_file():
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TrainingDataError(f"{manifest_path} is not valid JSON ({exc.msg}); re-export "
                                    "the dataset") from None
        digest = sha256_file(manifest_path)
    else:
        digest = _hash_files([root / n for n in (SFT_FILE, PAIRS_FILE) if (root / n).is_file()])
    return TrainingData(root, found[SFT_FILE], found[PAIRS_FILE], digest, manifest)


def _hash_files(paths: list[Path]) -> str:
    import hashlib

    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + sha256_file(path).encode())
    return digest.hexdigest()
