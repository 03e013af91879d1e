"""Keep a running server on the registry's current version, under one name that never changes.

``promote`` and ``rollback`` only move the registry's ``current`` pointer;
clients must not have to learn a new model name or restart after each one.
So a registry is served under one **stable name** (``--name``, by default the
registry folder's name), and the serving process records where it serves in
``<registry>/serving.json`` (:class:`ServingState`: url, port, name, the
serve process's pid, the version served, the mode; written atomically,
removed on a clean exit).

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
  every ``poll_s`` seconds; here the answer is ``"restarting on v3 ..."``.
* no ``serving.json``, or its pid is dead (a crash): ``"no server running"``
  (a stale file is removed).

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp()) / "registry"
    >>> sync_served(root)
    'no server running'
    >>> state = ServingState(name="agent", url="http://127.0.0.1:9/v1", port=9, pid=2**22 + 7,
    ...                      version="v1", path="/m/v1", mode="model")
    >>> write_serving(root, state); read_serving(root).name
    'agent'
    >>> sync_served(root)    # that pid is not running: the file is stale
    'no server running (removed the stale serving.json of pid 4194311)'
    >>> read_serving(root) is None, stable_name(root)
    (True, 'registry')
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, Field, ValidationError

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_stamp
from agentic_loop.distill.release.registry import INDEX_FILE, ModelVersion, Registry
from agentic_loop.distill.release.serve import ServeError, lora_call, lora_rank
from agentic_loop.models.model_dirs import resolve_model_dir

__all__ = ["SERVING_FILE", "ServingState", "clear_serving", "index_signature", "is_alive",
           "live_server",
           "needs_restart", "read_serving", "serving_lock", "short_error", "stable_name",
           "state_for", "swap_adapter", "sync_served", "write_serving"]

SERVING_FILE = "serving.json"
LOCK_FILE = ".serving.lock"


class ServingState(BaseModel):
    """What ``serving.json`` says about the server of a registry."""

    name: str  #: the stable model name clients send
    url: str  #: the OpenAI-compatible base URL (ends in /v1)
    port: int
    pid: int  #: the serve process (it owns vLLM and follows ``current``)
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


def clear_serving(registry: Registry | str | os.PathLike[str], pid: int) -> bool:
    """Remove ``serving.json`` if process ``pid`` wrote it; True when removed."""
    state = read_serving(registry)
    if state is None or state.pid != pid:
        return False
    (_root(registry) / SERVING_FILE).unlink(missing_ok=True)
    return True


def serving_lock(registry: Registry | str | os.PathLike[str], timeout: float = 30.0) -> FileLock:
    """The lock every change of the served version takes (adapter swaps, state writes)."""
    root = _root(registry)
    root.mkdir(parents=True, exist_ok=True)
    return FileLock(str(root / LOCK_FILE), timeout=timeout)


def is_alive(state: ServingState) -> bool:
    """Whether the recorded serve process still runs (on another host: whether it answers)."""
    if state.hostname != socket.gethostname():
        import httpx

        try:
            return httpx.get(f"{state.url}/models", timeout=3.0).status_code < 500
        except httpx.HTTPError:
            return False
    try:
        os.kill(state.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def live_server(registry: Registry | str | os.PathLike[str]) -> ServingState | None:
    """The recorded server when its process is alive, else None (nothing is removed)."""
    state = read_serving(registry)
    return state if state is not None and is_alive(state) else None


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


def sync_served(registry: Registry | str | os.PathLike[str]) -> str:
    """Make the registry's live server serve ``current`` under its stable name; say what happened.

    Safe to call from any process at any time (``promote`` and ``rollback``
    call it; so does the serve process's watcher). A swap that vLLM refuses is
    recorded in ``serving.json`` and reported; the old version keeps serving.
    """
    root = _root(registry)
    state = read_serving(root)
    if state is None:
        return "no server running"
    if not is_alive(state):
        clear_serving(root, state.pid)
        return f"no server running (removed the stale {SERVING_FILE} of pid {state.pid})"
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
            return _sync_locked(root, current)
    except Timeout:
        return f"{where} is busy changing versions; it follows {current.version} when done"


def _sync_locked(root: Path, current: ModelVersion) -> str:
    state = read_serving(root)
    if state is None:
        return "no server running"
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


def index_signature(registry: Registry | str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """What changes whenever ``index.json`` is rewritten (one ``stat``); None when it is missing."""
    try:
        st = (_root(registry) / INDEX_FILE).stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ino, st.st_size)


def short_error(exc: BaseException) -> str:
    """An error in one line: its first line, and the last line of a log it quotes."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if len(lines) < 2 else f"{lines[0]} {lines[-1]}"
    return text[:400]


def state_for(entry: ModelVersion, **fields: Any) -> dict[str, Any]:
    """The ``serving.json`` fields that describe serving ``entry``."""
    return {"version": entry.version, "path": entry.path,
            "mode": "adapter" if entry.adapter else "model",
            "base": (str(resolve_model_dir(entry.base_model).resolve())
                     if entry.adapter and entry.base_model else None), **fields}
