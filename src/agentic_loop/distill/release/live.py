"""Keep a running server on the registry's current version, under one name that never changes.

``promote`` and ``rollback`` only move the registry's ``current`` pointer;
clients must not have to learn a new model name or restart after each one.
So a registry is served under one **stable name** (``--name``, by default the
registry folder's name), and the serving process records where it serves in
``<registry>/serving.json`` (:class:`ServingState`: url, port, name, the
serve process's pid, a random **token** drawn at each server start, the
version served, the mode; written atomically, removed on a clean exit).

**The record is checked, never trusted.** A pid alone proves nothing (a
crashed server's pid is handed to another process), so :func:`check_server`
asks the front proxy at ``url`` for its identity (``GET
/agentic-loop/identity``, which the serve process answers with its token and
the version it serves). A dead pid, nothing listening, or an answer without
the token makes the record **stale**: it is removed (:func:`checked_server`)
and reported, never used; a server that does not answer in time is
**unknown**: reported, and left alone.

:func:`sync_served` makes a live server serve ``current``:

* **adapter on the same base** (mode ``adapter``): the new adapter is loaded
  into the running vLLM under the same name with vLLM's ``load_inplace``: the
  new weights load and are checked first, then take the name over, so the
  name never disappears and no request fails. Done here, by whichever process
  calls first (``promote``, ``rollback``, or the serve process's watcher),
  under ``.serving.lock``.
* **anything else** (a merged model, another base, a larger LoRA rank): a new
  vLLM on the new weights, behind the front proxy that holds the port (no
  request fails). Only the serve process owns its vLLM, so it does that
  itself: its watcher
  (:mod:`~agentic_loop.distill.release.serve_watch`) follows ``current``
  every ``poll_s`` seconds; here the answer is ``"restarting on v3 ..."``
  (said only of a server that answered with its token).
* no ``serving.json``: ``"no server running"``; a stale one is removed and
  the answer says why.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp()) / "registry"
    >>> sync_served(root)
    'no server running'
    >>> state = ServingState(name="agent", url="http://127.0.0.1:9/v1", port=9, pid=2**22 + 7,
    ...                      token="t0", version="v1", path="/m/v1", mode="model")
    >>> write_serving(root, state); read_serving(root).name
    'agent'
    >>> # that pid is not running: the record is stale, removed, and said to be
    >>> print(sync_served(root))  # doctest: +NORMALIZE_WHITESPACE
    no server running (removed the stale serving.json: its serve process, pid 4194311,
    has exited); start one with `agentic-loop serve`
    >>> read_serving(root) is None, stable_name(root)
    (True, 'registry')
"""

from __future__ import annotations

import os
import socket
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_stamp
from agentic_loop.distill.release.front import IDENTITY_PATH
from agentic_loop.distill.release.registry import ModelVersion, Registry
from agentic_loop.distill.release.registry_audit import AUDIT_FILE, INDEX_FILE
from agentic_loop.distill.release.serve import ServeError, lora_call, lora_rank
from agentic_loop.errors import short_error
from agentic_loop.models.model_dirs import resolve_model_dir
from agentic_loop.paths import file_signature

__all__ = ["SERVING_FILE", "ServerCheck", "ServingState", "Signature", "StaleServingWarning",
           "check_server", "checked_server", "clear_serving", "index_signature", "live_server",
           "needs_restart", "read_serving", "serving_lock", "short_error", "stable_name",
           "state_for", "swap_adapter", "sync_served", "write_serving"]

SERVING_FILE = "serving.json"
LOCK_FILE = ".serving.lock"
#: :func:`index_signature`: (mtime_ns, inode, size) of ``index.json``, then of ``audit.jsonl``
Signature = tuple[int, ...]


