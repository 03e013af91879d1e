"""N vLLM replicas of one version behind vllm-router; an adapter change reaches all or none.

One vLLM saturates its devices; more traffic needs more copies of the same
version, each on its own port (and, on GPUs, its own devices), behind the
balancer of :mod:`~agentic_loop.distill.release.replicas.balancer`. The front
proxy stays in front of the balancer and keeps only what no balancer does:
choosing the version by user key (canary, shadow).

**What every replica in the balancer serves is the same.** An adapter change
(promote, rollback, a canary's adapter: :meth:`ReplicaSet.load_lora_adapter`)
runs in two phases, each on all replicas in service at once:

1. *stage*: the new adapter is loaded on every replica under a staging name
   (``<name>--staged``); a replica that cannot load it is **taken out** of
   the balancer (``POST /remove_worker``) *before* any replica switches, and
   keeps running, out of rotation, on what it served;
2. *commit*: the replicas that staged it take it under the served name with
   vLLM's ``load_inplace`` (the files were just read: they are in the page
   cache); a replica whose commit fails is taken out too. The staging name is
   unloaded.

If **no** replica could stage it (or none commit it), nothing changed: no
replica is taken out for it, every replica in service still serves the old
adapter, and :class:`~.balancer.BalancerError` says why. Requests can mix old
and new answers only while the commits run (all at once; their length on real
vLLM was not measured here).

A replica is also taken out when its process exits, or when ``GET /health``
fails ``health_failures`` times in a row (checked every ``health_s`` seconds
by a thread, and by :meth:`ReplicaSet.check_health`); the balancer retries a
request that hit it on another replica. A replica taken out stays out until
:meth:`ReplicaSet.readmit` loads the served adapters on it and puts it back.
:meth:`ReplicaSet.state` (written atomically to ``record`` on every change; a
registry's server writes ``<registry>/replicas.json``, ``REPLICAS_FILE``, and
names it in ``serving.json``'s ``replicas`` field) says which replica serves what,
which were taken out, when and why.

Example (the per-replica device split on GPUs; nothing starts):
    >>> replica_devices(1, devices_per_replica=2)
    {'CUDA_VISIBLE_DEVICES': '2,3'}
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Self

from agentic_loop.atomic import atomic_write_bytes
from agentic_loop.clock import utc_stamp
from agentic_loop.distill.release.replicas.balancer import BalancerError, VLLMRouter, start_router
from agentic_loop.distill.release.replicas.replica import Replica, launch_adapters, replica_devices
from agentic_loop.distill.release.serve import ServeError, detect_device, serve
from agentic_loop.errors import AgenticLoopError, ConfigError, short_error

__all__ = ["REPLICAS_FILE", "STAGING_SUFFIX", "Replica", "ReplicaSet", "replica_devices",
           "serve_replicas"]

log = logging.getLogger(__name__)
STAGING_SUFFIX = "--staged"
REPLICAS_FILE = "replicas.json"
SEMANTICS = ("every replica in the balancer serves the same adapters; a change is staged on "
             "all, a replica that fails it is taken out before any switches, and if none "
             "takes it nothing changes")


class ReplicaSet:
    """``replicas`` vLLM servers of ``model`` behind vllm-router. Use it as a context manager.

    ``spec``, ``model`` and ``base_url`` (the balancer's) are what a client or
    the front proxy uses, as with a :class:`~.serve.VLLMServer`.
    ``replica_env(i)`` adds environment variables to replica ``i`` (default on
    GPUs: its own devices, see :func:`replica_devices`); other keywords go to
    :func:`~.serve.serve` (``python``, ``eager``, ``tensor_parallel_size`` ...).
    """

    def __init__(self, model: str | os.PathLike[str], *, replicas: int, name: str | None = None,
                 host: str = "127.0.0.1", port: int | None = None, policy: str = "cache_aware",
                 router: str | os.PathLike[str] | None = None,
                 replica_env: Callable[[int], Mapping[str, str]] | None = None,
                 health_s: float = 2.0, health_failures: int = 2,
                 record: str | os.PathLike[str] | None = None, timeout: float = 300.0,
                 **serve_kw: Any) -> None:
        if replicas < 1:
            raise ConfigError(f"replicas={replicas}: serve at least 1 replica")
        self.model_path = model
        self.count = replicas
        self.name = name
        self.host = host
        self.port = port
        self.policy = policy
        self.router = router
        self.health_s = health_s
        self.health_failures = health_failures
        self.record = Path(record) if record is not None else None
        self.timeout = timeout
        self._owns_log = False  # as VLLMServer's: the balancer's log is kept
        self._serve_kw = serve_kw
        self._replica_env = replica_env or self._default_env
        self.replicas: list[Replica] = []
        self.balancer: VLLMRouter | None = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _default_env(self, index: int) -> Mapping[str, str]:
        device = self._serve_kw.get("device") or "auto"
        if (detect_device() if device == "auto" else device) != "cuda":
            return {}
        per = 1
        for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"):
            per *= int(self._serve_kw.get(key, 1))
        return replica_devices(index, per)

    def __repr__(self) -> str:
        live = sum(r.in_service for r in self.replicas)
        return f"ReplicaSet({self.base_url!r}, {live}/{self.count} in service)"

    # -- what clients use ---------------------------------------------------

    @property
    def base_url(self) -> str:
        """The balancer's OpenAI-compatible URL (ends in ``/v1``)."""
        return self._balancer().base_url

    @property
    def spec(self) -> str:
        """The ``load_chat_model`` spec of the balancer."""
        return f"openai:{self.base_url}"

    @property
    def model(self) -> str:
        """The model name clients send."""
        return self.replicas[0].server.model if self.replicas else str(self.name)

    @property
    def running(self) -> bool:
        """True while the balancer runs and at least one replica is in service."""
        return (self.balancer is not None and self.balancer.running
                and any(r.in_service for r in self.replicas))

    @property
    def log_path(self) -> Path:
        """The balancer's log."""
        return self._balancer().log_path

    @property
    def process(self) -> Any:
        """The balancer's process (what a :class:`~.serve.VLLMServer` user polls)."""
        return self._balancer().process

    def wait_until_ready(self, timeout: float = 300.0, poll_s: float = 1.0,
                         cancel: threading.Event | None = None) -> None:
        """Ready once started (:meth:`start` waits); raise if nothing is in service."""
        if not self.running:
            raise ServeError(f"the replica set of {self.model_path} is not serving: no balancer, "
                             f"or every replica was taken out (see {self.record or 'state()'})")

    def _balancer(self) -> VLLMRouter:
        if self.balancer is None:
            raise ServeError("the replica set has not been started; call start() first")
        return self.balancer

    def in_service(self) -> list[Replica]:
        """The replicas the balancer sends requests to."""
        return [r for r in self.replicas if r.in_service]

    def served_models(self, timeout: float = 5.0) -> list[str]:
        """The model names listed at the balancer's ``/v1/models``."""
        import httpx

        response = httpx.get(f"{self.base_url}/models", timeout=timeout)
        response.raise_for_status()
        return [m["id"] for m in response.json().get("data", [])]

    # -- life cycle ---------------------------------------------------------

    def start(self) -> Self:
        """Start every replica (all must be ready), then the balancer over them."""
        atexit.register(self.stop)
        try:
            for index in range(self.count):
                server = serve(self.model_path, name=self.name, host=self.host, wait=False,
                               env=dict(self._replica_env(index)), **self._serve_kw)
                self.replicas.append(Replica(index, server))
            for replica in self.replicas:
                replica.server.wait_until_ready(self.timeout)
                replica.adapters = launch_adapters(replica.server.command)
            self.balancer = start_router([r.url for r in self.replicas], host=self.host,
                                         port=self.port, policy=self.policy, router=self.router,
                                         health_interval_s=max(1, int(self.health_s)))
        except BaseException:
            self.stop()
            raise
        self._write()
        self._thread = threading.Thread(target=self._watch, name="replica-health", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> int | None:
        """Stop the health thread, the balancer and every replica; the balancer's exit code."""
        atexit.unregister(self.stop)
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        code = self.balancer.stop() if self.balancer is not None else None
        for replica in self.replicas:
            replica.server.stop()
        if self.record is not None:
            self.record.unlink(missing_ok=True)
        return code

    def wait(self) -> int:
        """Block until the balancer exits or no replica is left in service (Ctrl-C: a clean
        stop). Returns the balancer's exit code (1 when every replica was taken out)."""
        try:
            while self.running:
                time.sleep(0.5)
            code = self._balancer().process.poll()
            self.stop()
            return 1 if code is None else code
        except KeyboardInterrupt:
            return self.stop() or 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- adapters: all or none ----------------------------------------------

    def load_lora_adapter(self, name: str, path: str | os.PathLike[str], *,
                          replace: bool = False) -> list[int]:
        """Put adapter ``path`` live as ``name`` on every replica in service (see the module
        doc); the indices of the replicas that took it."""
        path = os.fspath(path)
        staged = f"{name}{STAGING_SUFFIX}"
        with self._lock:
            live = self.in_service()
            if not live:
                raise BalancerError(f"no replica is in service to load {path} as '{name}'; "
                                    f"see {self.record or 'state()'} for why they were taken out")
            errors = self._each(live, lambda r: r.server.load_lora_adapter(staged, path,
                                                                           replace=True))
            staged_ok = [r for r in live if r.index not in errors]
            if not staged_ok:
                raise BalancerError(f"no replica could load {path} as '{name}', so none changed "
                                    f"(all still serve what they did): {_first(errors)}")
            for replica in live:
                if replica.index in errors:
                    self._take_out(replica, f"could not load {path} as '{name}': "
                                            f"{errors[replica.index]}")
            try:  # the staged copy leaves every replica that took it, whatever happens next
                commit = self._each(staged_ok, lambda r: r.server.load_lora_adapter(
                    name, path, replace=replace))
                done = [r for r in staged_ok if r.index not in commit]
                if not done:
                    raise BalancerError(f"every replica staged {path} but none could take it "
                                        f"as '{name}', so none changed: {_first(commit)}")
                for replica in staged_ok:
                    if replica.index in commit:
                        self._take_out(replica, f"could not switch '{name}' to {path}: "
                                                f"{commit[replica.index]}")
                for replica in done:
                    replica.adapters[name] = path
            finally:
                self._each(staged_ok, lambda r: r.server.unload_lora_adapter(staged))
            self._write()
            return [r.index for r in done]

    def unload_lora_adapter(self, name: str) -> None:
        """Remove adapter ``name`` from every replica in service (a failure takes it out)."""
        with self._lock:
            live = self.in_service()
            errors = self._each(live, lambda r: r.server.unload_lora_adapter(name))
            for replica in live:
                if replica.index in errors:
                    self._take_out(replica, f"could not unload '{name}': {errors[replica.index]}")
                else:
                    replica.adapters.pop(name, None)
            self._write()

    def lora_request(self, endpoint: str, payload: Mapping[str, Any]) -> None:
        """vLLM's ``load_lora_adapter`` / ``unload_lora_adapter`` request, done on every
        replica in service (what a front proxy hands over instead of forwarding it)."""
        name = str(payload.get("lora_name", ""))
        if endpoint.rstrip("/").endswith("unload_lora_adapter"):
            self.unload_lora_adapter(name)
        elif endpoint.rstrip("/").endswith("load_lora_adapter"):
            self.load_lora_adapter(name, str(payload.get("lora_path", "")),
                                   replace=bool(payload.get("load_inplace")))
        else:
            raise BalancerError(f"{endpoint!r} is not a LoRA endpoint: pass load_lora_adapter "
                                "or unload_lora_adapter")

    def _each(self, replicas: list[Replica], call: Callable[[Replica], None]) -> dict[int, str]:
        """Run ``call`` on every replica at once; the errors by replica index."""
        def one(replica: Replica) -> str | None:
            try:
                call(replica)
            except (AgenticLoopError, OSError) as exc:
                return short_error(exc)[:300]
            return None

        with ThreadPoolExecutor(max_workers=max(1, len(replicas))) as pool:
            results = list(pool.map(one, replicas))
        return {r.index: e for r, e in zip(replicas, results, strict=True) if e is not None}

    # -- health ---------------------------------------------------------------

    def check_health(self) -> list[int]:
        """Take out the replicas in service that exited or fail ``/health`` (see the module
        doc); the indices taken out now."""
        import httpx

        taken: list[int] = []
        with self._lock:
            for replica in self.in_service():
                code = replica.server.process.poll()
                if code is not None:
                    reason = f"its process exited with code {code}"
                else:
                    try:
                        ok = httpx.get(f"{replica.url}/health", timeout=2.0).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    replica.health_misses = 0 if ok else replica.health_misses + 1
                    if replica.health_misses < self.health_failures:
                        continue
                    reason = f"/health failed {replica.health_misses} times in a row"
                self._take_out(replica, reason)
                taken.append(replica.index)
            if taken:
                self._write()
        return taken

    def readmit(self, index: int) -> None:
        """Load the served adapters on replica ``index`` and put it back into rotation."""
        with self._lock:
            replica = self.replicas[index]
            if replica.in_service:
                return
            if not replica.server.running:
                raise BalancerError(f"replica {index} ({replica.url}) is not running "
                                    f"({replica.out_reason}); it cannot be readmitted")
            reference = self.in_service()[0].adapters if self.in_service() else replica.adapters
            for name, path in reference.items():
                if replica.adapters.get(name) != path:
                    replica.server.load_lora_adapter(name, path, replace=name in replica.adapters)
                    replica.adapters[name] = path
            self._balancer().add_worker(replica.url)
            replica.in_service, replica.out_reason, replica.out_at = True, None, None
            replica.health_misses = 0
            self._write()

    def _take_out(self, replica: Replica, reason: str) -> None:
        log.warning("taking replica %d (%s) out of the balancer: %s", replica.index,
                    replica.url, reason)
        try:  # out of the balancer first: once the record says out, no request goes there
            self._balancer().remove_worker(replica.url)
        except BalancerError as exc:  # a dead balancer routes to nobody anyway
            reason += f" (the balancer could not be told: {short_error(exc)})"
        replica.in_service, replica.out_reason, replica.out_at = False, reason, utc_stamp()

    def _watch(self) -> None:
        while not self._stop.wait(self.health_s):
            try:
                self.check_health()
            except Exception as exc:  # noqa: BLE001 - the watcher must outlive one bad poll
                log.warning("checking the replicas failed: %s", exc)

    # -- the record -------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Which replica serves what, which were taken out, when and why."""
        balancer = self.balancer
        return {"balancer": {"kind": "vllm-router", "policy": self.policy,
                             "url": balancer.base_url if balancer else None,
                             "pid": balancer.process.pid if balancer else None},
                "semantics": SEMANTICS, "replicas": [r.state() for r in self.replicas],
                "updated_at": utc_stamp()}

    def _write(self) -> None:
        if self.record is not None:
            atomic_write_bytes(self.record, (json.dumps(self.state(), indent=2) + "\n").encode())


def _first(errors: Mapping[int, str]) -> str:
    index = min(errors)
    return f"replica {index}: {errors[index]}"


def serve_replicas(model: str | os.PathLike[str], *, replicas: int, **kw: Any) -> ReplicaSet:
    """Start ``replicas`` vLLM servers of ``model`` behind vllm-router (see :class:`ReplicaSet`
    for the keywords); ready when it returns."""
    return ReplicaSet(model, replicas=replicas, **kw).start()
