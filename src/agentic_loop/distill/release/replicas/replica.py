"""One replica of a :class:`~.replica_set.ReplicaSet`: its vLLM, and whether it is in rotation.

Kept apart from the set so the record of a replica (what it serves, why it was
taken out) reads in one place.

Example:
    >>> launch_adapters(["py", "--lora-modules", "agent=/a/v1", "--max-lora-rank", "16"])
    {'agent': '/a/v1'}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentic_loop.distill.release.serve import VLLMServer

__all__ = ["Replica", "launch_adapters", "replica_devices"]


def replica_devices(index: int, devices_per_replica: int) -> dict[str, str]:
    """The ``CUDA_VISIBLE_DEVICES`` of replica ``index``: its own consecutive devices."""
    first = index * devices_per_replica
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(d) for d in range(first,
                                                                   first + devices_per_replica))}


@dataclass
class Replica:
    """One vLLM of the set, and whether the balancer sends it requests."""

    index: int
    server: VLLMServer
    in_service: bool = True
    adapters: dict[str, str] = field(default_factory=dict)  #: name -> the path it serves
    out_reason: str | None = None
    out_at: str | None = None
    health_misses: int = 0

    @property
    def url(self) -> str:
        """The replica's origin, as the balancer knows it (no ``/v1``)."""
        return self.server.base_url.removesuffix("/v1")

    def state(self) -> dict[str, Any]:
        return {"index": self.index, "url": self.url, "pid": self.server.process.pid,
                "in_service": self.in_service, "running": self.server.running,
                "adapters": dict(self.adapters), "out_reason": self.out_reason,
                "out_at": self.out_at}


def launch_adapters(command: list[str]) -> dict[str, str]:
    """The adapters a vLLM command line serves from its start (``--lora-modules``)."""
    if "--lora-modules" not in command:
        return {}
    found: dict[str, str] = {}
    for arg in command[command.index("--lora-modules") + 1:]:
        if arg.startswith("--"):
            break
        name, _, path = arg.partition("=")
        found[name] = path
    return found