class ServingState(BaseModel):
    """What ``serving.json`` says about the server of a registry."""

    name: str  #: the stable model name clients send
    url: str  #: the OpenAI-compatible base URL (ends in /v1)
    port: int
    pid: int  #: the serve process (it owns vLLM and follows ``current``)
    token: str  #: drawn at each server start; its front answers it at ``IDENTITY_PATH``
    hostname: str = Field(default_factory=socket.gethostname)
    version: str | None  #: the registry version being served
    path: str  #: its model or adapter directory
    mode: Literal["adapter", "model"]  #: a LoRA on a base (swapped live) or a whole model
    base: str | None = None  #: the base model directory (adapter mode)
    max_lora_rank: int | None = None  #: the largest adapter rank this vLLM accepts
    follow: bool = True  #: False when started on a fixed version: promote does not change it
    state: Literal["starting", "ready", "restarting"] = "ready"
    target: str | None = None  #: the version a restart is bringing up
    failed: str | None = None  #: a version that could not be put live (not retried)
    error: str | None = None  #: why it could not
    canary: str | None = None  #: the candidate the front sends a share of users to (canary.json)
    canary_error: str | None = None  #: why canary.json's candidate is not served
    replicas: str | None = None  #: with replicas: the file saying which serves what (and why not)
    updated_at: str = Field(default_factory=utc_stamp)

    @property
    def spec(self) -> str:
        """The ``load_chat_model`` spec of this server (with ``model=name``)."""
        return f"openai:{self.url}"


def _root(registry: Registry | str | os.PathLike[str]) -> Path:
    return registry.root if isinstance(registry, Registry) else Path(registry).expanduser()


def stable_name(registry: Registry | str | os.PathLike[str], name: str | None = None) -> str:
    """The name a registry is served under: ``name``, else the registry folder's name."""
    return name or _root(registry).resolve().name or "model"


def read_serving(registry: Registry | str | os.PathLike[str]) -> ServingState | None:
    """The recorded server, or None (no file, or one that is not a serving record)."""
    path = _root(registry) / SERVING_FILE
    try:
        return ServingState.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def write_serving(registry: Registry | str | os.PathLike[str], state: ServingState) -> None:
    """Record ``state`` (atomically: a reader sees the old record or the new one)."""
    root = _root(registry)
    root.mkdir(parents=True, exist_ok=True)
    payload = state.model_copy(update={"updated_at": utc_stamp()}).model_dump_json(indent=2)
    atomic_write_bytes(root / SERVING_FILE, (payload + "\n").encode())


def clear_serving(registry: Registry | str | os.PathLike[str], token: str) -> bool:
    """Remove ``serving.json`` if the server with ``token`` wrote it; True when removed."""
    state = read_serving(registry)
    if state is None or state.token != token:
        return False
    (_root(registry) / SERVING_FILE).unlink(missing_ok=True)
    return True


def serving_lock(registry: Registry | str | os.PathLike[str], timeout: float = 30.0) -> FileLock:
    """The lock every change of the served version takes (adapter swaps, state writes)."""
    root = _root(registry)
    root.mkdir(parents=True, exist_ok=True)
    return FileLock(str(root / LOCK_FILE), timeout=timeout)


class StaleServingWarning(UserWarning):
    """A ``serving.json`` whose server did not answer with its token was removed."""


@dataclass(frozen=True)
class ServerCheck:
    """What asking a recorded server for its identity found.

    ``verdict``: ``ok`` (it answered with the record's token), ``stale`` (it
    cannot be that server: ``reason`` says why) or ``unknown`` (no answer in time).
    """

    state: ServingState
    verdict: Literal["ok", "stale", "unknown"]
    reason: str = ""
    version: str | None = None  #: the version the server says it serves (``ok`` only)


