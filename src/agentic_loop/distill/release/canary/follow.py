"""The serve process's side of a canary: follow ``canary.json`` into the running vLLM.

Why here and not in the front: the front only routes, by the table it is
handed; which versions it may route to is decided where the registry and the
vLLM are known. At each poll :meth:`CanaryFollower.sync` stats
``canary.json`` (read only when it changed, or when the served version
moved) and, for a candidate that the registry has, that is not current, and
that the running vLLM can take (an adapter on its base, ``why_not`` says
otherwise), loads its adapter under
:func:`~agentic_loop.distill.release.router.served_model_id` and makes the
table route to it. A candidate that vLLM cannot take (a full model, which
is what ``improve`` registers, or an adapter on another base) gets a vLLM of
its own beside it when the follower is given ``side`` (the serve process's
settings): the table then sends the candidate's users to that server's
origin (``candidate_backend``), and it is stopped when the canary ends. A
candidate it cannot serve is reported in :attr:`~CanaryFollower.error` and
everything keeps going to current; a removed file unloads the candidate.
Requests never fail on any of it.

A load that fails (vLLM busy, a transient 5xx) is tried again at a later
poll, at most once per ``retry_s`` (10 s), with :attr:`~CanaryFollower.error`
kept set meanwhile: a canary must not stay unserved until its file changes.

Example (no canary file: everything to current):
    >>> import tempfile
    >>> from agentic_loop.distill.release.registry import ModelVersion, Registry
    >>> v1 = ModelVersion(version="v1", path="/m", name="m", registered_at="")
    >>> follower = CanaryFollower(Registry(tempfile.mkdtemp()), served_name="agent",
    ...                           lora_url=lambda: "http://127.0.0.1:9/v1",
    ...                           why_not=lambda entry: None)
    >>> follower.sync(v1), follower.table.current, follower.table.candidate
    (None, 'v1', None)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentic_loop.distill.release.canary.state import CanaryState, canary_file, read_canary
from agentic_loop.distill.release.canary.table import ArmTable
from agentic_loop.distill.release.registry import ModelVersion, Registry, RegistryError
from agentic_loop.distill.release.router import served_model_id
from agentic_loop.distill.release.serve import ServeError, VLLMServer, free_port, lora_call, serve
from agentic_loop.errors import AgenticLoopError, StorageError, short_error
from agentic_loop.paths import file_signature

__all__ = ["CanaryFollower"]

log = logging.getLogger(__name__)


def _signature(path: Path) -> tuple[int, int, int] | None:

    return file_signature(path)


class CanaryFollower:
    """Keeps :attr:`table` in step with ``canary.json`` and the version served.

    ``served_name``: the stable name clients send (only those requests are
    split). ``lora_url``: the running vLLM's ``.../v1`` URL now.
    ``why_not(entry)``: why the running vLLM cannot take ``entry`` as an
    adapter (None: it can). ``retry_s``: the least time between two tries to load a
    candidate adapter that failed to load. ``side``: keywords of :func:`~..serve.serve`
    (and ``cancel``, an event that stops a start) for a candidate's own vLLM when the
    running one cannot take it; None: such a candidate is not served.
    """

    def __init__(self, registry: Registry, *, served_name: str, lora_url: Callable[[], str],
                 why_not: Callable[[ModelVersion], str | None], retry_s: float = 10.0,
                 side: dict[str, Any] | None = None) -> None:
        self.registry = registry
        self.retry_s = retry_s
        self._retry_at: float | None = None  # monotonic time of the next try of a failed load
        self.served_name = served_name
        self._lora_url = lora_url
        self._why_not = why_not
        self._signature: tuple[int, int, int] | None = None
        self._served: str | None = None  # the version the table was made for
        self._loaded: ModelVersion | None = None  # the candidate adapter in vLLM
        self._side_kw = side
        self._side: VLLMServer | None = None  # the candidate's own vLLM, when it has one
        self.table = ArmTable(current="", served_name=served_name)
        self.error: str | None = None  #: why the canary file's candidate is not served

    @property
    def candidate(self) -> str | None:
        """The candidate the front routes to now (None: no canary running)."""
        return self.table.candidate

    def reset(self) -> None:
        """A new vLLM is serving: nothing is loaded in it, so nothing goes to a candidate until
        the next :meth:`sync` loads it again."""
        self._loaded, self._served, self._signature = None, None, None
        self._retry_at = None
        self.table = ArmTable(current=self.table.current, served_name=self.served_name)
        self.close()  # its own vLLM too: the next sync starts it again if still a candidate

    def close(self) -> None:
        """Stop the candidate's own vLLM, if it has one (the serve process stops)."""
        side, self._side = self._side, None
        if side is not None:
            self._loaded = None
            side.stop()

    def sync(self, served: ModelVersion) -> str | None:
        """Follow the canary file against ``served`` (the version vLLM serves as current);
        what changed, or None when nothing did."""
        signature = _signature(canary_file(self.registry))
        retry = self._retry_at is not None and time.monotonic() >= self._retry_at
        if signature == self._signature and served.version == self._served and not retry:
            return None
        self._signature, self._served, self._retry_at = signature, served.version, None
        before = (self.table.candidate, self.table.fraction, self.table.mode, self.error)
        try:
            state = read_canary(self.registry)
        except StorageError as exc:
            state, self.error = None, str(exc)
        else:
            self.error = None
        entry = self._candidate(state, served)
        if entry is None or state is None:
            self._unload()
            self.table = ArmTable(current=served.version, served_name=self.served_name)
        else:
            backend = self._side.base_url.removesuffix("/v1") if self._side else None
            self.table = ArmTable.from_state(state, current=served.version,
                                             candidate_model=served_model_id(entry),
                                             candidate_backend=backend,
                                             served_name=self.served_name)
        after = (self.table.candidate, self.table.fraction, self.table.mode, self.error)
        if after == before:
            return None
        if self.error:
            return f"canary not served ({self.error}); every request goes to {served.version}"
        if self.table.candidate is None:
            return f"no canary: every request goes to {served.version}"
        return (f"{self.table.mode} of {self.table.candidate} at {self.table.fraction:g} "
                f"against {served.version}")

    def _candidate(self, state: CanaryState | None, served: ModelVersion) -> ModelVersion | None:
        """The version to load for ``state`` (loaded when it can be); None sets :attr:`error`."""
        if state is None or state.candidate == served.version:
            return None  # no canary, or its candidate was promoted: nothing to split
        try:
            entry = self.registry.get(state.candidate)
        except RegistryError:
            self.error = (f"{state.candidate} is not a version of {self.registry.root}; write "
                          "a canary file that names a registered version")
            return None
        if self._loaded is not None and self._loaded.version == entry.version:
            return entry
        reason = self._why_not(entry)
        if reason is not None and self._side_kw is None:
            self.error = reason
            return None
        self._unload()
        if reason is not None:
            return self._start_side(entry)
        try:
            lora_call(self._lora_url(), "load_lora_adapter",
                      {"lora_name": served_model_id(entry), "lora_path": entry.path})
        except ServeError as exc:

            self.error = (f"could not load {entry.version}'s adapter (tried again in "
                          f"{self.retry_s:g} s): {short_error(exc)}")[:400]
            self._retry_at = time.monotonic() + self.retry_s
            return None
        self._loaded = entry
        return entry

    def _start_side(self, entry: ModelVersion) -> ModelVersion | None:
        """``entry`` in a vLLM of its own, ready (None: it did not start, see :attr:`error`)."""
        kw = dict(self._side_kw or {})
        cancel, host = kw.pop("cancel", None), kw.pop("host", "127.0.0.1")
        timeout = float(kw.pop("timeout", 300.0))
        server = serve(entry.path, name=served_model_id(entry), host=host,
                       port=free_port(host), wait=False, **kw)
        try:
            server.wait_until_ready(timeout, cancel=cancel)
        except AgenticLoopError as exc:
            server.stop()
            self.error = f"{entry.version} did not start beside the served version: {exc}"[:400]
            self._retry_at = time.monotonic() + self.retry_s
            return None
        self._side, self._loaded = server, entry
        return entry

    def _unload(self) -> None:
        """Take the loaded candidate adapter out of vLLM (a failure is only logged)."""
        if self._side is not None:
            self.close()
            return
        if self._loaded is None:
            return
        name, self._loaded = served_model_id(self._loaded), None
        try:
            lora_call(self._lora_url(), "unload_lora_adapter", {"lora_name": name})
        except ServeError as exc:
            log.warning("could not unload the canary adapter %s: %s", name, exc)
