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

Tool-calling rows (an agent's episode: assistant ``tool_calls``, ``tool``
results, a row-level ``tools`` list) are checked call by call (every result
answers an earlier call, every call names an offered tool with an object of
arguments) and kept whole: how they become training text depends on the
model's chat template (:mod:`~agentic_loop.distill.train.tool_format`).

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
    >>> call = {"id": "c1", "type": "function", "function": {"name": "calc", "arguments": {}}}
    >>> bad = {"messages": [{"role": "user", "content": "2+2?"},
    ...                     {"role": "assistant", "content": "", "tool_calls": [call]},
    ...                     {"role": "tool", "tool_call_id": "c9", "content": "4"},
    ...                     {"role": "assistant", "content": "4"}],
    ...        "tools": [{"type": "function", "function": {"name": "calc"}}]}
    >>> _ = (d / "sft.jsonl").write_text(json.dumps(bad) + "\\n")
    >>> read_sft_rows(d / "sft.jsonl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop.distill.train.training_data.TrainingDataError: .../sft.jsonl:1: messages[2] is \
a tool result for tool_call_id 'c9', which no earlier assistant call has (calls so far: ['c1']); ...
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

_ROLES = ("system", "user", "assistant", "tool")


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


def _messages(value: Any, where: str, key: str,
              calls: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Checked chat messages; ``calls`` (call id -> tool name) collects the calls made so far.

    Plain messages come back as ``{"role", "content"}``; an assistant's calls
    as ``tool_calls`` (``content`` ``""`` when it had none), a tool result with
    its ``tool_call_id`` and ``name`` (taken from its call when missing).
    """
    if not isinstance(value, list) or not value:
        raise TrainingDataError(f"{where}: {key!r} must be a non-empty list of chat messages "
                                '({"role": ..., "content": ...}), got ' f"{value!r:.120}")
    calls = {} if calls is None else calls
    out = []
    for i, message in enumerate(value):
        at = f"{where}: {key}[{i}]"
        if not isinstance(message, dict):
            raise TrainingDataError(f"{at} must be an object, got {message!r:.80}")
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise TrainingDataError(f"{at} has role {role!r}; use one of {', '.join(_ROLES)}")
        has_calls = role == "assistant" and message.get("tool_calls")
        if content is None and has_calls:
            content = ""
        if not isinstance(content, str):
            raise TrainingDataError(f"{at} content must be a string, got {content!r:.80}")
        checked: dict[str, Any] = {"role": role, "content": content}
        if has_calls:
            checked["tool_calls"] = _tool_calls(message["tool_calls"], at, calls)
        elif role == "tool":
            checked.update(_tool_result(message, at, calls))
        out.append(checked)
    return out


def _tool_calls(value: Any, at: str, calls: dict[str, str]) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise TrainingDataError(f"{at}: tool_calls must be a list of calls, got {value!r:.80}")
    out = []
    for j, call in enumerate(value):
        call = call if isinstance(call, dict) else {}
        found = call.get("function")
        function: dict[str, Any] = found if isinstance(found, dict) else {}
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise TrainingDataError(
                f"{at}.tool_calls[{j}] has no function.name; a call is "
                '{"id": ..., "type": "function", "function": {"name": ..., "arguments": {...}}}')
        arguments = function.get("arguments", {})
        if not isinstance(arguments, dict):
            raise TrainingDataError(
                f"{at}.tool_calls[{j}] ({name}) arguments must be a JSON object, got "
                f"{arguments!r:.80}; write the arguments as an object, not a JSON string")
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            raise TrainingDataError(f"{at}.tool_calls[{j}] ({name}) needs a string id, "
                                    f"got {call_id!r}; use the recorded id or 'call_<n>'")
        calls[call_id] = name
        out.append({"id": call_id, "type": "function",
                    "function": {"name": name, "arguments": arguments}})
    return out


def _tool_result(message: dict[str, Any], at: str, calls: dict[str, str]) -> dict[str, str]:
    call_id = message.get("tool_call_id")
    if call_id not in calls:
        raise TrainingDataError(
            f"{at} is a tool result for tool_call_id {call_id!r}, which no earlier assistant "
            f"call has (calls so far: {sorted(calls)}); a result must follow its call")
    name = message.get("name") or calls[call_id]
    return {"tool_call_id": call_id, "name": name}


def _tools(row: dict[str, Any], where: str, *parts: list[dict[str, Any]]
           ) -> list[dict[str, Any]] | None:
    """The row's tool specs, checked against the calls its messages make (None: no tools)."""
    called = {c["function"]["name"] for part in parts for m in part
              for c in m.get("tool_calls", ())}
    used = called or any(m["role"] == "tool" for part in parts for m in part)
    value = row.get("tools")
    if not value:
        if used:
            raise TrainingDataError(f'{where}: the row calls tools but has no "tools" list; add '
                                    "the OpenAI specs of the tools the model was offered")
        return None
    if not isinstance(value, list) or not all(
            isinstance(t, dict) and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str) for t in value):
        raise TrainingDataError(
            f'{where}: "tools" must be a list of OpenAI function specs '
            '({"type": "function", "function": {"name": ..., "parameters": {...}}}), got '
            f"{value!r:.120}")
    names = {t["function"]["name"] for t in value}
    unknown = sorted(called - names)
    if unknown:
        raise TrainingDataError(f'{where}: the row calls {unknown}, which its "tools" list '
                                f"does not offer ({sorted(names)}); add their specs")
    return value


def _assistant_answer(messages: list[dict[str, Any]], where: str, key: str, *,
                      call_ends: bool = False) -> None:
    """The last message is the assistant's non-empty answer (or, with ``call_ends``, a call)."""
    last = messages[-1]
    if last["role"] != "assistant":
        raise TrainingDataError(
            f"{where}: the last message must be the assistant's answer, got role "
            f"{last['role']!r}; {key} rows end with the response to learn")
    if last.get("tool_calls"):
        if call_ends:
            return
        raise TrainingDataError(f"{where}: the last message of {key!r} is a tool call; an "
                                "episode ends with the assistant's text answer")
    if not last["content"].strip():
        raise TrainingDataError(f"{where}: the assistant's answer in {key!r} is empty; "
                                "drop the row or give it an answer")


def read_sft_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """``sft.jsonl`` rows, checked: plain rows as TRL prompt-completion rows, tool rows whole.

    A tool-calling row (one with ``tools``) comes back as ``{"messages",
    "tools"}``; :mod:`~agentic_loop.distill.train.tool_format` splits it into
    one prompt-completion row per assistant turn once the tokenizer is known.
    """
    path = Path(path)
    rows = []
    for number, row in _lines(path):
        where = f"{path}:{number}"
        if "messages" not in row:
            raise TrainingDataError(f'{where}: an SFT row needs "messages" (TRL conversational '
                                    f"format), got keys {sorted(row)}")
        messages = _messages(row["messages"], where, "messages")
        tools = _tools(row, where, messages)
        _assistant_answer(messages, where, "messages")
        if len(messages) < 2:
            raise TrainingDataError(f"{where}: an SFT row needs a prompt before the answer; "
                                    "add the user message")
        if tools is not None:
            rows.append({"messages": messages, "tools": tools})
        else:
            rows.append({"prompt": messages[:-1], "completion": messages[-1:]})
    return rows


def read_pair_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """``pairs.jsonl`` rows as TRL conversational preference rows (extra keys dropped).

    A tool-calling pair keeps its ``tools``; its rejected episode may end on a
    call (one cut off at the step limit), its chosen one ends with an answer.
    """
    path = Path(path)
    rows = []
    for number, row in _lines(path):
        where = f"{path}:{number}"
        missing = [k for k in ("prompt", "chosen", "rejected") if k not in row]
        if missing:
            raise TrainingDataError(f"{where}: a preference row needs prompt, chosen and rejected; "
                                    f"missing {missing}")
        calls: dict[str, str] = {}
        prompt = _messages(row["prompt"], where, "prompt", calls)
        chosen = _messages(row["chosen"], where, "chosen", dict(calls))
        rejected = _messages(row["rejected"], where, "rejected", dict(calls))
        tools = _tools(row, where, prompt, chosen, rejected)
        _assistant_answer(chosen, where, "chosen")
        _assistant_answer(rejected, where, "rejected", call_ends=tools is not None)
        if chosen == rejected:
            raise TrainingDataError(f"{where}: chosen and rejected are identical; the pair "
                                    "teaches nothing")
        pair = {"prompt": prompt, "chosen": chosen, "rejected": rejected}
        rows.append(pair if tools is None else {**pair, "tools": tools})
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