def _pid_alive(pid: int) -> bool:
    if pid <= 0:  # kill(0) and kill(-1) reach a whole group: never a serve process's pid
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def check_server(state: ServingState, timeout: float = 5.0) -> ServerCheck:
    """Ask the server ``state`` records who it is (see the module doc); no file is changed."""
    import httpx

    local = state.hostname == socket.gethostname()
    if local and not _pid_alive(state.pid):
        return ServerCheck(state, "stale", f"its serve process, pid {state.pid}, has exited")
    url = state.url.rstrip("/").removesuffix("/v1") + IDENTITY_PATH
    reused = f"; pid {state.pid} is alive, so it now belongs to another process" if local else ""
    try:
        answer = httpx.get(url, timeout=timeout)
    except httpx.TimeoutException:
        return ServerCheck(state, "unknown", f"{url} did not answer within {timeout:g} s")
    except httpx.HTTPError as exc:
        return ServerCheck(state, "stale", f"nothing answers at {url} "
                                           f"({type(exc).__name__}){reused}")
    try:
        identity = answer.json()
    except ValueError:
        identity = None
    if not isinstance(identity, dict) or identity.get("token") != state.token:
        return ServerCheck(state, "stale", f"{url} answers (HTTP {answer.status_code}) but not "
                                           f"with the token of the server that wrote "
                                           f"{SERVING_FILE}: another server has the port{reused}")
    version = identity.get("version")
    return ServerCheck(state, "ok", version=str(version) if version is not None else None)


def _remove_if_unchanged(root: Path, state: ServingState) -> None:
    current = read_serving(root)
    if current is not None and current.token == state.token:
        (root / SERVING_FILE).unlink(missing_ok=True)


def checked_server(registry: Registry | str | os.PathLike[str],
                   timeout: float = 5.0) -> ServerCheck | None:
    """The recorded server, checked (:func:`check_server`); None when nothing is recorded.

    A stale record is removed (under the serving lock, and only if no new
    server replaced it meanwhile); the check it returns says why.
    """
    root = _root(registry)
    state = read_serving(root)
    if state is None:
        return None
    check = check_server(state, timeout)
    if check.verdict == "stale":
        try:
            with serving_lock(root, timeout=10.0):
                _remove_if_unchanged(root, state)
        except Timeout:  # a server is being started or changed: it rewrites the record
            pass
    return check


def live_server(registry: Registry | str | os.PathLike[str],
                timeout: float = 5.0) -> ServingState | None:
    """The recorded server when it answers with its token, else None (a stale record is removed
    with a :class:`StaleServingWarning`).

    Raises :class:`ServeError` when it does not answer in time: neither
    trusted nor replaced, it needs a person to look.
    """
    check = checked_server(registry, timeout)
    if check is None:
        return None
    if check.verdict == "unknown":
        raise ServeError(_unknown_message(check))
    if check.verdict == "stale":
        warnings.warn(f"removed the stale {_root(registry) / SERVING_FILE}: {check.reason}",
                      StaleServingWarning, stacklevel=2)
        return None
    return check.state


def _unknown_message(check: ServerCheck) -> str:
    """The report on a recorded server that did not answer its identity check."""
    state = check.state
    return (f"the server recorded in {SERVING_FILE} ('{state.name}' at {state.url}, pid "
            f"{state.pid}) did not answer its identity check ({check.reason}); nothing was "
            "changed: check that process (it may be busy), or stop it and run `agentic-loop "
            "serve` again")


def needs_restart(state: ServingState, entry: ModelVersion) -> bool:
    """True when ``entry`` cannot be swapped into the running vLLM as an adapter."""
    if state.mode != "adapter" or not entry.adapter or not entry.base_model or not state.base:
        return True
    try:
        same_base = resolve_model_dir(entry.base_model).resolve() == Path(state.base).resolve()
    except Exception:  # noqa: BLE001 - an unreadable base is a restart, which reports it
        return True
    return not same_base or lora_rank([entry.path]) > (state.max_lora_rank or 16)


