"""vLLM's own load balancer, ``vllm-router``, as a child process we start, feed and stop.

Replicas of one version sit behind a balancer that exists, not one we write.
We chose **vllm-router** (PyPI ``vllm-router``, a Rust server in a manylinux
wheel, Apache-2.0) over HAProxy (Debian ``haproxy``):

* it is made for vLLM: its policies know LLM serving (``cache_aware`` sends a
  prompt to the replica whose prefix cache holds its start, ``consistent_hash``,
  ``power_of_two`` by load, ``round_robin``), it speaks the OpenAI routes
  (``/v1/chat/completions``, ``/v1/models``) and retries a failed request on
  another worker, so a replica that dies mid-request costs no failed answer;
* workers come and go at run time over plain HTTP (``POST /add_worker?url=``,
  ``POST /remove_worker?url=``, ``GET /list_workers``), which is how a replica
  that fails an adapter load or dies is taken out; HAProxy's runtime API is a
  Unix socket with its own text protocol and servers that must be declared in
  a configuration file first;
* it installs with pip, as a user, on any Linux with glibc 2.28 (HAProxy needs
  root and apt), and health-checks workers itself (``/health``, vLLM's).

It comes with the ``serve`` extra (``pip install "agentic-loop[serve]"``, which
``make setup`` installs; or a venv of its own, ``.venv-router``: 130 MB, 25 s).
The executable is found as ``router=``, else ``$AGENTIC_LOOP_VLLM_ROUTER``, else
``.venv-router/bin/vllm-router`` in the working directory or a parent, else
beside this interpreter, else on ``PATH``; none: :class:`RouterNotInstalledError`
says how to install it.

Example (the command line, built without starting anything):
    >>> " ".join(router_command("vllm-router", port=8000,
    ...                         workers=["http://127.0.0.1:8001"])[1:7])
    '--host 127.0.0.1 --port 8000 --worker-urls http://127.0.0.1:8001'
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from agentic_loop.distill.release.serve import ServeError, free_port

__all__ = ["POLICIES", "ROUTER_VENV", "BalancerError", "RouterNotInstalledError", "VLLMRouter",
           "find_vllm_router", "router_command", "start_router"]

ROUTER_VENV = ".venv-router"
POLICIES = ("cache_aware", "round_robin", "power_of_two", "consistent_hash", "random")
INSTALL_HINT = (
    "vllm-router is not installed: run `make setup` in the agentic-loop checkout, or `pip "
    "install 'agentic-loop[serve]'` (or `pip install vllm-router` anywhere, about 130 MB, and "
    "pass its executable with --vllm-router, router= or $AGENTIC_LOOP_VLLM_ROUTER; one beside "
    "this Python, in a .venv-router here or above, or on PATH is found by itself)")


class BalancerError(ServeError):
    """The balancer could not be started, or refused a change of its workers."""


class RouterNotInstalledError(BalancerError):
    """No ``vllm-router`` executable was found; the message says how to install it."""


def find_vllm_router(router: str | os.PathLike[str] | None = None) -> str:
    """The ``vllm-router`` executable (see the module doc for the search order)."""
    if router is not None:
        path = Path(router).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise RouterNotInstalledError(f"the vllm-router executable {path} does not exist or "
                                          f"is not executable; {INSTALL_HINT}")
        return str(path)
    env = os.environ.get("AGENTIC_LOOP_VLLM_ROUTER")
    if env:
        return find_vllm_router(env)
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        candidate = folder / ROUTER_VENV / "bin" / "vllm-router"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    beside = Path(sys.executable).parent / "vllm-router"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("vllm-router")
    if found is None:
        raise RouterNotInstalledError(INSTALL_HINT)
    return found


def router_command(executable: str, *, port: int, workers: Sequence[str],
                   host: str = "127.0.0.1", policy: str = "cache_aware",
                   health_interval_s: int = 2, extra_args: Sequence[str] = ()) -> list[str]:
    """The command line that starts vllm-router on ``host:port`` over ``workers`` (origins,
    ``http://host:port`` without ``/v1``)."""
    if policy not in POLICIES:
        raise BalancerError(f"balancer policy {policy!r} is not one of vllm-router's: pass one "
                            f"of {', '.join(POLICIES)}")
    return [executable, "--host", host, "--port", str(port), "--worker-urls", *workers,
            "--policy", policy, "--health-check-interval-secs", str(max(1, health_interval_s)),
            "--worker-startup-check-interval", "1", "--log-level", "info", *extra_args]


class VLLMRouter:
    """A running vllm-router that this process started. Use it as a context manager.

    ``base_url`` is the OpenAI-compatible URL clients (or the front) send to.
    """

    def __init__(self, process: subprocess.Popen[bytes], host: str, port: int, log_path: Path,
                 command: list[str]) -> None:
        self.process = process
        self.host = host
        self.port = port
        self.log_path = log_path
        self.command = command
        atexit.register(self.stop)

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited({self.process.returncode})"
        return f"VLLMRouter({self.origin!r}, {state})"

    @property
    def origin(self) -> str:
        """``http://host:port`` of the balancer."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (ends in ``/v1``)."""
        return f"{self.origin}/v1"

    @property
    def running(self) -> bool:
        """True while the balancer process is alive."""
        return self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the balancer's log (for error messages)."""
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def _call(self, method: str, route: str, **params: str) -> Any:
        import httpx

        try:
            response = httpx.request(method, f"{self.origin}{route}", params=params,
                                     timeout=30.0)
        except httpx.HTTPError as exc:
            raise BalancerError(f"vllm-router at {self.origin} did not answer {route}: {exc}; "
                                f"is it running? its log ({self.log_path}) ends with:\n"
                                f"{self.log_tail()}") from exc
        if response.status_code >= 400:
            raise BalancerError(f"vllm-router at {self.origin} refused {route} {params} "
                                f"({response.status_code}): {response.text[:300]}")
        return response.json() if route == "/list_workers" else response.text

    def workers(self) -> list[str]:
        """The worker origins the balancer sends requests to now."""
        return list(self._call("GET", "/list_workers").get("urls", []))

    def add_worker(self, url: str) -> None:
        """Put the worker at ``url`` (an origin) into rotation."""
        self._call("POST", "/add_worker", url=url)

    def remove_worker(self, url: str) -> None:
        """Take the worker at ``url`` out of rotation (it keeps running)."""
        if url in self.workers():
            self._call("POST", "/remove_worker", url=url)

    def wait_until_ready(self, timeout: float = 60.0) -> None:
        """Wait until the balancer answers (it listens once its workers are healthy)."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise BalancerError(f"vllm-router exited with code {self.process.returncode} "
                                    f"before it was ready; its log ({self.log_path}) ends "
                                    f"with:\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                if httpx.get(f"{self.origin}/list_workers", timeout=2.0).status_code == 200:
                    return
            time.sleep(0.2)
        self.stop()
        raise BalancerError(f"vllm-router did not answer within {timeout:g}s (its workers must "
                            f"answer /health first); its log ({self.log_path}) ends with:\n"
                            f"{self.log_tail()}")

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop the balancer (SIGTERM, then SIGKILL after ``timeout``); return its exit code."""
        atexit.unregister(self.stop)
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        return self.process.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_router(workers: Sequence[str], *, host: str = "127.0.0.1", port: int | None = None,
                 policy: str = "cache_aware", router: str | os.PathLike[str] | None = None,
                 health_interval_s: int = 2, log_path: str | os.PathLike[str] | None = None,
                 timeout: float = 60.0) -> VLLMRouter:
    """Start vllm-router over ``workers`` (origins) and wait until it answers."""
    executable = find_vllm_router(router)
    port = port or free_port(host)
    command = router_command(executable, port=port, workers=workers, host=host, policy=policy,
                             health_interval_s=health_interval_s)
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="vllm-router-", suffix=".log")
        os.close(fd)
        log = Path(name)
    else:
        log = Path(log_path)
        log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   env={**os.environ, "NO_COLOR": "1"})
    balancer = VLLMRouter(process, host, port, log, command)
    balancer.wait_until_ready(timeout)
    return balancer
