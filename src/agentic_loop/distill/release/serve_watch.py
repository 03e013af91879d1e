"""Serve a registry under one stable name and follow its ``current`` pointer (promote, rollback).

:func:`serve_registered` starts vLLM on the registry's current version
under a name that never changes (see :mod:`~agentic_loop.distill.release.live`),
records it in ``<registry>/serving.json`` and, in a background thread, checks
``index.json`` and ``audit.jsonl`` every ``poll_s`` seconds (a ``stat`` each;
the index is read only when they changed). When ``current`` moves:

* an adapter on the same base is swapped into the running vLLM under the
  same name (no restart, no failed request);
* anything else needs a new vLLM on the new weights. Clients never see it:
  they talk to a front proxy on the stable port
  (:mod:`~agentic_loop.distill.release.front`) and vLLM runs behind it on a
  port of its own. ``swap="restart"`` (the default) holds new requests, lets
  the running ones finish, and brings vLLM up on the new weights: requests
  wait (about 45 s on 2 CPU cores with vLLM's compile cache warm), none
  fails. ``swap="side-by-side"`` starts the new vLLM beside the old one,
  moves new requests over once it is ready and stops the old one after its
  last answer: nothing waits, but it needs room for two vLLMs (GPU memory,
  or cores: on 2 CPU cores a vLLM starting beside a busy one took 6 minutes
  to reach its model, see bench/front.py).
  ``serving.json`` says ``restarting`` meanwhile. A version that does not
  start is recorded as failed, and the version served before goes on.

Only this process restarts its vLLM, so no signal crosses processes:
``agentic-loop registry promote`` swaps adapters itself and otherwise leaves the
restart to this watcher. ``serving.json`` carries a token drawn at start,
which the front answers at its identity route with the version served; it
is removed on a clean exit, and after a crash (or with its pid reused by
another process) the front no longer answers the token, which marks it
stale (:func:`~agentic_loop.distill.release.live.check_server`).

**Canary at the server.** The watcher also follows ``<registry>/canary.json`` (a ``stat``
each poll, :mod:`~agentic_loop.distill.release.canary`): a candidate adapter on the served
base is loaded into the running vLLM under ``<name>-<version>``, any other candidate (a full
model) gets a vLLM of its own beside it, and the front splits requests by user key between it
and current; one it cannot serve is recorded (``canary_error``), everything going to current;
a removed file sends everything back to current and unloads (or stops) the candidate.

Example (a registry with nothing promoted cannot be served):
    >>> import tempfile
    >>> serve_registered(tempfile.mkdtemp())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    agentic_loop...RegistryError: registry ... has no current version yet...
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import threading
import time
from pathlib import Path
from typing import Any, Self

from agentic_loop.distill.release.canary import ArmTable, CanaryFollower
from agentic_loop.distill.release.front import FrontProxy
from agentic_loop.distill.release.live import (
    SERVING_FILE,
    ServingState,
    Signature,
    check_server,
    clear_serving,
    index_signature,
    needs_restart,
    read_serving,
    serving_lock,
    short_error,
    stable_name,
    state_for,
    sync_served,
    write_serving,
)
from agentic_loop.distill.release.registry import ModelVersion, Registry
from agentic_loop.distill.release.replicas import REPLICAS_FILE, ReplicaSet
from agentic_loop.distill.release.serve import (
    ServeError,
    VLLMServer,
    free_port,
    lora_rank,
    lora_rank_bucket,
    serve,
)
from agentic_loop.errors import AgenticLoopError

__all__ = ["RegistryServer", "serve_registered"]

log = logging.getLogger(__name__)


class RegistryServer:
    """vLLM serving a registry's version under one name; follows ``current`` when ``follow``.

    Use it as a context manager, or :meth:`wait` until Ctrl-C. ``spec`` and
    ``model`` are what ``load_chat_model`` takes, and never change.
    """

    def __init__(self, registry: Registry, *, name: str, version: str = "current",
                 poll_s: float = 2.0, timeout: float = 300.0, host: str = "127.0.0.1",
                 port: int | None = None, swap: str = "restart", drain_s: float = 120.0,
                 **serve_kw: Any) -> None:
        if swap not in ("side-by-side", "restart"):
            raise ServeError(f"swap={swap!r}: pass 'restart' (one vLLM; requests wait while "
                             "it restarts) or 'side-by-side' (a new vLLM starts beside the old)")
        self.swap = swap
        self.drain_s = drain_s
        self.registry = registry
        self.model = name
        self.follow = str(version) == "current"
        self.poll_s = poll_s
        self.timeout = timeout
        self.host = host
        self.port = port or free_port(host)
        self.base_url = f"http://{host}:{self.port}/v1"
        self.replicas = int(serve_kw.pop("replicas", 1))  # >1: N vLLMs behind vllm-router
        self._replica_kw = {k: serve_kw.pop(k) for k in ("policy", "router", "replica_env",
                                                         "health_s") if k in serve_kw}
        self._serve_kw = serve_kw
        self._entry = registry.get(version)
        self._server: VLLMServer | None = None
        self._stop = threading.Event()
        self._restarting = False
        self._fatal: str | None = None  # why vLLM could not be brought back after a restart
        self._signature: Signature | None = None
        self._thread: threading.Thread | None = None
        self.token = secrets.token_urlsafe(16)  # serving.json's; the front answers it
        side = {"cancel": self._stop, "host": host, "timeout": timeout, **serve_kw}
        self._canary = CanaryFollower(registry, served_name=name, lora_url=lambda: (
            self.base_url if self.replicas > 1 else self.server.base_url),
            why_not=self._why_not_canary, side=None if self.replicas > 1 else side)
        self._front = FrontProxy(host, self.port, hold_s=timeout, identity=self._identity,
                                 arms=self._arms, lora=self._lora if self.replicas > 1 else None)

    def __repr__(self) -> str:
        return f"RegistryServer({self.base_url!r}, model={self.model!r}, {self.version})"

    # -- what clients use ---------------------------------------------------

    @property
    def spec(self) -> str:
        """The ``load_chat_model`` spec of this server (with ``model=self.model``)."""
        return f"openai:{self.base_url}"

    @property
    def version(self) -> str:
        """The registry version being served now."""
        return self._entry.version

    @property
    def server(self) -> VLLMServer:
        """The vLLM process serving now (a new one after each restart)."""
        if self._server is None:
            raise ServeError(f"the server of {self.registry.root} has not been started; call "
                             "start() first")
        return self._server

    @property
    def running(self) -> bool:
        """True while vLLM runs (or is being restarted on a new version)."""
        return self._restarting or (self._server is not None and self._server.running)

    @property
    def log_path(self) -> Path:
        """The log of the vLLM process serving now."""
        return self.server.log_path

    def served_models(self, timeout: float = 5.0) -> list[str]:
        """The model names vLLM lists at ``/v1/models``."""
        return self.server.served_models(timeout)

    def chat_model(self, **kw: Any) -> Any:
        """A LangChain chat model talking to this server under the stable name."""
        from agentic_loop.models import load_chat_model

        return load_chat_model(self.spec, model=kw.pop("model", self.model), **kw)

    # -- life cycle ---------------------------------------------------------

    def start(self) -> Self:
        """Start vLLM on the version, record ``serving.json``, start following ``current``."""
        with serving_lock(self.registry.root):
            self._check_other()
            self._front.start()  # the stable port first: taken, it fails before vLLM starts
            self._write(state="starting", target=self._entry.version, **state_for(self._entry))
        atexit.register(self.stop)
        try:
            self._server = self._launch(self._entry)
        except BaseException:
            self.stop()
            raise
        self._front.route_to(_origin(self._server))
        with serving_lock(self.registry.root):
            self._write(state="ready", target=None, **state_for(self._entry))
        self._signature = index_signature(self.registry)
        if self.follow:
            self._follow_canary()
            self._thread = threading.Thread(target=self._watch, name="registry-follow",
                                            daemon=True)
            self._thread.start()
        return self

    def _check_other(self) -> None:
        """Refuse to start beside a live server of this registry; a stale record is replaced."""
        other = read_serving(self.registry.root)
        if other is None:
            return
        check = check_server(other)
        if check.verdict == "ok":
            raise ServeError(
                f"registry {self.registry.root} is already served as '{other.name}' at "
                f"{other.url} by pid {other.pid}; use that server, or stop it first")
        if check.verdict == "unknown":
            raise ServeError(
                f"registry {self.registry.root} has a server recorded in {SERVING_FILE} (pid "
                f"{other.pid} at {other.url}) that did not answer its identity check "
                f"({check.reason}); stop that process, or delete "
                f"{self.registry.root / SERVING_FILE} if it is gone, then start again")
        log.warning("replacing the stale %s: %s", SERVING_FILE, check.reason)

    def _identity(self) -> dict[str, Any]:
        """What the front answers at its identity route: who serves here, and which version."""
        own = _read_own(self.registry.root, self.token)
        return {"token": self.token, "pid": os.getpid(), "name": self.model,
                "registry": str(self.registry.root.resolve()),
                "version": own.version if own is not None else self._entry.version,
                "state": own.state if own is not None else "starting",
                "canary": self._canary.candidate, "canary_error": self._canary.error}

    def _lora(self, endpoint: str, payload: dict[str, Any]) -> None:
        self.server.lora_request(endpoint, payload)  # type: ignore[attr-defined]

    def _launch(self, entry: ModelVersion) -> VLLMServer:
        """vLLM on ``entry``, ready, behind the front (``replicas``: N behind vllm-router)."""
        if self.replicas > 1:
            return ReplicaSet(  # type: ignore[return-value]  # quacks as a VLLMServer
                entry.path, replicas=self.replicas, name=self.model, host=self.host,
                max_lora_rank=self._max_rank(), timeout=self.timeout,
                record=self.registry.root / REPLICAS_FILE, **self._replica_kw,
                **self._serve_kw).start()
        server = serve(entry.path, name=self.model, port=free_port(self.host), host=self.host,
                       max_lora_rank=self._max_rank(), wait=False, **self._serve_kw)
        try:
            server.wait_until_ready(self.timeout, cancel=self._stop)
        except BaseException:
            server._owns_log = False  # keep the log the error points to
            server.stop()
            raise
        return server

    def _max_rank(self) -> int:
        """A LoRA rank that fits every registered adapter, so later ones swap in live."""
        return lora_rank([v.path for v in self.registry.versions() if v.adapter])

    def _write(self, **fields: Any) -> None:
        mode = fields.get("mode")
        state = ServingState(name=self.model, url=self.base_url, port=self.port,
                             pid=os.getpid(), token=self.token, follow=self.follow,
                             max_lora_rank=lora_rank_bucket(self._max_rank())
                             if mode == "adapter" else None, canary=self._canary.candidate,
                             canary_error=self._canary.error, replicas=str(self.registry.root /
                             REPLICAS_FILE) if self.replicas > 1 else None, **fields)
        write_serving(self.registry.root, state)

    # -- the canary at the front ---------------------------------------------

    def _arms(self) -> ArmTable | None:
        """The front's arm table: never a current other than the version served now."""
        table = self._canary.table
        if table.current != self._entry.version:  # the table lags a swap: current only
            return ArmTable(current=self._entry.version, served_name=self.model)
        return table

    def _why_not_canary(self, entry: ModelVersion) -> str | None:
        """Why the running vLLM cannot take ``entry`` as a canary adapter (None: it can)."""
        state = _read_own(self.registry.root, self.token)
        if state is None or state.state != "ready":
            return f"the server is not ready to load {entry.version} (see {SERVING_FILE})"
        if needs_restart(state, entry):
            return (f"{entry.version} cannot run beside {state.version} in one vLLM (a canary "
                    f"at the server needs a LoRA adapter of rank <= {state.max_lora_rank or 16} "
                    f"on the served base {state.base or state.path}); canary it with "
                    "agentic_loop's in-process Router instead")
        return None

    def _follow_canary(self) -> str | None:
        """Follow ``canary.json`` once (see the module doc); what changed, or None."""
        if self._restarting:
            return None
        message = self._canary.sync(self._entry)
        if message is not None:
            log.info("%s", message)
            with serving_lock(self.registry.root):
                own = _read_own(self.registry.root, self.token)
                if own is not None:
                    write_serving(self.registry.root, ServingState.model_validate(
                        {**own.model_dump(), "canary": self._canary.candidate,
                         "canary_error": self._canary.error}))
        return message

    # -- following current --------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.check()
                self._follow_canary()
            except Exception as exc:  # noqa: BLE001 - the watcher must outlive one bad poll
                log.warning("following %s failed: %s", self.registry.root, exc)

    def check_canary(self) -> str | None:
        """Follow ``current`` and then ``canary.json`` once; what the canary did, or None."""
        self.check()
        return self._follow_canary()

    def check(self) -> str | None:
        """Follow ``current`` once if ``index.json`` changed; what happened, or None."""
        signature = index_signature(self.registry)
        if signature == self._signature:
            return None
        self._signature = signature
        current = self.registry.current
        if current is None or current.version == self._entry.version:
            return None
        state = _read_own(self.registry.root, self.token)
        if state is not None and state.failed == current.version:
            return None  # it did not start before; promote another version to move on
        if state is not None and not needs_restart(state, current):
            message = sync_served(self.registry)  # the same swap promote does, under its lock
            after = _read_own(self.registry.root, self.token)
            if after is not None and after.version == current.version:
                self._entry = current
            return message
        return self.restart(current)

    def restart(self, entry: ModelVersion) -> str:
        """Serve ``entry`` in a new vLLM behind the front (see ``swap`` in the module doc);
        the version served before goes on when ``entry`` does not start."""
        old, old_server = self._entry, self.server
        self._restarting = True
        try:
            with serving_lock(self.registry.root):
                self._write(state="restarting", target=entry.version, **state_for(old))
            if self.swap == "restart":
                self._front.route_to(None)  # new requests wait; running ones finish
                self._front.drain(_origin(old_server), self.drain_s)
                old_server.stop()
            try:
                self._server = self._launch(entry)
            except AgenticLoopError as exc:
                if self._stop.is_set():
                    raise
                return self._stay_on(old, old_server, entry, short_error(exc))
            self._canary.reset()  # a new vLLM holds no canary adapter
            self._front.route_to(_origin(self._server))
            if old_server.running:  # side by side: the old one goes once its requests are done
                self._front.drain(_origin(old_server), self.drain_s)
                old_server.stop()
            self._entry = entry
            with serving_lock(self.registry.root):
                self._write(state="ready", **state_for(entry))
            how = "beside" if self.swap == "side-by-side" else "after"
            return f"restarted on {entry.version} under '{self.model}' ({how} {old.version})"
        finally:
            self._restarting = False

    def _stay_on(self, old: ModelVersion, old_server: VLLMServer, failed: ModelVersion,
                 error: str) -> str:
        """``failed`` did not start: keep (or bring back) ``old``, and record why."""
        log.warning("%s did not start (%s); back on %s", failed.version, error, old.version)
        self._server = old_server
        if not old_server.running:  # a restart in place stopped it: start it again
            self._canary.reset()
            try:
                self._server = self._launch(old)
            except AgenticLoopError as again:
                self._fatal = (f"{failed.version} did not start ({error}), and neither did "
                               f"{old.version} again ({short_error(again)}); nothing is "
                               "served: fix the model and run `agentic-loop serve` again")
                raise
        self._front.route_to(_origin(self._server))
        with serving_lock(self.registry.root):
            self._write(state="ready", failed=failed.version, error=error, **state_for(old))
        return f"{failed.version} did not start ({error}); back on {old.version}"

    def wait(self) -> int:
        """Block until vLLM exits by itself (or Ctrl-C: a clean stop). Returns the exit code.

        Raises :class:`ServeError` when a restart left nothing to serve.
        """
        try:
            while True:
                if self._fatal is not None and not self._restarting:
                    self.stop()
                    raise ServeError(self._fatal)
                server = self._server
                code = server.process.poll() if server is not None else 0
                if code is not None and not self._restarting and server is self._server:
                    if code != 0 and server is not None:
                        server._owns_log = False  # it died by itself: keep its log
                    self.stop()
                    return code
                time.sleep(0.5)
        except KeyboardInterrupt:
            return self.stop() or 0

    def stop(self) -> int | None:
        """Stop following and serving; remove ``serving.json``. Returns vLLM's exit code."""
        atexit.unregister(self.stop)
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.timeout + 60)
        code = self._server.stop() if self._server is not None else None
        self._canary.close()
        self._front.stop()
        clear_serving(self.registry.root, self.token)
        return code

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _origin(server: VLLMServer) -> str:
    """``http://host:port`` of a vLLM (its ``base_url`` less the ``/v1`` the client adds)."""
    return server.base_url.removesuffix("/v1")


def _read_own(root: Path, token: str) -> ServingState | None:
    state = read_serving(root)
    return state if state is not None and state.token == token else None


def serve_registered(registry: Registry | str | os.PathLike[str], version: str | int = "current",
                     *, name: str | None = None, poll_s: float = 2.0, timeout: float = 300.0,
                     **kw: Any) -> RegistryServer:
    """Serve a registry version under its stable name (see :func:`~.live.stable_name`).

    ``"current"`` (the default) follows promote and rollback; a fixed version
    (``"v3"``) stays on it. Other keywords go to :func:`~.serve.serve`
    (``port``, ``host``, ``python``, ``device``, ``max_model_len`` ...).
    """
    reg = registry if isinstance(registry, Registry) else Registry(registry)
    reg.get(version)  # a clear error before anything starts
    return RegistryServer(reg, name=stable_name(reg, name), version=str(version), poll_s=poll_s,
                          timeout=timeout, **kw).start()