def swap_adapter(state: ServingState, entry: ModelVersion) -> ServingState:
    """Put adapter ``entry`` live under ``state.name`` (vLLM ``load_inplace``); the new state."""
    lora_call(state.url, "load_lora_adapter",
              {"lora_name": state.name, "lora_path": entry.path, "load_inplace": True})
    return state.model_copy(update={"version": entry.version, "path": entry.path,
                                    "failed": None, "error": None})


def sync_served(registry: Registry | str | os.PathLike[str], *,
                check_timeout: float = 5.0) -> str:
    """Make the registry's live server serve ``current`` under its stable name; say what happened.

    Safe to call from any process at any time (``promote`` and ``rollback``
    call it; so does the serve process's watcher). The recorded server is
    checked first (``check_timeout``: how long its identity may take); a
    stale record is removed and reported. A swap that vLLM refuses is
    recorded in ``serving.json`` and reported; the old version keeps serving.
    """
    root = _root(registry)
    check = checked_server(root, check_timeout)
    if check is None:
        return "no server running"
    if check.verdict == "stale":
        return (f"no server running (removed the stale {SERVING_FILE}: {check.reason}); start "
                "one with `agentic-loop serve`")
    if check.verdict == "unknown":
        return _unknown_message(check)
    state = check.state
    reg = registry if isinstance(registry, Registry) else Registry(root)
    current = reg.current
    where = f"'{state.name}' at {state.url}"
    if current is None:
        return f"{where} serves {state.version}; the registry has no current version"
    if not state.follow:
        return (f"{where} is fixed on {state.version} (started with a version); it does not "
                "follow promote or rollback: restart `agentic-loop serve` without a version")
    try:
        with serving_lock(root, timeout=10.0):
            return _sync_locked(root, current, state.token)
    except Timeout:
        return f"{where} is busy changing versions; it follows {current.version} when done"


def _sync_locked(root: Path, current: ModelVersion, token: str) -> str:
    state = read_serving(root)
    if state is None:
        return "no server running (it stopped during the check)"
    if state.token != token:  # a new server started meanwhile: it starts on current
        return f"a new server started under '{state.name}'; it serves current from its start"
    where = f"'{state.name}'"
    if state.state in ("starting", "restarting"):
        doing = "starting" if state.state == "starting" else "restarting"
        then = "" if state.target == current.version else f", then it follows {current.version}"
        return f"{doing} on {state.target or state.version} under {where}{then}"
    if state.version == current.version:
        return f"{current.version} already served under {where}"
    if state.failed == current.version:
        return (f"{current.version} could not be put live ({state.error}); still serving "
                f"{state.version} under {where}")
    if needs_restart(state, current):
        return (f"restarting on {current.version}: the serve process (pid {state.pid}) brings "
                f"vLLM up on it behind the same port; {where} answers again when it is ready")
    try:
        new = swap_adapter(state, current)
    except ServeError as exc:
        error = short_error(exc)
        write_serving(root, state.model_copy(update={"failed": current.version, "error": error}))
        return f"could not swap {current.version} in ({error}); still serving {state.version}"
    write_serving(root, new)
    return f"adapter {current.version} swapped in under {where}"


def index_signature(registry: Registry | str | os.PathLike[str]) -> Signature | None:
    """What changes whenever the registry changes (two ``stat`` calls); None without its files.

    ``index.json`` is rewritten by every change, and ``audit.jsonl`` grows
    first (write-ahead): a change whose process was killed before it moved
    the index is in the log only, and must still be followed.
    """
    root = _root(registry)
    parts = [n for name in (INDEX_FILE, AUDIT_FILE)
             for n in file_signature(root / name) or (0, 0, 0)]
    return None if not any(parts) else tuple(parts)


def state_for(entry: ModelVersion, **fields: Any) -> dict[str, Any]:
    """The ``serving.json`` fields that describe serving ``entry``."""
    return {"version": entry.version, "path": entry.path,
            "mode": "adapter" if entry.adapter else "model",
            "base": (str(resolve_model_dir(entry.base_model).resolve())
                     if entry.adapter and entry.base_model else None), **fields}
